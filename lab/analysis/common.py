"""Pieces every analysis shares: which tasks to look at, and CPU-number translation."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from .. import levels as lv
from ..topology import Topology

CpuMap = Callable[[int], int]


def identity(cpu: int) -> int:
    return cpu


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks an analysis counts: those whose pid is in *pids* or whose comm
    matches one of *comms* (exact, or a shell glob such as 'kworker/*').

    No pids and no comms means every task.  A comm can change on exec (a shell
    forks, then execs 'stream'); events are matched on the comm they carry.
    """

    pids: frozenset[int] | None = None
    comms: tuple[str, ...] | None = None

    @classmethod
    def of(
        cls, pids: Iterable[int] | None = None, comms: Iterable[str] | str | None = None
    ) -> TaskFilter:
        if isinstance(comms, str):
            comms = (comms,)
        return cls(
            frozenset(pids) if pids is not None else None,
            tuple(comms) if comms is not None else None,
        )

    @property
    def everything(self) -> bool:
        return self.pids is None and self.comms is None

    def __call__(self, pid: int, comm: str) -> bool:
        if self.pids is None and self.comms is None:
            return True
        if self.pids is not None and pid in self.pids:
            return True
        if self.comms is not None:
            for c in self.comms:
                if comm == c or (any(ch in c for ch in "*?[") and fnmatchcase(comm, c)):
                    return True
        return False

    def to_dict(self) -> dict[str, Any]:
        return {
            "pids": sorted(self.pids) if self.pids is not None else None,
            "comms": list(self.comms) if self.comms is not None else None,
        }


ALL_TASKS = TaskFilter()


def as_filter(
    task_filter: TaskFilter | None = None,
    pids: Iterable[int] | None = None,
    comms: Iterable[str] | str | None = None,
) -> TaskFilter:
    """One filter from the keyword arguments the analyses accept."""
    if task_filter is not None:
        if pids is not None or comms is not None:
            raise ValueError("give either task_filter or pids/comms, not both")
        return task_filter
    if pids is None and comms is None:
        return ALL_TASKS
    return TaskFilter.of(pids, comms)


def group_ids(topo: Topology, level: str) -> dict[int, int]:
    """CPU id -> the id of its group at *level*.

    Nodes keep their real ids; other levels are numbered by position in
    ``topo.groups(level)`` (ordered by first CPU), which is stable for a spec.
    """
    if level == "cpu":
        return {c.id: c.id for c in topo.cpus}
    if lv.get(level).real_ids:
        return {c.id: lv.group_key(level, c) for c in topo.cpus}
    out: dict[int, int] = {}
    for i, group in enumerate(topo.groups(level)):
        for cpu in group:
            out[cpu] = i
    return out


def count_by_group(topo: Topology, cpus: Iterable[int], level: str) -> dict[int, int]:
    """How many of *cpus* (repeats count) fall in each group at *level*; every group listed.

    Groups are keyed as in ``group_ids`` (node ids for 'node').
    """
    gid = group_ids(topo, level)
    out = dict.fromkeys(sorted(set(gid.values())), 0)
    for cpu in cpus:
        out[gid[cpu]] += 1
    return out
