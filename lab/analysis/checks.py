"""Checks every run gets: figures computed from any run's trace, whatever the scenario.

One pass over a phase's events (``ChecksAccumulator.feed``) gives six figures, each
defined in its function's docstring below:

* ``starvation``: the longest time any task was runnable without running, and which;
* ``work_conservation``: CPU time spent idle while a task allowed there waited in the
  same LLC / node;
* ``affinity``: placements and switch-ins on a CPU outside the task's recorded mask;
* ``fairness``: the spread of CPU time among the tasks of one comm;
* ``wakeup_latency``: waking -> running, p50 / p90 / p99 / max;
* ``migrations``: migrations per second by topology level (lab.analysis.placement).

A figure is only given on the events it needs.  An event the run did not trace, or traced
with a filter that keeps only some tasks' events, makes the figure ``{"not_measured":
"event sched_switch not traced"}`` instead of a number that would be wrong.  State is per
task and per CPU (bounded by the tasks and CPUs of the trace); each event costs O(1) but
for the work-conservation recount of the one or two groups it touches, which is O(1) when
no task's allowed CPUs are recorded and O(idle CPUs x waiting tasks of the group) when they
are.  Times are seconds of the trace clock, rounded to the trace's microsecond.

What no trace can show is stated in each definition: a wait that began before the trace
did is not seen (its task first appears when it is switched in); a task's allowed CPUs are
not in any sched event, so they come from the run (``allowed``, comm or glob -> CPUs).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from .. import levels
from ..cpulist import format as fmt
from ..topology import Topology
from ..trace.events import (
    Event,
    SchedMigrateTask,
    SchedSwitch,
    SchedWakeup,
    SchedWakeupNew,
    SchedWaking,
)
from ..trace.parser import TraceStats, parse_file
from .common import CpuMap, group_ids, identity
from .placement import MigrationAccumulator

CHECKS = ("starvation", "work_conservation", "affinity", "fairness", "wakeup_latency", "migrations")

# The events each check cannot do without (all must be traced, unfiltered).
NEEDS: dict[str, tuple[str, ...]] = {
    "starvation": ("sched_switch", "sched_wakeup", "sched_wakeup_new"),
    "work_conservation": ("sched_switch", "sched_wakeup", "sched_wakeup_new", "sched_migrate_task"),
    "affinity": (),  # any of PLACEMENT_EVENTS: judged on those traced
    "fairness": ("sched_switch",),
    "wakeup_latency": ("sched_switch", "sched_wakeup"),
    "migrations": ("sched_migrate_task",),
}
PLACEMENT_EVENTS = ("sched_switch", "sched_wakeup", "sched_wakeup_new", "sched_migrate_task")
EVENTS = ("sched_switch", "sched_wakeup", "sched_wakeup_new", "sched_waking", "sched_migrate_task")
WC_LEVELS = ("llc", "node")
FAIRNESS_GROUPS_SHOWN = 10
EVIDENCE_SHOWN = 5


def _s(x: float) -> float:
    """Seconds at the trace's resolution (1 us), so sums of differences read back exactly."""
    return round(x, 6)


def percentile(sorted_xs: list[float], p: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least *p* % of the samples at
    or below it (p in (0, 100]); *sorted_xs* must be sorted and non-empty."""
    k = max(0, math.ceil(p / 100 * len(sorted_xs)) - 1)
    return sorted_xs[min(k, len(sorted_xs) - 1)]


@dataclass(frozen=True)
class Traced:
    """Which events the run traced and with which filters.  *events* None: not known, so
    the events present in the trace count as traced (an analysis on a bare trace file)."""

    events: frozenset[str] | None = None
    filters: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, events: Iterable[str] | None, filters: Mapping[str, str] | None = None) -> Traced:
        """From a scenario's ``events`` ('sched:sched_switch' or 'sched_switch') and ``filters``."""
        evs = None if events is None else frozenset(e.rpartition(":")[2] for e in events)
        return cls(evs, dict(filters or {}))

    def why_not(self, needs: Iterable[str], stats: TraceStats, filtered_ok: bool = False) -> str:
        """'' when every event of *needs* was traced (unfiltered, unless *filtered_ok*: a
        figure that is then of the tasks the filter keeps), else why it is not measured."""
        needs = tuple(needs)
        for ev in needs:
            if (ev not in self.events) if self.events is not None else not stats.events.get(ev):
                return f"not measured: event {ev} not traced"
        if "sched_switch" in needs and not stats.events.get("sched_switch"):
            # Any busy CPU switches; none at all means it was off during this phase.
            return "not measured: no sched_switch event in the trace (traced, but none recorded: disabled during this phase?)"
        for ev in needs:
            if ev in self.filters and not filtered_ok:
                return f"not measured: event {ev} traced with a filter ({self.filters[ev]}): only some tasks' events"
        return ""


class _Masks:
    """comm (exact, or a shell glob) -> allowed CPUs, looked up by the comm an event carries."""

    def __init__(self, allowed: Mapping[str, Iterable[int]]):
        self.exact = {k: frozenset(v) for k, v in allowed.items() if not any(ch in k for ch in "*?[")}
        self.globs = [(k, frozenset(v)) for k, v in allowed.items() if any(ch in k for ch in "*?[")]
        self.cache: dict[str, frozenset[int] | None] = {}

    def __call__(self, comm: str) -> frozenset[int] | None:
        if comm in self.cache:
            return self.cache[comm]
        m = self.exact.get(comm)
        if m is None:
            m = next((v for k, v in self.globs if fnmatchcase(comm, k)), None)
        self.cache[comm] = m
        return m


class _Group:
    """One LLC or node for work conservation: its idle CPUs, the tasks waiting on its CPUs'
    runqueues, and the idle-while-waiting CPU-seconds so far."""

    __slots__ = ("idle", "waiting", "queues", "count", "since", "acc")

    def __init__(self) -> None:
        self.idle: set[int] = set()
        self.waiting: dict[int, tuple[int, frozenset[int] | None]] = {}  # pid -> (queue CPU, mask)
        self.queues: Counter[int] = Counter()
        self.count = 0  # CPUs idle while a task allowed there waits elsewhere in the group
        self.since = 0.0
        self.acc = 0.0


class ChecksAccumulator:
    """The six checks over one phase's events in one pass (feed each event, then result()).

    *topo* and *cpu_map* (guest -> spec CPU numbers) place CPUs in LLCs and nodes;
    *traced* says which events the run recorded (``Traced``); *allowed* maps a comm or
    glob to the CPUs the run recorded as its tasks' allowed ones (None: not recorded),
    *allowed_source* says where they came from.
    """

    def __init__(
        self,
        topo: Topology,
        cpu_map: CpuMap | None = None,
        traced: Traced | None = None,
        allowed: Mapping[str, Iterable[int]] | None = None,
        allowed_source: str = "",
    ):
        self.topo = topo
        self.cpu_map = cpu_map or identity
        self.traced = traced or Traced()
        self.masks = _Masks(allowed) if allowed is not None else None
        self.allowed_source = allowed_source
        self.known_cpus = frozenset(topo.cpu_ids)
        self.gid = {lv: group_ids(topo, lv) for lv in WC_LEVELS}
        self.groups: dict[str, dict[int, _Group]] = {lv: {g: _Group() for g in set(m.values())} for lv, m in self.gid.items()}
        self.running: dict[int, tuple[int, float]] = {}  # cpu -> (pid running, since)
        self.cpu_first: dict[int, float] = {}  # cpu -> its first event's ts
        self.cpu_known: dict[int, float] = {}  # cpu -> its first sched_switch's ts
        self.on_cpu: dict[int, int] = {}  # pid -> cpu, tasks running
        self.wait: dict[int, tuple[float, int, str, str]] = {}  # pid -> (since, queue CPU, why, comm)
        self.waking: dict[int, float] = {}  # pid -> ts of a sched_waking not yet followed by its wakeup
        self.woke: dict[int, tuple[float, str]] = {}  # pid -> (when the wakeup began, comm)
        self.longest: tuple[float, int, str, int, float, str, bool] | None = None
        self.latencies: list[float] = []
        self.worst_latency: tuple[float, int, str] | None = None
        self.cpu_time: dict[int, float] = {}
        self.comm_of: dict[int, str] = {}
        self.violations = 0
        self.violators: set[int] = set()
        self.evidence: list[str] = []
        self.migs = MigrationAccumulator(topo, cpu_map=cpu_map)
        self.first: float | None = None
        self.last: float | None = None
        self.seen: Counter[str] = Counter()  # events fed, by name (the stats of a bare event list)

    # ---- work conservation bookkeeping ----------------------------------------------------
    def _recount(self, g: _Group) -> int:
        if not g.waiting or not g.idle:
            return 0
        if self.masks is None:  # every task allowed everywhere: every idle CPU but the only queue
            n = len(g.idle)
            if len(g.queues) == 1 and next(iter(g.queues)) in g.idle:
                n -= 1
            return n
        return sum(1 for c in g.idle if any(q != c and (m is None or c in m) for q, m in g.waiting.values()))

    def _touched(self, cpu: int, ts: float) -> list[_Group]:
        out = []
        for lv in WC_LEVELS:
            g = self.groups[lv][self.gid[lv][cpu]]
            g.acc += g.count * (ts - g.since)
            g.since = ts
            out.append(g)
        return out

    def _wc_wait(self, pid: int, cpu: int, comm: str, ts: float) -> None:
        if cpu not in self.known_cpus:
            return
        mask = self.masks(comm) if self.masks is not None else None
        for g in self._touched(cpu, ts):
            g.waiting[pid] = (cpu, mask)
            g.queues[cpu] += 1
            g.count = self._recount(g)

    def _wc_unwait(self, pid: int, cpu: int, ts: float) -> None:
        if cpu not in self.known_cpus:
            return
        for g in self._touched(cpu, ts):
            if g.waiting.pop(pid, None) is not None:
                g.queues[cpu] -= 1
                if not g.queues[cpu]:
                    del g.queues[cpu]
            g.count = self._recount(g)

    def _wc_idle(self, cpu: int, idle: bool, ts: float) -> None:
        if cpu not in self.known_cpus:
            return
        for g in self._touched(cpu, ts):
            if idle:
                g.idle.add(cpu)
            else:
                g.idle.discard(cpu)
            g.count = self._recount(g)

    # ---- task states ------------------------------------------------------------------------
    def _runnable(self, pid: int, cpu: int, why: str, comm: str, ts: float) -> None:
        old = self.wait.get(pid)
        if old is not None:  # already waiting: it moved queue, its wait goes on
            if old[1] == cpu:
                return
            self._wc_unwait(pid, old[1], ts)
            self.wait[pid] = (old[0], cpu, old[2], comm)
        else:
            self.wait[pid] = (ts, cpu, why, comm)
        self._wc_wait(pid, cpu, comm, ts)

    def _place(self, pid: int, comm: str, cpu: int, ts: float, line: str) -> None:
        if self.masks is None:
            return
        m = self.masks(comm)
        if m is not None and cpu not in m:
            self.violations += 1
            self.violators.add(pid)
            if len(self.evidence) < EVIDENCE_SHOWN:
                self.evidence.append(f"{ts:.6f}: {line} (allowed {_cpus(m)})")

    def feed(self, ev: Event) -> None:
        ts = ev.ts
        if self.first is None:
            self.first = ts
        self.last = ts
        self.seen[ev.name] += 1
        cpu = self.cpu_map(ev.cpu)
        if cpu not in self.cpu_first:
            self.cpu_first[cpu] = ts
        t = type(ev)
        if t is SchedSwitch:
            self._switch(ev, cpu, ts)  # type: ignore[arg-type]
        elif t is SchedWakeup or t is SchedWakeupNew:
            self._wakeup(ev, ts)  # type: ignore[arg-type]
        elif t is SchedWaking:
            pid = ev.task_pid  # type: ignore[attr-defined]
            if pid not in self.on_cpu and pid not in self.wait:  # else no wakeup follows (ttwu_runnable)
                self.waking.setdefault(pid, ts)
        elif t is SchedMigrateTask:
            pid, dst = ev.task_pid, self.cpu_map(ev.dest_cpu)  # type: ignore[attr-defined]
            if dst in self.known_cpus and self.cpu_map(ev.orig_cpu) in self.known_cpus:  # type: ignore[attr-defined]
                self.migs.feed(ev)
            w = self.wait.get(pid)
            if w is not None:
                self._runnable(pid, dst, w[2], ev.task_comm, ts)  # type: ignore[attr-defined]
            self._place(pid, ev.task_comm, dst, ts, f"sched_migrate_task {ev.task_comm}-{pid} to CPU {dst}")  # type: ignore[attr-defined]

    def _switch(self, ev: SchedSwitch, cpu: int, ts: float) -> None:
        prev, nxt = ev.prev_pid, ev.next_pid
        cur = self.running.get(cpu)
        if prev:
            since = cur[1] if cur is not None and cur[0] == prev else (self.cpu_first[cpu] if cur is None else None)
            if since is not None:  # else lost events: someone else was running here
                self.cpu_time[prev] = self.cpu_time.get(prev, 0.0) + (ts - since)
            self.comm_of[prev] = ev.prev_comm
            self.on_cpu.pop(prev, None)
            self.waking.pop(prev, None)
            if ev.prev_state.startswith("R"):
                self._runnable(prev, cpu, "preempted", ev.prev_comm, ts)
        if nxt:
            w = self.wait.pop(nxt, None)
            if w is not None:
                waited = ts - w[0]
                if self.longest is None or waited > self.longest[0]:
                    self.longest = (waited, nxt, ev.next_comm, cpu, w[0], w[2], False)
                self._wc_unwait(nxt, w[1], ts)
            woke = self.woke.pop(nxt, None)
            if woke is not None:
                lat = ts - woke[0]
                self.latencies.append(lat)
                if self.worst_latency is None or lat > self.worst_latency[0]:
                    self.worst_latency = (lat, nxt, ev.next_comm)
            self.waking.pop(nxt, None)
            self.on_cpu[nxt] = cpu
            self.comm_of[nxt] = ev.next_comm
            self.cpu_time.setdefault(nxt, 0.0)
            self._place(nxt, ev.next_comm, cpu, ts, f"sched_switch to {ev.next_comm}-{nxt} on CPU {cpu}")
        if cpu not in self.cpu_known:
            self.cpu_known[cpu] = ts
        was_idle = cur is not None and cur[0] == 0
        if (nxt == 0) != was_idle or cur is None:
            self._wc_idle(cpu, nxt == 0, ts)
        self.running[cpu] = (nxt, ts)

    def _wakeup(self, ev: SchedWakeup, ts: float) -> None:
        pid = ev.task_pid
        target = self.cpu_map(ev.target_cpu)
        self._place(pid, ev.task_comm, target, ts, f"{ev.NAME} {ev.task_comm}-{pid} target CPU {target}")
        if pid in self.on_cpu:  # already running (the trace missed its switch-out): nothing to wait for
            return
        start = self.waking.pop(pid, ts)
        if pid not in self.woke:
            self.woke[pid] = (start, ev.task_comm)
        self._runnable(pid, target, "new" if type(ev) is SchedWakeupNew else "wakeup", ev.task_comm, ts)

    # ---- the figures ------------------------------------------------------------------------
    def result(self, stats: TraceStats | None = None) -> dict[str, Any]:
        """The figures of every check (``{"not_measured": why}`` where the events do not
        allow it).  *stats*: the parser's, for which events the trace holds and its span
        (default: the events fed)."""
        st = stats if stats is not None else TraceStats(events=self.seen, first_ts=self.first, last_ts=self.last)
        end = st.last_ts if st.last_ts is not None else self.last
        begin = st.first_ts if st.first_ts is not None else self.first
        out: dict[str, Any] = {}
        for name in CHECKS:
            comm = switch_comm(self.traced.filters.get("sched_switch", "")) if name == "fairness" else None
            why = self.traced.why_not(NEEDS[name], st, filtered_ok=name == "migrations" or comm is not None)
            if name == "affinity":
                out[name] = self.affinity(st)
            elif why:
                out[name] = {"not_measured": why}
            elif end is None or begin is None:
                out[name] = {"not_measured": "not measured: no events in the trace"}
            elif name == "fairness":
                out[name] = self.fairness(begin, end, only=comm)
            else:
                out[name] = getattr(self, name)(begin, end)
        return out

    def starvation(self, begin: float, end: float) -> dict[str, Any]:
        """The longest time one task was runnable without running.

        A task becomes runnable at its sched_wakeup or sched_wakeup_new, or when it is
        switched out still runnable (sched_switch prev_state R or R+: preempted); it stops
        waiting when sched_switch switches it in on any CPU.  A task still waiting when the
        trace ends counts up to the trace's last timestamp (``open``: true).  Gives the
        wait in seconds, the task (pid, comm), the CPU it was switched in on (or queued on,
        if open), when the wait began and what began it (wakeup / new / preempted).
        Needs sched_switch, sched_wakeup and sched_wakeup_new; waits that began before the
        trace are not seen.
        """
        best = self.longest
        for pid, (since, q, why, comm) in self.wait.items():
            if best is None or end - since > best[0]:
                best = (end - since, pid, comm, q, since, why, True)
        if best is None:
            return {"longest_s": 0.0, "pid": None, "comm": None, "cpu": None, "since": None, "from": None, "open": False}
        waited, pid, comm, cpu, since, why, still = best
        return {"longest_s": _s(waited), "pid": pid, "comm": comm, "cpu": cpu, "since": since, "from": why, "open": still}

    def work_conservation(self, begin: float, end: float) -> dict[str, Any]:
        """Idle while others wait: CPU-seconds a CPU was idle while a task allowed on it
        waited runnable on another CPU of the same LLC (``llc``) or node (``node``).

        A CPU is idle from a sched_switch to pid 0 until its next sched_switch; before its
        first sched_switch its state is unknown and it is not counted.  A task waits as in
        starvation(), on the runqueue of the CPU its wakeup targeted, it was preempted on,
        or sched_migrate_task moved it to.  Allowed CPUs are the run's (``allowed``) where
        recorded; otherwise every CPU is assumed allowed for every task (``masks`` says
        which).  ``share`` is the idle-while-waiting CPU-seconds over the CPU-seconds whose
        state was known (each CPU from its first sched_switch to the trace's end).  Needs
        sched_switch, sched_wakeup, sched_wakeup_new and sched_migrate_task.
        """
        observed = sum(end - t for c, t in self.cpu_known.items() if c in self.known_cpus)
        masks = (
            f"allowed CPUs from {self.allowed_source or 'the run'}; tasks it does not name: every CPU"
            if self.masks is not None
            else "assumed: every CPU allowed for every task (the run records no task's allowed CPUs)"
        )
        out: dict[str, Any] = {"observed_cpu_s": _s(observed), "masks": masks}
        for lv in WC_LEVELS:
            total = 0.0
            for g in self.groups[lv].values():
                total += g.acc + g.count * (end - g.since)
            out[lv] = {"idle_while_waiting_s": _s(total), "share": round(total / observed, 6) if observed > 0 else 0.0}
        return out

    def affinity(self, stats: TraceStats) -> dict[str, Any]:
        """Affinity and cpuset violations: a task placed or run on a CPU outside the CPUs
        the run recorded as allowed for it (its comm in ``allowed``).

        Judged on each traced event of sched_switch (the task switched in on a CPU),
        sched_wakeup / sched_wakeup_new (its target CPU) and sched_migrate_task (its
        destination): the kernel never places a task outside its mask, so every one is a
        violation.  Gives the count, the tasks and the first few events.  Not measured when
        the run records no allowed CPUs, or traced none of those events.
        """
        if self.masks is None:
            return {"not_measured": "not measured: the run records no task's allowed CPUs"}
        on = [e for e in PLACEMENT_EVENTS if (e in self.traced.events if self.traced.events is not None else stats.events.get(e))]
        if not on:
            return {"not_measured": f"not measured: none of {', '.join(PLACEMENT_EVENTS)} traced"}
        d: dict[str, Any] = {
            "violations": self.violations,
            "tasks": sorted(self.violators),
            "evidence": list(self.evidence),
            "judged_on": on,
            "allowed_from": self.allowed_source or "the run",
        }
        scoped = [f"{e} ({self.traced.filters[e]})" for e in on if e in self.traced.filters]
        if scoped:
            d["filtered"] = scoped
        return d

    def fairness(self, begin: float, end: float, only: str | None = None) -> dict[str, Any]:
        """Spread of CPU time among the tasks of one comm (tasks of one group, which a
        workload gives one name and one weight).

        A task's CPU time is the sum of its sched_switch intervals (switched in to switched
        out, on any CPU; one running when the trace ends counts to the end, one running
        when its CPU's events begin counts from that CPU's first event).  For each comm
        with at least two tasks (pids): ``tasks``, ``min_s``, ``max_s``, ``max_over_min``
        (null when a task had no CPU time), and ``cv``, the coefficient of variation
        (population standard deviation over the mean).  CPU time is over the trace, not
        over each task's lifetime: a task that started late or exited early has less.
        Shows the FAIRNESS_GROUPS_SHOWN comms of highest cv; ``worst`` names the highest.
        Needs sched_switch, unfiltered, or filtered to one comm's switches
        (``prev_comm == "X" || next_comm == "X"``, which keeps every interval of X's
        tasks): then of comm X only (*only*; ``scope`` says so).
        """
        times = dict(self.cpu_time)
        for pid, since in self.running.values():
            if pid:
                times[pid] = times.get(pid, 0.0) + (end - since)
        by_comm: dict[str, list[float]] = {}
        for pid, tm in times.items():
            comm = self.comm_of.get(pid, "?")
            if only is None or comm == only:
                by_comm.setdefault(comm, []).append(_s(tm))
        groups: dict[str, dict[str, Any]] = {}
        cvs: dict[str, float] = {}
        for comm, ts in by_comm.items():
            if len(ts) < 2:
                continue
            mean = sum(ts) / len(ts)
            sd = math.sqrt(sum((x - mean) ** 2 for x in ts) / len(ts))
            lo, hi = min(ts), max(ts)
            groups[comm] = {
                "tasks": len(ts),
                "min_s": _s(lo),
                "max_s": _s(hi),
                "max_over_min": round(hi / lo, 6) if lo > 0 else None,
                "cv": round(sd / mean, 6) if mean > 0 else 0.0,
            }
            cvs[comm] = groups[comm]["cv"]
        ranked = sorted(groups, key=lambda c: (-cvs[c], c))
        d: dict[str, Any] = {
            "groups": len(groups),
            "worst": ranked[0] if ranked else None,
            "by_comm": {c: groups[c] for c in ranked[:FAIRNESS_GROUPS_SHOWN]},
        }
        if only is not None:
            d["scope"] = f"comm {only} only (sched_switch traced with a filter keeping its switches)"
        return d

    def wakeup_latency(self, begin: float, end: float) -> dict[str, Any]:
        """Wakeup latency: from a task's waking to its running, p50 / p90 / p99 / max.

        The wakeup begins at the task's sched_waking when traced (the waker's call),
        else at its sched_wakeup or sched_wakeup_new (on the runqueue); it ends when
        sched_switch switches the task in.  A wakeup of a task the trace shows running,
        and a preemption (prev_state R), are no wakeups.  Percentiles are nearest-rank
        (the smallest latency with at least p % of the wakeups at or below it).  Wakeups
        not yet run when the trace ends are not counted (starvation counts them).  Needs
        sched_switch and sched_wakeup; sched_waking moves the start earlier when traced.
        """
        xs = sorted(self.latencies)
        waking = "sched_waking" in self.traced.events if self.traced.events is not None else bool(self.seen.get("sched_waking"))
        src = "sched_waking" if waking else "sched_wakeup"
        if not xs:
            return {"count": 0, "p50_s": None, "p90_s": None, "p99_s": None, "max_s": None, "from": src}
        worst = self.worst_latency
        assert worst is not None
        return {
            "count": len(xs),
            "p50_s": _s(percentile(xs, 50)),
            "p90_s": _s(percentile(xs, 90)),
            "p99_s": _s(percentile(xs, 99)),
            "max_s": _s(xs[-1]),
            "max_pid": worst[1],
            "max_comm": worst[2],
            "from": src,
        }

    def migrations(self, begin: float, end: float) -> dict[str, Any]:
        """Migrations per second by topology level: sched_migrate_task events classified
        by the smallest level holding both CPUs (lab.analysis.migrations, source
        'migrate_task'), each count over the trace's span (first to last event).  Needs
        sched_migrate_task; with a filter on it (the run's), the counts are of the tasks the
        filter keeps, and ``filtered`` says so.
        """
        m = self.migs.result()
        span = end - begin
        d: dict[str, Any] = {
            "total": m.total,
            "span_s": _s(span),
            "by_level": {lv: m.by_level.get(lv, 0) for lv in m.levels},
            "per_s": {lv: round(m.by_level.get(lv, 0) / span, 6) if span > 0 else None for lv in m.levels},
        }
        if "sched_migrate_task" in self.traced.filters:
            d["filtered"] = self.traced.filters["sched_migrate_task"]
        return d


_COMM_FILTER = re.compile(r'\s*\(?\s*(prev|next)_comm\s*==\s*"([^"*?\[]+)"\s*\|\|\s*(prev|next)_comm\s*==\s*"([^"]+)"\s*\)?\s*')


def switch_comm(flt: str) -> str | None:
    """The comm X of a sched_switch filter that keeps exactly X's switches in and out
    (``prev_comm == "X" || next_comm == "X"``, either order), else None."""
    m = _COMM_FILTER.fullmatch(flt)
    if m is None or {m.group(1), m.group(3)} != {"prev", "next"} or m.group(2) != m.group(4):
        return None
    return m.group(2)


def _cpus(cpus: Iterable[int]) -> str:
    return fmt(sorted(cpus))


def checks(
    events: Iterable[Event],
    topo: Topology,
    cpu_map: CpuMap | None = None,
    traced: Traced | None = None,
    allowed: Mapping[str, Iterable[int]] | None = None,
    allowed_source: str = "",
    stats: TraceStats | None = None,
) -> dict[str, Any]:
    """Every check's figures over *events* (see ChecksAccumulator); *stats* the parser's
    when the events come from a TraceReader (else taken from it, or none: then an event
    counts as traced unless *traced* says otherwise)."""
    acc = ChecksAccumulator(topo, cpu_map, traced, allowed, allowed_source)
    for ev in events:
        acc.feed(ev)
    return acc.result(stats if stats is not None else getattr(events, "stats", None))


def trace_checks(
    path: Path,
    topo: Topology,
    cpu_map: CpuMap | None = None,
    traced: Traced | None = None,
    allowed: Mapping[str, Iterable[int]] | None = None,
    allowed_source: str = "",
) -> dict[str, Any]:
    """checks() over a run's trace file (a regular file: see parse_file's follow_symlinks)."""
    reader = parse_file(path, only=EVENTS, follow_symlinks=False)
    return checks(reader, topo, cpu_map, traced, allowed, allowed_source, stats=None)


def _dur(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


def _rate(r: float) -> str:
    return f"{r:.0f}" if r >= 100 else f"{r:.3g}"


def _line(key: str, f: Any) -> str:
    name = key.replace("_", " ")
    if not isinstance(f, dict):
        return f"{name}: {f}"
    if "not_measured" in f:
        return f"{name}: {f['not_measured']}"
    if key == "starvation":
        if f.get("pid") is None:
            return f"{name}: no task waited"
        return (f"{name}: {_dur(f['longest_s'])} ({f['comm']}-{f['pid']}, {f['from']}"
                f"{', still waiting at the end' if f.get('open') else ''})")  # fmt: skip
    if key == "work_conservation":
        parts = [
            f"{lv} {f[lv]['share'] * 100:.2g}% ({_dur(f[lv]['idle_while_waiting_s'])})" for lv in WC_LEVELS if isinstance(f.get(lv), dict)
        ]
        assumed = "; masks assumed" if str(f.get("masks", "")).startswith("assumed") else ""
        return f"{name} (idle while others wait): {', '.join(parts)} of {_dur(f.get('observed_cpu_s'))}{assumed}"
    if key == "affinity":
        return f"{name}: {f['violations']} violation(s) of {f.get('allowed_from')}"
    if key == "fairness":
        if not f.get("worst"):
            return f"{name}: no comm with two tasks or more"
        w = f["by_comm"][f["worst"]]
        mm = f"{w['max_over_min']:.3g}" if w["max_over_min"] is not None else "inf"
        return f"{name}: worst {f['worst']}: {w['tasks']} tasks, max/min {mm}, cv {w['cv']:.2g} ({f['groups']} comm(s))"
    if key == "wakeup_latency":
        if not f.get("count"):
            return f"{name}: no wakeup ran"
        return (f"{name}: p50 {_dur(f['p50_s'])}, p90 {_dur(f['p90_s'])}, p99 {_dur(f['p99_s'])}, "
                f"max {_dur(f['max_s'])} ({f['count']} wakeups)")  # fmt: skip
    if key == "migrations":
        rates = ", ".join(f"{lv} {_rate(r)}" for lv, r in f.get("per_s", {}).items() if r)
        return f"migrations/s: {rates or 'none'} ({f['total']} in {_dur(f['span_s'])}{', filtered' if f.get('filtered') else ''})"
    return f"{name}: {f}"


def format_checks(per_phase: Mapping[str, Any]) -> list[str]:
    """results.json's ``checks`` as short lines for a terminal or a mail, phase by phase."""
    out: list[str] = []
    for phase, figs in per_phase.items():
        out.append(f"checks ({phase}), figures, not judged:")
        if not isinstance(figs, dict):
            continue
        if "not_measured" in figs:
            out.append(f"  {figs['not_measured']}")
            continue
        out.extend(f"  {_line(name, figs[name])}" for name in CHECKS if name in figs)
    return out


# ---- --check expressions: a figure turned into an expectation ---------------------------------

# name -> (check, {stat: how to read it}, the default stat, the kind of value)
_COLUMNS: dict[str, tuple[str, tuple[str, ...], str, str]] = {
    "starvation": ("starvation", ("longest",), "longest", "duration"),
    "work-conservation": ("work_conservation", WC_LEVELS, "llc", "share"),
    "wakeup-latency": ("wakeup_latency", ("p50", "p90", "p99", "max"), "p99", "duration"),
    "affinity": ("affinity", ("violations",), "violations", "count"),
    "fairness": ("fairness", ("cv", "max/min"), "cv", "number"),
    "migrations": ("migrations", ("total", *levels.NAMES), "total", "rate"),
}
_UNITS = {  # unit -> what the number is divided by (so '5us' is 5e-06 exactly, as figures are)
    "duration": {"": 1.0, "s": 1.0, "ms": 1e3, "us": 1e6},
    "share": {"": 1.0, "%": 100.0},
    "count": {"": 1.0},
    "number": {"": 1.0},
    "rate": {"": 1.0, "/s": 1.0},
}
_OPS = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}  # fmt: skip
_TOKEN = re.compile(r"\s*(?:(?P<op><=|>=|==|!=|<|>)|(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<word>[A-Za-z%/][A-Za-z0-9%/_-]*))")


def check_names() -> str:
    """The checks an expression may name, with their stats, for error messages and --help."""
    return "; ".join(
        f"{n} [{'|'.join(stats)}]" if len(stats) > 1 else n for n, (_, stats, _, _) in _COLUMNS.items()
    )


class CheckSyntaxError(ValueError):
    pass


@dataclass(frozen=True)
class CheckExpr:
    """``NAME [STAT] OP VALUE[UNIT]``, e.g. 'starvation < 100ms', 'wakeup-latency p99 < 5ms',
    'work-conservation < 2%', 'migrations node < 10/s', 'affinity == 0', 'fairness cv < 0.3'."""

    text: str
    name: str
    stat: str
    op: str
    value: float

    @property
    def check(self) -> str:
        return _COLUMNS[self.name][0]

    def needs(self) -> tuple[str, ...]:
        return NEEDS[self.check] or PLACEMENT_EVENTS[:1]

    def figure(self, figs: Mapping[str, Any]) -> tuple[float | None, str]:
        """This expression's figure in one phase's checks, or None and why not."""
        f = figs.get(self.check) if isinstance(figs, Mapping) else None
        if not isinstance(f, Mapping):
            return None, str((figs or {}).get("not_measured", "not measured")) if isinstance(figs, Mapping) else "not measured"
        if "not_measured" in f:
            return None, str(f["not_measured"])
        v: Any
        if self.check == "starvation":
            v = f.get("longest_s")
        elif self.check == "work_conservation":
            v = (f.get(self.stat) or {}).get("share")
        elif self.check == "wakeup_latency":
            v = f.get(f"{self.stat}_s")
            if v is None:
                return None, "not measured: no wakeup ran"
        elif self.check == "affinity":
            v = f.get("violations")
        elif self.check == "fairness":
            worst = f.get("worst")
            if worst is None:
                return None, "not measured: no comm with two tasks or more"
            v = f["by_comm"][worst]["cv" if self.stat == "cv" else "max_over_min"]
            if v is None:
                v = math.inf
        else:
            span = f.get("span_s") or 0
            if not span:
                return None, "not measured: the trace spans no time"
            v = f.get("total", 0) / span if self.stat == "total" else (f.get("per_s") or {}).get(self.stat)
            if v is None:
                return None, f"not measured: no {self.stat} level on this machine"
        return (float(v), "") if isinstance(v, (int, float)) else (None, "not measured")

    def holds(self, v: float) -> bool:
        return bool(_OPS[self.op](v, self.value))


def parse_check(text: str) -> CheckExpr:
    """One --check expression; a CheckSyntaxError names the column (1-based) and what is
    wrong, and lists the checks that exist."""

    def err(col: int, what: str) -> CheckSyntaxError:
        shown = text if len(text) <= 80 else text[:77] + "..."
        return CheckSyntaxError(f"--check {shown!r}: column {col}: {what}; the checks: {check_names()}")

    toks: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            col = pos + len(text[pos:]) - len(text[pos:].lstrip()) + 1
            raise err(col, f"cannot read {text[col - 1 : col + 9]!r}")
        kind = m.lastgroup or ""
        toks.append((kind, m.group(kind), m.start(kind) + 1))
        pos = m.end()
    if not toks or toks[0][0] != "word":
        raise err(toks[0][2] if toks else 1, "expected a check's name")
    name = toks[0][1]
    if name not in _COLUMNS:
        raise err(toks[0][2], f"unknown check {name!r}")
    _, stats, default, kind = _COLUMNS[name]
    i, stat = 1, default
    if i < len(toks) and toks[i][0] == "word":
        if toks[i][1] not in stats:
            raise err(toks[i][2], f"{name} has no {toks[i][1]!r} (it has {', '.join(stats)})")
        stat, i = toks[i][1], i + 1
    if i >= len(toks) or toks[i][0] != "op":
        raise err(toks[i][2] if i < len(toks) else len(text) + 1, f"expected one of {' '.join(_OPS)}")
    op, i = toks[i][1], i + 1
    if i >= len(toks) or toks[i][0] != "num":
        raise err(toks[i][2] if i < len(toks) else len(text) + 1, "expected a number")
    number, col, i = toks[i][1], toks[i][2], i + 1
    unit = ""
    if i < len(toks) and toks[i][0] == "word":
        unit, ucol, i = toks[i][1], toks[i][2], i + 1
        if unit not in _UNITS[kind]:
            raise err(ucol, f"{name} takes {' or '.join(u for u in _UNITS[kind] if u) or 'no unit'}, not {unit!r}")
    if i < len(toks):
        raise err(toks[i][2], f"unexpected {toks[i][1]!r} after the value")
    value = float(number) / _UNITS[kind][unit]
    if not math.isfinite(value):
        raise err(col, "the value is not a finite number")
    return CheckExpr(text, name, stat, op, value)


def untraced(expr: CheckExpr, traced: Traced) -> str:
    """Why a run with *traced* cannot measure *expr* ('' when it can), said before booting."""
    if expr.check == "affinity":
        if traced.events is not None and not any(e in traced.events for e in PLACEMENT_EVENTS):
            return f"needs one of {', '.join(PLACEMENT_EVENTS)} traced"
        return ""
    if traced.events is not None:
        missing = [e for e in NEEDS[expr.check] if e not in traced.events]
        if missing:
            return f"needs {', '.join(missing)} traced"
    filt = [e for e in NEEDS[expr.check] if e in traced.filters]
    if filt and expr.check != "migrations" and not (expr.check == "fairness" and switch_comm(traced.filters.get("sched_switch", ""))):
        return f"needs {', '.join(filt)} unfiltered (the scenario filters it: {traced.filters[filt[0]]})"
    return ""
