"""Any numbering on any layout (issue 34, item 2): a generated machine, written as a sysfs
capture, imported and rendered, puts every CPU on its node, socket, LLC and core in QEMU.

QEMU's ids (socket-id, die-id, cluster-id, core-id, thread-id) are positions inside the
parent; the spec's group numbers are ranks by lowest CPU id.  They differ as soon as the
numbering is not linear (even/odd sockets, nodes interleaved), and the renderer once used
the latter: `-numa cpu,node-id=0,socket-id=0,core-id=20: no match found`.

Two checks of the same property: one simulates how QEMU numbers vCPUs and matches
`-numa cpu` (many machines, pure Python), one asks a real QEMU, stopped before its first
instruction, over QMP (a few machines, marked `qmp`)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lab import host, hwloc, importer, sysfs, topology
from lab.render import qemu

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _qmp_readback as qmp  # noqa: E402
import _synth_sysfs as ss  # noqa: E402

HOST = host.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")
STYLES = ("linear", "smt-last", "socket-interleaved", "node-interleaved", "random")
# How many generated machines each property ran (the closing note reports them).
RAN: dict[str, int] = {"simulated": 0, "qmp": 0}


def import_dir(root: Path) -> topology.Topology:
    text, _ = importer.view_to_spec(sysfs.read_capture(root), "gen", str(root))
    return topology.loads(text, default_name="gen")


# ---- what QEMU does with -smp and -numa cpu (hw/core/machine.c, hw/i386/x86.c, hw/arm/virt.c)


def simulated_props(p) -> list[dict[str, int]]:
    """Each vCPU's props in QEMU's order, and its node from the -numa cpu arguments, the way
    QEMU matches them: every given prop must equal the vCPU's; a -numa cpu that matches no
    vCPU is QEMU's 'no match found'."""
    smp = dict(kv.split("=") for kv in p.smp.split(",")[1:])
    counts = {k: int(v) for k, v in smp.items()}
    n = int(p.smp.split(",")[0])
    if p.arch == "x86_64":
        order = [("thread-id", counts["threads"]), ("core-id", counts["cores"]), ("die-id", counts.get("dies", 1)), ("socket-id", counts["sockets"])]
    else:
        order = [("thread-id", counts["threads"]), ("core-id", counts["cores"]), ("cluster-id", counts.get("clusters", 1)), ("socket-id", counts["sockets"])]
    props = []
    for i in range(n):
        d, rest = {}, i
        for name, k in order:
            d[name] = rest % k
            rest //= k
        assert rest == 0, "the -smp counts do not multiply to the CPU count"
        props.append(d)
    for arg in p.numa_cpu_args:
        want = dict(kv.split("=") for kv in arg.split(",")[1:])
        node = int(want.pop("node-id"))
        hits = [d for d in props if all(d.get(k) == int(v) for k, v in want.items())]
        assert hits, f"-numa {arg}: no match found (QEMU refuses the argv)"
        for d in hits:
            assert "node-id" not in d, f"-numa {arg}: vCPU {d} already in node {d['node-id']}"
            d["node-id"] = node
    return props


def check_mapping(t: topology.Topology, p, props: list[dict[str, int]], truth: ss.Machine | None = None) -> None:
    """vCPU i is the spec's CPU t.cpus[i]: its node, and the socket, LLC and core QEMU gives
    it, must be the machine's (*truth*, the generator's, when given; else the spec's)."""
    assert len(props) == t.n_cpus
    guest_node = {n: i for i, n in enumerate(t.node_ids)}
    ids = [c.id for c in t.cpus]
    for i, c in enumerate(t.cpus):
        assert props[i].get("node-id") == guest_node[c.node], f"CPU {c.id} (vCPU {i}): node {props[i].get('node-id')}"

    def partition(key) -> set[frozenset[int]]:
        g: dict[object, set[int]] = {}
        for i, d in enumerate(props):
            g.setdefault(key(d), set()).add(ids[i])
        return {frozenset(x) for x in g.values()}

    def want(level: str) -> set[frozenset[int]]:
        if truth is None:
            return {frozenset(g) for g in t.groups(level)}
        online = set(ids)
        g: dict[int, set[int]] = {}
        for c in truth.cpus:
            if c.id in online:
                g.setdefault({"socket": c.socket, "llc": c.llc, "core": c.core, "node": c.node}[level], set()).add(c.id)
        return {frozenset(x) for x in g.values()}

    def get(d, *names):
        return tuple(d.get(k, 0) for k in names)

    assert partition(lambda d: d["node-id"]) == want("node")
    assert partition(lambda d: d["socket-id"]) == want("socket")
    core_key = ("socket-id", "die-id", "cluster-id", "core-id")
    assert partition(lambda d: get(d, *core_key)) == want("core")
    if p.arch == "x86_64":
        # The guest's LLC is QEMU's die (one L3 per die); with sub-NUMA clustering the
        # socket's one L3, which the guest kernel splits at node boundaries.
        llc = (lambda d: get(d, "socket-id", "node-id")) if t.snc else (lambda d: get(d, "socket-id", "die-id"))
        assert partition(llc) == want("llc")
    else:
        # arm64's LLC comes from the device tree lab writes per LLC group; the cluster is QEMU's.
        assert partition(lambda d: get(d, "socket-id", "cluster-id")) == {frozenset(g) for g in t.groups("cluster")}
    for d in props:
        assert 0 <= d.get("thread-id", 0) < t.threads_per_core


# ---- the case


def snc_interleaved() -> ss.Machine:
    """2 sockets with even/odd CPUs, 2 SNC nodes per socket interleaved across CPU ids,
    SMT siblings n and n+40 (80 CPUs)."""
    return ss.build(sockets=2, nodes_per_socket=2, cores_per_cluster=10, threads=2, numbering="node-interleaved", snc=True)


def test_snc_socket_interleaved_renders_core_ids_inside_the_socket(tmp_path):
    m = snc_interleaved()
    t = import_dir(ss.write(ss.files(m), tmp_path))
    assert t.snc and t.node_cpus(0)[:3] == (0, 4, 8) and t.group_of("core", 3) == (3, 43)
    p = qemu.plan(t, HOST)
    assert p.smp == "80,sockets=2,cores=20,threads=2"
    cores = {int(re.search(r"core-id=(\d+)", a).group(1)) for a in p.numa_cpu_args}
    assert cores == set(range(20)), "QEMU's core-id counts inside the socket"
    assert "cpu,node-id=1,socket-id=0,core-id=10" in p.numa_cpu_args
    check_mapping(t, p, simulated_props(p), m)


@pytest.mark.qmp
def test_snc_socket_interleaved_qemu_takes_it(tmp_path):
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 missing")
    m = snc_interleaved()
    t = import_dir(ss.write(ss.files(m), tmp_path))
    p = qemu.plan(t, HOST)
    check_mapping(t, p, qmp.readback(p), m)


# ---- generated machines


@st.composite
def machines(draw, max_cpus: int = 64):
    arch = draw(st.sampled_from(["x86_64", "x86_64", "x86_64", "arm64"]))
    sockets = draw(st.integers(1, 4 if arch == "x86_64" else 2))
    nps = draw(st.integers(1, 4))
    snc = arch == "x86_64" and nps > 1 and draw(st.booleans())
    llcs = 1 if snc else draw(st.integers(1, 3))
    clusters = draw(st.integers(1, 3)) if arch == "arm64" else 1  # x86 clusters need QEMU 9.2
    cores = draw(st.integers(1, 4))
    threads = draw(st.integers(1, 2)) if arch == "x86_64" else 1  # QEMU's arm64 model: no SMT
    n = sockets * nps * llcs * clusters * cores * threads
    assume(n <= max_cpus)
    style = draw(st.sampled_from(STYLES))
    seed = draw(st.integers(0, 2**16))
    nodes = sockets * nps
    # Node ids: dense, sparse, or sparse and not in the machine's order.
    kind = draw(st.sampled_from(["dense", "sparse", "shuffled"]))
    node_ids = list(range(nodes))
    if kind != "dense":
        node_ids = sorted(draw(st.lists(st.integers(0, 63), min_size=nodes, max_size=nodes, unique=True)))
        if kind == "shuffled":
            node_ids = draw(st.permutations(node_ids))
    ids: str | list[int] = style
    if draw(st.booleans()):
        # Holes in the CPU ids (firmware leaving disabled cores' ids unused): the same
        # numbering, every id from a drawn point on shifted up.
        base = ss._numbering(style, sockets, nps, llcs * clusters * cores, threads, seed)
        cut, gap = draw(st.integers(1, n)), draw(st.integers(1, 64))
        ids = [i + gap if i >= cut else i for i in base]
    m = ss.build(
        sockets=sockets, nodes_per_socket=nps, llcs_per_node=llcs, clusters_per_llc=clusters,
        cores_per_cluster=cores, threads=threads, numbering=ids, node_ids=list(node_ids), snc=snc,
        core_id_stride=draw(st.sampled_from([1, 2])), seed=seed,
    )  # fmt: skip
    if arch == "arm64":
        m.vendor = "ARM"
    forms = {k: draw(st.sampled_from(ss.FORMS)) for k in ss.KINDS}
    no_node_dir = nodes == 1 and draw(st.booleans())
    no_distances = draw(st.booleans())
    # The same machine as hwloc's XML instead of sysfs files (not for SNC: the XML writer
    # nests an L3 inside a node).
    if not snc and draw(st.integers(0, 3)) == 0:
        forms = {"hwloc-xml": "xml"}
    return m, forms, no_node_dir, no_distances, f"{arch} {sockets}s x {nps}n x {llcs}llc x {clusters}cl x {cores}c x {threads}t {style} holes={ids != style} nodes={kind} snc={snc} forms={forms}"


def _render(case, tmp: Path | None = None):
    """Import the machine's capture (from a directory when *tmp* is given, else straight
    from its files: writing thousands of small files is most of a case's time) and plan it."""
    m, forms, no_node_dir, no_distances, _desc = case
    if "hwloc-xml" in forms:
        f = hwloc.xml_files(ss.hwloc_xml(m).encode(), "gen.xml")
    else:
        f = ss.files(m, forms, no_node_dir=no_node_dir, no_distances=no_distances)
    if tmp is not None:
        t = import_dir(ss.write(f, tmp / "cap"))
    else:
        text, _ = importer.view_to_spec(sysfs.capture_view(f, "gen"), "gen", "gen")
        t = topology.loads(text, default_name="gen")
    # The import keeps every group the machine has.
    for level in ("node", "socket", "core"):
        got = {frozenset(g) for g in t.groups(level)}
        want: dict[int, set[int]] = {}
        for c in m.cpus:
            want.setdefault(getattr(c, level), set()).add(c.id)
        assert got == {frozenset(x) for x in want.values()}, level
    assert t.snc == m.snc
    return t, qemu.plan(t, HOST)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(case=machines())
def test_generated_machines_map_every_cpu_home(case):
    t, p = _render(case)
    check_mapping(t, p, simulated_props(p), case[0])
    RAN["simulated"] += 1


@pytest.mark.qmp
@settings(max_examples=8, suppress_health_check=[HealthCheck.too_slow])
@given(case=machines(max_cpus=32))
def test_generated_machines_qemu_reads_back_the_mapping(case):
    """The same property, asked of a real QEMU (-S: no guest runs; well under a second each)."""
    arch = "x86_64" if case[0].vendor != "ARM" else "arm64"
    binary = {"x86_64": "qemu-system-x86_64", "arm64": "qemu-system-aarch64"}[arch]
    if shutil.which(binary) is None:
        pytest.skip(f"{binary} missing")
    t, p = _render(case)
    check_mapping(t, p, qmp.readback(p), case[0])
    RAN["qmp"] += 1
