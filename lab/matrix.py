"""`lab matrix`: scenarios x topologies x kernels, each cell one `lab run`.

The expansion (``expand``) is a pure function of the axes: every cell in a fixed order,
the ones a scenario's requirements exclude (or whose kernel is another arch) skipped
with the reason.  ``shard(i, n)`` is a deterministic slice of the runnable cells, so a
CI system's jobs (``plan``: GitHub's ``strategy.matrix``, GitLab's ``parallel:matrix``)
or several hosts run the rest, and ``merge`` puts their results back into one table
and one JUnit file, refusing results of different matrices.

Each cell runs as its own ``lab run --json`` process (``python -m lab``), in a session of
its own: lab's runner already guarantees that a run stops its VM and writes what it
gathered when it fails or is interrupted, and a process per cell means a cell that
crashes takes nothing else with it.  The parent never runs a VM itself; on Ctrl-C or
SIGTERM it asks every running cell to stop (SIGTERM: the child unwinds as on Ctrl-C),
records them as interrupted, and keeps every finished cell.  A child whose parent dies
gets SIGTERM from the kernel (PR_SET_PDEATHSIG), and its QEMU gets SIGKILL the same way.

Concurrency (``capacity``): cells run while the VMs running use at most one busy
host thread per host core (a single-threaded TCG guest is one thread, an MTTCG or KVM
guest one per vCPU; one VM always runs, however big) and fit in the memory free at the
start.  More busy threads than cores only stretch every guest: lab's deadlines stretch
with the CPU share other work takes (host.HostClock), but only down to a quarter, and
a shared host's other work counts too.  ``-j N`` caps the VMs at once below that.

A cell's result is kept in ``OUT/cells/<cell>.json`` with a key over its inputs (the
topology spec's bytes, the kernel's store id, the scenario's source, lab's own source,
the VM options, the backend, --repeat): a later matrix into the same directory reuses a
judged cell (PASS, FAIL, SKIP) whose key is unchanged, unless --rerun.  An ERROR is
never reused: it judged nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from . import arch as archs
from . import atomic, junit, paths, proc, rundir, session, topology
from . import host as host_mod
from . import scenario as sc
from . import scheduler as scheduler_mod
from .backends import base
from .errors import LabError, UserError, unknown
from .integrity import read_record
from .kernel import recipe as krecipe
from .kernel import resolve, store
from .plan import VmOptions
from .progress import Progress
from .progress import of as progress_of
from .runner import EXIT, worst

FORMAT = 1
MATRIX_FILE = "matrix.json"
JUNIT_FILE = rundir.JUNIT  # the matrix's own, beside its cells' run directories
SUMMARY_FILE = "summary.md"
STATUSES = ("PASS", "FAIL", "INCONCLUSIVE", "ERROR", "SKIP")
QEMU_OVERHEAD_MB = 256  # QEMU's own memory beside the guest's (TCG's code cache included)
STOP_GRACE_S = 60.0  # an interrupted cell's lab run: time to stop QEMU and write its results
REUSED = ("PASS", "FAIL", "INCONCLUSIVE", "SKIP")


# ---- axes and expansion ---------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    scenario: str
    topology: str
    kernel: str  # the kernel as the axis names it (a column of the table)
    skip: str = ""  # why it does not run anywhere (the scenario's requirements, the arch)
    # The sched_ext scheduler as the --schedulers axis names it (eevdf: the kernel's own);
    # "" when the matrix has no such axis (ids and files as before it existed).
    scheduler: str = ""

    @property
    def id(self) -> str:
        return f"{self.scenario}@{self.topology}@{self.kernel}" + (f"@{self.scheduler}" if self.scheduler else "")

    @property
    def column(self) -> str:
        """The table's column: the kernel, and the scheduler when the matrix has that axis."""
        return column(self.kernel, self.scheduler)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if not self.scheduler:
            del d["scheduler"]
        return d

    @classmethod
    def from_id(cls, cell_id: str) -> Cell:
        """The cell an id names (scenario@topology@kernel[@scheduler])."""
        parts = cell_id.split("@", 3)
        return cls(parts[0], parts[1], parts[2], scheduler=parts[3] if len(parts) > 3 else "")

    @property
    def slug(self) -> str:
        """A file name for the cell: its id with anything but [A-Za-z0-9._@-] as _, and a
        hash when that changed it (two ids never share a file)."""
        s = re.sub(r"[^A-Za-z0-9._@-]", "_", self.id)
        if s != self.id:
            s += "-" + hashlib.sha256(self.id.encode()).hexdigest()[:8]
        return s


def column(kernel: str, scheduler: str) -> str:
    return f"{kernel} {scheduler}" if scheduler else kernel


def columns(m: dict[str, Any]) -> list[str]:
    """The table's columns of a matrix's definition: kernels, x schedulers when given."""
    scheds = m.get("schedulers") or [""]
    return [column(k, sch) for k in m["kernels"] for sch in scheds]


@dataclass(frozen=True)
class Matrix:
    """The axes as given (names in order, duplicates dropped), the run options, and the
    cells they expand to."""

    scenarios: tuple[str, ...]
    topologies: tuple[str, ...]
    kernels: tuple[str, ...]
    repeat: int = 1
    options: VmOptions = field(default_factory=VmOptions)  # its kernel is unused: the axis says
    backend: str = "qemu"
    cells: tuple[Cell, ...] = ()
    inputs: dict[str, str] = field(default_factory=dict, compare=False)  # name -> content hash
    sources: dict[str, str] = field(default_factory=dict, compare=False)  # scenario name -> as given (a name or a file)
    # A scenario label (`soft-affinity loops=600`) -> the -p NAME=VALUE its cells run with.
    params: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    schedulers: tuple[str, ...] = ()  # the --schedulers axis (() : none, each run the kernel's own)

    @property
    def runnable(self) -> list[Cell]:
        return [c for c in self.cells if not c.skip]

    def definition(self) -> dict[str, Any]:
        """What makes two matrices the same matrix (merge compares these)."""
        opts = {k: v for k, v in self.options.to_dict().items() if k != "kernel"}
        d = {
            "scenarios": list(self.scenarios), "topologies": list(self.topologies), "kernels": list(self.kernels),
            "repeat": self.repeat, "options": opts, "backend": self.backend,
        }  # fmt: skip
        if self.schedulers:  # only then: a matrix without the axis is defined as before
            d["schedulers"] = list(self.schedulers)
        return d

    def shard(self, i: int, n: int) -> list[Cell]:
        """Shard *i* of *n* (1-based): every n-th runnable cell from the i-th, so each shard
        gets a share of every scenario and the slices never depend on the host."""
        return self.runnable[i - 1 :: n]

    def shard_of(self, cell: Cell, n: int) -> int | None:
        run = self.runnable
        return run.index(cell) % n + 1 if cell in run else None


def split(value: str, what: str) -> list[str]:
    """A comma-separated axis, duplicates dropped; an empty entry is an error."""
    items = [x.strip() for x in value.split(",")]
    if not value.strip() or any(not x for x in items):
        raise UserError(f"--{what}: {value!r}: give names separated by commas, none empty")
    return list(dict.fromkeys(items))


def topology_names(value: str) -> list[str]:
    if value.strip() == "all-minis":
        return [n for n in topology.catalog_names() if n.endswith("-mini")]
    if value.strip() == "all":
        return topology.catalog_names()
    return split(value, "topologies")


def scenario_names(value: str) -> list[str]:
    if value.strip() == "all":
        return sc.names()
    return split(value, "scenarios")


def kernel_arch(spec: str) -> str | None:
    """The arch of the kernel *spec* names, without building it (None: any, as `debian`
    is one per arch); an unknown name is refused with the nearest ones."""

    if spec == "debian":
        return None
    if spec in krecipe.names():
        return krecipe.load(spec).arch
    p = Path(spec).expanduser()
    if "/" in spec or p.is_file():
        if not p.is_file():
            raise UserError(f"--kernels: kernel image {p} does not exist")
        with open(p, "rb") as f:
            a = archs.from_kernel_image(f.read(1 << 20))
        if a is None:
            raise UserError(f"--kernels: {p} is not a kernel image lab can boot")
        return a.name
    if len(spec) >= 4 or spec.startswith("debian-"):
        found = store.get(spec)
        if found is not None:
            return found.arch
    resolve(spec, "x86_64", build=False)  # raises: unknown, with the nearest names
    raise unknown("kernel", spec, krecipe.names())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@cache
def lab_source_hash() -> str:
    """lab's version and a hash of its own source: a changed lab may judge differently."""

    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".py", ".sh", ".c") and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    try:
        v = version("lab")
    except PackageNotFoundError:
        v = "0"
    return f"{v}+{h.hexdigest()[:12]}"


def sweep(params: list[str] | tuple[str, ...]) -> dict[str, list[str]]:
    """``-p NAME=A,B,C`` arguments as NAME -> its values (in order, duplicates dropped)."""

    return {k: split(v, f"p {k}=") for k, v in sc.parse_assignments(params).items()}


def _with_params(s: Any, label: str, sweeps: dict[str, list[str]]) -> list[tuple[str, tuple[str, ...]]]:
    """*s*'s rows: one per combination of the swept parameters it declares (each value
    checked now, before anything boots), labelled 'NAME k=v ...'; one row when it declares none."""

    mine = [k for k in sweeps if k in {q.name for q in s.params}]
    rows = []
    for combo in itertools.product(*(sweeps[k] for k in mine)):
        assign = tuple(f"{k}={v}" for k, v in zip(mine, combo, strict=True))
        s.set_params(dict(a.split("=", 1) for a in assign))
        rows.append((" ".join([label, *assign]), assign))
    return rows


def expand(
    scenarios: str, topologies: str, kernels: str, *, repeat: int = 1, options: VmOptions | None = None,
    backend: str = "qemu", params: list[str] | tuple[str, ...] = (), schedulers: str = "",
) -> Matrix:
    """The cells of scenarios x topologies x kernels, in that order; every name checked
    (an unknown one is refused with the nearest names), nothing built or booted.  *params*
    (``NAME=A,B``) sweeps a parameter: each scenario that declares it is a row per value.
    *schedulers* (``eevdf,scx_simple``) is a fourth axis, inside the kernels: each kernel
    column becomes one per scheduler (eevdf or cfs: the kernel's own)."""

    if backend not in base.names():
        raise unknown("backend", backend, list(base.names()))
    s_names, t_names, k_names = scenario_names(scenarios), topology_names(topologies), split(kernels, "kernels")
    sch_names = scheduler_names(schedulers)
    scen = {n: sc.load(n) for n in s_names}
    sources = {s.name: (n if n in sc.names() else str(Path(n).resolve())) for n, s in scen.items()}
    sweeps = sweep(params)
    unused = [k for k in sweeps if not any(k in {q.name for q in s.params} for s in scen.values())]
    if unused:
        raise UserError(f"-p {unused[0]}=...: no scenario of the matrix declares the parameter {unused[0]!r}")
    rows = {n: _with_params(s, s.name, sweeps) for n, s in scen.items()}
    swept = {label: assign for r in rows.values() for label, assign in r if assign}
    topos = {n: topology.load(n) for n in t_names}
    karch = {k: kernel_arch(k) for k in k_names}
    inputs = {f"scenario:{label}": _sha(Path(s.path).read_bytes()) for n, s in scen.items() for label, _ in rows[n]}
    for n in topos:
        inputs[f"topology:{n}"] = _sha(topology.resolve(n).read_bytes())
    inputs["lab"] = lab_source_hash()
    cells = []
    for sn, label in ((n, lb) for n in s_names for lb, _ in rows[n]):
        s = scen[sn]
        for tn in t_names:
            t = topos[tn]
            unmet = s.unmet(t)
            for k in k_names:
                skip = ""
                if unmet:
                    skip = f"{t.name} lacks {'; '.join(unmet)}"
                elif karch[k] is not None and karch[k] != t.arch:
                    skip = f"kernel {k} is {karch[k]}, {t.name} is {t.arch}"
                for sch in sch_names or [""]:
                    cells.append(Cell(label, tn, k, skip, sch))
    sources.update({label: sources[s.name] for n, s in scen.items() for label, _ in rows[n]})
    return Matrix(
        tuple(label for r in rows.values() for label, _ in r), tuple(t_names), tuple(k_names), repeat, options or VmOptions(),
        backend, tuple(cells), inputs, sources, swept, tuple(sch_names),
    )  # fmt: skip


def scheduler_names(value: str) -> list[str]:
    """The --schedulers axis: each NAME[:ARGS] checked (an unknown name is one line); the
    kernel's own (eevdf, cfs) once, as eevdf."""

    if not value:
        return []
    out: list[str] = []
    for v in split(value, "schedulers"):
        spec = scheduler_mod.parse_spec(v)
        name = spec.text if spec else "eevdf"
        if name in out:
            raise UserError(f"--schedulers {value}: {v} is given twice ({name})")
        out.append(name)
    return out


def parse_shard(spec: str) -> tuple[int, int]:
    """``I/N`` with 1 <= I <= N."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec or "")
    if not m:
        raise UserError(f"--shard {spec!r}: give I/N, shard I of N, e.g. 1/4")
    i, n = int(m[1]), int(m[2])
    if n < 1 or not 1 <= i <= n:
        raise UserError(f"--shard {spec}: I must be from 1 to N (N at least 1), e.g. 1/{max(n, 2)}")
    return i, n


# ---- capacity -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """What one cell's VM takes from the host while it runs."""

    threads: int  # busy host threads: 1 for single-threaded TCG, else one per vCPU
    memory_mb: int


def eta_sample(res) -> float | None:
    """A finished cell's wall time as a sample for the ETA, or None: a reused cell took no
    time, and a SKIP decided in the cell (its kernel's config) did not boot, so neither
    says how long the cells left will take (a 0 s SKIP first made the ETA seconds)."""
    if res.reused or res.status == "SKIP":
        return None
    return res.wall_s or 0.0


def cost_of(plan) -> Cost:
    threads = 1 if plan.accel == "tcg" and plan.tcg_threads == "single" else plan.topo.n_cpus
    return Cost(threads, plan.memory_mb + QEMU_OVERHEAD_MB)


def mem_available_mb(meminfo: str | None = None) -> int:
    """MemAvailable from /proc/meminfo, in MiB (what can be used without swapping)."""
    try:
        text = meminfo if meminfo is not None else Path("/proc/meminfo").read_text()
    except OSError:
        return 0
    m = re.search(r"^MemAvailable:\s+(\d+)\s+kB", text, re.M)
    return int(m[1]) // 1024 if m else 0


def default_jobs(host_cpus: int, mem_mb: int, costs: list[Cost]) -> int:
    """How many cells at once by default: as many VMs as the host's cores carry at one
    busy thread each (for the largest cell), and as fit in the free memory; at least 1."""
    if not costs:
        return 1
    by_cpu = max(1, host_cpus // max(c.threads for c in costs))
    by_mem = max(1, mem_mb // max(c.memory_mb for c in costs)) if mem_mb > 0 else 1
    return max(1, min(by_cpu, by_mem))


def can_start(running: list[Cost], c: Cost, *, jobs: int, host_cpus: int, mem_mb: int) -> bool:
    """Whether a cell costing *c* may start beside *running*: under -j, at most one busy
    thread per host core and within the free memory; one VM always may run alone."""
    if not running:
        return True
    if len(running) >= jobs:
        return False
    threads = sum(r.threads for r in running) + c.threads
    mem = sum(r.memory_mb for r in running) + c.memory_mb
    return threads <= host_cpus and (mem_mb <= 0 or mem <= mem_mb)


# ---- a time budget --------------------------------------------------------------------------
#
# `lab matrix --budget T` runs the cells that fit in T, chosen from each cell's cost:
# measured (the wall time of its last run, kept in lab's cache, COSTS_FILE, by every
# matrix that runs a cell) or else estimated from its vCPUs and its scenario's length.
# Cells a matrix reuses (OUT/cells, same inputs) cost nothing and are not chosen among.
# The choice (``choose``): first a cover, so every scenario, topology and kernel of the
# cells to run has a cell if one fits (greedily: the most values not yet covered per
# second, then a changed cell, then the matrix's order); then the cells that changed since
# their last run (never run, another kernel digest, another scenario source: ``changed``),
# then the rest, each in the matrix's order while it fits.  A cell left out is a SKIP saying
# why ("left out by --budget ..."), in the table, matrix.json and junit.xml.  With
# --shard I/N the budget is the shard's: each shard chooses among its own cells.

COSTS_FILE = "matrix-costs.json"
BOOT_S_PER_VCPU = 1.5  # an estimate's boot share: TCG brings vCPUs up one by one
SCENARIO_SHARE = 0.1  # and its workload's: a tenth of the scenario's timeout


def estimate_s(vcpus: int, scenario_timeout: float, repeat: int = 1) -> float:
    """A cell never measured: its boot (per vCPU) and a tenth of its scenario's timeout, per run."""
    return round((BOOT_S_PER_VCPU * vcpus + SCENARIO_SHARE * scenario_timeout) * repeat, 1)


def costs_file() -> Path:
    return paths.cache_dir() / COSTS_FILE


# A cell never run on this host has a cost measured elsewhere when lab's own scenario ran
# on lab's own topology in the last full mini matrix (scenarios/matrix-costs.json, written
# by bench/cost_baseline.py from a bench/results/bench_matrix-*.json): that wall time, per
# run, where the cell runs under the same accelerator, the scenario has the same version
# and the topology spec the same bytes.  The timeout formula above was 2-7x off on that
# matrix (numa-balancing estimated 96 s, took 176-272 s; wake-affine 78 s, took 11 s), so
# --budget chose, and the start order ranked, by the wrong cells on a fresh CI runner.
BASELINE_FILE = "matrix-costs.json"


def baseline_file() -> Path:
    return paths.SCENARIOS / BASELINE_FILE


def read_baseline(path: Path | None) -> dict[str, Any]:
    """The baseline file's document ({} when there is none or it cannot be read: it only
    informs estimates)."""
    if path is None:
        return {}
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) and isinstance(d.get("cells"), dict) else {}


def baseline_s(base: dict[str, Any], scenario: str, topology_name: str, *, version: int, topology_sha: str, accel: str) -> float | None:
    """The baseline's cost per run of scenario@topology, or None where it does not apply."""
    if not base or base.get("accel") != accel:
        return None
    e = base["cells"].get(f"{scenario}@{topology_name}")
    if not isinstance(e, dict) or e.get("version") != version or e.get("topology_sha") != topology_sha:
        return None
    s = e.get("run_s")
    return float(s) if isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 else None


def read_costs(path: Path) -> dict[str, Any]:
    """The measured cells: cell id -> {"run_s", "scenario", "kernel_id", "when"}; an
    unreadable file is no measurement (never an error: it is a cache)."""
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    cells = d.get("cells") if isinstance(d, dict) else None
    return {k: v for k, v in cells.items() if isinstance(v, dict)} if isinstance(cells, dict) else {}


def record_cost(path: Path, cell: Cell, wall_s: float, repeat: int, scenario_hash: str, kernel_id: str) -> None:
    """Keep *cell*'s cost per run and the inputs it ran with (read, merged, written
    atomically: two matrices at once lose at most one's record)."""
    cells = read_costs(path)
    cells[cell.id] = {"run_s": round(wall_s / max(1, repeat), 1), "scenario": scenario_hash, "kernel_id": kernel_id,
                      "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, json.dumps({"format": 1, "cells": cells}, indent=1, sort_keys=True), "the matrix's cell costs")
    except (OSError, LabError):
        pass  # a cache that cannot be written costs estimates next time, not this matrix


def changed(previous: dict[str, Any] | None, scenario_hash: str, kernel_id: str) -> str:
    """Why a cell is new since its last run ("" when it is not)."""
    if previous is None:
        return "never run"
    why = []
    if previous.get("kernel_id") != kernel_id:
        why.append("kernel changed")
    if previous.get("scenario") != scenario_hash:
        why.append("scenario source changed")
    return ", ".join(why)


@dataclass(frozen=True)
class Pick:
    """A cell to choose or leave out: its cost in seconds, whether measured, and why it is
    new since its last run ("" when unchanged)."""

    cell: Cell
    cost_s: float
    measured: bool
    changed: str = ""
    basis: str = ""  # how an unmeasured cost was estimated: "baseline" (lab's measured baseline) or the formula

    @property
    def how(self) -> str:
        return "measured" if self.measured else ("estimated from lab's baseline" if self.basis == "baseline" else "estimated")


def _dur_text(s: float) -> str:
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.1f}m"


def choose(picks: list[Pick], budget_s: float, budget_text: str = "") -> tuple[list[Pick], list[tuple[Pick, str]], list[str]]:
    """The cells that fit in *budget_s* (see the section's comment): (chosen, in the
    given order; left out, each with why; the scenarios, topologies and kernels no chosen
    cell covers).  A budget below the cheapest cell is refused, naming its cost."""
    budget_text = budget_text or _dur_text(budget_s)
    if not picks:
        return [], [], []
    cheapest = min(picks, key=lambda p: p.cost_s)
    if budget_s < cheapest.cost_s:
        raise UserError(f"--budget {budget_text} is too small for one cell: the cheapest, {cheapest.cell.id}, "
                        f"costs {_dur_text(cheapest.cost_s)} ({cheapest.how})")  # fmt: skip

    def values(p: Pick) -> set[tuple[str, str]]:
        return {("scenario", p.cell.scenario), ("topology", p.cell.topology), ("kernel", p.cell.column)}

    index = {p.cell.id: i for i, p in enumerate(picks)}
    need: set[tuple[str, str]] = set().union(*(values(p) for p in picks))
    chosen: list[Pick] = []
    left = budget_s
    while need:
        fits = [p for p in picks if p not in chosen and p.cost_s <= left and values(p) & need]
        if not fits:
            break
        best = max(fits, key=lambda p: (len(values(p) & need) / max(p.cost_s, 1e-9), bool(p.changed), -index[p.cell.id]))
        chosen.append(best)
        left -= best.cost_s
        need -= values(best)
    for p in sorted((p for p in picks if p not in chosen), key=lambda p: (not p.changed, index[p.cell.id])):
        if p.cost_s <= left:
            chosen.append(p)
            left -= p.cost_s
    out = []
    for p in picks:
        if p in chosen:
            continue
        what = f"changed ({p.changed})" if p.changed else "unchanged since its last run"
        out.append((p, f"{what}, costs {_dur_text(p.cost_s)} ({p.how}); {_dur_text(max(left, 0))} of {budget_text} was left"))
    uncovered = [f"{k} {v}" for k, v in sorted(need)]
    return sorted(chosen, key=lambda p: index[p.cell.id]), out, uncovered


# ---- results --------------------------------------------------------------------------------


@dataclass
class CellResult:
    cell: Cell
    status: str  # PASS | FAIL | INCONCLUSIVE | ERROR | SKIP
    message: str = ""  # ERROR / SKIP: why; FAIL: the failed expectation and its first evidence line
    detail: str = ""  # FAIL: every failed expectation with its evidence
    wall_s: float | None = None
    started_s: float | None = None  # when it started, in seconds from the matrix's start
    passed: int = 0  # runs that passed / ran (--repeat, a majority verdict)
    runs: int = 0
    kernel_id: str = ""
    key: str = ""
    run_dirs: list[str] = field(default_factory=list)
    reused: bool = False
    log: str = ""
    connect: str = ""  # --backend libvirt: the libvirt URI the cell ran on ('' for the backend's default)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["cell"] = self.cell.to_dict()
        d["id"] = self.cell.id
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellResult:
        known = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in known and k != "cell"}
        return cls(Cell(**d["cell"]), **kw)

    def label(self) -> str:
        """The table's word for the cell: the status, with the pass count when it took
        more than one run."""
        if self.runs > 1 and self.status in ("PASS", "FAIL"):
            return f"{self.status} {self.passed}/{self.runs}"
        return self.status


def from_lab_run(cell: Cell, rc: int | None, stdout: str, log_text: str) -> CellResult:
    """A cell's result from its `lab run --json` process: the verdict it printed, or,
    when it printed none, why (its one-line error, an interruption, a crash)."""
    doc = None
    try:
        doc = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        doc = None
    if isinstance(doc, dict) and doc.get("status") == "SKIP":
        return CellResult(cell, "SKIP", str(doc.get("message", "")))
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if isinstance(doc, dict) and isinstance(runs, list) and runs and rc in (0, 1, 3, 4):
        statuses = [str(r.get("status")) for r in runs]
        verdict = doc.get("verdict") if isinstance(doc.get("verdict"), dict) else None
        if verdict:
            status = str(verdict.get("status"))
        elif "ERROR" in statuses:
            status = "ERROR"
        elif "FAIL" in statuses:
            status = "FAIL"
        elif "INCONCLUSIVE" in statuses:
            status = "INCONCLUSIVE"
        else:
            status = statuses[-1]
        # The run that stands for the verdict: the last one that agrees with it.
        standing = next((r for r in reversed(runs) if r.get("status") == status), runs[-1])
        res = CellResult(cell, status, passed=statuses.count("PASS"), runs=len(runs))
        res.run_dirs = [str(r.get("run_dir")) for r in runs if r.get("run_dir")]
        res.kernel_id = str((standing.get("kernel_info") or {}).get("id", ""))
        if status == "FAIL":
            exps = [
                SimpleNamespace(name=str(e.get("name", "")), ok=e.get("status") == "PASS", note=str(e.get("note") or ""),
                                evidence=[str(x) for x in e.get("evidence") or []])
                for e in standing.get("expectations") or []
            ]  # fmt: skip
            res.message, res.detail = junit.failure_message(exps)
        elif status != "PASS":
            res.message = str(standing.get("message") or f"the run is {status}")
        return res
    said = [ln for ln in log_text.splitlines() if ln.startswith("lab: error: ")]
    if rc == 2 and said:
        return CellResult(cell, "ERROR", said[-1].removeprefix("lab: error: "))
    if rc in (130, -signal.SIGINT, -signal.SIGTERM):
        return CellResult(cell, "ERROR", "the cell did not finish: interrupted")
    return CellResult(cell, "ERROR", f"lab run exited {rc} without a verdict: {proc.tail(log_text) or 'no output'}")


# ---- renderers (pure) ------------------------------------------------------------------------


def table_rows(m: dict[str, Any], results: list[CellResult]) -> list[tuple[str, str, list[str]]]:
    """(scenario, topology, one label per kernel) for each row of the summary table."""
    rows = []
    seen = set()
    for r in results:
        key = (r.cell.scenario, r.cell.topology)
        if key in seen:
            continue
        seen.add(key)
        labels = []
        by_col = {r.cell.column: r for r in results if (r.cell.scenario, r.cell.topology) == key}
        for k in columns(m):
            got = by_col.get(k)
            labels.append(got.label() if got else "-")
        rows.append((key[0], key[1], labels))
    return rows


def counts(results: list[CellResult]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in STATUSES}


def counts_line(results: list[CellResult]) -> str:
    """'N cells: a PASS, b FAIL, ...' (INCONCLUSIVE only when some cell is)."""
    n = counts(results)
    parts = [f"{n[s]} {s}" for s in STATUSES if n[s] or s != "INCONCLUSIVE"]
    return f"{len(results)} cells: " + ", ".join(parts)


# The kinds of reason a cell is skipped for, in the order they are told: (label, test on
# the message with the cell's topology said as "the topology").
SKIP_CAUSES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("tool packing", lambda m: "cannot be packed" in m or "knows no Debian package" in m or m.startswith("host tool '")
     or "package lists" in m),
    ("topology", lambda m: m.startswith("the topology lacks")),
    ("kernel arch", lambda m: m.startswith("kernel ") and ", the topology is " in m),
    ("kernel config", lambda m: m.startswith("kernel ") and " lacks " in m),
    ("host", lambda m: m.startswith("cannot run here")),
    ("budget", lambda m: m.startswith("left out by --budget")),
)


def skip_cause(r: CellResult) -> tuple[str, str]:
    """(kind, reason) of a SKIP, the reason worded the same for every cell it covers: the
    cell's topology name is "the topology" (a matrix says "<topology> lacks ...")."""
    msg = " ".join(r.message.split())
    t = r.cell.topology
    if msg.startswith(f"{t} lacks "):
        msg = "the topology" + msg[len(t) :]
    msg = msg.replace(f", {t} is ", ", the topology is ")
    # a tool reason after a topology one ("the topology lacks X; no Debian ... package")
    kinds = [label for label, test in SKIP_CAUSES if any(test(part.strip()) for part in [msg, *msg.split("; ")])]
    return (kinds[0] if kinds else "other"), msg


def skip_groups(results: list[CellResult]) -> list[tuple[str, list[tuple[str, list[Cell]]]]]:
    """The SKIPs by cause: [(kind, [(reason, cells)])], the kinds in SKIP_CAUSES' order,
    each reason once with every cell it covers (in the matrix's order)."""
    kinds: dict[str, dict[str, list[Cell]]] = {}
    for r in results:
        if r.status == "SKIP":
            kind, why = skip_cause(r)
            kinds.setdefault(kind, {}).setdefault(why, []).append(r.cell)
    order = [label for label, _ in SKIP_CAUSES] + ["other"]
    return [(k, list(kinds[k].items())) for k in order if k in kinds]


def cells_text(cells: list[Cell], kernels: list[str] | tuple[str, ...]) -> str:
    """Cells said compactly: 'scenario on topo1, topo2' per scenario, and the kernels when
    not every kernel of the matrix is covered."""
    by: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    topo_kernels: dict[tuple[str, str], list[str]] = {}
    for c in cells:
        topo_kernels.setdefault((c.scenario, c.topology), []).append(c.column)
    for (sc_name, topo), ks in topo_kernels.items():
        tag = () if sorted(ks) == sorted(kernels) else tuple(ks)
        by.setdefault((sc_name, tag), []).append(topo)
    return "; ".join(f"{sc_name} on {', '.join(topos)}" + (f" ({', '.join(ks)})" if ks else "") for (sc_name, ks), topos in by.items())


def summary_markdown(m: dict[str, Any], results: list[CellResult], title: str = "lab matrix") -> str:
    """The summary table as Markdown (a CI job summary), then why each cell that did not
    pass did not: a FAIL, ERROR or INCONCLUSIVE per cell, the SKIPs once per cause with the
    cells each covers."""
    lines = [
        f"### {title}", "",
        counts_line(results), "",
        "| scenario | topology | " + " | ".join(_md(k) for k in columns(m)) + " |",
        "|---|---|" + "---|" * len(columns(m)),
    ]  # fmt: skip
    for s, t, labels in table_rows(m, results):
        lines.append(f"| {_md(s)} | {_md(t)} | " + " | ".join(labels) + " |")
    notes = [r for r in results if r.status not in ("PASS", "SKIP")]
    if notes:
        lines += ["", "| cell | status | why |", "|---|---|---|"]
        for r in notes:
            lines.append(f"| {_md(r.cell.id)} | {r.status} | {_md(r.message)} |")
    groups = skip_groups(results)
    if groups:
        lines += ["", "| SKIP cause | cells | why | which |", "|---|---|---|---|"]
        for kind, reasons in groups:
            for why, cells in reasons:
                lines.append(f"| {_md(kind)} | {len(cells)} | {_md(why)} | {_md(cells_text(cells, columns(m)))} |")
    return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    return junit.xml_text(" ".join(s.split())).replace("|", "\\|")


def junit_report(m: dict[str, Any], results: list[CellResult]) -> str:
    """One testcase per cell, a testsuite per scenario: classname lab.<scenario>.<topology>,
    name the kernel."""
    suites: dict[str, list[junit.Case]] = {}
    for r in results:
        c = r.cell
        case = junit.Case(junit.classname(c.scenario, c.topology), c.column, r.status, r.wall_s, r.message, r.detail)
        suites.setdefault(c.scenario, []).append(case)
    return junit.render([junit.Suite(f"lab.{junit.name_part(s)}", tuple(cs)) for s, cs in suites.items()], name="lab matrix")


# ---- running --------------------------------------------------------------------------------


@dataclass
class _Running:
    cell: Cell
    popen: subprocess.Popen
    started: float
    cost: Cost
    key: str
    kernel_id: str
    files: tuple[Path, Path]  # stdout (the JSON), the log
    connect: str | None = None


class Runner:
    """Runs a matrix's cells into *out*; ``run()`` returns every cell's result."""

    def __init__(
        self, m: Matrix, out: Path, *, jobs: int | None = None, shard: tuple[int, int] | None = None,
        rerun: bool = False, connect: tuple[str, ...] = (), progress: Progress | None = None,
        child: Callable[[Cell, str, str | None], list[str]] | None = None,
        budget_s: float | None = None, budget_text: str = "", costs: Path | None = None,
        baseline: Path | None = None,
    ) -> None:  # fmt: skip
        self.m, self.out, self.jobs_asked, self.shard, self.rerun = m, out, jobs, shard, rerun
        self.budget_s, self.budget_text = budget_s, budget_text
        self.costs_path = costs if costs is not None else costs_file()
        # A stand-in child (a test's) is no `lab run`: its time is no cell's cost, unless asked.
        self.record_costs = costs is not None or child is None
        # lab's measured baseline (BASELINE_FILE) informs a real matrix's estimates; a
        # stand-in child's only when given, so a test's order hangs on what it sets up.
        self.baseline = read_baseline(baseline if baseline is not None else (baseline_file() if child is None else None))
        self.cost_basis: dict[str, str] = {}  # cell id -> "measured" | "baseline" | "estimate"
        self.budget_doc: dict[str, Any] | None = None
        self.order: list[dict[str, Any]] = []  # the cells to run, in the order they start
        self.connect = connect
        self.progress = progress_of(progress)
        self.child_argv = child or self.lab_run_argv
        self.results: dict[str, CellResult] = {}
        self.kernel_ids: dict[str, str] = {}
        self._kernel_errors: dict[str, LabError] = {}
        self.jobs = 1
        self.t0 = time.monotonic()

    # what each cell runs
    def lab_run_argv(self, cell: Cell, kernel_id: str, connect: str | None) -> list[str]:
        """The `lab run` a cell is: w16b's backends plug in through --backend/--connect."""
        o = self.m.options
        scenario = self.m.sources.get(cell.scenario, cell.scenario)  # a scenario file is passed as its path
        # Every VM option the matrix was given (VmOptions.to_args: --qemu too, which this
        # list once left out, so `lab matrix --qemu lab` ran its cells on the default QEMU);
        # the kernel is the cell's, the backend and its URI the runner's.
        argv = [sys.executable, "-m", "lab", "run", scenario, "--topology", cell.topology, "--kernel", kernel_id,
                "--json", *o.to_args(always=("accel", "cpu_model", "tcg_threads", "bringup"), skip=("kernel", "backend", "connect"))]  # fmt: skip
        # The matrix places its cells on the host itself (can_start: one guest each), so
        # a cell's verdict runs one after another: left to itself, each `lab run` that
        # starts on a host still idle would put its runs side by side and oversubscribe.
        argv += ["--jobs", "1"]
        for a in self.m.params.get(cell.scenario, ()):  # a swept parameter's value (-p NAME=A,B)
            argv += ["-p", a]
        if cell.scheduler and cell.scheduler != "eevdf":  # the --schedulers axis; eevdf: none
            argv += ["--scheduler", cell.scheduler]
        if self.m.repeat > 1:
            argv += ["--repeat", str(self.m.repeat)]
        if self.m.backend != VmOptions.backend:
            argv += ["--backend", self.m.backend]
        if connect:
            argv += ["--connect", connect]
        return argv

    def cells(self) -> list[Cell]:
        if self.shard is None:
            return list(self.m.cells)
        i, n = self.shard
        mine = set(self.m.shard(i, n))
        # Cells skipped everywhere are reported by shard 1, so a merge has them once.
        return [c for c in self.m.cells if c in mine or (c.skip and i == 1)]

    def identity(self) -> dict[str, Any]:
        """What merge compares: the definition, every input's hash, the kernels' ids."""
        return {**self.m.definition(), "kernel_ids": dict(sorted(self.kernel_ids.items())), "inputs": dict(sorted(self.m.inputs.items()))}

    # ---- the run ----
    def run(self) -> list[CellResult]:
        cells = self.cells()
        h = host_mod.probe()
        todo: list[tuple[Cell, Cost, str, str]] = []  # cell, cost, key, kernel id
        vcpus: dict[str, int] = {}
        accels: dict[str, str] = {}
        with self.progress.step("matrix", f"preparing {len(cells)} cells"):
            for c in cells:
                if c.skip:
                    self._record(CellResult(c, "SKIP", c.skip))
                    continue
                topo = topology.load(c.topology)
                try:
                    kid = self._kernel_id(c.kernel, topo.arch)
                except LabError as e:  # a recipe that does not build: nothing to judge with it
                    self._record(CellResult(c, "ERROR", f"kernel {c.kernel}: {' '.join(str(e).split())}"))
                    continue
                try:
                    sess = session.prepare(topo, dataclasses.replace(self.m.options, kernel=kid), build=False)
                except UserError as e:  # this host's QEMU cannot build the machine
                    self._record(CellResult(c, "SKIP", f"cannot run here: {' '.join(str(e).split())}"))
                    continue
                key = self._key(c, kid)
                old = self._previous(c, key)
                if old is not None:
                    self._record(old)
                    continue
                todo.append((c, cost_of(sess.plan), key, kid))
                vcpus[c.id] = topo.n_cpus
                accels[c.id] = sess.plan.accel
        costs = self._cell_costs(todo, vcpus, accels)
        if self.budget_s is not None:
            todo = self._within_budget(todo, costs)
        # Longest first (a longest-processing-time schedule): a long cell started last
        # would run alone at the end while the other slots sit idle.  Stable, so equal
        # costs keep the matrix's order; the results are reported in the matrix's order.
        todo.sort(key=lambda t: -costs[t[0].id][0])
        self.order = [{"id": t[0].id, "cost_s": costs[t[0].id][0], "measured": costs[t[0].id][1], "basis": self.cost_basis[t[0].id]} for t in todo]
        mem = mem_available_mb()
        self.jobs = default_jobs(h.cpus, mem, [t[1] for t in todo]) if self.jobs_asked is None else self.jobs_asked
        self.host = {"cpus": h.cpus, "mem_available_mb": mem, "jobs": self.jobs}
        self._write(finished=False)
        self._schedule(todo, h.cpus, mem)
        self._write()
        return self.ordered()

    def _cell_costs(self, todo: list[tuple[Cell, Cost, str, str]], vcpus: dict[str, int], accels: dict[str, str]) -> dict[str, tuple[float, bool, dict[str, Any] | None]]:
        """Each cell of *todo*'s cost in seconds for the matrix's repeat: (cost, measured,
        its last run's record).  Measured where lab's costs file has the cell, estimated
        from lab's baseline where it applies (baseline_s), else from its vCPUs and its
        scenario's timeout (self.cost_basis says which).  A stand-in child (a test's) with
        no costs file of its own reads none: its order may not hang on this host's cache."""

        known = read_costs(self.costs_path) if self.record_costs or self.budget_s is not None else {}
        scens: dict[str, sc.Scenario] = {}
        out: dict[str, tuple[float, bool, dict[str, Any] | None]] = {}
        for c, _cost, _key, _kid in todo:
            prev = known.get(c.id)
            run_s = prev.get("run_s") if prev else None
            measured = isinstance(run_s, (int, float)) and not isinstance(run_s, bool) and run_s > 0
            if measured:
                cost, basis = float(run_s) * self.m.repeat, "measured"  # type: ignore[arg-type]
            else:
                if c.scenario not in scens:
                    scens[c.scenario] = sc.load(self.m.sources.get(c.scenario, c.scenario))
                s = scens[c.scenario]
                own = Path(s.path).resolve().parent == paths.SCENARIOS.resolve()  # lab's own, not a namesake
                base = baseline_s(
                    self.baseline, c.scenario, c.topology, version=s.version, accel=accels.get(c.id, ""),
                    topology_sha=self.m.inputs.get(f"topology:{c.topology}", ""),
                ) if own else None  # fmt: skip
                if base is not None:
                    cost, basis = round(base * self.m.repeat, 1), "baseline"
                else:
                    cost, basis = estimate_s(vcpus[c.id], float(s.timeout), self.m.repeat), "estimate"
            self.cost_basis[c.id] = basis
            out[c.id] = (cost, measured, prev)
        return out

    def _within_budget(
        self, todo: list[tuple[Cell, Cost, str, str]], costs: dict[str, tuple[float, bool, dict[str, Any] | None]]
    ) -> list[tuple[Cell, Cost, str, str]]:
        """The cells of *todo* that --budget chooses; the others recorded as SKIPs saying why."""

        assert self.budget_s is not None
        picks = []
        for c, _cost, _key, kid in todo:
            cost, measured, prev = costs[c.id]
            picks.append(Pick(c, cost, measured, changed(prev, self.m.inputs[f"scenario:{c.scenario}"], kid), self.cost_basis.get(c.id, "")))
        text = self.budget_text or _dur_text(self.budget_s)
        chosen, out, uncovered = choose(picks, self.budget_s, text)
        for p, why in out:
            self._record(CellResult(p.cell, "SKIP", f"left out by --budget {text}: {why}"))
        self.budget_doc = {
            "seconds": self.budget_s, "chosen": [p.cell.id for p in chosen],
            "estimated_s": round(sum(p.cost_s for p in chosen), 1),
            "left_out": [{"id": p.cell.id, "why": why} for p, why in out], "uncovered": uncovered,
            "costs": {p.cell.id: {"cost_s": p.cost_s, "measured": p.measured, "basis": p.basis, "changed": p.changed} for p in picks},
        }  # fmt: skip
        ids = {p.cell.id for p in chosen}
        return [t for t in todo if t[0].id in ids]

    def _kernel_id(self, spec: str, arch: str) -> str:
        k = f"{spec}@{arch}"
        if k in self._kernel_errors:  # failed once: not built again for every cell
            raise self._kernel_errors[k]
        if k not in self.kernel_ids:
            try:
                # A fetch or a build on demand is its own progress step (kernel.resolve).
                self.kernel_ids[k] = resolve(spec, arch, build=True, progress=self.progress).id
            except LabError as e:
                self._kernel_errors[k] = e
                raise
        return self.kernel_ids[k]

    def _key(self, c: Cell, kernel_id: str) -> str:
        inputs = {
            "scenario": self.m.inputs[f"scenario:{c.scenario}"], "topology": self.m.inputs[f"topology:{c.topology}"],
            "kernel_id": kernel_id, "lab": self.m.inputs["lab"], "repeat": self.m.repeat,
            "options": self.m.definition()["options"], "backend": self.m.backend,
        }  # fmt: skip
        return _sha(json.dumps(inputs, sort_keys=True).encode())

    def _previous(self, c: Cell, key: str) -> CellResult | None:
        if self.rerun:
            return None
        p = self.out / "cells" / f"{c.slug}.json"
        try:
            old = CellResult.from_dict(json.loads(p.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if old.key != key or old.status not in REUSED or old.cell != c:
            return None
        old.reused = True
        return old

    def _record(self, r: CellResult) -> None:
        self.results[r.cell.id] = r
        if r.key:  # a cell that ran: its own record, for reuse
            atomic.write_text(self.out / "cells" / f"{r.cell.slug}.json", json.dumps(r.to_dict(), indent=1), "a matrix cell's result")

    def ordered(self) -> list[CellResult]:
        return [self.results[c.id] for c in self.m.cells if c.id in self.results]

    def _schedule(self, todo: list[tuple[Cell, Cost, str, str]], host_cpus: int, mem: int) -> None:
        running: list[_Running] = []
        pending = list(todo)
        walls: list[float] = []
        total = len(todo)
        conns: list[str | None] = [*self.connect] or [None]
        try:
            with self.progress.step("matrix", f"{total} cells to run, up to {self.jobs} at once") as p:
                while pending or running:
                    for r in list(running):
                        if r.popen.poll() is not None:
                            running.remove(r)
                            res = self._finish(r)
                            if eta_sample(res) is not None:
                                walls.append(eta_sample(res) or 0.0)
                            p.note(f"{res.status:5} {r.cell.id} ({res.wall_s or 0:.0f}s){': ' + res.message if res.message else ''}")
                            self._write(finished=False)
                    while pending and can_start([r.cost for r in running], pending[0][1], jobs=self.jobs, host_cpus=host_cpus, mem_mb=mem):
                        c, cost, key, kid = pending.pop(0)
                        # --connect: the connection with the fewest cells running gets the next one.
                        conn = min(conns, key=lambda u: sum(r.connect == u for r in running))
                        running.append(self._start(c, cost, key, kid, conn))
                    p.update(self._status(total, pending, running, walls))
                    time.sleep(0.2)
        except BaseException as e:
            # lab unwinds on SIGINT, SIGTERM and SIGHUP alike (lab.cli): all three arrive here as KeyboardInterrupt.
            why = "SIGINT, SIGTERM or SIGHUP" if isinstance(e, KeyboardInterrupt) else f"lab failed: {type(e).__name__}"
            for r in running:  # each stops its VM and writes what it gathered
                if r.popen.poll() is None:
                    try:
                        os.killpg(r.popen.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            for r in running:
                proc.stop_group(r.popen, grace=STOP_GRACE_S)
                res = self._finish(r)  # a cell that gave its verdict as it was stopped keeps it
                if res.status == "ERROR":
                    if "interrupted" not in res.message:
                        res.message = f"the cell did not finish: the matrix was interrupted ({why})"
                    res.detail = f"the matrix was interrupted ({why}); each running cell was asked to stop"
                    self._record(res)
            self._write(finished=False)
            raise

    def _status(self, total: int, pending: list, running: list[_Running], walls: list[float]) -> str:
        done = total - len(pending) - len(running)
        now = time.monotonic()
        eta = "?"
        if walls:
            mean = sum(walls) / len(walls)
            left = sum(max(0.0, mean - (now - r.started)) for r in running) + mean * len(pending)
            eta = _dur(left / max(1, min(self.jobs, len(pending) + len(running))))
        names = ", ".join(r.cell.id for r in running)
        return f"{done} done, {len(running)} running, {len(pending)} left, ETA {eta}: {names}"

    def _start(self, c: Cell, cost: Cost, key: str, kid: str, conn: str | None) -> _Running:
        cdir = self.out / "cells"
        cdir.mkdir(parents=True, exist_ok=True)
        out_f, log_f = cdir / f"{c.slug}.out", cdir / f"{c.slug}.log"
        env = {"LAB_RUNS": str((self.out / "runs" / c.slug).resolve()), "PYTHONUNBUFFERED": "1"}
        with open(out_f, "wb") as so, open(log_f, "wb") as se:
            p = None
            try:
                with proc.signals_held():
                    p = proc.popen(self.child_argv(c, kid, conn), env=env, stdin=subprocess.DEVNULL, stdout=so, stderr=se,
                                   start_new_session=True, preexec_fn=proc.die_with_parent(signal.SIGTERM))  # fmt: skip
            except BaseException:
                if p is not None:
                    proc.stop_group(p)
                raise
        return _Running(c, p, time.monotonic(), cost, key, kid, (out_f, log_f), conn)

    def _finish(self, r: _Running) -> CellResult:
        out_f, log_f = r.files
        read = lambda f: f.read_bytes().decode(errors="replace") if f.exists() else ""  # noqa: E731
        res = from_lab_run(r.cell, r.popen.returncode, read(out_f), read(log_f))
        res.wall_s = round(time.monotonic() - r.started, 1)
        res.started_s = round(r.started - self.t0, 1)
        res.key, res.kernel_id, res.log = r.key, res.kernel_id or r.kernel_id, str(log_f)
        res.connect = r.connect or ""
        if self.record_costs and res.status in ("PASS", "FAIL", "INCONCLUSIVE") and res.wall_s:  # a judged run: what the cell costs
            record_cost(self.costs_path, r.cell, res.wall_s, self.m.repeat, self.m.inputs.get(f"scenario:{r.cell.scenario}", ""), res.kernel_id)
        if not res.run_dirs:
            runs = self.out / "runs" / r.cell.slug
            res.run_dirs = sorted(str(d) for d in runs.iterdir()) if runs.is_dir() else []
            said = _run_message(Path(res.run_dirs[-1])) if res.run_dirs and res.status == "ERROR" else ""
            if said:  # the run's own words: e.g. "interrupted by SIGTERM during boot"
                res.message = said
        self._record(res)
        return res

    def document(self, *, finished: bool = True) -> dict[str, Any]:
        results = self.ordered()
        n = self.shard[1] if self.shard else 1
        return {
            "format": FORMAT, "finished": finished, "identity": self.identity(),
            "shard": f"{self.shard[0]}/{self.shard[1]}" if self.shard else None,
            "planned": [{"id": c.id, "shard": self.m.shard_of(c, n), "skip": c.skip} for c in self.m.cells],
            "host": getattr(self, "host", {}), "wall_s": round(time.monotonic() - self.t0, 1), "expected": len(self.cells()),
            "counts": counts(results), "cells": [r.to_dict() for r in results],
            **({"budget": self.budget_doc} if self.budget_doc is not None else {}),
            "start_order": self.order,
        }  # fmt: skip

    def _write(self, finished: bool = True) -> None:
        write_outputs(self.out, self.document(finished=finished))


def _run_message(run_dir: Path) -> str:
    """What a run directory's results.json says went wrong, if it says."""

    doc, _ = read_record(run_dir)
    return str(doc.get("message") or "") if doc is not None and doc.get("status") == "ERROR" else ""


def write_outputs(out: Path, doc: dict[str, Any]) -> None:
    """matrix.json, junit.xml and summary.md, each replaced whole."""
    results = [CellResult.from_dict(d) for d in doc["cells"]]
    ident = doc["identity"]
    title = "lab matrix" + (f" (shard {doc['shard']})" if doc.get("shard") else "")
    if not doc.get("finished") or len(results) < doc.get("expected", len(results)):
        title += f": NOT FINISHED, {len(results)} of {doc.get('expected', '?')} cells have a result"
    atomic.write_text(out / MATRIX_FILE, json.dumps(doc, indent=1), "the matrix's results")
    atomic.write_text(out / JUNIT_FILE, junit_report(ident, results), "the matrix's JUnit report")
    atomic.write_text(out / SUMMARY_FILE, summary_markdown(ident, results, title), "the matrix's summary")


def _dur(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def exit_code(results: list[CellResult]) -> int:
    return EXIT[worst(r.status for r in results)] if results else 0


# ---- merge ----------------------------------------------------------------------------------


def read_doc(d: Path) -> dict[str, Any]:
    p = d / MATRIX_FILE
    if not p.is_file():
        raise UserError(f"{d}: not a lab matrix output directory (no {MATRIX_FILE})")
    try:
        doc = json.loads(p.read_text())
        if doc.get("format") != FORMAT or not isinstance(doc.get("identity"), dict):
            raise ValueError(f"format {doc.get('format')!r}")
        [CellResult.from_dict(c) for c in doc["cells"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UserError(f"{p}: not a matrix result lab can read ({e})") from None
    return doc


def _difference(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> tuple[str, Any, Any] | None:
    """The first key (axes first, in the identity's order) whose values differ."""
    for k in [*a, *(k for k in b if k not in a)]:
        if a.get(k) != b.get(k):
            if isinstance(a.get(k), dict) and isinstance(b.get(k), dict):
                return _difference(a[k], b[k], f"{prefix}{k}.")
            return f"{prefix}{k}", a.get(k), b.get(k)
    return None


def merge(dirs: list[Path]) -> dict[str, Any]:
    """One matrix document from shard outputs of the same matrix; results of different
    matrices are refused naming the first difference.  A planned cell no shard reported
    is an ERROR saying which shard is missing: nothing is judged on partial data."""
    docs = [(d, read_doc(d)) for d in dirs]
    d0, first = docs[0]
    kernel_ids: dict[str, str] = {}  # each shard resolved the kernels its own cells use
    where: dict[str, Path] = {}
    for d, doc in docs:
        ident = {k: v for k, v in doc["identity"].items() if k != "kernel_ids"}
        diff = _difference({k: v for k, v in first["identity"].items() if k != "kernel_ids"}, ident)
        for k, v in (doc["identity"].get("kernel_ids") or {}).items():
            if k in kernel_ids and kernel_ids[k] != v and diff is None:
                diff, d0 = (f"kernel_ids.{k}", kernel_ids[k], v), where[k]
            kernel_ids.setdefault(k, v)
            where.setdefault(k, d)
        if diff:
            k, va, vb = diff
            raise UserError(
                f"{d0} and {d} hold results of different matrices: {k} is {json.dumps(va)} in {d0} and {json.dumps(vb)} in {d}"
            )
    shards = {doc.get("shard") for _, doc in docs}
    ns = {s.split("/")[1] for s in shards if s}
    if len(ns) > 1 or (None in shards and len(docs) > 1):
        raise UserError(f"{', '.join(map(str, dirs))}: shards of different splits ({', '.join(sorted(str(s) for s in shards))}); merge the shards of one run")
    seen: dict[str | None, Path] = {}
    cells: dict[str, dict[str, Any]] = {}
    for d, doc in docs:
        s = doc.get("shard")
        if s in seen:
            raise UserError(f"shard {s} given twice: {seen[s]} and {d}")
        seen[s] = d
        for c in doc["cells"]:
            cells.setdefault(c["id"], c)
    n = int(ns.pop()) if ns else 1
    out = []
    for p in first["planned"]:
        got = cells.get(p["id"])
        if got is None:
            cell = Cell.from_id(p["id"])
            if p.get("skip"):
                got = CellResult(dataclasses.replace(cell, skip=p["skip"]), "SKIP", p["skip"]).to_dict()
            else:
                got = CellResult(cell, "ERROR", f"no result: shard {p.get('shard')}/{n} is not among the merged directories").to_dict()
        out.append(got)
    results = [CellResult.from_dict(c) for c in out]
    return {
        "format": FORMAT, "finished": all(doc.get("finished") for _, doc in docs),
        "identity": {**first["identity"], "kernel_ids": dict(sorted(kernel_ids.items()))},
        "shard": None, "merged_from": [str(d) for d in dirs], "planned": first["planned"], "expected": len(out),
        "counts": counts(results), "cells": out,
    }  # fmt: skip


# ---- plan (CI) ------------------------------------------------------------------------------

GITHUB_MAX_JOBS = 256  # a GitHub Actions matrix makes at most 256 jobs
GITLAB_MAX_JOBS = 200  # GitLab's parallel:matrix makes at most 200 jobs


def ci_plan(m: Matrix, fmt: str, *, shards: int | None, args: list[str]) -> str:
    """The expansion for a CI system: *shards* jobs (default one per runnable cell, at
    most what the CI allows), each running ``lab matrix <args> --shard I/N``."""
    limit = {"github": GITHUB_MAX_JOBS, "gitlab": GITLAB_MAX_JOBS}.get(fmt, 10_000)
    n = shards if shards is not None else min(max(1, len(m.runnable)), limit)
    if n > limit:
        raise UserError(f"--shards {n}: {fmt} runs at most {limit} jobs in one matrix")
    jobs = [(i, m.shard(i, n)) for i in range(1, n + 1)]

    cmd = shlex.join(["lab", "matrix", *args])
    if fmt == "json":
        return json.dumps({
            "definition": m.definition(), "shards": n, "command": cmd,
            "cells": [{**dataclasses.asdict(c), "id": c.id, "shard": m.shard_of(c, n)} for c in m.cells],
        }, indent=1)  # fmt: skip
    if fmt == "github":
        include = [
            {"shard": f"{i}/{n}", "dir": f"shard-{i}-{n}", "cells": ", ".join(c.id for c in cs) or "(none: reports the skipped cells)"}
            for i, cs in jobs
        ]  # dir: a name for the shard's output and artifact (no "/")
        return json.dumps({"include": include}, separators=(",", ":"))
    if fmt == "gitlab":
        return gitlab_pipeline(cmd, n, [f"{i}/{n}" for i, _ in jobs])
    raise unknown("plan format", fmt, ["github", "gitlab", "json"])


def gitlab_pipeline(cmd: str, n: int, shards: list[str]) -> str:
    """A child pipeline: one job per shard (``parallel:matrix``), then one that merges
    them into one JUnit report and prints the table.  Scalars are written as JSON strings,
    which YAML reads as the same double-quoted strings."""
    q = json.dumps
    lines = [
        "# made by: lab matrix plan --format gitlab (run it again to change the matrix)",
        "stages: [matrix, merge]",
        "",
        ".lab:",
        "  image: debian:bookworm",
        "  before_script:",
        f"    - {q('sh scripts/setup.sh')}",
        f"    - {q('export PATH=$PWD/.venv/bin:$PATH')}",
        "",
        "lab-matrix:",
        "  extends: .lab",
        "  stage: matrix",
        "  parallel:",
        "    matrix:",
        f"      - LAB_SHARD: [{', '.join(q(s) for s in shards)}]",
        "  script:",
        f"    - {q('SHARD_DIR=matrix-out/shard-$(echo $LAB_SHARD | tr / -)')}",
        f"    - {q(cmd + ' --shard $LAB_SHARD -o $SHARD_DIR')}",
        "  artifacts:",  # the merged report is the pipeline's test report: a shard's would count twice
        "    when: always",
        "    paths: [matrix-out/]",
        "",
        "lab-matrix-merge:",
        "  extends: .lab",
        "  stage: merge",
        "  when: always",
        "  needs: [lab-matrix]",
        "  script:",
        f"    - {q('lab matrix merge -o merged matrix-out/shard-*')}",
        "  artifacts:",
        "    when: always",
        "    paths: [merged/]",
        "    reports:",
        f"      junit: {q('merged/junit.xml')}",
        "",
    ]
    del n
    return "\n".join(lines)
