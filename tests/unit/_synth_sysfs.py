"""Synthetic sysfs captures for tests: a machine described by its levels and a numbering,
written as the files Linux shows (lists, masks or both, files left out on purpose).

A machine is a list of CPUs in canonical order (socket, node, LLC, cluster, core,
thread), each with the real CPU id the numbering gives it.  ``files()`` derives every
sysfs file the way the kernel does, so a test can check that an import keeps exactly
the groups it was given.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from lab.cpulist import format as fmt_list

FORMS = ("list", "mask", "both")
# Kinds of file that come as a list, a mask or both (one choice per kind).
KINDS = ("node", "thread", "package", "cluster", "cache")


@dataclass(frozen=True)
class SynthCpu:
    id: int
    socket: int  # 0..S-1 in canonical order
    node: int  # the real node id
    llc: int  # machine-wide LLC number (the scheduler's: split at nodes)
    l3: int  # the L3 the cache files show (the socket's on SNC)
    cluster: int  # machine-wide
    core: int  # machine-wide
    thread: int
    core_id: int  # what topology/core_id says (per package, may be sparse)
    package_id: int  # what physical_package_id says


@dataclass
class Machine:
    cpus: list[SynthCpu]
    node_ids: list[int]  # in canonical order
    distances: list[list[int]]
    vendor: str = "GenuineIntel"
    family: int = 6
    model_name: str = "Synthetic CPU"
    clusters: bool = False  # cluster_cpus files differ from the core's
    snc: bool = False
    offline: list[int] = field(default_factory=list)  # ids that exist but are offline

    @property
    def ids(self) -> list[int]:
        return [c.id for c in self.cpus]


def build(
    sockets: int = 1,
    nodes_per_socket: int = 1,
    llcs_per_node: int = 1,
    clusters_per_llc: int = 1,
    cores_per_cluster: int = 2,
    threads: int = 1,
    numbering: str | list[int] = "linear",
    node_ids: list[int] | None = None,
    snc: bool = False,
    distances: list[list[int]] | None = None,
    core_id_stride: int = 1,
    package_ids: list[int] | None = None,
    seed: int = 0,
) -> Machine:
    """A regular machine.  *numbering*: 'linear' (siblings adjacent), 'smt-last' (siblings
    after all first threads), 'socket-interleaved' (socket s's cores are s, s+S, ...,
    siblings last), 'node-interleaved' (cores dealt round-robin over every node, siblings
    last), 'random' (any permutation, from *seed*), or the ids in canonical order."""
    S, N, L, CL, C, T = sockets, nodes_per_socket, llcs_per_node, clusters_per_llc, cores_per_cluster, threads
    nodes = S * N
    node_ids = node_ids if node_ids is not None else list(range(nodes))
    package_ids = package_ids if package_ids is not None else list(range(S))
    assert len(node_ids) == nodes and len(set(node_ids)) == nodes
    ncores = S * N * L * CL * C
    n = ncores * T
    ids = _numbering(numbering, S, N, L * CL * C, T, seed)
    assert sorted(ids) == sorted(set(ids)) and len(ids) == n
    cpus = []
    i = 0
    for s in range(S):
        for nl in range(N):
            node_i = s * N + nl
            for ll in range(L):
                llc = node_i * L + ll
                for cl in range(CL):
                    cluster = llc * CL + cl
                    for co in range(C):
                        core = cluster * C + co
                        local = core - s * (N * L * CL * C)  # core number within the socket
                        for t in range(T):
                            cpus.append(
                                SynthCpu(
                                    ids[i], s, node_ids[node_i], llc, s if snc else llc, cluster, core, t,
                                    local * core_id_stride, package_ids[s],
                                )
                            )
                            i += 1
    if distances is None:
        distances = [
            [10 if a == b else (12 if a // N == b // N else 21) for b in range(nodes)] for a in range(nodes)
        ]
    return Machine(cpus, node_ids, distances, clusters=CL > 1, snc=snc)


def _numbering(style: str | list[int], S: int, N: int, cores_per_node: int, T: int, seed: int) -> list[int]:
    ncores = S * N * cores_per_node
    n = ncores * T
    if isinstance(style, list):
        return list(style)
    if style == "linear":
        return list(range(n))
    first: list[int]  # the id of each core's first thread, cores in canonical order
    if style == "smt-last":
        first = list(range(ncores))
    elif style == "socket-interleaved":
        cps = N * cores_per_node
        first = [(k % cps) * S + k // cps for k in range(ncores)]
    elif style == "node-interleaved":
        # The k-th core of node j gets id k*nodes + (j's position when nodes are dealt
        # socket-interleaved): 2 sockets x 2 nodes gives node 0 = 0,4,8..; node 1 = 2,6,..;
        # node 2 = 1,5,..; node 3 = 3,7,.. (even/odd sockets, nodes interleaved inside).
        nodes = S * N
        first = []
        for k in range(ncores):
            j, m = divmod(k, cores_per_node)
            s, nl = divmod(j, N)
            first.append(m * nodes + nl * S + s)
    elif style == "random":
        out = list(range(n))
        random.Random(seed).shuffle(out)
        return out
    else:
        raise ValueError(style)
    return [first[k] + t * ncores for k in range(ncores) for t in range(T)]


def fmt_mask(cpus, nbits: int) -> str:
    """The kernel's %*pb: 32-bit hex words, most significant first, the first one only as
    wide as nbits needs."""
    v = 0
    for c in cpus:
        v |= 1 << c
    nwords = (nbits + 31) // 32
    words = [(v >> (32 * i)) & 0xFFFFFFFF for i in range(nwords)][::-1]
    first_digits = (nbits - 32 * (nwords - 1) + 3) // 4
    return ",".join([f"{words[0]:0{first_digits}x}", *(f"{w:08x}" for w in words[1:])])


def files(
    m: Machine,
    forms: dict[str, str] | str = "list",
    *,
    no_node_dir: bool = False,
    no_distances: bool = False,
    with_ids: bool = True,
) -> dict[str, str]:
    """{path: content} as `lab topo capture` (or an older tool) would have written."""
    if isinstance(forms, str):
        forms = dict.fromkeys(KINDS, forms)
    online = [c for c in m.cpus if c.id not in m.offline]
    ids_online = {c.id for c in online}
    nbits = max(c.id for c in m.cpus) + 1

    def put(f: dict[str, str], base: str, list_name: str, mask_name: str, kind: str, cpus) -> None:
        cpus = sorted(x for x in cpus if x in ids_online)
        form = forms.get(kind, "list")
        if form in ("list", "both"):
            f[f"{base}/{list_name}"] = fmt_list(cpus) + "\n"
        if form in ("mask", "both"):
            f[f"{base}/{mask_name}"] = fmt_mask(cpus, nbits) + "\n"

    def group(key) -> dict[int, list[int]]:
        out: dict[object, list[int]] = {}
        for c in m.cpus:
            out.setdefault(key(c), []).append(c.id)
        return {c.id: out[key(c)] for c in m.cpus}

    core_g = group(lambda c: c.core)
    pkg_g = group(lambda c: c.socket)
    cl_g = group(lambda c: c.cluster) if m.clusters else core_g
    l3_g = group(lambda c: c.l3)
    f: dict[str, str] = {}
    base = "sys/devices/system/cpu"
    for c in m.cpus:
        f[f"{base}/cpu{c.id}/online"] = "0\n" if c.id in m.offline else "1\n"
        if c.id in m.offline:
            continue  # an offline CPU has no topology or cache directory
        t = f"{base}/cpu{c.id}/topology"
        if with_ids:
            f[f"{t}/physical_package_id"] = f"{c.package_id}\n"
            f[f"{t}/core_id"] = f"{c.core_id}\n"
            f[f"{t}/die_id"] = "0\n"
        put(f, t, "thread_siblings_list", "thread_siblings", "thread", core_g[c.id])
        put(f, t, "core_siblings_list", "core_siblings", "package", pkg_g[c.id])
        put(f, t, "cluster_cpus_list", "cluster_cpus", "cluster", cl_g[c.id])
        for i, (level, typ, g) in enumerate(
            ((1, "Data", core_g), (1, "Instruction", core_g), (2, "Unified", cl_g), (3, "Unified", l3_g))
        ):
            d = f"{base}/cpu{c.id}/cache/index{i}"
            f[f"{d}/level"] = f"{level}\n"
            f[f"{d}/type"] = f"{typ}\n"
            put(f, d, "shared_cpu_list", "shared_cpu_map", "cache", g[c.id])
    f[f"{base}/online"] = fmt_list(ids_online) + "\n"
    if not no_node_dir:
        for i, n in enumerate(m.node_ids):
            put(f, f"sys/devices/system/node/node{n}", "cpulist", "cpumap", "node", [c.id for c in m.cpus if c.node == n])
            if not no_distances:
                # A row lists the distances to every node in node id order.
                row = [m.distances[i][m.node_ids.index(o)] for o in sorted(m.node_ids)]
                f[f"sys/devices/system/node/node{n}/distance"] = " ".join(map(str, row)) + "\n"
    if m.vendor == "ARM":
        f["proc/cpuinfo"] = "".join(
            f"processor\t: {c.id}\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd08\n\n"
            for c in sorted(online, key=lambda c: c.id)
        )
        return f
    f["proc/cpuinfo"] = "".join(
        f"processor\t: {c.id}\nvendor_id\t: {m.vendor}\ncpu family\t: {m.family}\nmodel\t\t: 1\n"
        f"model name\t: {m.model_name}\nphysical id\t: {c.package_id}\ncore id\t\t: {c.core_id}\n\n"
        for c in sorted(online, key=lambda c: c.id)
    )
    return f


def write(f: dict[str, str], root: Path) -> Path:
    for rel, text in f.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def hwloc_xml(m: Machine) -> str:
    """The machine as `lstopo --of xml` (hwloc 2.x) writes it: Package > [Group per node] >
    NUMANode + L3Cache > L2Cache > L1Cache > Core > PU, and a distances2 matrix."""

    def cs(ids) -> str:
        v = 0
        for c in ids:
            v |= 1 << c
        words = []
        while True:
            words.append(f"0x{v & 0xFFFFFFFF:08x}")
            v >>= 32
            if not v:
                break
        return ",".join(reversed(words))

    def obj(typ: str, cpus, inner: str, extra: str = "") -> str:
        return f'<object type="{typ}" cpuset="{cs(cpus)}"{extra}>{inner}</object>\n'

    def by(key, cpus):
        out: dict[object, list[SynthCpu]] = {}
        for c in cpus:
            out.setdefault(key(c), []).append(c)
        return list(out.values())

    def ids(cs_):
        return [c.id for c in cs_]

    pk = []
    multi = len({c.node for c in m.cpus}) > len({c.socket for c in m.cpus})
    for sock in by(lambda c: c.socket, m.cpus):
        nodes_xml = ""
        for node in by(lambda c: c.node, sock):
            l3s = ""
            for l3 in by(lambda c: c.l3, node):
                l2s = ""
                for l2 in by(lambda c: c.cluster if m.clusters else c.core, l3):
                    cores = ""
                    for core in by(lambda c: c.core, l2):
                        pus = "".join(f'<object type="PU" os_index="{c.id}" cpuset="{cs([c.id])}"/>\n' for c in core)
                        core_xml = obj("Core", ids(core), pus, f' os_index="{core[0].core_id}"')
                        cores += obj("L1Cache", ids(core), core_xml, ' cache_type="1" depth="1"')
                    l2s += obj("L2Cache", ids(l2), cores, ' cache_type="0" depth="2"')
                l3s += obj("L3Cache", ids(l3), l2s, ' cache_type="0" depth="3"')
            numa = f'<object type="NUMANode" os_index="{node[0].node}" cpuset="{cs(ids(node))}" local_memory="1073741824"/>\n'
            nodes_xml += obj("Group", ids(node), numa + l3s) if multi else numa + l3s
        info = (
            f'<info name="CPUVendor" value="{m.vendor}"/><info name="CPUFamilyNumber" value="{m.family}"/>'
            f'<info name="CPUModel" value="{m.model_name}"/>\n'
        )
        pk.append(obj("Package", ids(sock), info + nodes_xml, f' os_index="{sock[0].package_id}"'))
    order = sorted(m.node_ids)
    vals = " ".join(str(m.distances[m.node_ids.index(a)][m.node_ids.index(b)]) for a in order for b in order)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology version="2.0">\n'
        + obj("Machine", m.ids, '<info name="Architecture" value="x86_64"/>\n' + "".join(pk), ' os_index="0"')
        + f'<distances2 type="NUMANode" nbobjs="{len(order)}" kind="5" indexing="os">\n'
        f'<indexes length="{len(order)}">{" ".join(map(str, order))}</indexes>\n'
        f'<u64values length="{len(order) ** 2}">{vals}</u64values>\n</distances2>\n</topology>\n'
    )
