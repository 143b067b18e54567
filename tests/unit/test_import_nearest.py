"""Machines QEMU cannot build (issue 34, bad input): groups of different sizes beyond
capacity, e.g. a 2-socket machine whose sockets have different core counts or different
LLC sharing.  QEMU's -smp gives every socket, die, cluster and core the same count, so
the import is refused with the exact reason and the nearest buildable machine, and
`lab topo import --nearest` writes that one with every deviation in its notes."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from lab import host, importer, sysfs, topology
from lab.cli import main
from lab.render import qemu

HOST = host.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")


def lscpu(rows: list[tuple[int, int, int, int, str]], cluster: bool = False) -> str:
    """An `lscpu -e` table: (cpu, node, socket, core, caches[, cluster])."""
    head = "CPU NODE SOCKET CORE " + ("CLUSTER " if cluster else "") + "L1d:L1i:L2:L3 ONLINE\n"
    return head + "".join(" ".join(map(str, r[:4])) + (f" {r[5]}" if cluster else "") + f" {r[4]} yes\n" for r in rows)  # type: ignore[misc]


def uneven_sockets() -> str:
    """Socket 0: 8 cores, socket 1: 6 (both SMT, one node and one L3 each); siblings +14."""
    rows = []
    for t in range(2):
        for core in range(14):
            s = 0 if core < 8 else 1
            rows.append((core + 14 * t, s, s, core, f"{core}:{core}:{core}:{s}"))
    return lscpu(sorted(rows))


def uneven_llcs() -> str:
    """Socket 0: one L3 over its 8 cores; socket 1: two L3s of 4 cores (no SMT)."""
    rows = []
    for c in range(16):
        s = c // 8
        l3 = 0 if s == 0 else 1 + (c - 8) // 4
        rows.append((c, s, s, c, f"{c}:{c}:{c}:{l3}"))
    return lscpu(rows)


def uneven_clusters() -> str:
    """One socket, one L3, clusters of 4, 2 and 2 cores sharing an L2 (a phone SoC's
    core types): the clusters differ, the LLC does not."""
    rows = []
    for c in range(8):
        cl = 0 if c < 4 else (1 if c < 6 else 2)
        rows.append((c, 0, 0, c, f"{c}:{c}:{cl}:0", cl))
    return lscpu(rows, cluster=True)


def imported(tmp_path: Path, text: str) -> topology.Topology:
    p = tmp_path / "m.txt"
    p.write_text(text)
    spec, _ = importer.view_to_spec(sysfs.read_capture(p), "m", str(p))
    return topology.loads(spec, default_name="m")


def test_exact_reasons(tmp_path):
    t = imported(tmp_path, uneven_sockets())
    assert t.shape is None
    assert topology.irregularities(t) == [
        "cores per LLC differ: the LLC of CPUs 0-7,14-21 has 8, the LLC of CPUs 8-13,22-27 6 (2 LLCs: 1 with 8, 1 with 6)"
    ]
    u = imported(tmp_path, uneven_llcs())
    assert topology.irregularities(u)[0].startswith("LLCs per node differ: the node of CPUs 8-15 has 2, the node of CPUs 0-7 1")


def test_refused_with_the_reason_and_the_nearest(tmp_path):
    p = tmp_path / "uneven.txt"
    p.write_text(uneven_sockets())
    r = CliRunner().invoke(main, ["topo", "import", str(p), "-o", str(tmp_path / "u.toml")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "QEMU cannot build this machine: cores per LLC differ: the LLC of CPUs 0-7,14-21 has 8" in r.stderr
    assert "the nearest machine lab can build is 32 CPUs: 2 sockets x 1 node/socket x 1 LLC/node x 8 cores/LLC x 2 threads/core" in r.stderr
    assert "--nearest writes it" in r.stderr and not (tmp_path / "u.toml").exists()
    # The renderer says the same where an irregular spec reaches it (lab verify, lab topo diff).
    t = imported(tmp_path, uneven_sockets())
    try:
        qemu.plan(t, HOST)
    except Exception as e:  # noqa: BLE001
        assert "cores per LLC differ" in str(e) and "--nearest" in str(e), e
    else:
        raise AssertionError("an irregular machine was planned")


def test_nearest_writes_the_buildable_machine_and_names_each_change(tmp_path):
    p = tmp_path / "uneven.txt"
    p.write_text(uneven_sockets())
    out = tmp_path / "u.toml"
    r = CliRunner().invoke(main, ["topo", "import", str(p), "-o", str(out), "--nearest", "--mini"])
    assert r.exit_code == 0, r.output
    t = topology.load(out)
    assert t.shape is not None and t.n_cpus == 32 and t.shape.cores_per_llc == 8 and t.distances == ((10, 20), (20, 10))
    assert "nearest: cores per LLC differ: the LLC of CPUs 0-7,14-21 has 8" in r.output
    assert "the nearest has 8 each" in t.provenance.notes
    assert "32 CPUs instead of 28, numbered linearly" in t.provenance.notes
    assert t.provenance.derived_from == "u"
    qemu.plan(t, HOST)  # QEMU can build it
    assert topology.load(tmp_path / "u-mini.toml").n_cpus <= 32


def test_nearest_of_uneven_llcs_keeps_the_cpu_count(tmp_path):
    t = imported(tmp_path, uneven_llcs())
    text, changes = importer.nearest(t, "n")
    n = topology.loads(text)
    assert n.shape is not None and n.n_cpus == 16 and n.shape.llcs_per_node == 2 and n.shape.cores_per_llc == 4
    assert any(c.startswith("LLCs per node differ") and c.endswith("the nearest has 2 each") for c in changes), changes
    assert "CPU ids numbered linearly: the capture's are not kept" in changes


def test_nearest_of_uneven_clusters_drops_the_cluster_level_and_keeps_every_id(tmp_path):
    t = imported(tmp_path, uneven_clusters())
    assert t.has_clusters and t.shape is None
    text, changes = importer.nearest(t, "n")
    n = topology.loads(text)
    assert n.shape is not None and not n.has_clusters and n.cpu_ids == t.cpu_ids
    assert changes == [
        "cores per cluster differ: the cluster of CPUs 4-5 has 2, the cluster of CPUs 0-3 4 (3 clusters: 1 with 4, 2 with 2): "
        "the nearest has no cluster level (one cluster per LLC, every CPU and id kept)"
    ]
    assert "nearest buildable machine" in n.provenance.notes
