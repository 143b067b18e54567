"""Placement facts from trace events, classified against a Topology.

All entry points are pure functions over an iterable of ``lab.trace`` events
(one pass); CPU numbers go through the optional *cpu_map* (guest -> spec
numbering) before anything is looked up.  Results are dataclasses with
``to_dict()`` for results.json.
"""

from .common import ALL_TASKS, CpuMap, TaskFilter, count_by_group, group_ids
from .numa import NumaAccumulator, NumaBalancing, numa_balancing
from .placement import (
    Interval,
    Migration,
    MigrationAccumulator,
    Migrations,
    MigrationTable,
    PathAccumulator,
    Residency,
    ResidencyAccumulator,
    TaskPath,
    TaskResidency,
    Wakeup,
    WakeupAccumulator,
    WakeupTargets,
    migration_table,
    migrations,
    residency,
    run_all,
    task_paths,
    wakeup_targets,
)
from .procfs import (
    NUMA_VMSTAT_KEYS,
    ProcFormatError,
    Schedstat,
    parse_schedstat,
    parse_vmstat,
    schedstat_delta,
    vmstat_delta,
)

__all__ = [
    "ALL_TASKS",
    "NUMA_VMSTAT_KEYS",
    "CpuMap",
    "Interval",
    "Migration",
    "MigrationAccumulator",
    "MigrationTable",
    "Migrations",
    "NumaAccumulator",
    "NumaBalancing",
    "PathAccumulator",
    "ProcFormatError",
    "Residency",
    "ResidencyAccumulator",
    "Schedstat",
    "TaskFilter",
    "TaskPath",
    "TaskResidency",
    "Wakeup",
    "WakeupAccumulator",
    "WakeupTargets",
    "count_by_group",
    "group_ids",
    "migration_table",
    "migrations",
    "numa_balancing",
    "parse_schedstat",
    "parse_vmstat",
    "residency",
    "run_all",
    "schedstat_delta",
    "task_paths",
    "vmstat_delta",
    "wakeup_targets",
]
