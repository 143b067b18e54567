"""Real machines' odd shapes (issue 17), imported from captures and rendered, no VM:
sub-NUMA clustering, caches private to an SMT thread, sparse node ids.  The captures are
made by tests/fixtures/captures/make_captures.py from the public figures it names."""

import importlib.util
import shlex
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import expect, host, importer, sysfs, topology
from lab.cli import main
from lab.render import qemu

CAPS = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
HOST = host.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")
SNC, OPTERON, SPARSE = (CAPS / f"{n}.tar.gz" for n in ("spr8480-2s-snc4", "opteron6376-4s", "sparse-nodes-2s"))


def imported(path, name="m"):
    text, notes = importer.view_to_spec(sysfs.read_capture(path), name, str(path))
    return topology.loads(text, default_name=name), notes


def test_fixtures_are_what_the_generator_makes(tmp_path):
    spec = importlib.util.spec_from_file_location("make_captures", CAPS / "make_captures.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_captures"] = mod  # dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules["make_captures"]
    for make in mod.MACHINES.values():
        m = make()
        out = tmp_path / f"{m.name}.tar.gz"
        mod.write_tarball(m, out)
        assert out.read_bytes() == (CAPS / out.name).read_bytes(), f"regenerate {out.name}"
        with tarfile.open(out) as tf:
            assert tf.extractfile(f"{m.name}/SOURCE").read().strip()  # every capture says where it came from


def test_snc_import_keeps_socket_l3_and_node_split_llc():
    t, notes = imported(SNC)
    assert t.snc and t.n_nodes == 8 and t.n_cpus == 112
    # The scheduler's LLC is each node's part of the socket's L3.
    assert t.groups("llc") == tuple(tuple(range(i, i + 14)) for i in range(0, 112, 14))
    assert t.group_of("socket", 20) == tuple(range(56))
    assert any("sub-NUMA clustering" in n for n in notes)
    assert t.shape is not None and t.shape.nodes_per_socket == 4 and t.shape.llcs_per_node == 1


def test_snc_render_is_an_argv_qemu_takes():
    t, _ = imported(SNC)
    p = qemu.plan(t, HOST)
    # One die per socket (its L3), nodes assigned per core: never two "-numa cpu" for one die.
    assert p.smp == "112,sockets=2,cores=56,threads=1"
    assert len(p.numa_cpu_args) == 112 and len(set(p.numa_cpu_args)) == 112
    assert all("die-id" not in a for a in p.numa_cpu_args)
    assert "cpu,node-id=1,socket-id=0,core-id=14" in p.numa_cpu_args
    assert "cpu,node-id=4,socket-id=1,core-id=0" in p.numa_cpu_args
    # The kernel's view: no DIE level (numa in package), MC = the node's part of the L3.
    doms = expect.expected_domains(t, reclaim_distance=30, cluster_level=False)[0]
    assert [(d.name, len(d.span)) for d in doms] == [("MC", 14), ("NUMA", 56), ("NUMA", 112)]
    assert expect.deviations(t, p) == []


def test_snc_mini_keeps_snc():
    t, _ = imported(SNC)
    m = topology.loads(importer.mini(t, "snc-mini"))
    assert m.snc and m.shape is not None and m.shape.nodes_per_socket == 4 and m.n_cpus <= 32
    assert qemu.plan(m, HOST).smp.endswith("sockets=2,cores=12,threads=1")


def test_snc_spec_validation():
    base = (
        'arch = "x86_64"\n[cpu]\nvendor = "intel"\nmodel = "x"\n[topology]\nsockets = 2\nnodes_per_socket = {nps}\n'
        "llcs_per_node = {llcs}\ncores_per_cluster = 2\n[caches]\nsnc = true\n[numa]\nmemory_mb = 64\n"
    )
    d2 = "distances = [[10, 21], [21, 10]]\n"
    d4 = "distances = [[10, 12, 21, 21], [12, 10, 21, 21], [21, 21, 10, 12], [21, 21, 12, 10]]\n"
    with pytest.raises(topology.SpecError, match="caches.snc: needs several nodes in every socket"):
        topology.loads(base.format(nps=1, llcs=1) + d2, where="s.toml")
    with pytest.raises(topology.SpecError, match="caches.snc: needs one LLC per node"):
        topology.loads(base.format(nps=2, llcs=2) + d4, where="s.toml")
    assert topology.loads(base.format(nps=2, llcs=1) + d4, where="s.toml").snc


def test_opteron_private_l1d_is_a_named_deviation():
    t, notes = imported(OPTERON)
    assert t.per_thread == ("L1d",) and t.vendor == "amd" and t.family == 0x15
    assert t.threads_per_core == 2 and t.group_of("core", 6) == (6, 7) and t.n_nodes == 8
    assert any("L1d is private to each SMT thread" in n for n in notes)
    p = qemu.plan(t, HOST)
    assert p.cpu_model.startswith("Skylake-Server")  # family 15h: node_reclaim_distance 30 either way
    # The Intel model's CPUID 4 gives each thread its own L1: the L1d is reproduced; the
    # L1i, which each Bulldozer module shares between its two threads, is not.  QEMU has
    # no AMD model of family 15h lab can use: the vendor is named too (issue 34).
    devs = dict(expect.deviations(t, p))
    assert list(devs) == ["L1i shared by SMT threads", "dies", "CPU vendor"]
    assert devs["CPU vendor"].startswith("the real CPU is amd family 0x15, the guest's CPU model Skylake-Server is intel")


def test_l2_per_thread_named_at_import(tmp_path):
    """The issue's case: an L2 per thread with SMT siblings (the capture edited so)."""
    with tarfile.open(OPTERON) as tf:
        tf.extractall(tmp_path, filter="data")
    root = tmp_path / "opteron6376-4s"
    for cpu in range(64):
        (root / f"sys/devices/system/cpu/cpu{cpu}/cache/index2/shared_cpu_list").write_text(f"{cpu}\n")
    t, notes = imported(root)
    assert t.per_thread == ("L1d", "L2")
    assert any("L2 is private" in n and "CLS" in n for n in notes)
    names = [n for n, _ in expect.deviations(t, qemu.plan(t, HOST))]
    assert names == ["L2 per thread", "L1i shared by SMT threads", "dies", "CPU vendor"]


def test_sparse_node_ids_translated_and_named():
    t, notes = imported(SPARSE)
    assert t.node_ids == (0, 1, 2, 33, 34, 45, 72, 73)
    assert t.node_cpus(45) == (20, 21, 22, 23, 52, 53, 54, 55) and t.distance(33, 72) == 32
    assert any("sparse" in n for n in notes)
    p = qemu.plan(t, HOST)
    assert p.guest_node_to_spec == t.node_ids
    argv = shlex.join(qemu.argv(p, qemu.boot_files(p, Path("K"))))
    assert "node,nodeid=7," in argv and "nodeid=73" not in argv  # QEMU numbers nodes densely
    assert [n for n, _ in expect.deviations(t, p)] == ["node ids", "dies"]


def test_verify_names_sparse_nodes_and_per_thread_caches():
    """What verify says about a guest of these shapes: the named deviation when the guest
    shows exactly what QEMU can, a FAIL when it shows something else."""
    t, _ = imported(SPARSE)
    p = qemu.plan(t, HOST)
    g = sysfs.MachineView(online=tuple(range(t.n_cpus)))
    for i, n in enumerate(t.node_ids):
        g.nodes[i] = tuple(sorted(gi for gi, s in enumerate(p.guest_to_spec) if t.cpu(s).node == n))
        g.distances[i] = t.distances[i]
    checks = {c.name: c for c in expect.verify(t, p, g, cluster_level=True).checks}
    assert checks["node ids"].status == "known" and "QEMU numbers NUMA nodes" in checks["node ids"].known
    assert checks["node 45 CPUs"].ok and checks["node 73 distances"].ok

    o, _ = imported(OPTERON)
    # The Intel model shares L2 by core: with L2 per thread that is the named deviation.
    po = qemu.plan(o, HOST)
    o2 = topology.Topology(**{**o.__dict__, "per_thread": ("L1d", "L2")})
    go = sysfs.MachineView(online=tuple(range(o.n_cpus)))
    for gi, s in enumerate(po.guest_to_spec):
        core = tuple(sorted(po.guest_to_spec.index(x) for x in o.group_of("core", s)))
        go.cpus[gi] = sysfs.CpuView(gi, caches=[sysfs.Cache(1, "Data", (gi,)), sysfs.Cache(2, "Unified", core)])
    checks = {c.name: c for c in expect.verify(o2, po, go, cluster_level=True).checks}
    assert checks["L1d per thread"].ok
    assert checks["L2 per thread"].status == "known" and "shares a core's L2" in checks["L2 per thread"].known
    go.cpus[0] = sysfs.CpuView(0, caches=[sysfs.Cache(1, "Data", (0,)), sysfs.Cache(2, "Unified", (0, 1, 2, 3))])
    checks = {c.name: c for c in expect.verify(o2, po, go, cluster_level=True).checks}
    assert checks["L2 per thread"].status == "FAIL"


def test_cli_import_ends_with_what_the_vm_will_not_reproduce(tmp_path):
    r = CliRunner().invoke(main, ["topo", "import", str(SPARSE), "-o", str(tmp_path / "sp.toml")])
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1].startswith("the VM of sp.toml will not reproduce: node ids (")
    r = CliRunner().invoke(main, ["topo", "import", str(SNC), "-o", str(tmp_path / "snc.toml")])
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1] == "the VM of snc.toml will not reproduce: nothing lab knows of"


def test_capture_no_vm_here_can_boot_is_refused(tmp_path, monkeypatch):
    """An x86 machine with clusters (L2 shared by two cores): QEMU 7.2 cannot build x86
    clusters (9.2 can: modules and smp-cache), so without a lab-built QEMU import refuses it
    naming the version that can, and writes nothing."""
    from lab import emulators
    from lab import host as host_mod

    monkeypatch.setattr(emulators, "built", lambda: [])  # no lab-built QEMU (one can boot x86 clusters)
    host_mod.probe.cache_clear()  # probed once per process: probe this host without one
    monkeypatch.setattr(host_mod, "probe", host_mod.probe.__wrapped__)
    with tarfile.open(OPTERON) as tf:
        tf.extractall(tmp_path, filter="data")
    root = tmp_path / "opteron6376-4s"
    for cpu in range(64):
        first = cpu - cpu % 4
        (root / f"sys/devices/system/cpu/cpu{cpu}/topology/cluster_cpus_list").write_text(f"{first}-{first + 3}\n")
    t, _ = imported(root)
    assert t.has_clusters
    r = CliRunner().invoke(main, ["topo", "import", str(root), "-o", str(tmp_path / "c.toml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    # No lab-built QEMU: the version that can and the command that builds it.
    assert "x86 clusters (" in r.output and "needs QEMU 9.2.0 or newer" in r.output, r.output
    assert "`lab qemu build`" in r.output, r.output
    assert not (tmp_path / "c.toml").exists()


def test_intel_l1_shared_by_smt_threads_is_named_before_qemu_9_1_only():
    """QEMU 7.2's Intel model gives each SMT thread its own L1 (CPUID 4); from QEMU 9.1's
    machine types it is shared per core, as on the real machine: nothing to name."""
    t = topology.load("xeon-2s22c-mini")
    old = [n for n, _ in expect.deviations(t, qemu.plan(t, HOST))]
    assert old == ["L1d shared by SMT threads", "L1i shared by SMT threads"]
    new_host = host.Host(arch="x86_64", cpus=2, qemu={"x86_64": (10, 0, 13), "arm64": (10, 0, 13)}, kvm=False, kvm_reason="test")
    assert expect.deviations(t, qemu.plan(t, new_host)) == []
    z = topology.load("zen3-2s-mini")  # the AMD model shares L1 per core on any QEMU
    # ... but on 7.2 it shows each LLC as a die (0x8000001E's node id); 10.0 does not
    assert [n for n, _ in expect.deviations(z, qemu.plan(z, HOST))] == ["dies"]
    assert expect.deviations(z, qemu.plan(z, new_host)) == []


def test_verify_names_the_vendor_and_a_split_llc():
    """Issue 34, item 4: what the import said the VM will not reproduce, verify repeats."""
    o, _ = imported(OPTERON)
    p = qemu.plan(o, HOST)
    g = sysfs.MachineView(online=tuple(range(o.n_cpus)), vendor="intel")
    checks = {c.name: c for c in expect.verify(o, p, g, cluster_level=True).checks}
    assert checks["CPU vendor"].status == "known" and checks["CPU vendor"].actual == "intel"
    g.vendor = "amd"  # a guest of another vendor than the plan's is not the named deviation
    checks = {c.name: c for c in expect.verify(o, p, g, cluster_level=True).checks}
    assert checks["CPU vendor"].status == "FAIL"


def test_llc_crossing_nodes_is_split_and_named(tmp_path):
    """An L3 whose lists span two nodes on a non-Intel machine (not SNC): the spec splits it
    at node boundaries, says so in [caches], and import and verify name it."""
    with tarfile.open(OPTERON) as tf:
        tf.extractall(tmp_path, filter="data")
    root = tmp_path / "opteron6376-4s"
    for cpu in range(64):
        first = cpu - cpu % 16  # one L3 per package: the two dies' nodes share it
        (root / f"sys/devices/system/cpu/cpu{cpu}/cache/index3/shared_cpu_list").write_text(f"{first}-{first + 15}\n")
    t, notes = imported(root)
    assert t.split_llc and not t.snc and t.group_of("llc", 0) == tuple(range(8))
    assert any("split at node boundaries" in n for n in notes)
    p = qemu.plan(t, HOST)
    assert "LLC crossing nodes" in dict(expect.deviations(t, p))
    checks = {c.name: c for c in expect.verify(t, p, sysfs.MachineView(online=tuple(range(64))), cluster_level=True).checks}
    assert checks["LLC crossing nodes"].status == "known"
    assert topology.loads(importer.mini(t, "o-mini")).split_llc
