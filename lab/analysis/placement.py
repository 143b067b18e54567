"""Where the scheduler put tasks: CPU residency, wakeup targets, migrations.

Pure functions over an iterable of ``lab.trace`` events (one pass each, so a
streamed trace never has to be held in memory) plus a ``Topology`` for
classification.  CPU numbers in a trace are the guest's; *cpu_map* translates
each one to the spec's numbering before anything is looked up or reported.

Each analysis is also an accumulator class with ``feed(event)`` and
``result()``, so several can share one pass over a large trace (``run_all``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import levels as lv
from ..topology import Topology
from ..trace.events import (
    Event,
    SchedMigrateTask,
    SchedProcessExit,
    SchedSwitch,
    SchedWakeup,
    SchedWakeupNew,
)
from .common import CpuMap, TaskFilter, as_filter, count_by_group, group_ids, identity


class Accumulator(Protocol):
    def feed(self, ev: Event) -> None: ...

    def result(self) -> Any: ...


def run_all(events: Iterable[Event], *accumulators: Accumulator) -> list[Any]:
    """Feed every event to every accumulator in one pass; return their results."""
    feeds = [a.feed for a in accumulators]
    for ev in events:
        for f in feeds:
            f(ev)
    return [a.result() for a in accumulators]


# ======================================================================================
# Residency
# ======================================================================================


@dataclass(frozen=True, slots=True)
class Interval:
    """A task ran on *cpu* from *start* to *end* (seconds, trace clock)."""

    cpu: int
    start: float
    end: float
    # True when the trace does not show the switch-in (the task was already
    # running when this CPU's events begin) or the switch-out (still running
    # at the end): the interval is then clipped to what the trace covers.
    clipped_start: bool = False
    clipped_end: bool = False

    @property
    def duration(self) -> float:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu,
            "start": self.start,
            "end": self.end,
            "clipped_start": self.clipped_start,
            "clipped_end": self.clipped_end,
        }


@dataclass
class TaskResidency:
    pid: int
    comm: str
    per_cpu: dict[int, float] = field(default_factory=dict)  # seconds on each CPU
    intervals: list[Interval] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(self.per_cpu.values())

    @property
    def cpus(self) -> list[int]:
        return sorted(self.per_cpu)

    def fraction(self, cpu: int) -> float:
        t = self.total
        return self.per_cpu.get(cpu, 0.0) / t if t else 0.0

    def by_group(self, topo: Topology, level: str) -> dict[int, float]:
        """Seconds per group at *level* (node ids for 'node', group index otherwise)."""
        gid = group_ids(topo, level)
        out: dict[int, float] = defaultdict(float)
        for cpu, t in self.per_cpu.items():
            out[gid[cpu]] += t
        return dict(sorted(out.items()))

    def main_cpu(self) -> int | None:
        """The CPU the task spent the most time on."""
        if not self.per_cpu:
            return None
        return max(self.per_cpu.items(), key=lambda kv: (kv[1], -kv[0]))[0]

    def to_dict(self, intervals: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "pid": self.pid,
            "comm": self.comm,
            "total": self.total,
            "per_cpu": {str(c): t for c, t in sorted(self.per_cpu.items())},
        }
        if intervals:
            d["intervals"] = [i.to_dict() for i in self.intervals]
        return d


@dataclass
class Residency:
    tasks: dict[int, TaskResidency]
    start: float | None  # first and last timestamps of the events seen
    end: float | None
    inconsistent: int = 0  # switch-outs of a task the trace did not show running (lost events)

    def __getitem__(self, pid: int) -> TaskResidency:
        return self.tasks[pid]

    def by_comm(self, comm: str) -> list[TaskResidency]:
        return [t for t in self.tasks.values() if t.comm == comm]

    @property
    def total(self) -> float:
        """Seconds of all the tasks together."""
        return sum(t.total for t in self.tasks.values())

    def by_group(self, topo: Topology, level: str) -> dict[int, float]:
        """Seconds of all the tasks together per group at *level* (see TaskResidency.by_group)."""
        out: dict[int, float] = {}
        for t in self.tasks.values():
            for g, secs in t.by_group(topo, level).items():
                out[g] = out.get(g, 0) + secs
        return dict(sorted(out.items()))

    def to_dict(self, intervals: bool = True) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "inconsistent": self.inconsistent,
            "tasks": {str(p): t.to_dict(intervals) for p, t in sorted(self.tasks.items())},
        }


class ResidencyAccumulator:
    """Time each task spent on each CPU, from sched_switch.

    Per CPU it remembers who was switched in and when; a switch-out closes
    that interval.  A task switched out without a visible switch-in was
    already running when the CPU's events begin: its interval starts at that
    CPU's first event (clipped_start).  Tasks still running at the end are
    closed at *end_ts* (default: the last timestamp seen).  The idle task
    (pid 0) is left out unless *include_idle*.
    """

    def __init__(
        self,
        task_filter: TaskFilter | None = None,
        *,
        pids: Iterable[int] | None = None,
        comms: Iterable[str] | str | None = None,
        cpu_map: CpuMap | None = None,
        keep_intervals: bool = True,
        include_idle: bool = False,
        end_ts: float | None = None,
    ):
        self.want = as_filter(task_filter, pids, comms)
        self.cpu_map = cpu_map or identity
        self.keep_intervals = keep_intervals
        self.include_idle = include_idle
        self.end_ts = end_ts
        self.running: dict[int, tuple[int, str, float]] = {}  # cpu -> (pid, comm, since)
        self.cpu_first: dict[int, float] = {}
        self.tasks: dict[int, TaskResidency] = {}
        self.first: float | None = None
        self.last: float | None = None
        self.inconsistent = 0

    def _add(
        self, pid: int, comm: str, cpu: int, start: float, end: float, cs: bool, ce: bool
    ) -> None:
        if pid == 0 and not self.include_idle:
            return
        if not self.want(pid, comm):
            return
        t = self.tasks.get(pid)
        if t is None:
            t = self.tasks[pid] = TaskResidency(pid, comm)
        t.comm = comm  # the latest name (after exec)
        t.per_cpu[cpu] = t.per_cpu.get(cpu, 0.0) + (end - start)
        if self.keep_intervals:
            t.intervals.append(Interval(cpu, start, end, cs, ce))

    def feed(self, ev: Event) -> None:
        ts = ev.ts
        if self.first is None:
            self.first = ts
        self.last = ts
        cpu = self.cpu_map(ev.cpu)
        if cpu not in self.cpu_first:
            self.cpu_first[cpu] = ts
        if type(ev) is not SchedSwitch:
            return
        cur = self.running.get(cpu)
        if cur is not None and cur[0] == ev.prev_pid:
            self._add(ev.prev_pid, ev.prev_comm, cpu, cur[2], ts, False, False)
        elif cur is None:
            self._add(ev.prev_pid, ev.prev_comm, cpu, self.cpu_first[cpu], ts, True, False)
        else:
            # The trace showed someone else switched in here: events were lost.
            # Guessing an interval would invent residency, so count and skip it.
            self.inconsistent += 1
        self.running[cpu] = (ev.next_pid, ev.next_comm, ts)

    def result(self) -> Residency:
        end = self.end_ts if self.end_ts is not None else self.last
        if end is not None:
            for cpu, (pid, comm, since) in sorted(self.running.items()):
                if end > since:
                    self._add(pid, comm, cpu, since, end, False, True)
        self.running.clear()
        for t in self.tasks.values():
            t.intervals.sort(key=lambda i: (i.start, i.cpu))
        return Residency(dict(sorted(self.tasks.items())), self.first, end, self.inconsistent)


def residency(
    events: Iterable[Event],
    task_filter: TaskFilter | None = None,
    *,
    pids: Iterable[int] | None = None,
    comms: Iterable[str] | str | None = None,
    cpu_map: CpuMap | None = None,
    keep_intervals: bool = True,
    include_idle: bool = False,
    end_ts: float | None = None,
) -> Residency:
    """Per-task time on each CPU (and the intervals), from sched_switch events."""
    acc = ResidencyAccumulator(
        task_filter,
        pids=pids,
        comms=comms,
        cpu_map=cpu_map,
        keep_intervals=keep_intervals,
        include_idle=include_idle,
        end_ts=end_ts,
    )
    return run_all(events, acc)[0]


# ======================================================================================
# Wakeup targets
# ======================================================================================

WAKEUP_KINDS = ("sched_wakeup_new", "sched_wakeup", "sched_waking")


@dataclass(frozen=True, slots=True)
class Wakeup:
    ts: float
    kind: str  # 'sched_wakeup_new', 'sched_wakeup' or 'sched_waking'
    pid: int  # the wakee
    comm: str
    prio: int
    waker_pid: int  # the task current on waker_cpu when the event fired
    waker_comm: str
    waker_cpu: int  # the event's CPU column (see SchedWakeup on when that is the waker's)
    target_cpu: int
    level: str | None  # topo.common_level(waker_cpu, target_cpu), None without a topology

    def to_dict(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "kind": self.kind,
            "pid": self.pid,
            "comm": self.comm,
            "prio": self.prio,
            "waker_pid": self.waker_pid,
            "waker_comm": self.waker_comm,
            "waker_cpu": self.waker_cpu,
            "target_cpu": self.target_cpu,
            "level": self.level,
        }

    def line(self) -> str:
        """The wakeup laid out as its trace line (without the flags column), for evidence.

        The CPUs are this record's, so in the numbering the analysis mapped to.
        """
        return (
            f"{self.waker_comm}-{self.waker_pid} [{self.waker_cpu:03d}] {self.ts:.6f}: "
            f"{self.kind}: comm={self.comm} pid={self.pid} prio={self.prio} "
            f"target_cpu={self.target_cpu:03d}"
        )


@dataclass
class WakeupTargets:
    wakeups: list[Wakeup]  # in trace order

    def of_kind(self, kind: str) -> list[Wakeup]:
        return [w for w in self.wakeups if w.kind == kind]

    def by_task(self) -> dict[int, list[Wakeup]]:
        out: dict[int, list[Wakeup]] = {}
        for w in self.wakeups:
            out.setdefault(w.pid, []).append(w)
        return out

    def targets(self, kind: str | None = None, pid: int | None = None) -> list[int]:
        """Target CPUs in trace order, optionally of one kind and one wakee."""
        return [
            w.target_cpu
            for w in self.wakeups
            if (kind is None or w.kind == kind) and (pid is None or w.pid == pid)
        ]

    def target_counts(self, kind: str | None = None) -> Counter[int]:
        return Counter(self.targets(kind))

    def pileups(self, kind: str | None = "sched_wakeup_new") -> dict[int, int]:
        """CPUs chosen as target more than once (seed 000's pile-up), with the count."""
        return {cpu: n for cpu, n in sorted(self.target_counts(kind).items()) if n > 1}

    def outside(self, allowed: Iterable[int], kind: str | None = None) -> list[Wakeup]:
        """Wakeups whose target is not in *allowed* (e.g. the pinned CPU set)."""
        ok = set(allowed)
        return [
            w for w in self.wakeups if (kind is None or w.kind == kind) and w.target_cpu not in ok
        ]

    def split(self, topo: Topology, level: str, kind: str | None = None) -> dict[int, int]:
        """Targets counted per group at *level* (node ids for 'node'); every group listed."""
        return count_by_group(topo, self.targets(kind), level)

    def level_counts(self, kind: str | None = None) -> Counter[str]:
        """How far from the waker's CPU the targets landed ('cpu', 'core', 'cluster', 'llc', ...)."""
        return Counter(
            w.level
            for w in self.wakeups
            if (kind is None or w.kind == kind) and w.level is not None
        )

    def to_dict(self) -> dict[str, Any]:
        kinds = sorted({w.kind for w in self.wakeups})
        return {
            "count": len(self.wakeups),
            "by_kind": {
                k: {
                    "targets": self.targets(k),
                    "pileups": {str(c): n for c, n in self.pileups(k).items()},
                    "levels": dict(sorted(self.level_counts(k).items())),
                }
                for k in kinds
            },
            "wakeups": [w.to_dict() for w in self.wakeups],
        }


class WakeupAccumulator:
    """Wakeups of the selected wakees, of the given *kinds*.

    The waker is the event's current task and CPU.  That is not always so for
    sched_wakeup: it may fire on the target CPU (a queued wakeup), while
    sched_waking always fires in the waker's context but names only the
    wakee's previous CPU.  With *paired*, a sched_wakeup takes its waker from
    the same task's sched_waking before it (trace both events), and one
    without a sched_waking is left out; a sched_waking with no sched_wakeup
    after it (the task was still running) is replaced by the task's next one.
    """

    def __init__(
        self,
        topo: Topology | None = None,
        task_filter: TaskFilter | None = None,
        *,
        pids: Iterable[int] | None = None,
        comms: Iterable[str] | str | None = None,
        cpu_map: CpuMap | None = None,
        kinds: Iterable[str] = ("sched_wakeup_new", "sched_wakeup"),
        paired: bool = False,
    ):
        self.topo = topo
        self.want = as_filter(task_filter, pids, comms)
        self.cpu_map = cpu_map or identity
        self.kinds = frozenset(kinds)
        unknown = self.kinds - set(WAKEUP_KINDS)
        if unknown:
            raise ValueError(f"unknown wakeup kinds {sorted(unknown)}; known: {list(WAKEUP_KINDS)}")
        if paired and "sched_waking" in self.kinds:
            raise ValueError("paired takes the waker from sched_waking: it cannot also be a kind")
        self.paired = paired
        self.waking: dict[int, tuple[int, str, int]] = {}  # wakee -> (waker pid, comm, CPU)
        self.wakeups: list[Wakeup] = []

    def feed(self, ev: Event) -> None:
        if not isinstance(ev, SchedWakeup):
            return
        name = ev.NAME
        if self.paired and name == "sched_waking":
            if self.want(ev.task_pid, ev.task_comm):
                self.waking[ev.task_pid] = (ev.pid, ev.comm, self.cpu_map(ev.cpu))
            return
        if name not in self.kinds or not self.want(ev.task_pid, ev.task_comm):
            return
        if self.paired and name == "sched_wakeup":
            waker = self.waking.pop(ev.task_pid, None)
            if waker is None:
                return
        else:
            waker = (ev.pid, ev.comm, self.cpu_map(ev.cpu))
        wpid, wcomm, src = waker
        dst = self.cpu_map(ev.target_cpu)
        level = self.topo.common_level(src, dst) if self.topo is not None else None
        self.wakeups.append(
            Wakeup(ev.ts, name, ev.task_pid, ev.task_comm, ev.prio, wpid, wcomm, src, dst, level)
        )

    def result(self) -> WakeupTargets:
        return WakeupTargets(self.wakeups)


def wakeup_targets(
    events: Iterable[Event],
    topo: Topology | None = None,
    task_filter: TaskFilter | None = None,
    *,
    pids: Iterable[int] | None = None,
    comms: Iterable[str] | str | None = None,
    cpu_map: CpuMap | None = None,
    kinds: Iterable[str] = ("sched_wakeup_new", "sched_wakeup"),
    paired: bool = False,
) -> WakeupTargets:
    """Every wakeup of the selected wakees: waker CPU (the event's CPU, or with *paired*
    the sched_waking's: see WakeupAccumulator), target CPU, and with a topology the level
    they share."""
    acc = WakeupAccumulator(
        topo, task_filter, pids=pids, comms=comms, cpu_map=cpu_map, kinds=kinds, paired=paired
    )
    return run_all(events, acc)[0]


# ======================================================================================
# Placement paths
# ======================================================================================


@dataclass
class TaskPath:
    """Where a task was put over time: its sched_wakeup_new target, then every
    sched_migrate_task destination; each placement lasts until the next."""

    pid: int
    comm: str
    path: list[tuple[float, int]] = field(default_factory=list)  # (ts, cpu), in trace order
    exit_ts: float | None = None  # its sched_process_exit, when traced

    def time_by_group(self, topo: Topology, level: str, start: float, end: float) -> dict[int, float]:
        """Seconds inside [start, end] in each group at *level* (node ids for 'node'),
        the last placement lasting until *end*; groups in the order the task reached them."""
        gid = group_ids(topo, level)
        spent: dict[int, float] = {}
        for i, (ts, cpu) in enumerate(self.path):
            nxt = self.path[i + 1][0] if i + 1 < len(self.path) else end
            a, b = max(ts, start), min(nxt, end)
            if b > a:
                spent[gid[cpu]] = spent.get(gid[cpu], 0.0) + (b - a)
        return spent

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "comm": self.comm,
            "path": [list(p) for p in self.path],
            "exit_ts": self.exit_ts,
        }


class PathAccumulator:
    """TaskPath of every task (or of *pids*), in the order the trace first shows each.

    Placements come from the scheduler's decisions (sched_wakeup_new,
    sched_migrate_task), which a trace filtered to a few tasks keeps, rather
    than from sched_switch.  A task's comm is the one its latest migration or
    exit carries: a thread renamed after fork (perf's 'thread P/T') is
    reported under its new name.  That is why tasks are selected by pid, not
    comm: matching each event's comm would drop the placements made under the
    first name; select on ``TaskPath.comm`` in the result instead.
    """

    def __init__(self, pids: Iterable[int] | None = None, cpu_map: CpuMap | None = None):
        self.pids = frozenset(pids) if pids is not None else None
        self.cpu_map = cpu_map or identity
        self.paths: dict[int, TaskPath] = {}

    def feed(self, ev: Event) -> None:
        if not isinstance(ev, (SchedWakeupNew, SchedMigrateTask, SchedProcessExit)):
            return
        pid, comm = ev.task_pid, ev.task_comm
        if self.pids is not None and pid not in self.pids:
            return
        p = self.paths.get(pid)
        if p is None:
            p = self.paths[pid] = TaskPath(pid, comm)
        if isinstance(ev, SchedWakeupNew):
            p.path.append((ev.ts, self.cpu_map(ev.target_cpu)))
            return
        p.comm = comm
        if isinstance(ev, SchedMigrateTask):
            p.path.append((ev.ts, self.cpu_map(ev.dest_cpu)))
        else:
            p.exit_ts = ev.ts

    def result(self) -> dict[int, TaskPath]:
        return self.paths


def task_paths(
    events: Iterable[Event], pids: Iterable[int] | None = None, cpu_map: CpuMap | None = None
) -> dict[int, TaskPath]:
    """pid -> where the task was put over time (see PathAccumulator)."""
    return run_all(events, PathAccumulator(pids, cpu_map))[0]


# ======================================================================================
# Migrations
# ======================================================================================

MIGRATION_SOURCES = ("migrate_task", "switch")


@dataclass(frozen=True, slots=True)
class Migration:
    ts: float
    pid: int
    comm: str
    src: int
    dst: int
    level: str  # topo.common_level(src, dst): the smallest group holding both CPUs
    src_node: int
    dst_node: int

    @property
    def cross_node(self) -> bool:
        return self.src_node != self.dst_node

    def to_dict(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "pid": self.pid,
            "comm": self.comm,
            "src": self.src,
            "dst": self.dst,
            "level": self.level,
            "src_node": self.src_node,
            "dst_node": self.dst_node,
        }


@dataclass(frozen=True)
class MigrationTable:
    """Seed 003's table: exclusive classes that sum to the total.

    samecore = SMT siblings; same_llc = same LLC (any cluster) but not the same
    core; samenode = same node, different LLC; crossnode = different nodes,
    of which to_node/from_node enter or leave *node*.
    """

    node: int
    samecore: int
    same_llc: int
    samenode: int
    crossnode: int
    to_node: int
    from_node: int
    total: int

    def to_dict(self) -> dict[str, Any]:
        n = self.node
        return {
            "node": n,
            "samecore": self.samecore,
            "same_llc": self.same_llc,
            "samenode": self.samenode,
            "crossnode": self.crossnode,
            f"to_{n}": self.to_node,
            f"from_{n}": self.from_node,
            "total": self.total,
        }

    def format(self) -> str:
        """The seed's layout, for logs and reports."""
        n = self.node
        return "\n".join(
            [
                f"num_migrations_samecore : {self.samecore}",
                f"num_migrations_same_llc : {self.same_llc}",
                f"num_migrations_samenode : {self.samenode}",
                f"num_migrations_crossnode: {self.crossnode}",
                f"  num_migrations_to_{n}   : {self.to_node}",
                f"  num_migrations_from_{n} : {self.from_node}",
                f"num_migrations: {self.total}",
            ]
        )


@dataclass
class Migrations:
    source: str
    levels: tuple[str, ...]  # the topology's levels, small to large
    by_level: Counter[str]
    node_pairs: Counter[tuple[int, int]]  # (src_node, dst_node) -> count
    per_task: dict[int, Counter[str]]  # pid -> level -> count
    items: list[Migration]  # empty unless keep=True
    total: int
    first_ts: float | None
    last_ts: float | None

    @property
    def cross_node(self) -> int:
        return sum(n for (a, b), n in self.node_pairs.items() if a != b)

    def to_node(self, node: int) -> int:
        return sum(n for (a, b), n in self.node_pairs.items() if b == node and a != node)

    def from_node(self, node: int) -> int:
        return sum(n for (a, b), n in self.node_pairs.items() if a == node and b != node)

    def table(self, node: int = 0) -> MigrationTable:
        same_node = self.total - self.cross_node
        def within(cls: str) -> int:
            return sum(self.by_level.get(x.name, 0) for x in lv.LEVELS if x.within == cls)

        core, llc = within("same core"), within("same LLC")
        return MigrationTable(
            node=node,
            samecore=core,
            same_llc=llc,
            samenode=same_node - core - llc,
            crossnode=self.cross_node,
            to_node=self.to_node(node),
            from_node=self.from_node(node),
            total=self.total,
        )

    def to_dict(self, items: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "source": self.source,
            "total": self.total,
            "by_level": {lv: self.by_level.get(lv, 0) for lv in self.levels},
            "cross_node": self.cross_node,
            "node_pairs": [
                {"src": a, "dst": b, "count": n} for (a, b), n in sorted(self.node_pairs.items())
            ],
            "per_task": {
                str(p): {lv: c[lv] for lv in self.levels if c.get(lv)}
                for p, c in sorted(self.per_task.items())
            },
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
        }
        if items:
            d["items"] = [m.to_dict() for m in self.items]
        return d


class MigrationAccumulator:
    """Migrations classified by the smallest topology level holding both CPUs.

    source='migrate_task' counts sched_migrate_task (orig_cpu -> dest_cpu):
    every time the kernel moved a task's runqueue, including wakeup placement
    on another CPU.  source='switch' counts a task being switched in on a CPU
    other than the one it last ran on (what the task experienced).
    """

    def __init__(
        self,
        topo: Topology,
        task_filter: TaskFilter | None = None,
        *,
        pids: Iterable[int] | None = None,
        comms: Iterable[str] | str | None = None,
        cpu_map: CpuMap | None = None,
        source: str = "migrate_task",
        keep: bool = False,
    ):
        if source not in MIGRATION_SOURCES:
            raise ValueError(
                f"unknown migration source {source!r}; known: {list(MIGRATION_SOURCES)}"
            )
        self.topo = topo
        self.want = as_filter(task_filter, pids, comms)
        self.cpu_map = cpu_map or identity
        self.source = source
        self.keep = keep
        self.by_level: Counter[str] = Counter()
        self.node_pairs: Counter[tuple[int, int]] = Counter()
        self.per_task: dict[int, Counter[str]] = {}
        self.items: list[Migration] = []
        self.last_cpu: dict[int, int] = {}
        self.total = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        # common_level() per CPU pair is pure; cache it, traces repeat pairs a lot.
        self._level: dict[tuple[int, int], str] = {}

    def _count(self, ts: float, pid: int, comm: str, src: int, dst: int) -> None:
        key = (src, dst)
        level = self._level.get(key)
        if level is None:
            level = self._level[key] = self.topo.common_level(src, dst)
        sn, dn = self.topo.node_of(src), self.topo.node_of(dst)
        self.by_level[level] += 1
        self.node_pairs[(sn, dn)] += 1
        self.per_task.setdefault(pid, Counter())[level] += 1
        self.total += 1
        if self.first_ts is None:
            self.first_ts = ts
        self.last_ts = ts
        if self.keep:
            self.items.append(Migration(ts, pid, comm, src, dst, level, sn, dn))

    def feed(self, ev: Event) -> None:
        if self.source == "migrate_task":
            if isinstance(ev, SchedMigrateTask) and self.want(ev.task_pid, ev.task_comm):
                src, dst = self.cpu_map(ev.orig_cpu), self.cpu_map(ev.dest_cpu)
                if src != dst:  # set_task_cpu() only traces real moves; be safe anyway
                    self._count(ev.ts, ev.task_pid, ev.task_comm, src, dst)
        elif isinstance(ev, SchedSwitch):
            pid = ev.next_pid
            if pid == 0 or not self.want(pid, ev.next_comm):
                return
            cpu = self.cpu_map(ev.cpu)
            prev = self.last_cpu.get(pid)
            self.last_cpu[pid] = cpu
            if prev is not None and prev != cpu:
                self._count(ev.ts, pid, ev.next_comm, prev, cpu)

    def result(self) -> Migrations:
        return Migrations(
            source=self.source,
            levels=self.topo.levels,
            by_level=self.by_level,
            node_pairs=self.node_pairs,
            per_task=self.per_task,
            items=self.items,
            total=self.total,
            first_ts=self.first_ts,
            last_ts=self.last_ts,
        )


def migrations(
    events: Iterable[Event],
    topo: Topology,
    task_filter: TaskFilter | None = None,
    *,
    pids: Iterable[int] | None = None,
    comms: Iterable[str] | str | None = None,
    cpu_map: CpuMap | None = None,
    source: str = "migrate_task",
    keep: bool = False,
) -> Migrations:
    """Every migration of the selected tasks, classified against *topo*."""
    acc = MigrationAccumulator(
        topo, task_filter, pids=pids, comms=comms, cpu_map=cpu_map, source=source, keep=keep
    )
    return run_all(events, acc)[0]


def migration_table(
    events: Iterable[Event],
    topo: Topology,
    node: int = 0,
    task_filter: TaskFilter | None = None,
    *,
    pids: Iterable[int] | None = None,
    comms: Iterable[str] | str | None = None,
    cpu_map: CpuMap | None = None,
    source: str = "migrate_task",
) -> MigrationTable:
    """Seed 003's table for *node* in one call."""
    m = migrations(
        events, topo, task_filter, pids=pids, comms=comms, cpu_map=cpu_map, source=source
    )
    return m.table(node)
