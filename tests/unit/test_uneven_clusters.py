"""arm64 machines whose clusters differ in size (issue 34, item 3: a DynamIQ phone's core
types, 4 + 2 + 2 CPUs) are built, not refused: QEMU's -smp makes one cluster per LLC and
lab's device tree writes the real clusters in its cpu-map."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import host, sysfs, topology
from lab.cli import main
from lab.errors import UserError
from lab.render import dtb, libvirt, qemu

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cache_sizes import phone_capture  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
QEMU_DTS = (HERE / "fixtures" / "dts" / "kunpeng920-2s-mini.qemu72.dts").read_text()
HOST = host.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")


def spec(arch: str = "arm64", vendor: str = "hisilicon") -> topology.Topology:
    """kunpeng920-2s-mini's 32 CPUs (2 sockets, a node and an LLC of 8 each), each LLC's
    cores in clusters of 4, 2 and 2."""
    llcs = [list(range(b, b + 8)) for b in range(0, 32, 8)]
    clusters = [g for llc in llcs for g in (llc[:4], llc[4:6], llc[6:])]
    fmt = topology.fmt
    text = "\n".join([
        'name = "uneven"', f'arch = "{arch}"', "[cpu]", f'vendor = "{vendor}"', 'model = "x"', "[groups]",
        "nodes = { " + ", ".join(f'"{i}" = "{fmt(g)}"' for i, g in enumerate(llcs)) + " }",
        'sockets = ["0-15", "16-31"]',
        "llcs = [" + ", ".join(f'"{fmt(g)}"' for g in llcs) + "]",
        "clusters = [" + ", ".join(f'"{fmt(g)}"' for g in clusters) + "]",
        "cores = [" + ", ".join(f'"{c}"' for c in range(32)) + "]",
        "[numa]", "distances = [[10, 12, 20, 22], [12, 10, 22, 24], [20, 22, 10, 12], [22, 24, 12, 10]]",
    ])  # fmt: skip
    return topology.loads(text + "\n", where="u.toml")


def test_flattening_keeps_every_cpu_and_drops_only_the_clusters():
    t = spec()
    assert t.shape is None and t.has_clusters
    f = topology.flatten_clusters(t)
    assert f is not None and f.shape is not None and not f.has_clusters
    assert (f.shape.sockets, f.shape.nodes_per_socket, f.shape.llcs_per_node, f.shape.cores_per_cluster) == (2, 2, 1, 8)
    assert f.cpu_ids == t.cpu_ids and f.groups("llc") == t.groups("llc") and f.numbering == "linear"
    assert topology.flatten_clusters(topology.load("kunpeng920-2s-mini")) is None  # regular: nothing to flatten


def test_uneven_sockets_do_not_flatten():
    t = topology.loads(
        '[cpu]\nvendor = "arm"\nmodel = "x"\n[groups]\nnodes = { "0" = "0-5" }\nsockets = ["0-3", "4-5"]\n'
        'llcs = ["0-3", "4-5"]\nclusters = ["0-1", "2-3", "4-5"]\ncores = ["0", "1", "2", "3", "4", "5"]\n'.replace("[cpu]", 'arch = "arm64"\n[cpu]'),
        where="s.toml",
    )
    assert t.shape is None and topology.flatten_clusters(t) is None
    with pytest.raises(UserError, match="the machine is irregular .*`lab topo import --nearest`"):
        qemu.plan(t, HOST)


def test_plan_builds_one_cluster_per_llc_and_names_it():
    t = spec()
    p = qemu.plan(t, HOST)
    assert p.topo is t  # the spec, whose clusters verify and the analyses read
    assert p.smp == qemu.plan(topology.flatten_clusters(t), HOST).smp == "32,sockets=2,clusters=2,cores=8,threads=1"
    assert any(n.startswith("clusters of different sizes (4 + 2 + 2 + 4 + 2 + 2") and "cpu-map" in n for n in p.notes)


def test_without_dtc_or_on_x86_it_is_refused_in_one_line():
    with pytest.raises(UserError, match=r"u.toml: groups.clusters: clusters of different sizes .* install device-tree-compiler"):
        qemu.plan(spec(), dataclasses.replace(HOST, dtc=False))
    with pytest.raises(UserError, match=r"cores per cluster differ.*`lab topo import --nearest`"):
        qemu.plan(spec("x86_64", "intel"), dataclasses.replace(HOST, qemu={"x86_64": (10, 0, 2), "arm64": (10, 0, 2)}))


def test_libvirt_says_to_use_the_qemu_backend():
    p = qemu.plan(spec(), HOST)
    with pytest.raises(UserError, match="clusters of different sizes .* use --backend qemu"):
        libvirt.adapt(p, (11, 3, 0))


def cpu_map(text: str) -> dict[tuple[int, int], list[int]]:
    """(socket, cluster) -> the phandles of its cores' cpus, from an edited tree."""
    m = re.search(r"cpu-map \{\n(.*?)\n\t\t\};\n", text, re.S)
    assert m
    out: dict[tuple[int, int], list[int]] = {}
    sock = clus = -1
    for line in m.group(1).splitlines():
        if s := re.match(r"\t+socket(\d+) \{", line):
            sock = int(s.group(1))
        elif c := re.match(r"\t+cluster(\d+) \{", line):
            clus = int(c.group(1))
        elif p := re.match(r"\t+cpu = <0x([0-9a-f]+)>;", line):
            out.setdefault((sock, clus), []).append(int(p.group(1), 16))
    return out


def test_device_tree_cpu_map_has_the_spec_s_clusters():
    t = spec()
    flat = topology.flatten_clusters(t)
    out = dtb.edit(QEMU_DTS, flat, cpu_map=t)
    # QEMU's cpu@N nodes keep their phandles; cpu@N is QEMU's CPU N, the flat machine's CPU N.
    ph = {int(n): int(h, 16) for n, h in re.findall(r"cpu@(\d+) \{\n\t+phandle = <0x([0-9a-f]+)>;", QEMU_DTS)}
    of = {c.id: ph[c.index] for c in flat.cpus}
    got = cpu_map(out)
    assert sorted(got) == [(s, k) for s in (0, 1) for k in range(6)]
    assert got[(0, 0)] == [of[c] for c in range(4)] and got[(0, 1)] == [of[4], of[5]] and got[(0, 2)] == [of[6], of[7]]
    assert got[(0, 3)] == [of[c] for c in range(8, 12)] and got[(1, 5)] == [of[30], of[31]]
    assert out.count("cpu-map {") == 1
    # The rest of the tree is what the regular machine's would be.
    assert re.sub(r"cpu-map \{.*?\n\t\t\};\n", "", out, flags=re.S) == re.sub(
        r"cpu-map \{.*?\n\t\t\};\n", "", dtb.edit(QEMU_DTS, flat), flags=re.S
    )


def test_edited_tree_compiles(tmp_path):
    import shutil
    import subprocess

    if not shutil.which("dtc"):
        pytest.skip("dtc not installed")
    t = spec()
    (tmp_path / "x.dts").write_text(dtb.edit(QEMU_DTS, topology.flatten_clusters(t), cpu_map=t))
    subprocess.run(["dtc", "-q", "-I", "dts", "-O", "dtb", "-o", str(tmp_path / "x.dtb"), str(tmp_path / "x.dts")], check=True)


def uneven_phone(tmp_path: Path) -> Path:
    """phone_capture() as a 6.x kernel shows a DynamIQ phone: one package, clusters 4 + 2 + 2."""
    root = phone_capture(tmp_path)
    for c in range(8):
        d = root / f"sys/devices/system/cpu/cpu{c}/topology"
        (d / "cluster_cpus_list").write_text("0-3\n" if c < 4 else ("4-5\n" if c < 6 else "6-7\n"))
        (d / "cluster_id").write_text(f"{0 if c < 4 else (1 if c < 6 else 2)}\n")
    return root


def test_a_phone_capture_with_its_clusters_imports_without_nearest(tmp_path):
    cap = uneven_phone(tmp_path / "cap")
    out = tmp_path / "phone.toml"
    r = CliRunner().invoke(main, ["topo", "import", str(cap), "-o", str(out)])
    assert r.exit_code == 0, r.output
    t = topology.load(out)
    assert t.groups("cluster") == ((0, 1, 2, 3), (4, 5), (6, 7)) and t.shape is None
    assert t.capacities[6] == 1024 and t.cache_size_kb("L2", 4) == 256
    assert sysfs.read_capture(cap).cpus[5].siblings("cluster") == (4, 5)


# ---- property: any split of any LLC into clusters ------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def arm_machines(draw):
    """32 CPUs as kunpeng920-2s-mini's QEMU tree has them (2 sockets, a node and an LLC of 8
    each), numbered by a random permutation, each LLC cut into clusters of random sizes."""
    ids = draw(st.permutations(list(range(32))))
    llcs = [sorted(ids[b : b + 8]) for b in range(0, 32, 8)]
    clusters = []
    for llc in llcs:
        cuts = sorted(draw(st.sets(st.integers(1, 7), max_size=4)))
        bounds = [0, *cuts, 8]
        clusters += [llc[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    return llcs, clusters


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arm_machines())
def test_any_cluster_split_reaches_the_cpu_map(machine):
    llcs, clusters = machine
    fmt = topology.fmt
    text = "\n".join([
        'name = "g"', 'arch = "arm64"', "[cpu]", 'vendor = "arm"', 'model = "x"', "[groups]",
        "nodes = { " + ", ".join(f'"{i}" = "{fmt(g)}"' for i, g in enumerate(llcs)) + " }",
        f'sockets = ["{fmt(llcs[0] + llcs[1])}", "{fmt(llcs[2] + llcs[3])}"]',
        "llcs = [" + ", ".join(f'"{fmt(g)}"' for g in llcs) + "]",
        "clusters = [" + ", ".join(f'"{fmt(g)}"' for g in clusters) + "]",
        "cores = [" + ", ".join(f'"{c}"' for c in range(32)) + "]",
        "[numa]", "distances = [[10, 12, 20, 22], [12, 10, 22, 24], [20, 22, 10, 12], [22, 24, 12, 10]]",
    ]) + "\n"  # fmt: skip
    t = topology.loads(text, where="g.toml")
    p = qemu.plan(t, HOST)  # builds (one cluster per LLC) whatever the split
    flat = topology.flatten_clusters(t) if t.shape is None else None
    if flat is None:  # equal clusters: -smp builds them itself
        assert t.shape is not None
        return
    out = dtb.edit(QEMU_DTS, flat, cpu_map=t)
    ph = {int(n): int(h, 16) for n, h in re.findall(r"cpu@(\d+) \{\n\t+phandle = <0x([0-9a-f]+)>;", QEMU_DTS)}
    cpu_of = {ph[c.index]: c.id for c in flat.cpus}
    got = sorted(tuple(sorted(cpu_of[h] for h in hs)) for hs in cpu_map(out).values())
    assert got == sorted(tuple(g) for g in t.groups("cluster"))
    assert sum(len(g) for g in got) == 32 and p.topo is t
