"""The topology levels, as one table.

Each level of the model (a group of CPUs a machine nests: a core's SMT threads, a
cluster, an LLC, a NUMA node, a socket, the machine) is one ``Level`` row: the ``Cpu``
attribute holding a CPU's group at that level, the spec's ``[groups]`` key, the words
people and tools use for it (lab's display name, the sched-domain the kernel builds on
it, QEMU's ``-smp`` word, the sysfs sibling files, hwloc's object type) and its place
from small to large.  The model, the parser, the renderers, the expected guest view,
sysfs, the importer, the analysis and the report read this table instead of spelling
each level out, so a new level is a row here plus what is genuinely new about it.

This module imports nothing of lab: every layer may read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Level:
    name: str  # the model's word: Topology.groups(name), Topology.levels
    attr: str | None  # the Cpu attribute numbering a CPU's group here (None: the machine, one group)
    key: str  # the plural: the spec's [groups] key, scenario counts ("llcs_per_socket")
    display: str  # in messages and tables: "LLC"
    plural: str  # "LLCs"
    domain: str  # the sched-domain level the kernel builds on these groups ("" : none of its own)
    smp: Mapping[str, str] = field(default_factory=dict)  # arch -> QEMU -smp word counting these groups
    sysfs: tuple[str, ...] = ()  # topology/ sibling lists naming the group, preferred first
    hwloc: str = ""  # hwloc's / lstopo's object type
    within: str = ""  # a migration inside one such group (and one node): its class in reports
    optional: bool = False  # only on machines that have it (Topology.has_clusters)
    real_ids: bool = False  # groups keep the machine's own ids (nodes) rather than ranks


# Small to large.  Between node and socket the order is the usual one (nodes inside a
# socket); Topology.levels swaps them on a machine whose nodes span sockets.
LEVELS: tuple[Level, ...] = (
    Level("core", "core", "cores", "core", "cores", "SMT", {"x86_64": "cores", "arm64": "cores"},
          ("thread_siblings_list", "core_cpus_list"), "Core", "same core"),
    Level("cluster", "cluster", "clusters", "cluster", "clusters", "CLS", {"x86_64": "modules", "arm64": "clusters"},
          ("cluster_cpus_list",), "Cluster", "same LLC", optional=True),
    Level("llc", "llc", "llcs", "LLC", "LLCs", "MC", {"x86_64": "dies", "arm64": "clusters"}, (), "L3", "same LLC"),
    Level("node", "node", "nodes", "node", "nodes", "NUMA", {}, (), "NUMANode", "same node", real_ids=True),
    Level("socket", "socket", "sockets", "socket", "sockets", "PKG", {"x86_64": "sockets", "arm64": "sockets"},
          ("package_cpus_list", "core_siblings_list"), "Package", "same node"),
    Level("machine", None, "machines", "machine", "machines", "", {}, (), "Machine", "same node"),
)  # fmt: skip

BY_NAME: dict[str, Level] = {lv.name: lv for lv in LEVELS}
BY_KEY: dict[str, Level] = {lv.key: lv for lv in LEVELS}
NAMES: tuple[str, ...] = tuple(lv.name for lv in LEVELS)
# The levels a CPU records a group number for, small to large (Cpu's fields, the spec's groups).
GROUPED: tuple[Level, ...] = tuple(lv for lv in LEVELS if lv.attr is not None)
# QEMU's -smp counts a core's threads too; "threads" is no level of groups of its own.
SMP_THREADS = "threads"
# sysfs sibling lists of groups lab's model has no level for (x86 dies).
SYSFS_EXTRA: dict[str, tuple[str, ...]] = {"die": ("die_cpus_list",)}


def get(name: str) -> Level:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown level {name!r}") from None


def group_key(level: str, cpu: object) -> int:
    """*cpu*'s group number at *level* (0 for the machine)."""
    attr = get(level).attr
    return 0 if attr is None else getattr(cpu, attr)


def smp(arch: str, n_cpus: int, counts: Mapping[str, int], threads: int) -> str:
    """QEMU's -smp value: *n_cpus*, then each level's count in *counts* (level name ->
    count) under the level's -smp word for *arch*, largest level first, then threads."""
    parts = [str(n_cpus)]
    for lv in reversed(LEVELS):
        if lv.name in counts:
            parts.append(f"{lv.smp[arch]}={counts[lv.name]}")
    parts.append(f"{SMP_THREADS}={threads}")
    return ",".join(parts)


def sysfs_lists(kind: str) -> tuple[str, ...]:
    """The sysfs sibling-list files of level *kind* (a level name, or "die"), preferred first."""
    if kind in SYSFS_EXTRA:
        return SYSFS_EXTRA[kind]
    names = get(kind).sysfs
    if not names:
        raise ValueError(f"level {kind!r} has no sysfs sibling list")
    return names
