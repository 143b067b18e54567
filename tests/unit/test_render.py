"""QEMU rendering: golden argv per catalog topology, host capabilities, refusals.

Regenerate the golden files after an intended change with:
    LAB_REGEN=1 .venv/bin/pytest tests/unit/test_render.py
and review the diff.
"""

import os
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import host as host_mod
from lab import topology
from lab.cli import main
from lab.errors import UserError
from lab.plan import VmOptions
from lab.render import qemu

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "qemu"
HOST_72 = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test host")
HOST_10 = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (10, 0, 13), "arm64": (10, 0, 13)}, kvm=False, kvm_reason="test host")
HOST_KVM = host_mod.Host(arch="x86_64", cpus=64, qemu={"x86_64": (9, 2, 0), "arm64": (9, 2, 0)}, kvm=True, kvm_reason="ok")


def plan(t, host, *, kernel_features=frozenset(), tcg="auto", **opts):
    """qemu.plan with the VM options as keywords (tcg= is --tcg-threads)."""
    return qemu.plan(t, host, VmOptions(tcg_threads=tcg, **opts), kernel_features=kernel_features)


def argv(p) -> list[str]:
    return qemu.argv(p, qemu.boot_files(p, Path("KERNEL")))


def render(name: str, host=HOST_72, **kw) -> str:
    t = topology.load(name)
    try:
        p = plan(t, host, **kw)
    except UserError as e:
        return f"refused: {e}\n"
    lines = [shlex.join(argv(p))]
    lines += [f"# {n}" for n in p.notes]
    lines.append(f"# numbering: {p.numbering_mode}; guest_to_spec: {list(p.guest_to_spec)}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", topology.catalog_names())
def test_golden_argv(name):
    got = render(name)
    path = GOLDEN / f"{name}.argv"
    if os.environ.get("LAB_REGEN") == "1":
        path.write_text(got)
    assert path.exists(), f"no golden file {path}; run LAB_REGEN=1 pytest {__file__}"
    assert got == path.read_text(), f"{name}: argv changed; if intended, LAB_REGEN=1 and review the diff"


def test_every_cpu_lands_in_its_node():
    """-numa cpu args cover every (socket, die) exactly once, in the spec's node."""
    for name in topology.catalog_names():
        t = topology.load(name)
        if t.arch != "x86_64" or t.n_cpus > 255:
            continue
        p = plan(t, HOST_10 if t.has_clusters else HOST_72)  # x86 clusters: QEMU 9.2+
        s = t.shape
        dies = s.llcs_per_socket
        cover = {}
        for a in p.numa_cpu_args:
            kv = dict(x.split("=") for x in a.split(",")[1:])
            node = t.node_ids[int(kv["node-id"])]
            sock = int(kv["socket-id"])
            for d in ([int(kv["die-id"])] if "die-id" in kv else range(dies)):
                assert (sock, d) not in cover
                cover[(sock, d)] = node
        for c in t.cpus:
            assert cover[(c.socket, c.llc % dies)] == c.node


def test_guest_numbering_is_qemu_order():
    t = topology.load("zen3-2s-mini")
    p = plan(t, HOST_72)
    # QEMU: socket 0 = guest CPUs 0-15, SMT siblings adjacent; spec: socket 0 = 0-7,16-23.
    assert p.guest_to_spec[:4] == (0, 16, 1, 17)
    assert sorted(p.guest_to_spec[:16]) == list(t.node_cpus(0))
    assert p.numbering_mode == "translated"
    assert plan(topology.load("numa4-96-mini"), HOST_72).numbering_mode == "native"


def test_amd_spec_gets_an_amd_model_with_topoext_under_tcg():
    """The guest's own kernel takes its AMD family 17h+ paths (node_reclaim_distance 32,
    SMT and LLC from CPUID 0x8000001E/0x8000001D): no vendor effect left to name."""
    zen3 = plan(topology.load("zen3-2s-mini"), HOST_72)
    assert zen3.cpu_vendor == "amd" and zen3.guest_reclaim_distance == 32 and zen3.notes == ()
    assert zen3.cpu_model.startswith("EPYC-Milan,x-force-features=on,")
    forced_off = zen3.cpu_model.split(",")[2:]
    assert all(f.startswith("-") for f in forced_off) and "-topoext" not in forced_off
    # Family 17h: Zen2's model, not Zen1's (whose kernel path takes the LLC as APIC id >> 3).
    epyc = plan(topology.load("epyc7551-8n-mini"), HOST_72)
    assert epyc.cpu_model.startswith("EPYC-Rome,") and epyc.guest_reclaim_distance == 32
    # Intel spec: the Intel model, nothing to say.
    xeon = plan(topology.load("xeon-2s22c-mini"), HOST_72)
    assert xeon.cpu_model.startswith("Skylake-Server,") and xeon.notes == ()


def test_amd_model_refused_where_its_l3_lists_would_be_wrong():
    t = topology.loads(
        'arch = "x86_64"\n[cpu]\nvendor = "amd"\nmodel = "x"\nfamily = 0x19\n'
        "[topology]\nsockets = 2\nllcs_per_node = 2\ncores_per_cluster = 3\nthreads_per_core = 2\n"
        "[numa]\ndistances = [[10, 32], [32, 10]]\nmemory_mb = 256\n",
        where="t.toml", default_name="t",
    )
    p = plan(t, HOST_72)
    assert p.cpu_model.startswith("Skylake-Server") and any("not a power of two" in n for n in p.notes)
    assert any("vendor effect" in n for n in p.notes)


def test_vendor_effect_named_and_fixed_by_kernel_param():
    t = topology.load("zen3-2s-mini")
    p = plan(t, HOST_72, cpu_model="intel")
    assert p.guest_reclaim_distance == 30 and any("vendor effect" in n for n in p.notes)
    p2 = plan(t, HOST_72, cpu_model="intel", kernel_features=frozenset({"node_reclaim_distance_param"}))
    assert p2.guest_reclaim_distance == 32 and "node_reclaim_distance=32" in qemu.cmdline(p2)
    # The AMD model needs no parameter: the guest kernel sets 32 itself.
    p3 = plan(t, HOST_72, kernel_features=frozenset({"node_reclaim_distance_param"}))
    assert p3.guest_reclaim_distance == 32 and "node_reclaim_distance" not in qemu.cmdline(p3)
    # Intel spec at distance 21: nothing to say.
    assert plan(topology.load("xeon-2s22c-mini"), HOST_72).notes == ()


def test_tcg_speed_params_and_append_overrides_them():
    t = topology.load("zen3-2s-mini")
    line = qemu.cmdline(plan(t, HOST_72))
    assert "rodata=off mitigations=off" in line
    # Under KVM neither costs anything: the guest keeps the kernel's defaults.
    assert "mitigations=off" not in qemu.cmdline(plan(t, HOST_KVM))
    p = plan(t, HOST_72, cpu_model="intel", kernel_features=frozenset({"node_reclaim_distance_param"}), append="mitigations=auto rodata=on")
    line = qemu.cmdline(p)
    # the user's words come last, after lab's own parameters, so the kernel takes theirs
    assert line.endswith("node_reclaim_distance=32 mitigations=auto rodata=on")
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--dry-run", "--append", "sched_verbose"])
    assert r.exit_code == 0 and "sched_verbose'" in r.output


def test_accel_auto():
    t = topology.load("xeon-2s22c-mini")
    assert plan(t, HOST_72).accel == "tcg"
    assert plan(t, HOST_KVM).accel == "kvm"
    assert plan(t, HOST_KVM).cpu_model == "host"
    # arm64 on an x86 host is TCG whatever KVM can do.
    assert plan(topology.load("kunpeng920-2s-mini"), HOST_KVM).accel == "tcg"
    with pytest.raises(UserError, match="KVM is not usable"):
        plan(t, HOST_72, accel="kvm")


def test_refusals_name_the_qemu_version():
    with pytest.raises(UserError, match=r"256 vCPUs need x2APIC, which TCG emulates from QEMU 9\.0: needs QEMU 9\.0\.0 or newer \(here: 7\.2\.0 \(system\)\); `lab qemu fetch` .* \(or `lab qemu build` builds it\)"):
        plan(topology.load("zen3-2s"), HOST_72)
    clusters = topology.loads(
        """
[cpu]
vendor = "intel"
[topology]
sockets = 1
clusters_per_llc = 2
cores_per_cluster = 2
"""
    )
    with pytest.raises(UserError, match=r"x86 clusters \(-smp modules= with an L2 per module through -machine smp-cache\): needs QEMU 9\.2\.0 or newer"):
        plan(clusters, HOST_72)
    smt_arm = topology.loads(
        """
arch = "arm64"
[cpu]
vendor = "arm"
[topology]
sockets = 1
cores_per_cluster = 2
threads_per_core = 2
"""
    )
    with pytest.raises(UserError, match="threads_per_core"):
        plan(smt_arm, HOST_72)


def test_kvm_usable_needs_vmx_or_svm(tmp_path):
    ok, why = host_mod.kvm_usable("x86_64", cpuinfo="flags : fpu hypervisor\n", dev=str(tmp_path / "nokvm"))
    assert not ok and "does not exist" in why
    if os.path.exists("/dev/kvm") and os.access("/dev/kvm", os.R_OK | os.W_OK):
        ok, why = host_mod.kvm_usable("x86_64", cpuinfo="flags : fpu hypervisor\n")
        assert not ok and "vmx/svm" in why


def test_tcg_threading_by_vcpus_per_core():
    assert qemu.tcg_threading(4, 2) == "multi"
    assert qemu.tcg_threading(32, 2) == "single"
    assert qemu.tcg_threading(32, 16) == "multi"
    t = topology.load("zen3-2s-mini")
    assert "tcg,thread=single" in argv(plan(t, HOST_72))
    assert "tcg,thread=multi" in argv(plan(t, HOST_72, tcg="multi"))


def test_apic_ids_beyond_254_are_refused_under_tcg():
    t = topology.loads(
        """
[cpu]
vendor = "intel"
[topology]
sockets = 3
llcs_per_node = 5
cores_per_cluster = 17
[numa]
distances = [[10, 20, 20], [20, 10, 20], [20, 20, 10]]
"""
    )
    assert t.n_cpus == 255
    assert qemu.max_apic_id(t) == (2 << 8) | (4 << 5) | 16
    with pytest.raises(UserError, match="highest APIC ID would be 656"):
        plan(t, HOST_72)
    flat = topology.loads('[cpu]\nvendor = "intel"\n[topology]\nsockets = 1\ncores_per_cluster = 255\n')
    assert qemu.max_apic_id(flat) == 254
    plan(flat, HOST_72)  # 255 vCPUs, IDs 0-254: fine


def test_arm64_gic_and_size_limits():
    def arm(extra_cpu: str, cores: int) -> topology.Topology:
        return topology.loads(f'arch = "arm64"\n[cpu]\nvendor = "arm"\n{extra_cpu}\n[topology]\nsockets = 1\ncores_per_cluster = {cores}\n')

    with pytest.raises(UserError, match="GICv2 addresses at most 8 CPUs, this machine has 16"):
        plan(arm("gic = 2", 16), HOST_72)
    assert plan(arm("gic = 2", 8), HOST_72).machine == "virt"
    assert plan(arm("", 16), HOST_72).machine == "virt,gic-version=3"
    with pytest.raises(UserError, match="at most 512"):
        plan(arm("", 513), HOST_72)
    with pytest.raises(topology.SpecError, match="cpu.gic: must be 2 or 3"):
        arm("gic = 4", 2)


def test_arm64_under_tcg_gets_tlbi_range_and_no_kpti():
    """QEMU's max CPU (FEAT_TLBIRANGE) without pointer authentication, SVE, SME; kpti=0 for
    any model (mitigations=off leaves KPTI on where KASLR asks for it); not on x86."""
    t = topology.load("kunpeng920-2s-mini")
    a = argv(plan(t, HOST_72))
    assert a[a.index("-cpu") + 1] == "max,pauth=off,sve=off,sme=off"
    assert "kpti=0" in qemu.cmdline(plan(t, HOST_72)).split()
    p = plan(t, HOST_72, cpu_model="cortex-a72")
    assert p.cpu_model == "cortex-a72" and "kpti=0" in qemu.cmdline(p).split()
    assert "kpti=0" not in qemu.cmdline(plan(topology.load("zen3-2s-mini"), HOST_72)).split()


HOTPLUG = frozenset({"cpu_hotplug"})


def _flat(n: int, arch: str = "x86_64") -> topology.Topology:
    return topology.from_dict(
        {"name": f"flat{n}", "arch": arch, "cpu": {"vendor": "intel" if arch == "x86_64" else "arm"},
         "topology": {"sockets": 2, "cores_per_cluster": n // 2}, "numa": {"distances": [[10, 20], [20, 10]]}}
    )  # fmt: skip


def test_bringup_hotplug_only_above_threshold_under_tcg_with_a_hotplug_kernel():
    n = qemu.HOTPLUG_BRINGUP_ABOVE
    assert qemu.bringup_mode(n, "tcg") == "boot"
    assert qemu.bringup_mode(n + 2, "tcg") == "hotplug"
    assert qemu.bringup_mode(n + 2, "kvm") == "boot"
    assert qemu.bringup_mode(n + 2, "tcg", kernel_hotplug=False) == "boot"
    assert qemu.bringup_mode(n + 2, "tcg", arch="arm64") == "boot"  # no jiffies tick storm there
    arm = plan(_flat(128, "arm64"), HOST_72, kernel_features=HOTPLUG)
    assert arm.bringup == "boot" and arm.tcg_threads == "single"
    assert plan(_flat(128, "arm64"), HOST_72, kernel_features=HOTPLUG, bringup="hotplug").bringup == "hotplug"
    big = _flat(128)
    p = plan(big, HOST_72, kernel_features=HOTPLUG)
    assert (p.bringup, p.boot_cpus) == ("hotplug", 1)
    assert "maxcpus=1" in qemu.cmdline(p).split()
    assert any("CPUs 1-127 are brought online by lab's agent" in note for note in p.notes)
    # A kernel without CONFIG_HOTPLUG_CPU (or one lab cannot read) boots them all.
    p = plan(big, HOST_72)
    assert (p.bringup, p.boot_cpus) == ("boot", 128)
    assert "maxcpus" not in qemu.cmdline(p)
    # --bringup boot and small machines: no maxcpus.
    assert "maxcpus" not in qemu.cmdline(plan(big, HOST_72, kernel_features=HOTPLUG, bringup="boot"))
    assert "maxcpus" not in qemu.cmdline(plan(_flat(32), HOST_72, kernel_features=HOTPLUG))


def test_forced_hotplug_needs_a_hotplug_kernel():
    with pytest.raises(UserError, match="CONFIG_HOTPLUG_CPU"):
        plan(_flat(16), HOST_72, bringup="hotplug")
    p = plan(_flat(16), HOST_72, kernel_features=HOTPLUG, bringup="hotplug")
    assert "maxcpus=1" in qemu.cmdline(p).split()


def test_boot_cpus_cover_numa_in_package():
    # Naples: 4 nodes per package.  x86 decides at boot whether a package holds
    # several nodes (no DIE level then), so CPU 0's package must show a second node
    # before maxcpus stops bring-up: the first guest CPU of node 1 boots too.
    t = topology.load("epyc7551-8n-mini")
    p = plan(t, HOST_72, kernel_features=HOTPLUG, bringup="hotplug")
    by_id = {c.id: c for c in t.cpus}
    guest = [by_id[s] for s in p.guest_to_spec]
    first_other = next(g for g, c in enumerate(guest) if c.socket == guest[0].socket and c.node != guest[0].node)
    assert p.boot_cpus == first_other + 1 > 1
    assert all(c.node == guest[0].node for c in guest[: p.boot_cpus - 1])
    assert f"maxcpus={p.boot_cpus}" in qemu.cmdline(p).split()
    # One node per package (and arm64, which reads the whole cpu-map at boot): one CPU.
    assert plan(topology.load("zen3-2s-mini"), HOST_72, kernel_features=HOTPLUG, bringup="hotplug").boot_cpus == 1
    assert plan(topology.load("kunpeng920-2s-mini"), HOST_72, kernel_features=HOTPLUG, bringup="hotplug").boot_cpus == 1


def test_hotplug_bringup_runs_one_tcg_thread_per_vcpu():
    assert qemu.tcg_threading(128, 2, "hotplug") == "multi"
    assert qemu.tcg_threading(128, 2, "boot") == "single"
    p = plan(_flat(128), HOST_72, kernel_features=HOTPLUG)
    assert p.tcg_threads == "multi"
    assert plan(_flat(128), HOST_72, kernel_features=HOTPLUG, tcg="single").tcg_threads == "single"
    assert plan(_flat(128), HOST_72).tcg_threads == "single"


def test_more_than_255_x86_vcpus_get_x2apic_and_an_interrupt_remapping_iommu():
    """zen3-2s at full size (256 vCPUs) under TCG on QEMU 10: the EPYC model needs
    x2apic=on (QEMU refuses it otherwise) and the guest needs interrupt remapping to run
    in x2APIC mode (without it CPU 255 was refused); minis get neither."""
    from lab.render import libvirt as rl

    h10 = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (10, 0, 13), "arm64": (10, 0, 13)}, kvm=False, kvm_reason="t")
    p = qemu.plan(topology.load("zen3-2s"), h10)
    a = qemu.argv(p, qemu.boot_files(p, Path("K")))
    assert a[a.index("-cpu") + 1].endswith(",x2apic=on")
    assert a[a.index("intel-iommu,intremap=on,eim=on") - 1] == "-device"
    assert "intel-iommu,intremap=on,eim=on" in rl.domain_xml(p, qemu.boot_files(p, Path("K")), name="t")
    mini = qemu.plan(topology.load("zen3-2s-mini"), h10)
    m = shlex.join(qemu.argv(mini, qemu.boot_files(mini, Path("K"))))
    assert "x2apic=on" not in m and "intel-iommu" not in m


def test_intel_model_with_dies_on_qemu_10_keeps_cpuid_0x1f_out():
    """QEMU 10.0.13 aborted at boot on the Intel model with several dies per socket (an
    assertion in its CPUID 0x1F encoder); the model's own level (0xd) keeps the leaf out.
    QEMU 7.2 and one-die machines are left as they were."""
    from lab import topology as topo_mod

    h10 = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (10, 0, 13), "arm64": (10, 0, 13)}, kvm=False, kvm_reason="t")
    spec = topo_mod.load("zen3-2s-mini")
    p = qemu.plan(spec, h10, VmOptions(cpu_model="intel"))  # 4 dies per socket, Intel model
    assert p.cpu_model.startswith("Skylake-Server,") and p.cpu_model.endswith(",level=13")
    assert not qemu.plan(spec, HOST_72, VmOptions(cpu_model="intel")).cpu_model.endswith(",level=13")
    one_die = qemu.plan(topo_mod.load("xeon-2s22c-mini"), h10)
    assert "level=" not in one_die.cpu_model
    assert "level=" not in qemu.plan(spec, h10).cpu_model  # the AMD model: no 0x1F abort seen


def test_x86_clusters_are_modules_with_the_l2_per_module():
    """An x86 cluster is a QEMU module (-smp modules=, 9.1) whose L2 -machine smp-cache
    puts at the module (9.2): the guest builds CLS from the CPUs sharing an L2.  On QEMU 10
    the model keeps its own CPUID level (modules raise it to 0x1F, which aborted)."""
    h10 = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (10, 0, 13), "arm64": (10, 0, 13)}, kvm=False, kvm_reason="t")
    h92 = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (9, 2, 0), "arm64": (9, 2, 0)}, kvm=False, kvm_reason="t")
    for name, n, modules in (("jacobsville-24c-mini", 12, 3), ("jacobsville-24c", 24, 6)):
        t = topology.load(name)
        p = qemu.plan(t, h10)
        assert p.smp == f"{n},sockets=1,modules={modules},cores=4,threads=1"
        assert p.machine == "q35,smp-cache.0.cache=l2,smp-cache.0.topology=module"
        assert p.cpu_model.endswith(",level=13")
        assert "level=" not in qemu.plan(t, h92).cpu_model  # the abort is 10.0's
        a = argv(p)
        assert a[a.index("-machine") + 1] == p.machine and a[a.index("-smp") + 1] == p.smp
    # APIC ids: thread, core, module, die, socket fields, each a power of two wide
    assert qemu.max_apic_id(topology.load("jacobsville-24c")) == (5 << 2) | 3
    two = topology.loads(
        '[cpu]\nvendor = "intel"\n[topology]\nsockets = 2\nllcs_per_node = 2\nclusters_per_llc = 3\n'
        "cores_per_cluster = 4\nthreads_per_core = 2\n[numa]\ndistances = [[10, 20], [20, 10]]\n"
    )
    # socket << (1 thread + 2 core + 2 module + 1 die bits) | die << 5 | module << 3 | core << 1 | thread
    assert qemu.max_apic_id(two) == (1 << 6) | (1 << 5) | (2 << 3) | (3 << 1) | 1
    assert qemu.plan(two, h10).smp == "96,sockets=2,dies=2,modules=3,cores=4,threads=2"


def test_amd_models_under_tcg_preset_every_cpus_delay_loop_from_the_host_tsc():
    """Issue 32, item 6: the EPYC models have no constant TSC under TCG, so each secondary
    CPU recalibrated its delay loop (about 100 ms each, and wrongly); lpj= from the host's
    TSC rate and the kernel's HZ gives every CPU the boot CPU's own value."""
    import dataclasses

    host = dataclasses.replace(HOST_72, tsc_khz=2596148)
    hz = frozenset({"hz=250", "cpu_hotplug"})
    p = plan(topology.load("zen3-2s-mini"), host, kernel_features=hz)
    assert p.cpu_vendor == "amd" and p.lpj == 2596148 * 4 == 10384592  # the guest's boot CPU: lpj=10384564
    assert "lpj=10384592" in qemu.cmdline(p).split() and p.to_dict()["lpj"] == 10384592
    # --append goes after it, and the kernel takes the last lpj=: lpj=0 is the old boot.
    assert qemu.cmdline(plan(topology.load("zen3-2s-mini"), host, kernel_features=hz, append="lpj=0")).split()[-1] == "lpj=0"
    assert plan(topology.load("zen3-2s-mini"), host, kernel_features=frozenset({"hz=1000"})).lpj == 2596148
    # None where it is not needed or not known: the Intel model (its secondaries reuse the
    # boot CPU's value), KVM, arm64, an unknown host TSC rate or kernel HZ.
    assert plan(topology.load("zen3-2s-mini"), host, kernel_features=hz, cpu_model="intel").lpj == 0
    assert plan(topology.load("xeon-2s22c-mini"), host, kernel_features=hz).lpj == 0
    assert plan(topology.load("kunpeng920-2s-mini"), host, kernel_features=hz).lpj == 0
    assert plan(topology.load("zen3-2s-mini"), HOST_72, kernel_features=hz).lpj == 0
    assert plan(topology.load("zen3-2s-mini"), host, kernel_features=frozenset({"cpu_hotplug"})).lpj == 0
    kvm = dataclasses.replace(HOST_KVM, tsc_khz=2596148, cpu_vendor="amd")
    assert plan(topology.load("zen3-2s-mini"), kvm, kernel_features=hz).lpj == 0
    assert "lpj=" not in qemu.cmdline(plan(topology.load("xeon-2s22c-mini"), host, kernel_features=hz))


@pytest.mark.parametrize(
    ("cpuinfo", "cpufreq", "khz"),
    [
        ("model name\t: AMD EPYC\ncpu MHz\t\t: 2596.148\nflags\t\t: fpu tsc constant_tsc\n", False, 2596148),  # a VM: no cpufreq
        ("model name\t: AMD EPYC 7B13\ncpu MHz\t\t: 3400.012\nflags\t\t: fpu constant_tsc\n", True, 0),  # cpu MHz is the current clock
        ("model name\t: Intel(R) Xeon(R) CPU E5-2690 v4 @ 2.60GHz\ncpu MHz\t\t: 1200.000\nflags\t\t: constant_tsc\n", True, 2600000),
        ("model name\t: AMD Athlon\ncpu MHz\t\t: 2000.000\nflags\t\t: fpu tsc\n", False, 0),  # no constant TSC: no one rate
        ("", False, 0),
    ],
)
def test_host_tsc_rate_only_where_cpuinfo_says_it(cpuinfo, cpufreq, khz):
    assert host_mod.tsc_khz(cpuinfo, cpufreq) == khz
