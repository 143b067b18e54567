"""What a report shows of a run, gathered once from its directory: the verdict, the
command, the machine and kernel, and from the trace the placement timeline and the
migrations classified by topology level.  The renderers (lab.report.render) are pure
functions of this document."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import compare, expect, topology
from .. import levels as lv
from ..analysis.placement import (
    MigrationAccumulator,
    PathAccumulator,
    ResidencyAccumulator,
    run_all,
)
from ..compare import rejudge
from ..errors import UserError
from ..integrity import read_record, unfinished
from ..limits import MAX_FILE_BYTES, read_file
from ..plan import VmPlan, read_plan_json
from ..rundir import RunDir
from ..topology import Topology
from ..trace.parser import parse_file
from . import fidelity

# How many tasks get a colour of their own in the timeline (the busiest); the rest are
# drawn as "other tasks".  Twelve colours stay told apart at a glance.
MAX_TASKS = 12
# Segments and marks a timeline keeps (a 30 s trace of a busy workload has ~10^5
# switches; a page of that many SVG boxes takes seconds to open).  Shorter segments
# merge into their neighbours first (see Timeline.coalesce).
MAX_SEGMENTS = 20_000
MAX_MARKS = 5_000

MIGRATION_CLASSES = ("same core", "same LLC", "same node", "cross-node")


@dataclass(frozen=True)
class Segment:
    cpu: int  # spec numbering
    start: float
    end: float
    task: int  # index into Timeline.tasks, -1: other tasks


@dataclass(frozen=True)
class Mark:
    ts: float
    src: int
    dst: int
    task: int
    klass: str  # one of MIGRATION_CLASSES


@dataclass(frozen=True)
class Timeline:
    source: str  # "sched_switch" (who ran) | "placement" (wakeup_new target, then migrations) | ""
    start: float
    end: float
    tasks: tuple[tuple[int, str], ...]  # (pid, comm) of the coloured tasks
    segments: tuple[Segment, ...]
    marks: tuple[Mark, ...]
    dropped: int = 0  # segments merged or left out to stay within MAX_SEGMENTS


@dataclass(frozen=True)
class RunDoc:
    scenario: str
    topology: Topology
    kernel: dict[str, Any]  # name, id, release, and what the run recorded (tree describe, ...)
    status: str
    message: str
    command: str
    accel: str
    accel_reason: str
    qemu_version: str
    expectations: tuple[dict[str, Any], ...]
    timing: dict[str, Any]
    notes: tuple[str, ...]
    migrations: dict[str, int] = field(default_factory=dict)  # class -> count, and "total"
    timeline: Timeline | None = None
    source: str = ""  # where it came from (run dir or bundle), for the footer
    verdict_note: str = ""  # re-judged and differing from the stored verdict, or shown as stored
    fidelity: Any = None  # lab.report.fidelity.Stamp, shown at the top of a report


def migration_class(level: str, src_node: int, dst_node: int) -> str:
    """A migration's class by the smallest level both CPUs share (lab.analysis's level)."""
    if src_node != dst_node:
        return "cross-node"
    return "same core" if level == "cpu" else lv.get(level).within


def load_run(run_dir: Path, topo: Topology | None = None, source: str = "", stored: bool = False) -> RunDoc:
    """The document of a finished run directory (its own topology spec unless *topo*),
    its verdict re-judged by lab's current scenario of that name (lab.compare.rejudge)
    unless *stored*; the message says where the stored verdict differs, or that it is
    the stored one."""

    rd = RunDir(run_dir)
    if topo is None:
        plan = VmPlan.read(run_dir)  # names a folder that is no run directory first

    res, why = read_record(run_dir)
    if res is None:
        raise UserError(f"{run_dir}: {why}")
    late = unfinished(res)
    if late:  # a killed or interrupted run is shown as what it is (as lab compare does)
        res = {**res, "status": "ERROR", "message": late, "expectations": []}
    elif not stored:
        res = rejudge(run_dir, res, topo)
    verdict_note = ""
    if res.get("stored_status") is not None:
        verdict_note = f"re-judged by the current scenario: stored {res['stored_status']}, now {res.get('status')}"
    elif stored or str(res.get("verdict_source", "")).startswith("stored"):
        verdict_note = f"verdict as stored in results.json, not re-judged{'' if stored else ' (' + str(res.get('verdict_source')) + ')'}"
    if topo is not None:
        plan = VmPlan.from_dict(read_plan_json(rd.plan), topo, where=str(rd.plan))
    info = res.get("kernel_info")
    kernel = {**(plan.kernel.to_dict() if plan.kernel else {}), **(info if isinstance(info, dict) else {})}
    kernel.pop("image", None)
    command = rd.read_command()
    migr, tl = _trace(rd.out, plan)

    stamp = fidelity.stamp(plan.topo, read_plan_json(rd.plan), res, expect.deviations(plan.topo, plan))
    return RunDoc(
        scenario=str(res.get("scenario", "?")),
        topology=plan.topo,
        kernel=kernel,
        status=str(res.get("status", "?")),
        message=str(res.get("message") or ""),
        verdict_note=verdict_note,
        command=command,
        accel=plan.accel,
        accel_reason=plan.accel_reason,
        qemu_version=".".join(map(str, plan.qemu_version)),
        expectations=tuple(e for e in _list(res.get("expectations")) if isinstance(e, dict)),
        timing=timing if isinstance(timing := res.get("timing"), dict) else {},
        notes=tuple(map(str, _list(res.get("notes")))),
        migrations=migr,
        timeline=tl,
        source=source or str(run_dir),
        fidelity=stamp,
    )


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def _trace(out: Path, plan) -> tuple[dict[str, int], Timeline | None]:
    """Migration counts and the placement timeline of the run's main (or first) phase."""

    phases = sorted(p.name[len("trace.") : -len(".txt")] for p in out.glob("trace.*.txt")) if out.is_dir() else []
    if not phases:
        return {}, None
    phase = "main" if "main" in phases else phases[0]
    topo = plan.topo
    g2s = plan.guest_to_spec

    def cpu_map(c: int) -> int:
        return g2s[c] if 0 <= c < len(g2s) else c

    res_acc = ResidencyAccumulator(cpu_map=cpu_map)
    path_acc = PathAccumulator(cpu_map=cpu_map)
    mig_acc = MigrationAccumulator(topo, cpu_map=cpu_map, keep=True)
    residency, paths, migs = run_all(parse_file(out / f"trace.{phase}.txt", follow_symlinks=False), res_acc, path_acc, mig_acc)
    counts = dict.fromkeys(MIGRATION_CLASSES, 0)
    classified = []
    for m in migs.items:
        k = migration_class(m.level, m.src_node, m.dst_node)
        counts[k] += 1
        classified.append((m, k))
    counts["total"] = migs.total
    # Who ran where: sched_switch when the trace has it, else the placements.
    spans: dict[int, list[tuple[int, float, float]]] = {}  # pid -> (cpu, start, end)
    names: dict[int, str] = {}
    start, end = residency.start, residency.end
    if start is None or end is None:
        return counts, None
    if any(t.intervals for t in residency.tasks.values()):
        source = "sched_switch"
        for pid, t in residency.tasks.items():
            names[pid] = t.comm
            spans[pid] = [(i.cpu, i.start, i.end) for i in t.intervals]
    else:
        source = "placement"
        for pid, tp in paths.items():
            names[pid] = tp.comm
            stop = tp.exit_ts if tp.exit_ts is not None else end
            segs = []
            for i, (ts, cpu) in enumerate(tp.path):
                nxt = tp.path[i + 1][0] if i + 1 < len(tp.path) else stop
                if nxt > ts:
                    segs.append((cpu, ts, nxt))
            if segs:
                spans[pid] = segs
    busy = sorted(spans, key=lambda pid: (-sum(b - a for _, a, b in spans[pid]), pid))
    coloured = busy[:MAX_TASKS]
    index = {pid: i for i, pid in enumerate(coloured)}
    segments = [Segment(cpu, a, b, index.get(pid, -1)) for pid, ss in spans.items() for cpu, a, b in ss]
    segments.sort(key=lambda s: (s.cpu, s.start))
    kept, dropped = _coalesce(segments, (end - start) / 2000 if end > start else 0.0)
    marks = [Mark(m.ts, m.src, m.dst, index.get(m.pid, -1), k) for m, k in classified][:MAX_MARKS]
    return counts, Timeline(source, start, end, tuple((pid, names[pid]) for pid in coloured), tuple(kept), tuple(marks), dropped)


def _coalesce(segments: list[Segment], quantum: float) -> tuple[list[Segment], int]:
    """Merge back-to-back segments of one task on one CPU that are closer than *quantum*
    (less than a pixel apart), then keep the longest MAX_SEGMENTS."""
    out: list[Segment] = []
    for s in segments:
        last = out[-1] if out else None
        if last is not None and last.cpu == s.cpu and last.task == s.task and s.start - last.end <= quantum:
            out[-1] = Segment(s.cpu, last.start, max(last.end, s.end), s.task)
        else:
            out.append(s)
    dropped = len(segments) - len(out)
    if len(out) > MAX_SEGMENTS:
        longest = sorted(out, key=lambda s: s.end - s.start, reverse=True)[:MAX_SEGMENTS]
        dropped += len(out) - len(longest)
        out = sorted(longest, key=lambda s: (s.cpu, s.start))
    return out, dropped


@dataclass(frozen=True)
class CompareDoc:
    """A `lab compare --json` document (lab.compare v1), with one run of each side drawn
    when its run directory is still there."""

    doc: dict[str, Any]
    topology: Topology | None
    runs: tuple[RunDoc | None, RunDoc | None]  # A's and B's first judged run
    source: str = ""


def load_compare(path: Path) -> CompareDoc:
    """The comparison document at *path*, checked against its schema."""

    try:
        doc = json.loads(read_file(path, 16 * MAX_FILE_BYTES, "a compare document"))
    except ValueError as e:
        raise UserError(f"{path}: not JSON ({e})") from None
    doc = compare.check_document(doc, str(path))
    for key in ("sides", "verdict", "expectations", "figures"):
        if key not in doc:
            raise UserError(f"{path}: a compare document without '{key}'")
    topo = None
    try:
        topo = topology.load(str(doc.get("topology")))
    except UserError:
        pass  # a spec this lab does not have: the tables still render
    runs: list[RunDoc | None] = []
    for side in ("a", "b"):
        found = None
        for d in doc["sides"][side].get("run_dirs") or []:
            if d and RunDir(Path(d)).is_run():
                try:
                    # the runs as the comparison counted them: its verdicts are the document's
                    found = load_run(Path(d), source=d, stored=True)
                except UserError:
                    continue
                if found.status in ("PASS", "FAIL"):
                    break
        runs.append(found)
    return CompareDoc(doc, topo, (runs[0], runs[1]), source=str(path))
