"""The API scenarios are written against.

A scenario is one Python file in scenarios/ defining a subclass of ``Scenario``:
what it reproduces, what it needs from the topology, the shell steps the guest
runs (with CPU selectors the guest resolves from its own sysfs: ``labsel``),
the trace events, and ``check(result)`` returning named expectations, each
PASS or FAIL with its evidence.

    class LlcSpreadPinned(Scenario):
        name = "llc-spread-pinned"
        summary = "threads pinned one per every-other LLC: fork placement must use both sockets"
        seed = "000"
        claim = "'targets distinct': fork placement spreads the pinned threads"
        topologies = ["zen3-2s-mini"]
        requires = [at_least("sockets", 2), at_least("llcs_per_socket", 2)]
        events = ["sched:sched_wakeup_new", "sched:sched_migrate_task"]

        def steps(self, topo):
            return 'CPUS=$(labsel llc-firsts every=2)\\necho "$CPUS" > allowed\\nlab_trace_on\\n...'

        def check(self, r):
            allowed = r.allowed("allowed")  # the cpulist the guest wrote
            w = r.wakeups(comms="stream", kinds=["sched_wakeup_new"])
            piled = w.pileups()  # target CPU -> times chosen, when more than once
            return [
                Expectation("every target inside the allowed CPUs", not w.outside(allowed),
                            evidence=[x.line() for x in w.outside(allowed)]),
                Expectation("targets distinct", bool(w.wakeups) and not piled,
                            evidence=[x.line() for x in w.wakeups if x.target_cpu in piled],
                            figures={f"socket{s}": n for s, n in w.split(r.topo, "socket").items()},
                            claim=True),
            ]

What a scenario needs and lab can tell before booting is declared, not checked in
steps(): ``requires`` (topology requirements such as ``at_least``/``clusters``, and
``kernel_config("SCHED_CLUSTER", why)`` for the kernel's config) and ``tools`` (host
tools, which must be packable for the topology's arch).  ``skip_reason()`` turns an
unmet one into a SKIP with the reason before anything boots.

A claim about the kernel's own scheduler (its fair class: fork balancing, wake_affine(),
NUMA balancing, ...) says so, in a line, as the class's ``kernel_scheduler`` (for its
claim-carrying expectations) or an Expectation's: under ``--scheduler`` a BPF scheduler
decides instead, so those are INCONCLUSIVE with their figures (``under_scheduler()``).

The guest numbers CPUs and nodes its own way; ``Result``'s helpers run
``lab.analysis`` on a phase's trace and answer in the spec's (the real
machine's) numbering, so a check() never translates: ``wakeups`` (with
``paired=True`` the waker's CPU from sched_waking), ``migrations`` (with the
seed's table by level), ``residency``, ``numa_balancing``, ``task_paths``;
``allowed``, ``node`` and ``by_node`` for what the guest wrote.  An
expectation that needs more than a few lines of computation reads best as a
named module-level function.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any, ClassVar

from . import analysis, atomic, cpulist, integrity, levels, paths
from .analysis import checks as ck
from .errors import UserError, unknown
from .image import tools as tools_mod
from .limits import MAX_FIGURE_DIGITS, MAX_RESULT_BYTES, read_file
from .plan import PLAN_FILE
from .topology import Topology
from .topology.spec import toml_str
from .trace import parse_file

# check() gets this long (wall seconds) before the run is an ERROR: the slowest shipped
# check (numa-balancing on a 146 MB trace) takes under 30 s.
CHECK_TIMEOUT_S = 300.0

# ---- requirements ---------------------------------------------------------------------------


def _any_topology(topo: Topology) -> bool:
    return True


@dataclass(frozen=True)
class Requirement:
    """Something a scenario needs that lab can tell before booting: of the topology
    (*test*), or of the kernel (*kernel_test*: True or False, or None when lab cannot
    tell, e.g. a bare image without its config; then the boot goes ahead)."""

    description: str
    test: Callable[[Topology], bool] = _any_topology
    kernel_test: Callable[[Any], bool | None] | None = None

    def __call__(self, topo: Topology) -> bool:
        return self.test(topo)

    def kernel_lacks(self, kernel: Any) -> bool:
        """Whether *kernel* (a KernelArtifact) is known not to meet this requirement."""
        return self.kernel_test is not None and self.kernel_test(kernel) is False


def _count(topo: Topology, what: str) -> int:
    """A count by levels' plurals (lab.levels): "llcs" (the machine's LLCs),
    "llcs_per_socket" (the fewest in any socket); and "cpus", "threads_per_core"."""
    if what == "cpus":
        return topo.n_cpus
    if what == "threads_per_core":
        return topo.threads_per_core
    inner, _, outer = what.partition("_per_")
    child = levels.BY_KEY.get(inner)
    parent = levels.BY_KEY.get(f"{outer}s") if outer else levels.BY_NAME["machine"]
    if child is None or parent is None or child.attr is None:
        raise ValueError(f"unknown count {what!r}")
    if child.name not in topo.levels:
        return 1  # a level the machine lacks (clusters): one per parent, as the kernel sees it
    return min(len({levels.group_key(child.name, topo.cpu(c)) for c in g}) for g in topo.groups(parent.name))


def at_least(what: str, n: int) -> Requirement:
    """e.g. at_least("llcs_per_socket", 2): 'at least 2 LLCs per socket'."""
    words = what.replace("_per_", " per ").replace("_", " ")
    return Requirement(f"at least {n} {words}", lambda t: _count(t, what) >= n)


def arch(name: str) -> Requirement:
    return Requirement(f"arch {name}", lambda t: t.arch == name)


# A level between core and LLC: more than one cluster per LLC, each of more than one core.  A
# cluster of one core spans what the core does, so Linux builds no CLS sched domain there
# (lab domains of lab minimize's 3 one-core clusters of jacobsville-24c-mini: only MC), and
# a "waker's cluster" claim would be judged on a level the guest kernel does not have.
clusters = Requirement(
    "clusters (a level between core and LLC)",
    lambda t: t.has_clusters and _count(t, "clusters_per_llc") >= 2 and _count(t, "cores_per_cluster") >= 2,
)


def kernel_config(symbol: str, why: str, hint: str = "") -> Requirement:
    """The kernel must be built with CONFIG_<symbol>=y; *why* says what the scenario
    needs it for, *hint* which kernel has it (its config is in the kernel store; a bare
    image's is unknown)."""
    symbol = symbol.removeprefix("CONFIG_")

    def test(kernel: Any) -> bool | None:
        value = kernel.config_value(symbol)
        return None if value is None else value == "y"

    return Requirement(f"CONFIG_{symbol}=y ({why}{'; ' + hint if hint else ''})", kernel_test=test)


def sysctl_lines(knobs: dict[str, Any], optional: dict[str, str] | None = None) -> str:
    """The job's lines writing *knobs* (path: value) with lib.sh's ``lab_sysctl``, which
    records each in ``knobs`` (a write that fails is FAILED there, for the scenario's
    precondition to judge).  A path in *optional* (path: why) turns off something the
    kernel may not be built with (lab's tinyconfig kernels have no transparent huge
    pages): where it is missing it is recorded as absent, with *why*, not FAILED."""
    optional = optional or {}
    return "\n".join(
        f'lab_sysctl_optional {k} {v} "{optional[k]}"' if k in optional else f"lab_sysctl {k} {v}" for k, v in knobs.items()
    )


# ---- parameters -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A scenario's typed parameter (``lab run S -p threads=16``): its type is its
    default's (int, float, bool or str); *min*/*max* bound a number, *choices* a string.
    Values are checked before anything boots and recorded in plan.json."""

    name: str
    default: Any
    help: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return {bool: "true or false", int: "a whole number", float: "a number"}.get(type(self.default), "a string")

    def describe(self) -> str:
        """e.g. 'threads: a whole number from 1 to 64 (default 16)'."""
        rng = ""
        if self.min is not None and self.max is not None:
            rng = f" from {self.min:g} to {self.max:g}"
        elif self.min is not None:
            rng = f" of at least {self.min:g}"
        elif self.max is not None:
            rng = f" of at most {self.max:g}"
        if self.choices:
            rng = f" (one of {', '.join(self.choices)})"
        return f"{self.name}: {self.kind}{rng} (default {fmt_param(self.default)})"

    def value(self, raw: Any) -> Any:
        """*raw* (text from the command line, or a value from a record) as this parameter's
        type, checked; ValueError saying what is expected."""
        t = type(self.default)
        v: Any
        if t is bool:
            if isinstance(raw, bool):
                v = raw
            elif isinstance(raw, str) and raw.strip().lower() in ("true", "yes", "1", "on", "false", "no", "0", "off"):
                v = raw.strip().lower() in ("true", "yes", "1", "on")
            else:
                raise ValueError(self.kind)
        elif t is int:
            if isinstance(raw, bool) or not isinstance(raw, (int, str)):
                raise ValueError(self.kind)
            if isinstance(raw, str):
                if not re.fullmatch(r"[-+]?[0-9]{1,18}", raw.strip()):
                    raise ValueError(self.kind)
                raw = int(raw.strip())
            v = raw
        elif t is float:
            if isinstance(raw, bool):
                raise ValueError(self.kind)
            try:
                v = float(raw)
            except (TypeError, ValueError):
                raise ValueError(self.kind) from None
            if not math.isfinite(v):
                raise ValueError(self.kind)
        else:
            if not isinstance(raw, str) or "\n" in raw or "\0" in raw or len(raw) > 200:
                raise ValueError("a one-line string of at most 200 characters")
            v = raw
            if self.choices and v not in self.choices:
                raise ValueError(f"one of {', '.join(self.choices)}")
        if t in (int, float) and ((self.min is not None and v < self.min) or (self.max is not None and v > self.max)):
            raise ValueError(self.describe().split(": ", 1)[1].rsplit(" (default", 1)[0])
        return v


def fmt_param(v: Any) -> str:
    """A parameter's value as -p takes it back."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"{v:g}" if isinstance(v, float) else str(v)


def parse_assignments(texts: list[str] | tuple[str, ...], flag: str = "-p") -> dict[str, str]:
    """``NAME=VALUE`` arguments as a mapping (the last of a name wins); anything else is a
    one-line UserError."""
    out: dict[str, str] = {}
    for t in texts:
        name, eq, val = t.partition("=")
        if not eq or not name.strip():
            raise UserError(f"{flag} {t!r}: give NAME=VALUE, e.g. {flag} threads=16")
        out[name.strip()] = val
    return out


# ---- expectations and results ---------------------------------------------------------------


@dataclass
class Expectation:
    """One named claim about the run, PASS or FAIL, with what shows it; INCONCLUSIVE when
    the scenario knows the outcome is the emulation's, not the scheduler's.

    *claim* marks the expectations that carry the scenario's claim (the seed's: what the
    post says the scheduler does or must do).  A run PASSes only when at least one of them
    was judged and could have failed; the others (the data is sane, the workload ran) are
    preconditions.  *vacuous* says why this one could not have failed on this run (e.g. the
    kernel lacks what it is about): it is shown, but never counts as the claim's PASS.

    *kernel_scheduler* says, in a line, why this expectation is a claim about the kernel's
    own scheduler (its fair class's mechanisms: fork balancing via SD_BALANCE_FORK,
    wake_affine(), NUMA balancing's task placement, ...) rather than about any scheduler.
    Under a sched_ext scheduler (--scheduler) such an expectation is INCONCLUSIVE, naming
    the scheduler and the claim, whatever *ok*, its figures still shown (under_scheduler());
    on the kernel's own scheduler it is judged as any other."""

    name: str
    ok: bool
    evidence: list[str] = field(default_factory=list)  # offending trace lines, or figures
    figures: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # why it failed, when the scenario knows
    # The cause, when what decided this outcome is the emulation (the vendor effect: the
    # guest's CPU model, not the kernel, keeps fork placement on one socket; timings under
    # TCG): the expectation is then INCONCLUSIVE, neither PASS nor FAIL, whatever *ok*.
    inconclusive: str = ""
    claim: bool = False
    vacuous: str = ""
    kernel_scheduler: str = ""
    # Set by under_scheduler(): the sched_ext scheduler under which this kernel-scheduler
    # claim was not judged (the run's message lists such claims in one sentence).
    bpf_scheduler: str = field(default="", repr=False)

    @property
    def status(self) -> str:
        if self.inconclusive:
            return "INCONCLUSIVE"
        return "PASS" if self.ok else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "figures": self.figures,
            "evidence": self.evidence,
            "note": self.note,
        }
        if self.inconclusive:
            d["inconclusive"] = self.inconclusive
        if self.claim:
            d["claim"] = True
        if self.vacuous:
            d["vacuous"] = self.vacuous
        return d


NO_CLAIM = "no expectation carrying the scenario's claim could fail on this run"


def verdict_of(expectations: list[Expectation]) -> tuple[str, str]:
    """A run's verdict from its expectations, and the message that goes with it: FAIL if
    any failed (a failure the scheduler owns decides, whatever else the emulation hid),
    else INCONCLUSIVE naming each cause (first, in one sentence, the claims about the
    kernel's own scheduler a BPF scheduler's run leaves unjudged), else INCONCLUSIVE when no claim-carrying
    expectation was judged and could have failed (a PASS that cannot fail is no PASS),
    else PASS."""
    if any(e.status == "FAIL" for e in expectations):
        return "FAIL", ""
    causes = list(dict.fromkeys(e.inconclusive for e in expectations if e.inconclusive and not e.bpf_scheduler))
    marked = [e for e in expectations if e.bpf_scheduler]
    if marked:  # one sentence for them all; each expectation's own inconclusive says why
        said = "; ".join(f"{e.name!r} {'held' if e.ok else 'did not hold'}" for e in marked)
        causes.insert(0, f"run under the sched_ext scheduler {marked[0].bpf_scheduler}: its claims about the kernel's own scheduler are not judged ({said})")
    if causes:
        return "INCONCLUSIVE", "; ".join(causes)
    if not any(e.claim and not e.vacuous for e in expectations):
        why = list(dict.fromkeys(f"{e.name}: {e.vacuous}" for e in expectations if e.claim and e.vacuous))
        return "INCONCLUSIVE", NO_CLAIM + (f" ({'; '.join(why)})" if why else " (check() marked none claim=True)")
    return "PASS", ""


def under_scheduler(expectations: list[Expectation], s: Scenario, scheduler: str) -> None:
    """Mark, for a run under the sched_ext scheduler *scheduler*, each expectation that is a
    claim about the kernel's own scheduler INCONCLUSIVE (its *inconclusive* names the
    scheduler, the claim, why it is the kernel's and whether it held): the expectation's own
    *kernel_scheduler*, else the scenario's for its claim-carrying ones (not a vacuous one).  The rest (the
    workload ran, affinity held: true under any scheduler) are judged as usual, so a
    failure of theirs is still the run's FAIL, and a run whose only claims are the kernel
    scheduler's comes out INCONCLUSIVE (verdict_of()), never PASS."""
    for e in expectations:
        why = e.kernel_scheduler or (s.kernel_scheduler if e.claim else "")
        if not why or e.vacuous:  # a claim that could not fail stays what it was (NO_CLAIM)
            continue
        cause = (
            f"run under the sched_ext scheduler {scheduler}: {e.name!r} is a claim about the kernel's own "
            f"scheduler ({why}); under {scheduler} it {'held' if e.ok else 'did not hold'}"
        )
        e.inconclusive = f"{cause}; {e.inconclusive}" if e.inconclusive else cause
        e.bpf_scheduler = scheduler


@dataclass
class Step:
    name: str
    rc: int | None
    out: str
    err: str

    @cached_property
    def json(self) -> dict[str, Any]:
        """The last JSON object line the workload printed."""
        for line in reversed(self.out.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    continue
        return {}


class Result:
    """What check() gets: the run's files, parsed on demand, CPUs in the spec's numbering."""

    def __init__(
        self, scenario: Scenario, topo: Topology, plan, kernel, out_dir: Path, guest_view=None, snapshot: str = ""
    ):
        self.scenario = scenario
        self.topo = topo
        self.plan = plan
        self.kernel = kernel
        self.out = out_dir
        self._guest_view = guest_view  # sysfs.MachineView in the spec's numbering, or None
        self._snapshot = snapshot  # where the run's snapshot should be, when it had to have one
        self._g2s = plan.guest_to_spec
        # Files check() asked for that the run does not have (or, for a trace, has empty):
        # a verdict on missing data is no verdict, so the run is then an ERROR naming them.
        self.missing: list[str] = []

    def _missing(self, name: str) -> None:
        if name not in self.missing:
            self.missing.append(name)

    @property
    def guest_view(self):
        """The guest's topology snapshot (sysfs.MachineView, spec numbering).  A check that
        asks for it on a run that lost it is judging without it: the run is an ERROR."""
        if self._guest_view is None and self._snapshot:
            self._missing(self._snapshot)
        return self._guest_view

    # numbering
    def cpu(self, guest_cpu: int) -> int:
        """Guest CPU id -> spec CPU id."""
        return self._g2s[guest_cpu] if 0 <= guest_cpu < len(self._g2s) else guest_cpu

    def cpus(self, guest_list: str) -> list[int]:
        return sorted(self.cpu(c) for c in cpulist.parse(guest_list))

    @property
    def cpu_map(self) -> Callable[[int], int]:
        return self.cpu

    def node(self, guest_node: int) -> int:
        """Guest NUMA node id -> spec node id (a workload's report of where its memory is)."""
        n2s = self.plan.guest_node_to_spec
        return n2s[guest_node] if 0 <= guest_node < len(n2s) else guest_node

    def by_node(self, per_node: Mapping[Any, Any]) -> dict[Any, Any]:
        """A mapping keyed by guest node (a workload's JSON, so string keys too) keyed by spec
        node instead; a key that names no guest node is kept as it is."""
        n2s = self.plan.guest_node_to_spec

        def spec(k: Any) -> Any:
            i = integrity.count(str(k))  # strict: '²' is a digit to str.isdigit(), not to int()
            return n2s[i] if i is not None and 0 <= i < len(n2s) else k

        return {spec(k): v for k, v in per_node.items()}

    def allowed(self, name: str) -> list[int]:
        """The cpulist the guest wrote to file *name* (``echo "$CPUS" > allowed``), sorted,
        in the spec's numbering; [] when the file is missing or empty."""
        return self.cpus(self.text(name).strip())

    # files
    def text(self, name: str, optional: bool = False) -> str:
        """The file *name* the guest's job wrote, '' when there is none: then, unless
        *optional* (the job writes it only sometimes), the run is an ERROR naming it once
        check() returns.  It must be a regular file of at most limits.MAX_RESULT_BYTES
        (lab unpacks nothing else): a link, a FIFO or a larger file is a one-line
        UserError naming it."""
        p = self.out / name
        if not os.path.lexists(p):
            if not optional:
                self._missing(f"out/{name}")
            return ""
        return read_file(p, MAX_RESULT_BYTES, "one file of a run's output", follow_symlinks=False).decode(errors="replace")

    def step(self, name: str) -> Step:
        """A workload step lab_run ran: its exit status, stdout and stderr (each must exist)."""
        return Step(name, integrity.count(self.text(f"{name}.rc")), self.text(f"{name}.out"), self.text(f"{name}.err"))

    @property
    def phases(self) -> list[str]:
        return sorted(p.name[len("trace.") : -len(".txt")] for p in self.out.glob("trace.*.txt"))

    def trace_path(self, phase: str = "main") -> Path:
        return self.out / f"trace.{phase}.txt"

    def events(self, phase: str = "main", only: list[str] | None = None) -> Iterator:
        """Stream the phase's raw trace events, in the guest's CPU numbering: the analyses
        below translate them; use this for what they do not cover."""
        p = self.trace_path(phase)
        if not os.path.lexists(p):
            self._missing(f"out/{p.name}")
            return iter(())
        try:
            if os.lstat(p).st_size == 0:  # ftrace's text always starts with its header
                self._missing(f"out/{p.name} (empty)")
        except OSError:
            pass
        return iter(parse_file(p, only=only, follow_symlinks=False))

    # Analyses of a phase's trace: lab.analysis's, given the events they need, the topology
    # and the guest->spec CPU map, so every CPU and node they report is in the spec's
    # numbering.  Keyword arguments go to the analysis: comms= and pids= select tasks.
    def wakeups(self, phase: str = "main", **kw: Any) -> analysis.WakeupTargets:
        """analysis.wakeup_targets(): each wakeup's waker CPU, target CPU and the level they
        share; kinds= (default sched_wakeup_new and sched_wakeup), paired=True to take a
        sched_wakeup's waker CPU from the sched_waking before it."""
        evs = self.events(phase, only=["sched_wakeup_new", "sched_wakeup", "sched_waking"])
        return analysis.wakeup_targets(evs, self.topo, cpu_map=self.cpu, **kw)

    def migrations(self, phase: str = "main", **kw: Any) -> analysis.Migrations:
        """analysis.migrations(): classified by level (same core, LLC, node, cross-node:
        ``.table(node)``); keep=True keeps each in ``.items``; source='switch' for what
        sched_switch shows instead of sched_migrate_task."""
        only = ["sched_switch" if kw.get("source") == "switch" else "sched_migrate_task"]
        return analysis.migrations(self.events(phase, only=only), self.topo, cpu_map=self.cpu, **kw)

    def residency(self, phase: str = "main", **kw: Any) -> analysis.Residency:
        """analysis.residency(): each task's time per CPU, from sched_switch."""
        evs = self.events(phase, only=["sched_switch"])
        return analysis.residency(evs, cpu_map=self.cpu, **kw)

    def numa_balancing(self, phase: str = "main", **kw: Any) -> analysis.NumaBalancing:
        """analysis.numa_balancing(): sched_move_numa / swap / stick counts, per task too."""
        evs = self.events(phase, only=["sched_move_numa", "sched_swap_numa", "sched_stick_numa"])
        return analysis.numa_balancing(evs, self.topo, cpu_map=self.cpu, **kw)

    def task_paths(self, phase: str = "main", **kw: Any) -> dict[int, analysis.TaskPath]:
        """analysis.task_paths(): pid -> where the task was put over time (fork placement,
        then each migration); pids= only, select by the result's comm (names change)."""
        only = ["sched_wakeup_new", "sched_migrate_task", "sched_process_exit"]
        return analysis.task_paths(self.events(phase, only=only), cpu_map=self.cpu, **kw)

    def lost(self, phase: str = "main") -> int:
        """Events the phase's trace lost (the guest's overrun count, [LOST n EVENTS] markers,
        overwritten entries); lab judges no run that lost any (lab.integrity)."""
        return integrity.trace_figures(self.out, phase)["lost"]

    def vmstat(self, phase: str = "main") -> dict[str, int]:
        """vmstat counters' change over the phase."""
        before = analysis.parse_vmstat(self.text(f"vmstat.{phase}.before") or "")
        after = analysis.parse_vmstat(self.text(f"vmstat.{phase}.after") or "")
        return {k: after[k] - before.get(k, 0) for k in after}

    def phase_seconds(self, phase: str = "main") -> float | None:
        start, end = integrity.seconds(self.text(f"phase.{phase}.start")), integrity.seconds(self.text(f"phase.{phase}.end"))
        return None if start is None or end is None else end - start

    def domain_flags(self, guest_cpu: int, name: str, span_size: int | None = None) -> set[str] | None:
        """Flags of the guest's sched domain *name* on a CPU (from the snapshot)."""
        if self.guest_view is None:
            return None
        cv = self.guest_view.cpus.get(self.cpu(guest_cpu))
        if cv is None:
            return None
        for d in cv.domains:
            if d.name == name and (span_size is None or len(d.span) == span_size):
                return set(d.flags)
        return None


class Scenario:
    """Subclass in scenarios/<name>.py.  Class attributes describe it; steps() and check() do it."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    seed: ClassVar[str] = ""  # which seed post it reproduces (000-004: the README lists them by title, author, list and date)
    topologies: ClassVar[list[str]] = []  # the first is the default
    requires: ClassVar[list[Requirement]] = []
    events: ClassVar[list[str]] = ["sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new", "sched:sched_migrate_task"]
    filters: ClassVar[dict[str, str]] = {}  # event name -> ftrace filter expression
    tools: ClassVar[list[str]] = []  # host tools to pack (perf, hackbench, stress-ng, numactl)
    workloads: ClassVar[bool] = True  # pack lab's static workloads (stream, pingpong, memprobe)
    buffer_kb: ClassVar[int] = 4096  # per CPU
    # How many runs make one verdict of `lab run`: the majority of up to this many,
    # decided as soon as one side has more than half.  More than 1 where single runs
    # under TCG are not stable enough to bisect on (bench/bench_verdicts.py measures
    # it); the scenario says why.  `--runs-per-verdict` overrides it.
    verdict_runs: ClassVar[int] = 1
    timeout: ClassVar[float] = 900
    # Which expectation carries the claim, in a sentence (check() marks it claim=True):
    # required, so a reader and lab both know what a PASS is a PASS of.
    claim: ClassVar[str] = ""
    # The design's version: bumped whenever steps() or check() change what a run means, so
    # a recorded run (a test's fixture) that predates it is known as such (results.json's
    # scenario_version; `lab recheck` notes the difference).
    version: ClassVar[int] = 1
    check_timeout: ClassVar[float] = CHECK_TIMEOUT_S  # seconds check() may take before the run is an ERROR
    # Typed parameters with defaults (Param): `lab run S -p NAME=VALUE`, swept by `lab matrix
    # -p NAME=A,B`; steps() and check() read them as self.p["NAME"].
    params: ClassVar[list[Param]] = []
    # Whether the --check expressions judged on this scenario's runs carry its claim (a
    # data scenario's checks are its claim; a Python scenario's claim is its own check()).
    checks_carry_claim: ClassVar[bool] = False
    # Why the scenario's claim is about the kernel's own scheduler, in a line, when it is
    # (every claim-carrying expectation's, unless one says its own: Expectation's
    # kernel_scheduler): under --scheduler those are INCONCLUSIVE (under_scheduler()).
    kernel_scheduler: ClassVar[str] = ""

    path: ClassVar[str] = ""

    def unmet(self, topo: Topology) -> list[str]:
        """The topology requirements *topo* does not meet."""
        return [r.description for r in self.requires if not r(topo)]

    def skip_reason(self, topo: Topology, kernel: Any = None) -> str | None:
        """Why this scenario cannot run on *topo* (with *kernel*, once it is known), said
        before anything boots: a topology requirement it lacks, a tool that cannot be
        packed for its arch, a kernel requirement the kernel's config does not meet.
        None when nothing known stands in the way."""

        why = []
        lacks = self.unmet(topo)
        if lacks:
            why.append(f"the topology lacks {'; '.join(lacks)}")
        packing = tools_mod.unpackable(topo.arch, list(self.tools))
        if packing:
            why.append(packing)
        if kernel is not None:
            klacks = [r.description for r in self.requires if r.kernel_lacks(kernel)]
            if klacks:
                why.append(f"kernel {kernel.name} ({kernel.release}) lacks {'; '.join(klacks)}")
        return "; ".join(why) or None

    @property
    def p(self) -> dict[str, Any]:
        """The parameters' values: each declared one's default unless set_params() gave it."""
        given = getattr(self, "_params", {})
        return {q.name: given.get(q.name, q.default) for q in self.params}

    def set_params(self, values: Mapping[str, Any], where: str = "-p") -> None:
        """Set parameters from *values* (text from -p, or a record's values), each checked
        against its declaration: an unknown name, a wrong type or a value out of range is a
        one-line UserError naming it, before anything boots."""
        declared = {q.name: q for q in self.params}
        out: dict[str, Any] = dict(getattr(self, "_params", {}))
        for name, raw in values.items():
            if name not in declared:
                if not declared:
                    raise UserError(f"{where} {name}=...: scenario {self.name} has no parameters")
                e = unknown(f"parameter of scenario {self.name}", name, list(declared))
                raise UserError(f"{where} {name}=...: {e}; its parameters: {'; '.join(q.describe() for q in self.params)}")
            try:
                out[name] = declared[name].value(raw)
            except ValueError as e:
                shown = raw if isinstance(raw, str) else repr(raw)
                raise UserError(f"{where} {name}={shown[:60]}: scenario {self.name}'s parameter {name} takes {e}") from None
        self._params = out

    def param_values(self) -> dict[str, Any]:
        """Every parameter's value (defaults included), as plan.json records them."""
        return self.p

    def record(self) -> dict[str, Any] | None:
        """What plan.json records of the scenario beside its name (None: nothing more than
        results.json's name): the parameters' values, and for a data scenario its whole
        definition (DataScenario, below)."""
        if not self.params:
            return None
        return {"name": self.name, "params": self.param_values()}

    def guest_files(self, topo: Topology) -> dict[str, bytes]:
        """Files of the job layer (path -> bytes) the steps read: data passed to the guest
        without a shell quoting it (a data scenario's argv lists)."""
        return {}

    def steps(self, topo: Topology) -> str:
        """Shell run in the guest after lab's library is sourced ($LAB_OUT is the cwd)."""
        raise NotImplementedError

    def check(self, r: Result) -> list[Expectation]:
        raise NotImplementedError

    def allowed_cpus(self, r: Result, phase: str) -> Mapping[str, list[int]] | None:
        """The CPUs the run allowed its tasks in *phase*, for the affinity check every run
        gets (lab.analysis.checks): comm (or shell glob) -> CPUs in the spec's numbering
        (``r.allowed(file)`` reads a cpulist the guest wrote).  None (the default): the run
        records none, and the check says 'not measured'.  Never part of the verdict."""
        return None


# ---- loading --------------------------------------------------------------------------------


class ScenarioError(UserError):
    pass


def _files(directory: Path | None) -> dict[str, Path]:
    """Scenario name -> file, from *directory*, else from the user's folders
    ($LAB_SCENARIOS or the settings file) and then lab's own (the first one wins)."""
    out: dict[str, Path] = {}
    for d in [directory] if directory is not None else paths.scenario_dirs():
        for p in sorted([*d.glob("*.py"), *d.glob("*.toml")]):
            if not p.name.startswith("_"):
                out.setdefault(p.stem.replace("_", "-"), p)
    return out


def names(directory: Path | None = None) -> list[str]:
    return sorted(_files(directory))


def _where(e: BaseException, path: str) -> str:
    """file:line of the deepest frame of *e* inside *path*, else of the deepest frame."""
    tb = traceback.extract_tb(e.__traceback__)
    frame = next((f for f in reversed(tb) if f.filename == path), tb[-1] if tb else None)
    return f"{frame.filename}:{frame.lineno}" if frame else path


def _raised(e: BaseException) -> str:
    if isinstance(e, SystemExit):
        return f"called sys.exit({e.code!r})"
    return f"raised {type(e).__name__}: {e}"


# A scenario's class attributes: what each must be, checked at load, before anything boots.
def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_name(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip()) and v == v.strip() and len(v) <= 100 and "/" not in v and "\n" not in v


def _is_str_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) and x for x in v)


def _is_seconds(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 < v <= 86400


ATTRIBUTES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "name": (_is_name, "a non-empty one-line name without '/'"),
    "summary": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string"),
    "seed": (_is_str, "a string"),
    "claim": (lambda v: isinstance(v, str) and bool(v.strip()), "a sentence naming the expectation that carries the scenario's claim (check() marks it claim=True)"),
    "topologies": (lambda v: _is_str_list(v) and len(v) > 0, "a non-empty list of topology names"),
    "requires": (lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, Requirement) for x in v), "a list of requirements (at_least(...), clusters, kernel_config(...))"),
    "events": (_is_str_list, "a list of event names ('sched:sched_switch')"),
    "filters": (lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()), "a dict of event name -> filter expression (strings)"),
    "tools": (_is_str_list, "a list of tool names (['perf'])"),
    "workloads": (lambda v: isinstance(v, bool), "True or False"),
    "buffer_kb": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1 << 20, "a whole number of KiB per CPU, 1 to 1048576"),
    "verdict_runs": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 99 and v % 2 == 1, "an odd number of runs (1, 3, 5, ...)"),
    "timeout": (_is_seconds, "seconds, above 0 and at most 86400"),
    "check_timeout": (_is_seconds, "seconds, above 0 and at most 86400"),
    "kernel_scheduler": (lambda v: isinstance(v, str) and "\n" not in v, "a one-line string: why the claim is about the kernel's own scheduler ('' when it holds for any)"),
    "version": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number, 1 or more"),
    "params": (lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, Param) for x in v) and len({x.name for x in v}) == len(v),
               "a list of Param(name, default, ...) with distinct names"),
}


def _validate(cls: type[Scenario], path: Path) -> None:
    for attr, (ok, what) in ATTRIBUTES.items():
        v = getattr(cls, attr)
        if not ok(v):
            shown = repr(v)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise ScenarioError(f"{path}: {cls.__name__}.{attr} must be {what}, not {shown}")


def load_file(path: Path) -> Scenario:
    """Import a scenario file (code: only files the user named, or lab's catalog); a syntax
    or API error, an invalid attribute or a sys.exit() at import is reported as file:line."""
    mod_name = f"lab_scenario_{path.stem}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ScenarioError(f"{path}: cannot load")
    mod = importlib.util.module_from_spec(spec)
    try:
        sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise ScenarioError(f"{e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # SystemExit too: a scenario never decides lab's exit code
        raise ScenarioError(f"{_where(e, str(path))}: {_raised(e) if isinstance(e, SystemExit) else f'{type(e).__name__}: {e}'}") from None
    classes = [
        v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, Scenario) and v is not Scenario and v.__module__ == mod_name
    ]
    if len(classes) != 1:
        raise ScenarioError(f"{path}: must define exactly one Scenario subclass (found {len(classes)})")
    cls = classes[0]
    for attr in ("name", "summary", "topologies"):
        if not getattr(cls, attr):
            raise ScenarioError(f"{path}: {cls.__name__}.{attr} is not set")
    if cls.steps is Scenario.steps or cls.check is Scenario.check:
        raise ScenarioError(f"{path}: {cls.__name__} must define steps() and check()")
    _validate(cls, path)
    for q in cls.params:
        try:
            q.value(q.default)
        except ValueError as e:
            raise ScenarioError(f"{path}: {cls.__name__}.params: {q.name}'s default {q.default!r} is not {e}") from None
    cls.path = str(path)
    return cls()


def load(name_or_path: str, directory: Path | None = None) -> Scenario:
    """A scenario the user named: a catalog name, or a .py file's path (code the user chose
    to run).  Names read from records go through load_recorded() instead."""
    p = Path(name_or_path)
    if p.suffix in (".py", ".toml"):
        if not p.exists():
            raise ScenarioError(f"{p}: no such scenario file")
        return load_file(p) if p.suffix == ".py" else _load_toml(p)
    files = _files(directory)
    if name_or_path not in files:
        raise unknown("scenario", name_or_path, list(files))
    f = files[name_or_path]
    return load_file(f) if f.suffix == ".py" else _load_toml(f)


def _load_toml(path: Path) -> Scenario:
    return load_toml(path)


def recorded_in(run_dir: Path) -> Any:
    """plan.json's ``scenario`` record of *run_dir* (None when it has none or no plan)."""

    try:
        d = json.loads((run_dir / PLAN_FILE).read_text())
    except (OSError, ValueError):
        return None
    return d.get("scenario") if isinstance(d, dict) else None


def from_run(name: Any, where: str, record: Any) -> Scenario:
    """The scenario a run was made with: a data scenario rebuilt from the run's own record
    (plan.json's ``scenario``: data, nothing imported), else load_recorded(name), with the
    parameters' values the record holds."""
    if isinstance(record, dict) and record.get("kind") == "data" and record.get("name") == name:
        return from_record(record, f"{where} (plan.json's scenario)")
    s = load_recorded(name, where)
    if isinstance(record, dict) and record.get("name") == name and isinstance(record.get("params"), dict):
        s.set_params(record["params"], where=f"{where}: plan.json's params")
    return s


def load_recorded(name: Any, where: str) -> Scenario:
    """The scenario a record (results.json, a command file, a bundle's manifest) names:
    only a name in lab's catalog or the user's scenario folders.  Data never names code to
    import: a path is refused in one line (*where* says which record), and the user who
    trusts it says so with --scenario FILE."""
    if not isinstance(name, str) or not name:
        raise UserError(f"{where}: the scenario must be a name, not {name!r}")
    if "/" in name or "\\" in name or name.endswith(".py") or name.startswith("."):
        raise UserError(f"{where}: names the scenario {name[:80]!r}, a path: lab loads only scenarios of its catalog by name from a record; to run that file, give it yourself (--scenario FILE)")
    return load(name)


class _CheckTimeout(BaseException):
    pass


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """SIGALRM after *seconds* raises _CheckTimeout in the main thread (elsewhere: no bound)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum, frame):
        raise _CheckTimeout()

    prev = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)


def _bad_expectation(x: Any) -> str:
    if not isinstance(x, Expectation):
        return f"{type(x).__name__} {x!r:.60} is not an Expectation"
    if not (isinstance(x.name, str) and x.name.strip()):
        return f"Expectation name {x.name!r:.60} is not a non-empty string"
    if not isinstance(x.ok, bool):
        return f"{x.name!r:.60}: ok={x.ok!r:.40} is not True or False"
    if not all(isinstance(v, str) for v in (x.inconclusive, x.note, x.vacuous, x.kernel_scheduler)):
        return f"{x.name!r:.60}: inconclusive, note, vacuous and kernel_scheduler must be strings"
    if not isinstance(x.claim, bool):
        return f"{x.name!r:.60}: claim={x.claim!r:.40} is not True or False"
    if not isinstance(x.figures, dict):
        return f"{x.name!r:.60}: figures must be a dict, not {type(x.figures).__name__}"
    if not isinstance(x.evidence, list):
        return f"{x.name!r:.60}: evidence must be a list, not {type(x.evidence).__name__}"
    return ""


def call_check(s: Scenario, r: Result) -> list[Expectation]:
    """Run check() within the scenario's check_timeout; what it raises (sys.exit too), a
    time-out, or a result that is not a non-empty list of well-formed Expectations is the
    scenario's bug: a ScenarioError naming file:line (the run is then an ERROR).  Evidence
    and figures are normalised so the results can always be written (normalise())."""
    path = s.path or type(s).__name__
    try:
        with _deadline(float(s.check_timeout)):
            out = s.check(r)
    except (KeyboardInterrupt, UserError):  # lab's own one-line errors (a run file that is a link...)
        raise
    except _CheckTimeout:
        raise ScenarioError(f"{path}: check() did not return within {s.check_timeout:g}s (the scenario's check_timeout)") from None
    except BaseException as e:
        raise ScenarioError(f"{_where(e, path)}: check() {_raised(e)}") from None
    if not isinstance(out, list):
        raise ScenarioError(f"{path}: check() must return a list of Expectation, not {type(out).__name__}")
    if not out:
        raise ScenarioError(f"{path}: check() returned no expectations: nothing was judged")
    for x in out:
        why = _bad_expectation(x)
        if why:
            raise ScenarioError(f"{path}: check() returned a bad expectation: {why}")
    for x in out:
        x.figures = normalise(x.figures, x.name)
        x.evidence = [v if isinstance(v, str) else str(normalise(v, x.name)) for v in x.evidence]
    return out


def normalise(v: Any, where: str = "") -> Any:
    """A figure as JSON can hold it and every reader reads it back: keys as strings,
    non-finite floats and huge ints as strings, anything else as its str()."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v if abs(v) < 10**MAX_FIGURE_DIGITS else f"{'-' if v < 0 else ''}>1e{MAX_FIGURE_DIGITS}"
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, dict):
        return {str(k) if not isinstance(k, str) else k: normalise(x, where) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [normalise(x, where) for x in v]
    return str(v)


# ---- data scenarios: a TOML file, or `lab run --workload CMD --check EXPR` ---------------------

WORKLOAD_NAME = "workload"  # the synthetic scenario `lab run --workload` makes
GUEST_DIR = "lab/workload"
DEFAULT_EVENTS = (
    "sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new", "sched:sched_waking", "sched:sched_migrate_task",
)  # fmt: skip
DEFAULT_BUFFER_KB = 8192
DEFAULT_TIMEOUT = 900.0
MAX_WORKLOADS = 32
MAX_ARGS = 256
MAX_TOML_BYTES = 64 * 1024
KEYS = ("name", "summary", "claim", "topologies", "requires", "workloads", "checks", "events", "tools", "timeout", "buffer_kb", "params")
_COUNTS = ("sockets", "nodes", "llcs", "llcs_per_socket", "llcs_per_node", "clusters_per_llc", "cpus", "threads_per_core")
_PARAM_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@cache
def _applets() -> frozenset[str]:
    """busybox's applets (the guest's /bin holds each as a link): from the host's busybox
    when it has one, else none known (a command is then packed as a host tool)."""
    bb = shutil.which("busybox") or next((p for p in ("/bin/busybox", "/usr/bin/busybox") if Path(p).exists()), None)
    if bb is None:
        return frozenset()
    try:
        out = subprocess.run([bb, "--list"], capture_output=True, timeout=10, check=False).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(out.split())


@cache
def _lab_programs() -> frozenset[str]:
    """The guest programs lab itself ships: its workloads (stream, pingpong, ...) and
    labsel/labcpu."""
    return frozenset({p.stem for p in (paths.IMAGES / "workloads").glob("*.c")} | {"labsel", "labcpu"})


def tool_of(argv: list[str]) -> str | None:
    """The host tool to pack for a command (its first word), or None when the guest has it
    already (a lab workload, a busybox applet) or it is a path in the guest."""
    first = argv[0]
    if "/" in first or first in _lab_programs() or first in _applets():
        return None
    return first


def requirement(text: str, where: str) -> Requirement:
    """'sockets >= 2' (any of _COUNTS), 'clusters', 'arch x86_64', 'CONFIG_SCHED_CLUSTER'."""
    t = " ".join(text.split())
    m = re.fullmatch(r"([a-z_]+)\s*>=\s*([0-9]{1,6})", t)
    if m and m[1] in _COUNTS:
        return at_least(m[1], int(m[2]))
    if t == "clusters":
        return clusters
    m = re.fullmatch(r"arch ([a-z0-9_]+)", t)
    if m:
        return arch(m[1])
    m = re.fullmatch(r"CONFIG_([A-Z0-9_]+)", t)
    if m:
        return kernel_config(m[1], "the scenario requires it")
    raise UserError(
        f"{where}: requirement {text[:60]!r}: give 'COUNT >= N' (COUNT one of {', '.join(_COUNTS)}), "
        "'clusters', 'arch NAME' or 'CONFIG_SYMBOL'"
    )


def _param(name: str, d: Any, where: str) -> Param:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,39}", name):
        raise UserError(f"{where}: parameter name {name[:40]!r} must be a word (letters, digits, _)")
    if not isinstance(d, dict) or "default" not in d:
        raise UserError(f"{where}: [params.{name}] needs a default (default = 16)")
    extra = set(d) - {"default", "min", "max", "help", "choices"}
    if extra:
        raise UserError(f"{where}: [params.{name}] has {', '.join(sorted(extra))}: it takes default, min, max, help, choices")
    default = d["default"]
    if not isinstance(default, (bool, int, float, str)):
        raise UserError(f"{where}: [params.{name}] default must be a number, true/false or a string")
    for k in ("min", "max"):
        if k in d and (isinstance(d[k], bool) or not isinstance(d[k], (int, float)) or isinstance(default, (bool, str))):
            raise UserError(f"{where}: [params.{name}] {k} must be a number, for a number parameter")
    choices = d.get("choices", [])
    if not (isinstance(choices, list) and all(isinstance(c, str) for c in choices)):
        raise UserError(f"{where}: [params.{name}] choices must be a list of strings")
    p = Param(name, default, str(d.get("help", "")), d.get("min"), d.get("max"), tuple(choices))
    try:
        p.value(default)
    except ValueError as e:
        raise UserError(f"{where}: [params.{name}] default {default!r} is not {e}") from None
    return p


def _argv(cmd: Any, where: str) -> list[str]:
    if isinstance(cmd, str):
        try:
            argv = shlex.split(cmd)
        except ValueError as e:
            raise UserError(f"{where}: command {cmd[:80]!r}: {e}") from None
    elif isinstance(cmd, list) and all(isinstance(a, str) for a in cmd):
        argv = list(cmd)
    else:
        raise UserError(f"{where}: a workload is a command line or a list of words, not {str(cmd)[:60]!r}")
    if not argv or not argv[0]:
        raise UserError(f"{where}: an empty command")
    if len(argv) > MAX_ARGS or any("\0" in a for a in argv):
        raise UserError(f"{where}: command {shlex.join(argv)[:80]!r}: at most {MAX_ARGS} words, none with a NUL byte")
    return argv


class DataScenario(Scenario):
    """A scenario from data: a TOML file, or `lab run --workload CMD --check EXPR`; one
    instance per definition.

    A data scenario runs its commands in the guest at once (each a workload step, all started
    together inside one traced phase, ``main``), traces the sched events the checks need, and
    judges its check expressions (lab.analysis.checks: ``starvation < 100ms``,
    ``wakeup-latency p99 < 5ms``, ...), which carry its claim.  Its steps' exit statuses are
    preconditions: a command that fails (or is not found in the guest) makes the run an ERROR
    naming it, with its stderr.

    Commands are data end to end: a command line is split with shlex on the host (or given as
    an argv list), each word written to a file of the job layer (``/lab/workload/N/arg.I``)
    and read back in the guest byte for byte into ``"$@"``; no shell of lab's parses them.
    Parameters (``[params.NAME]``: default, min, max, help) are substituted into words as
    ``{NAME}`` on the host, after the split.  The command's first word is packed as a host
    tool (as ``lab boot --tools`` does) unless it is one of lab's workloads, a busybox applet
    or a path; a tool that cannot be packed is a SKIP before booting.

    The whole definition, with the parameters' values, is recorded in plan.json
    (``scenario``), so ``lab recheck``, ``lab compare`` and a bundle's replay rebuild the same
    scenario from the run itself: it is data, nothing is imported.

    A TOML scenario::

        name = "hackbench-starvation"
        summary = "hackbench groups on every CPU: no task waits runnable longer than 100 ms"
        topologies = ["zen3-2s-mini"]
        requires = ["sockets >= 2"]               # also: "clusters", "arch x86_64", "CONFIG_SCHED_CLUSTER"
        workloads = ["hackbench -g {groups} -l 2000"]
        checks = ["starvation < 100ms", "wakeup-latency p99 < 5ms"]

        [params.groups]
        default = 4
        min = 1
        max = 64
        help = "hackbench groups (each 40 tasks)"
    """

    checks_carry_claim = True

    def __init__(self, d: dict[str, Any], where: str, source: str = "") -> None:
        unknown_keys = set(d) - set(KEYS)
        if unknown_keys:
            raise UserError(f"{where}: unknown key(s) {', '.join(sorted(unknown_keys))} (a scenario takes {', '.join(KEYS)})")
        self.where, self.source, self.definition = where, source, d
        for k in ("name", "summary"):
            if not isinstance(d.get(k), str) or not d[k].strip():
                raise UserError(f"{where}: {k} must be a non-empty string")
        if not _is_name(d["name"]):
            raise UserError(f"{where}: name must be a one-line name without '/', not {d['name'][:60]!r}")
        cmds = d.get("workloads")
        if not isinstance(cmds, list) or not cmds or len(cmds) > MAX_WORKLOADS:
            raise UserError(f"{where}: workloads must be a list of 1 to {MAX_WORKLOADS} commands")
        self.argvs = [_argv(c, f"{where}: workloads[{i}]") for i, c in enumerate(cmds)]
        exprs = d.get("checks")
        if not isinstance(exprs, list) or not exprs or not all(isinstance(x, str) for x in exprs):
            raise UserError(f"{where}: checks must be a non-empty list of expressions ('starvation < 100ms'): they are what a run is judged by")
        self.check_texts = list(exprs)
        for x in exprs:
            try:
                ck.parse_check(x)
            except ck.CheckSyntaxError as e:
                raise UserError(f"{where}: {e}") from None
        tops = d.get("topologies", [])
        if not _is_str_list(tops):
            raise UserError(f"{where}: topologies must be a list of topology names")
        reqs = d.get("requires", [])
        if not _is_str_list(reqs):
            raise UserError(f"{where}: requires must be a list of strings ('sockets >= 2', 'clusters')")
        params = d.get("params", {})
        if not isinstance(params, dict):
            raise UserError(f"{where}: params must be a table ([params.NAME] with default, min, max, help)")
        self.params = [_param(k, v, where) for k, v in params.items()]  # type: ignore[misc]
        declared = {p.name for p in self.params}
        for argv in self.argvs:
            for w in argv:
                for ref in _PARAM_REF.findall(w):
                    if ref not in declared:
                        raise UserError(f"{where}: command {shlex.join(argv)[:80]!r} names {{{ref}}}, which is no parameter ({', '.join(sorted(declared)) or 'none declared'})")
        self.name = d["name"]  # type: ignore[misc]
        self.summary = d["summary"]  # type: ignore[misc]
        self.claim = d.get("claim") or f"the checks {'; '.join(exprs)} hold"  # type: ignore[misc]
        self.topologies = list(tops) or ["zen3-2s-mini"]  # type: ignore[misc]
        self.requires = [requirement(r, where) for r in reqs]  # type: ignore[misc]
        self.events = list(d.get("events") or DEFAULT_EVENTS)  # type: ignore[misc]
        self.tools_extra = list(d.get("tools") or [])
        self.timeout = d.get("timeout", DEFAULT_TIMEOUT)  # type: ignore[misc]
        self.buffer_kb = d.get("buffer_kb", DEFAULT_BUFFER_KB)  # type: ignore[misc]
        self.path = source if source.endswith(".toml") else ""  # type: ignore[misc]
        for attr in ("events", "timeout", "buffer_kb", "claim"):
            ok, what = ATTRIBUTES[attr]
            if not ok(getattr(self, attr)):
                raise UserError(f"{where}: {attr} must be {what}")
        if not _is_str_list(self.tools_extra):
            raise UserError(f"{where}: tools must be a list of tool names")
        self._user_checks: list[Any] = []

    # the commands, with the parameters' values
    def commands(self) -> list[list[str]]:
        vals = {k: fmt_param(v) for k, v in self.p.items()}
        return [[_PARAM_REF.sub(lambda m: vals.get(m[1], m[0]), w) for w in argv] for argv in self.argvs]

    @property
    def tools(self) -> list[str]:  # type: ignore[override]
        out = [t for t in (tool_of(a) for a in self.commands()) if t is not None]
        return list(dict.fromkeys([*out, *self.tools_extra]))

    def own_checks(self) -> list[str]:
        return list(self.check_texts)

    def record(self) -> dict[str, Any]:
        """plan.json's ``scenario``: the definition (commands as argv lists), the
        parameters' values and the commands as run, so the run rebuilds it."""
        d = dict(self.definition)
        d["workloads"] = [list(a) for a in self.argvs]
        return {"kind": "data", "name": self.name, "source": self.source, "definition": d,
                "params": self.param_values(), "commands": self.commands()}  # fmt: skip

    def guest_files(self, topo: Topology) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for i, argv in enumerate(self.commands()):
            for j, a in enumerate(argv):
                files[f"{GUEST_DIR}/{i}/arg.{j}"] = a.encode("utf-8", "surrogateescape")
            files[f"{GUEST_DIR}/{i}/nargs"] = f"{len(argv)}\n".encode()
        return files

    def step_names(self) -> list[str]:
        return [f"w{i + 1}-{re.sub(r'[^A-Za-z0-9._-]', '_', Path(a[0]).name)[:30]}" for i, a in enumerate(self.commands())]

    def steps(self, topo: Topology) -> str:
        lines = [
            "# Each command's words are files (/lab/workload/N/arg.I), read back byte for byte",
            "# into \"$@\": this shell never parses them.",
            "lab_argv_run() {",
            '    nm=$1; d=$2; set --; n=0; cnt=$(cat "$d/nargs")',
            '    while [ "$n" -lt "$cnt" ]; do a=$(cat "$d/arg.$n"; echo x); set -- "$@" "${a%x}"; n=$((n + 1)); done',
            '    lab_run "$nm" "$@"',
            "}",
            "lab_trace_on main",
        ]
        # All at once, each in a subshell of its own: one phase traces them together.
        for i, name in enumerate(self.step_names()):
            lines.append(f"lab_argv_run {name} /{GUEST_DIR}/{i} &")
        lines += ["wait", "lab_trace_off main"]
        return "\n".join(lines)

    def check(self, r: Result) -> list[Expectation]:
        out = []
        for name, argv in zip(self.step_names(), self.commands(), strict=True):
            st = r.step(name)
            out.append(Expectation(
                f"{name} ran: {shlex.join(argv)[:100]}", st.rc == 0, figures={"rc": st.rc},
                note="" if st.rc == 0 else f"exited {st.rc}: {st.err.strip()[-200:]}",
            ))  # fmt: skip
        return out


def load_toml(path: Path) -> DataScenario:
    """A TOML scenario file; what is wrong with it is one line naming the file."""
    try:
        data = read_file(path, MAX_TOML_BYTES, "a TOML scenario").decode()
        d = tomllib.loads(data)
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: not TOML: {e}") from None
    return DataScenario(d, str(path), source=str(path))


def from_workloads(commands: list[str] | tuple[str, ...], checks: list[str] | tuple[str, ...]) -> DataScenario:
    """The synthetic scenario of `lab run --workload CMD ... --check EXPR ...`."""
    if not checks:
        raise UserError("--workload needs at least one --check EXPR: the checks are what the run is judged by")
    return DataScenario(
        {"name": WORKLOAD_NAME, "summary": "commands from the command line: " + "; ".join(commands),
         "workloads": list(commands), "checks": list(checks)},
        "--workload", source=WORKLOAD_NAME,
    )  # fmt: skip


def workload_file(commands: list[str] | tuple[str, ...], checks: list[str] | tuple[str, ...]) -> Path:
    """from_workloads()'s scenario as a TOML scenario file, for the commands that take a
    scenario by name or path and hand it on (`lab matrix --workload`, `lab bisect
    --workload`): kept under lab's cache, named by its content, so the same commands and
    checks are the same file (and the same matrix inputs) every time."""
    s = from_workloads(commands, checks)  # what is wrong with them: one line, as for lab run
    text = "\n".join([
        "# lab's scenario of --workload commands judged by --check expressions (scenario.workload_file)",
        f"name = {toml_str(WORKLOAD_NAME)}",
        f"summary = {toml_str(s.summary)}",
        f"workloads = [{', '.join(toml_str(c) for c in commands)}]",
        f"checks = [{', '.join(toml_str(c) for c in checks)}]",
        "",
    ])  # fmt: skip
    try:
        data = text.encode()
    except UnicodeEncodeError:
        raise UserError("--workload/--check: not UTF-8 text (a TOML scenario file holds only UTF-8)") from None
    back = tomllib.loads(text)
    assert back["workloads"] == list(commands) and back["checks"] == list(checks), back
    path = paths.cache_dir() / "workloads" / f"{hashlib.sha256(data).hexdigest()[:16]}.toml"
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, text, "a workload scenario")
    return path


def from_record(rec: Any, where: str) -> DataScenario:
    """The data scenario plan.json's ``scenario`` record defines, with its parameters."""
    if not isinstance(rec, dict) or rec.get("kind") != "data" or not isinstance(rec.get("definition"), dict):
        raise UserError(f"{where}: not a data scenario's record")
    s = DataScenario(rec["definition"], where, source=str(rec.get("source") or ""))
    if isinstance(rec.get("params"), dict) and rec["params"]:
        s.set_params(rec["params"], where=f"{where}: params")
    return s
