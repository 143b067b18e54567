"""NUMA balancing activity from sched_move_numa / sched_swap_numa / sched_stick_numa.

Seed 001 compares these counts before and after a patch set; a task that
keeps being moved or swapped has not converged on a node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..topology import Topology
from ..trace.events import Event, SchedMoveNuma, SchedStickNuma, SchedSwapNuma
from .common import CpuMap, TaskFilter, as_filter, identity
from .placement import run_all

KINDS = ("move", "swap", "stick")


@dataclass
class NumaBalancing:
    totals: Counter[str] = field(default_factory=Counter)  # 'move', 'swap', 'stick'
    # stick events with no destination CPU (dst_cpu = -1): no better node was found
    stick_no_dst: int = 0
    per_task: dict[int, Counter[str]] = field(default_factory=dict)  # src pid -> kind -> n
    per_tgid: dict[int, Counter[str]] = field(default_factory=dict)  # src tgid -> kind -> n
    # Tasks pulled in by a swap as the other side: pid -> times.
    swap_partners: Counter[int] = field(default_factory=Counter)
    node_pairs: Counter[tuple[int, int]] = field(default_factory=Counter)  # moves+swaps
    first_ts: float | None = None
    last_ts: float | None = None

    @property
    def total(self) -> int:
        return sum(self.totals.values())

    def count(self, kind: str) -> int:
        return self.totals.get(kind, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sched_move_numa": self.count("move"),
            "sched_swap_numa": self.count("swap"),
            "sched_stick_numa": self.count("stick"),
            "stick_no_dst": self.stick_no_dst,
            "total": self.total,
            "per_task": {
                str(p): {k: c[k] for k in KINDS if c.get(k)}
                for p, c in sorted(self.per_task.items())
            },
            "per_tgid": {
                str(p): {k: c[k] for k in KINDS if c.get(k)}
                for p, c in sorted(self.per_tgid.items())
            },
            "swap_partners": {str(p): n for p, n in sorted(self.swap_partners.items())},
            "node_pairs": [
                {"src": a, "dst": b, "count": n} for (a, b), n in sorted(self.node_pairs.items())
            ],
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
        }


class NumaAccumulator:
    """Counts NUMA balancing events of the selected tasks.

    A task is selected by its pid (src_pid), its tgid, or the comm of the
    current task on the event's line: task_numa_migrate() runs in the task's
    own context, so that comm is the task's.  With *topo*, nodes come from
    the (mapped) CPUs; without, from the events' src_nid/dst_nid.
    """

    def __init__(
        self,
        topo: Topology | None = None,
        task_filter: TaskFilter | None = None,
        *,
        pids: Iterable[int] | None = None,
        comms: Iterable[str] | str | None = None,
        cpu_map: CpuMap | None = None,
    ):
        self.topo = topo
        self.want = as_filter(task_filter, pids, comms)
        self.cpu_map = cpu_map or identity
        self.r = NumaBalancing()

    def _node(self, cpu: int, nid: int) -> int:
        if cpu < 0:
            return -1
        if self.topo is None:
            return nid
        return self.topo.node_of(self.cpu_map(cpu))

    def _selected(self, pid: int, tgid: int, comm: str) -> bool:
        w = self.want
        if w.everything:
            return True
        return w(pid, comm) or (w.pids is not None and tgid in w.pids)

    def feed(self, ev: Event) -> None:
        r = self.r
        dst_pid = 0
        if isinstance(ev, SchedMoveNuma):
            kind, pid, tgid = "move", ev.task_pid, ev.task_tgid
        elif isinstance(ev, (SchedSwapNuma, SchedStickNuma)):
            kind = "swap" if isinstance(ev, SchedSwapNuma) else "stick"
            pid, tgid, dst_pid = ev.src_pid, ev.src_tgid, ev.dst_pid
        else:
            return
        pair = (self._node(ev.src_cpu, ev.src_nid), self._node(ev.dst_cpu, ev.dst_nid))
        if not self._selected(pid, tgid, ev.comm):
            return
        r.totals[kind] += 1
        r.per_task.setdefault(pid, Counter())[kind] += 1
        r.per_tgid.setdefault(tgid, Counter())[kind] += 1
        if kind == "stick":
            if ev.dst_cpu < 0:
                r.stick_no_dst += 1
        else:
            r.node_pairs[pair] += 1
        if kind == "swap" and dst_pid:
            r.swap_partners[dst_pid] += 1
        if r.first_ts is None:
            r.first_ts = ev.ts
        r.last_ts = ev.ts

    def result(self) -> NumaBalancing:
        return self.r


def numa_balancing(
    events: Iterable[Event],
    topo: Topology | None = None,
    task_filter: TaskFilter | None = None,
    *,
    pids: Iterable[int] | None = None,
    comms: Iterable[str] | str | None = None,
    cpu_map: CpuMap | None = None,
) -> NumaBalancing:
    """sched_move_numa / swap / stick counts, in total and per task."""
    acc = NumaAccumulator(topo, task_filter, pids=pids, comms=comms, cpu_map=cpu_map)
    return run_all(events, acc)[0]
