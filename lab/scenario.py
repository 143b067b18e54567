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
                            figures={f"socket{s}": n for s, n in w.split(r.topo, "socket").items()}),
            ]

What a scenario needs and lab can tell before booting is declared, not checked in
steps(): ``requires`` (topology requirements such as ``at_least``/``clusters``, and
``kernel_config("SCHED_CLUSTER", why)`` for the kernel's config) and ``tools`` (host
tools, which must be packable for the topology's arch).  ``skip_reason()`` turns an
unmet one into a SKIP with the reason before anything boots.

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

import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from . import analysis, cpulist, integrity, paths
from .errors import UserError, unknown
from .limits import MAX_RESULT_BYTES, read_file
from .topology import Topology
from .trace import parse_file

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
    if what == "sockets":
        return len(topo.groups("socket"))
    if what == "nodes":
        return topo.n_nodes
    if what == "llcs":
        return len(topo.groups("llc"))
    if what == "llcs_per_socket":
        return min(len({topo.cpu(c).llc for c in s}) for s in topo.groups("socket"))
    if what == "llcs_per_node":
        return min(len({topo.cpu(c).llc for c in topo.node_cpus(n)}) for n in topo.node_ids)
    if what == "clusters_per_llc":
        if not topo.has_clusters:
            return 1
        return min(len({topo.cpu(c).cluster for c in g}) for g in topo.groups("llc"))
    if what == "cpus":
        return topo.n_cpus
    if what == "threads_per_core":
        return topo.threads_per_core
    raise ValueError(f"unknown count {what!r}")


def at_least(what: str, n: int) -> Requirement:
    """e.g. at_least("llcs_per_socket", 2): 'at least 2 LLCs per socket'."""
    words = what.replace("_per_", " per ").replace("_", " ")
    return Requirement(f"at least {n} {words}", lambda t: _count(t, what) >= n)


def arch(name: str) -> Requirement:
    return Requirement(f"arch {name}", lambda t: t.arch == name)


clusters = Requirement("clusters (a level between core and LLC)", lambda t: t.has_clusters)


def kernel_config(symbol: str, why: str, hint: str = "") -> Requirement:
    """The kernel must be built with CONFIG_<symbol>=y; *why* says what the scenario
    needs it for, *hint* which kernel has it (its config is in the kernel store; a bare
    image's is unknown)."""
    symbol = symbol.removeprefix("CONFIG_")

    def test(kernel: Any) -> bool | None:
        value = kernel.config_value(symbol)
        return None if value is None else value == "y"

    return Requirement(f"CONFIG_{symbol}=y ({why}{'; ' + hint if hint else ''})", kernel_test=test)


# ---- expectations and results ---------------------------------------------------------------


@dataclass
class Expectation:
    """One named claim about the run, PASS or FAIL, with what shows it; INCONCLUSIVE when
    the scenario knows the outcome is the emulation's, not the scheduler's."""

    name: str
    ok: bool
    evidence: list[str] = field(default_factory=list)  # offending trace lines, or figures
    figures: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # why it failed, when the scenario knows
    # The cause, when what decided this outcome is the emulation (the vendor effect: the
    # guest's CPU model, not the kernel, keeps fork placement on one socket; timings under
    # TCG): the expectation is then INCONCLUSIVE, neither PASS nor FAIL, whatever *ok*.
    inconclusive: str = ""

    @property
    def status(self) -> str:
        if self.inconclusive:
            return "INCONCLUSIVE"
        return "PASS" if self.ok else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        d = {
            "name": self.name,
            "status": self.status,
            "figures": self.figures,
            "evidence": self.evidence,
            "note": self.note,
        }
        if self.inconclusive:
            d["inconclusive"] = self.inconclusive
        return d


def verdict_of(expectations: list[Expectation]) -> tuple[str, str]:
    """A run's verdict from its expectations, and the message that goes with it: FAIL if
    any failed (a failure the scheduler owns decides, whatever else the emulation hid),
    else INCONCLUSIVE naming each cause, else PASS."""
    if any(e.status == "FAIL" for e in expectations):
        return "FAIL", ""
    causes = list(dict.fromkeys(e.inconclusive for e in expectations if e.inconclusive))
    if causes:
        return "INCONCLUSIVE", "; ".join(causes)
    return "PASS", ""


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

    def __init__(self, scenario: Scenario, topo: Topology, plan, kernel, out_dir: Path, guest_view=None):
        self.scenario = scenario
        self.topo = topo
        self.plan = plan
        self.kernel = kernel
        self.out = out_dir
        self.guest_view = guest_view  # sysfs.MachineView in the spec's numbering, or None
        self._g2s = plan.guest_to_spec

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
    def text(self, name: str) -> str:
        """The file *name* the guest's job wrote, '' when there is none.  It must be a
        regular file of at most limits.MAX_RESULT_BYTES (lab unpacks nothing else): a
        link, a FIFO or a larger file is a one-line UserError naming it."""
        p = self.out / name
        if not os.path.lexists(p):
            return ""
        return read_file(p, MAX_RESULT_BYTES, "one file of a run's output", follow_symlinks=False).decode(errors="replace")

    def step(self, name: str) -> Step:
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
            return iter(())
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
    seed: ClassVar[str] = ""  # which seed post it reproduces (shared/seeds/NNN_*.txt)
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

    path: ClassVar[str] = ""

    def unmet(self, topo: Topology) -> list[str]:
        """The topology requirements *topo* does not meet."""
        return [r.description for r in self.requires if not r(topo)]

    def skip_reason(self, topo: Topology, kernel: Any = None) -> str | None:
        """Why this scenario cannot run on *topo* (with *kernel*, once it is known), said
        before anything boots: a topology requirement it lacks, a tool that cannot be
        packed for its arch, a kernel requirement the kernel's config does not meet.
        None when nothing known stands in the way."""
        from .image import tools as tools_mod

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

    def steps(self, topo: Topology) -> str:
        """Shell run in the guest after lab's library is sourced ($LAB_OUT is the cwd)."""
        raise NotImplementedError

    def check(self, r: Result) -> list[Expectation]:
        raise NotImplementedError


# ---- loading --------------------------------------------------------------------------------


class ScenarioError(UserError):
    pass


def _files(directory: Path | None) -> dict[str, Path]:
    """Scenario name -> file, from *directory*, else from the user's folders
    ($LAB_SCENARIOS or the settings file) and then lab's own (the first one wins)."""
    out: dict[str, Path] = {}
    for d in [directory] if directory is not None else paths.scenario_dirs():
        for p in sorted(d.glob("*.py")):
            if not p.name.startswith("_"):
                out.setdefault(p.stem.replace("_", "-"), p)
    return out


def names(directory: Path | None = None) -> list[str]:
    return sorted(_files(directory))


def load_file(path: Path) -> Scenario:
    """Import a scenario file; a syntax or API error is reported as file:line."""
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
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        frame = next((f for f in reversed(tb) if f.filename == str(path)), tb[-1] if tb else None)
        where = f"{frame.filename}:{frame.lineno}" if frame else str(path)
        raise ScenarioError(f"{where}: {type(e).__name__}: {e}") from None
    classes = [
        v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, Scenario) and v is not Scenario and v.__module__ == mod_name
    ]
    if len(classes) != 1:
        raise ScenarioError(f"{path}: must define exactly one Scenario subclass (found {len(classes)})")
    cls = classes[0]
    for attr in ("name", "summary", "topologies"):
        if not getattr(cls, attr):
            raise ScenarioError(f"{path}: {cls.__name__}.{attr} is not set")
    if not (isinstance(cls.verdict_runs, int) and cls.verdict_runs >= 1 and cls.verdict_runs % 2 == 1):
        raise ScenarioError(f"{path}: {cls.__name__}.verdict_runs must be an odd number of runs (1, 3, 5, ...), not {cls.verdict_runs!r}")
    if cls.steps is Scenario.steps or cls.check is Scenario.check:
        raise ScenarioError(f"{path}: {cls.__name__} must define steps() and check()")
    cls.path = str(path)
    return cls()


def load(name_or_path: str, directory: Path | None = None) -> Scenario:
    p = Path(name_or_path)
    if p.suffix == ".py":
        if not p.exists():
            raise ScenarioError(f"{p}: no such scenario file")
        return load_file(p)
    files = _files(directory)
    if name_or_path not in files:
        raise unknown("scenario", name_or_path, list(files))
    return load_file(files[name_or_path])


def call_check(s: Scenario, r: Result) -> list[Expectation]:
    """Run check(); an exception in it is the scenario's bug: report file:line."""
    try:
        out = s.check(r)
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        frame = next((f for f in reversed(tb) if f.filename == s.path), tb[-1] if tb else None)
        where = f"{frame.filename}:{frame.lineno}" if frame else s.path
        raise ScenarioError(f"{where}: check() raised {type(e).__name__}: {e}") from None
    if not isinstance(out, list) or not all(isinstance(x, Expectation) for x in out):
        raise ScenarioError(f"{s.path}: check() must return a list of Expectation")
    return out
