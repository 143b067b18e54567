"""The one model of a machine's CPU topology.

A frozen ``Topology``: a tuple of ``Cpu`` records, each naming the socket, NUMA node,
LLC, cluster and core it sits in, plus the distance matrix, the CPU vendor and where
the figures came from.  Everything else asks this object: the QEMU renderer, the
expected guest view, the analysis ("which level does this migration cross?") and the
CPU selectors scenarios use.  The levels themselves (their attribute, names and order)
are ``lab.levels.LEVELS``; a spec file is read into this model by ``lab.topology.spec``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

from .. import arch as archs
from .. import cpulist
from .. import levels as lv
from ..errors import UserError

NUMBERINGS = ("linear", "smt-last", "socket-interleaved", "explicit")
VENDORS = (*(v for a in archs.ARCHES.values() for v in a.vendors), "generic")

# Linux's default RECLAIM_DISTANCE (include/linux/topology.h).  AMD family 17h+
# lowers node_reclaim_distance to 32: a8c52a9a4bc1 ("x86/amd_nb: ... 'node_reclaim_distance'")
# no: it is set in arch/x86/kernel/cpu/amd.c by init_amd_zn(), commit
# a55c7454a8c8 ("sched/topology: Improve load balancing on AMD EPYC systems").
RECLAIM_DISTANCE = 30
AMD_ZEN_RECLAIM_DISTANCE = 32


@dataclass(frozen=True)
class Cpu:
    """One logical CPU.

    ``id`` is the CPU number in the spec's (the real machine's) numbering.
    ``index`` is its canonical position: sockets, then nodes, LLCs, clusters,
    cores and threads in order, SMT siblings adjacent.  That is the order in
    which QEMU creates vCPUs, so on x86 the guest's logical CPU number is
    ``index``.  ``socket``, ``llc``, ``cluster`` and ``core`` are machine-wide
    group numbers; ``node`` is the real NUMA node id; ``thread`` is the SMT
    thread number within the core.
    """

    id: int
    index: int
    socket: int
    node: int
    llc: int
    cluster: int
    core: int
    thread: int


@dataclass(frozen=True)
class Shape:
    """Counts of a regular machine (every group the same size)."""

    sockets: int
    nodes_per_socket: int  # >= 1; 1 when a node spans sockets
    sockets_per_node: int  # >= 1; > 1 only when a node spans sockets
    llcs_per_node: int  # when a node spans sockets: LLCs per socket
    clusters_per_llc: int
    cores_per_cluster: int
    threads_per_core: int

    @property
    def nodes(self) -> int:
        return self.sockets * self.nodes_per_socket // self.sockets_per_node

    @property
    def llcs_per_socket(self) -> int:
        if self.sockets_per_node > 1:
            return self.llcs_per_node
        return self.nodes_per_socket * self.llcs_per_node

    @property
    def cores_per_llc(self) -> int:
        return self.clusters_per_llc * self.cores_per_cluster

    @property
    def cores_per_socket(self) -> int:
        return self.llcs_per_socket * self.cores_per_llc

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core


SHAPE_FIELDS = tuple(f.name for f in fields(Shape))  # in declaration order: to_dict and the spec read them


@dataclass(frozen=True)
class Provenance:
    machine: str = ""
    sources: tuple[str, ...] = ()
    notes: str = ""
    derived_from: str = ""


# The cache levels a spec can size ([caches] sizes) and the sysfs leaf each is:
# cache/indexN/level and type.
CACHE_LEAVES = {"L1d": (1, "Data"), "L1i": (1, "Instruction"), "L2": (2, "Unified"), "L3": (3, "Unified")}


@dataclass(frozen=True)
class Topology:
    name: str
    arch: str
    vendor: str
    model: str
    family: int | None
    cpus: tuple[Cpu, ...]  # sorted by index
    node_ids: tuple[int, ...]  # real node ids, in canonical order
    distances: tuple[tuple[int, ...], ...]  # [i][j] for node_ids[i], node_ids[j]
    memory_mb: tuple[int, ...]  # per node, canonical order
    numbering: str
    shape: Shape | None  # None when the machine is irregular (groups form)
    has_clusters: bool
    provenance: Provenance = field(default_factory=Provenance)
    path: str | None = None
    description: str = ""
    gic: int | None = None  # arm64 interrupt controller version (2 or 3); None: lab picks
    # [caches]: what the LLC / cpulist groups do not say.  snc: the L3 is one per socket,
    # shared by the socket's nodes (Intel sub-NUMA clustering); the llc groups are its
    # per-node parts, which is what Linux schedules on (x86 match_llc() never lets an LLC
    # cross a node).  per_thread: cache levels ("L1d", "L2", ...) private to each SMT
    # thread on the real machine (QEMU's models share them between a core's threads).
    snc: bool = False
    per_thread: tuple[str, ...] = ()
    # split_llc: the capture's LLC (its cache lists) spans several nodes, and the spec's
    # llc groups are its per-node parts (what x86 Linux schedules on; QEMU puts a die in
    # one node): a named deviation of the cache lists, not of the scheduler's view.
    split_llc: bool = False
    # [cpu] capacity: each CPU's capacity-dmips-mhz (arm64 device tree), sorted by CPU
    # id; empty when every CPU is alike.  Heterogeneous machines (big.LITTLE, DynamIQ)
    # differ here: the kernel builds SD_ASYM_CPUCAPACITY from it.
    dmips_mhz: tuple[tuple[int, int], ...] = ()
    # [caches] sizes: each cache level's size in KiB per CPU, for the levels the spec
    # gives ("L1d", "L1i", "L2", "L3"; arm64 only, through the device tree).  A DynamIQ
    # phone's core types have L1s and L2s of their own sizes; sockets may differ in L3.
    cache_kb: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()

    @cached_property
    def capacities(self) -> dict[int, int]:
        """CPU id -> the cpu_capacity Linux derives (arch_topology.c
        topology_normalize_cpu_scale(): dmips * 1024 / the largest, no cpufreq clocks);
        empty on a machine whose CPUs are alike."""
        if not self.dmips_mhz:
            return {}
        top = max(v for _, v in self.dmips_mhz)
        return {c: (v << 10) // top for c, v in self.dmips_mhz}

    @property
    def uneven_cache_sizes(self) -> list[str]:
        """The levels whose [caches] sizes differ between CPUs (a per-CPU table no machine
        with other CPUs can keep)."""
        return [n for n, per in self.cache_kb if len({kb for _, kb in per}) > 1]

    def cache_size_kb(self, name: str, cpu: int) -> int | None:
        """The size in KiB the spec gives CPU *cpu*'s cache *name* ("L2"), else None."""
        for n, per_cpu in self.cache_kb:
            if n == name:
                return dict(per_cpu).get(cpu)
        return None

    @property
    def asymmetric(self) -> bool:
        return len(set(self.capacities.values())) > 1

    # ---- sizes -------------------------------------------------------------------
    @property
    def n_cpus(self) -> int:
        return len(self.cpus)

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)

    @cached_property
    def threads_per_core(self) -> int:
        return max(c.thread for c in self.cpus) + 1

    @property
    def smt(self) -> bool:
        return self.threads_per_core > 1

    @cached_property
    def cpu_ids(self) -> tuple[int, ...]:
        return tuple(sorted(c.id for c in self.cpus))

    @cached_property
    def _by_id(self) -> dict[int, Cpu]:
        return {c.id: c for c in self.cpus}

    def cpu(self, cpu_id: int) -> Cpu:
        try:
            return self._by_id[cpu_id]
        except KeyError:
            raise UserError(f"{self.name}: no CPU {cpu_id} (CPUs are {cpulist.format(self.cpu_ids)})") from None

    def by_index(self, index: int) -> Cpu:
        return self.cpus[index]

    # ---- vendor behaviour ------------------------------------------------------------
    @property
    def node_reclaim_distance(self) -> int:
        """What the real machine's kernel uses: AMD family 17h+ sets 32, others 30."""
        if self.vendor == "amd" and (self.family or 0) >= 0x17:
            return AMD_ZEN_RECLAIM_DISTANCE
        return RECLAIM_DISTANCE

    # ---- groups ------------------------------------------------------------------
    @property
    def levels(self) -> tuple[str, ...]:
        """Grouping levels from small to large, as they nest on this machine (LEVELS'
        order, optional levels the machine lacks left out, node and socket swapped when
        a node spans sockets)."""
        out = [x.name for x in lv.LEVELS if not x.optional or self._has(x)]
        if self.shape is not None and self.shape.sockets_per_node > 1:
            i, j = out.index("node"), out.index("socket")
            out[i], out[j] = out[j], out[i]
        return tuple(out)

    def _has(self, level: lv.Level) -> bool:
        """Whether the machine has the optional *level* (clusters)."""
        return getattr(self, f"has_{level.key}")

    def _key(self, level: str, c: Cpu) -> int:
        return lv.group_key(level, c)

    @cached_property
    def _groups(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        out = {}
        for level in lv.NAMES:
            g: dict[int, list[int]] = {}
            for c in self.cpus:
                g.setdefault(self._key(level, c), []).append(c.id)
            out[level] = tuple(sorted((tuple(sorted(v)) for v in g.values()), key=lambda t: t[0]))
        return out

    def groups(self, level: str) -> tuple[tuple[int, ...], ...]:
        """All groups at *level* (a name of lab.levels.LEVELS), as sorted CPU ids."""
        return self._groups[level]

    def group_of(self, level: str, cpu_id: int) -> tuple[int, ...]:
        key = self._key(level, self.cpu(cpu_id))
        return tuple(sorted(c.id for c in self.cpus if self._key(level, c) == key))

    def common_level(self, a: int, b: int) -> str:
        """The smallest level that holds both CPUs ('cpu' when a == b).

        With clusters: cpu < core < cluster < llc < node < socket < machine
        (socket and node swap when a node spans sockets).  'machine' means
        the CPUs are on different sockets (and different nodes).
        """
        if a == b:
            return "cpu"
        ca, cb = self.cpu(a), self.cpu(b)
        for level in self.levels:
            if self._key(level, ca) == self._key(level, cb):
                return level
        return "machine"

    def node_cpus(self, node: int) -> tuple[int, ...]:
        """CPU ids of the node with real id *node*."""
        if node not in self.node_ids:
            raise UserError(f"{self.name}: no node {node} (nodes are {list(self.node_ids)})")
        return tuple(sorted(c.id for c in self.cpus if c.node == node))

    def node_of(self, cpu_id: int) -> int:
        return self.cpu(cpu_id).node

    def distance(self, node_a: int, node_b: int) -> int:
        i, j = self.node_ids.index(node_a), self.node_ids.index(node_b)
        return self.distances[i][j]

    @cached_property
    def node_sockets(self) -> dict[int, tuple[int, ...]]:
        out: dict[int, set[int]] = {}
        for c in self.cpus:
            out.setdefault(c.node, set()).add(c.socket)
        return {n: tuple(sorted(s)) for n, s in out.items()}

    def summary(self) -> str:
        s = self.shape
        if s is None:
            return (
                f"{self.n_cpus} CPUs, {len(self.groups('socket'))} sockets, {self.n_nodes} nodes, "
                f"{len(self.groups('llc'))} LLCs (irregular)"
            )
        parts = [f"{s.sockets} sockets"]
        if s.sockets_per_node > 1:
            parts.append(f"{s.sockets_per_node} sockets per node")
        else:
            parts.append(f"{s.nodes_per_socket} node{'s' if s.nodes_per_socket > 1 else ''}/socket")
        parts.append(f"{s.llcs_per_node} LLC{'s' if s.llcs_per_node > 1 else ''}/node")
        if self.has_clusters:
            parts.append(f"{s.clusters_per_llc} clusters/LLC")
            parts.append(f"{s.cores_per_cluster} cores/cluster")
        else:
            parts.append(f"{s.cores_per_llc} cores/LLC")
        parts.append(f"{s.threads_per_core} thread{'s' if s.threads_per_core > 1 else ''}/core")
        return f"{self.n_cpus} CPUs: " + " x ".join(parts) + f", {self.numbering} numbering"

    def to_dict(self) -> dict[str, Any]:
        """The model as plain data (for `lab topo render --format json`)."""
        d: dict[str, Any] = {
            "name": self.name,
            "arch": self.arch,
            "cpu": {"vendor": self.vendor, "model": self.model, "family": self.family},
            "summary": self.summary(),
            "numbering": self.numbering,
            "n_cpus": self.n_cpus,
            "node_reclaim_distance": self.node_reclaim_distance,
        }
        if self.shape is not None:
            d["shape"] = {k: getattr(self.shape, k) for k in SHAPE_FIELDS}
        d["nodes"] = [
            {
                "id": n,
                "cpus": cpulist.format(self.node_cpus(n)),
                "memory_mb": self.memory_mb[i],
                "distances": list(self.distances[i]),
            }
            for i, n in enumerate(self.node_ids)
        ]
        d["groups"] = {
            x.name: [cpulist.format(g) for g in self.groups(x.name)]
            for x in reversed(lv.GROUPED)
            if not x.real_ids  # nodes: d["nodes"] above, by their own ids and (not x.optional or self._has(x))
        }
        d["cpus"] = [
            {"id": c.id, "index": c.index, **{x.name: lv.group_key(x.name, c) for x in reversed(lv.GROUPED)}, "thread": c.thread}
            for c in self.cpus
        ]
        d["caches"] = {"snc": self.snc, "per_thread": list(self.per_thread)}
        if self.cache_kb:
            d["caches"]["size_kb"] = {n: {str(c): kb for c, kb in per_cpu} for n, per_cpu in self.cache_kb}
        if self.capacities:
            d["capacity"] = {"dmips_mhz": dict(self.dmips_mhz), "cpu_capacity": self.capacities}
        d["provenance"] = {
            "machine": self.provenance.machine,
            "sources": list(self.provenance.sources),
            "notes": self.provenance.notes,
            "derived_from": self.provenance.derived_from,
        }
        return d


def irregularities(topo: Topology) -> list[str]:
    """Why *topo* has no regular shape, level by level: each level whose groups hold
    different numbers of the level below, with two groups that differ (empty when the
    machine is regular).  What QEMU's -smp cannot build: it gives every socket, die,
    cluster and core the same count."""
    if topo.shape is not None:
        return []
    cpus = topo.cpus
    inner = "cluster" if topo.has_clusters else "LLC"
    levels: list[tuple[str, str, Any, Any]] = [
        ("nodes", "socket", lambda c: c.socket, lambda c: c.node),
        ("sockets", "node", lambda c: c.node, lambda c: c.socket),
        ("LLCs", "node", lambda c: (c.node, c.socket), lambda c: c.llc),
        ("clusters", "LLC", lambda c: c.llc, lambda c: c.cluster),
        ("cores", inner, lambda c: c.cluster, lambda c: c.core),
        ("threads", "core", lambda c: c.core, lambda c: c.thread),
    ]
    if not topo.has_clusters:
        del levels[3]
    out = []
    for child, parent, pkey, ckey in levels:
        members: dict[Any, set] = {}
        cpus_of: dict[Any, list[int]] = {}
        for c in cpus:
            members.setdefault(pkey(c), set()).add(ckey(c))
            cpus_of.setdefault(pkey(c), []).append(c.id)
        by_count: dict[int, list[Any]] = {}
        for k, v in members.items():
            by_count.setdefault(len(v), []).append(k)
        if len(by_count) < 2:
            continue
        (n1, g1), (n2, g2) = sorted(by_count.items(), key=lambda kv: (-len(kv[1]), -kv[0]))[:2]
        a, b = (min(g1, key=lambda k: min(cpus_of[k])), min(g2, key=lambda k: min(cpus_of[k])))
        tally = ", ".join(f"{len(g)} with {n}" for n, g in sorted(by_count.items(), key=lambda kv: -kv[0]))
        out.append(
            f"{child} per {parent} differ: the {parent} of CPUs {cpulist.format(cpus_of[a])} has {n1}, the {parent} "
            f"of CPUs {cpulist.format(cpus_of[b])} {n2} ({len(members)} {parent}s: {tally})"
        )
    if not out:
        out.append("the groups do not nest as sockets > nodes > LLCs > cores > threads alike")
    return out


# ---- convenience ---------------------------------------------------------------------------


def parse_cpus(text: str) -> list[int]:
    """Parse a cpulist for the CLI; raises UserError."""
    try:
        return cpulist.parse(text)
    except ValueError as e:
        raise UserError(str(e)) from None


def fmt(cpus: Iterable[int]) -> str:
    return cpulist.format(cpus)
