"""Heterogeneous machines (issue 34, item 3): per-CPU capacity in the spec, the device tree
and the guest's expected sched domains; captured cpu_capacity imported."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

from lab import expect, host, importer, sysfs, topology
from lab.render import dtb, qemu

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _synth_sysfs as ss  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
QEMU_DTS = (HERE / "fixtures" / "dts" / "kunpeng920-2s-mini.qemu72.dts").read_text()
HOST = host.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")

BASE = """arch = "{arch}"
[cpu]
vendor = "{vendor}"
model = "x"
{cap}
[topology]
sockets = 1
cores_per_cluster = 8
"""


def spec(cap: str, arch: str = "arm64", vendor: str = "arm") -> topology.Topology:
    return topology.loads(BASE.format(arch=arch, vendor=vendor, cap=cap), where="s.toml")


def test_catalog_machine_capacities():
    t = topology.load("tensor-gs101")
    assert t.capacities == {0: 250, 1: 250, 2: 250, 3: 250, 4: 620, 5: 620, 6: 1024, 7: 1024}
    assert t.asymmetric and t.shape is not None


def test_capacities_are_normalized_like_linux():
    t = spec('capacity = { "0-3" = 446, "4-7" = 1178 }')
    # topology_normalize_cpu_scale(): raw * 1024 / max, rounded down.
    assert t.capacities[0] == 446 * 1024 // 1178 == 387 and t.capacities[7] == 1024


@pytest.mark.parametrize(
    "cap, arch, vendor, words",
    [
        ('capacity = { "0-3" = 446, "4-7" = 1024 }', "x86_64", "intel", "cpu.capacity: per-CPU capacity reaches the guest through the arm64"),
        ('capacity = { "0-3" = 446 }', "arm64", "arm", "cpu.capacity: CPU 4 has no capacity (4 CPUs missing)"),
        ('capacity = { "0-4" = 446, "4-7" = 1024 }', "arm64", "arm", "CPU 4 is given a capacity twice"),
        ('capacity = { "0-7" = 0 }', "arm64", "arm", "cpu.capacity.'0-7': must be at least 1"),
        ('capacity = { "0-7" = "big" }', "arm64", "arm", "must be a whole number"),
        ('capacity = { "0-8" = 5 }', "arm64", "arm", "CPU 8 is not a CPU of this machine"),
        ("capacity = 5", "arm64", "arm", "must be a table of cpulist"),
    ],
)
def test_bad_capacity_is_one_line_naming_the_field(cap, arch, vendor, words):
    with pytest.raises(topology.SpecError) as e:
        spec(cap, arch, vendor)
    assert words in str(e.value) and str(e.value).startswith("s.toml: cpu.capacity") and "\n" not in str(e.value)


def test_device_tree_gets_capacity_dmips_mhz_per_cpu():
    kp = topology.load("kunpeng920-2s-mini")
    caps = tuple((c, 512 if c < 16 else 1024) for c in kp.cpu_ids)
    t = dataclasses.replace(kp, dmips_mhz=caps)
    out = dtb.edit(QEMU_DTS, t)
    for m in re.finditer(r"cpu@(\d+) \{\n(.*?)\n\t\t\};", out, re.S):
        got = re.search(r"capacity-dmips-mhz = <0x([0-9a-f]+)>;", m.group(2))
        assert got, m.group(0)
    assert out.count("capacity-dmips-mhz = <0x200>;") == 16 and out.count("capacity-dmips-mhz = <0x400>;") == 16
    # Without capacities the tree is what it was (the golden test pins it).
    assert "capacity-dmips-mhz" not in dtb.edit(QEMU_DTS, kp)


def test_expected_domains_have_the_asymmetric_capacity_flags():
    t = topology.load("tensor-gs101")
    doms = expect.expected_domains(t, reclaim_distance=30, cluster_level=False)
    assert [(d.name, len(d.span)) for d in doms[0]] == [("MC", 8)]
    assert {"SD_ASYM_CPUCAPACITY", "SD_ASYM_CPUCAPACITY_FULL"} <= doms[0][0].flags
    # A symmetric machine: neither flag.
    k = topology.load("kunpeng920-2s-mini")
    d = expect.expected_domains(k, reclaim_distance=30, cluster_level=True)
    assert not any("SD_ASYM_CPUCAPACITY" in x.flags for x in d[0])


def test_expected_asym_flags_follow_the_spans():
    """Two clusters, each of one capacity: the cluster level is symmetric, the level above
    holds both capacities (ASYM and FULL)."""
    text = BASE.format(arch="arm64", vendor="arm", cap='capacity = { "0-3" = 400, "4-7" = 1024 }').replace(
        "cores_per_cluster = 8", "clusters_per_llc = 2\ncores_per_cluster = 4"
    )
    t = topology.loads(text)
    doms = expect.expected_domains(t, reclaim_distance=30, cluster_level=True)[0]
    assert [(d.name, "SD_ASYM_CPUCAPACITY" in d.flags, "SD_ASYM_CPUCAPACITY_FULL" in d.flags) for d in doms] == [
        ("CLS", False, False),
        ("MC", True, True),
    ]


def test_verify_checks_capacities():
    t = topology.load("tensor-gs101")
    p = qemu.plan(t, HOST)
    g = sysfs.MachineView(online=tuple(range(8)))
    for i, sid in enumerate(p.guest_to_spec):
        g.cpus[i] = sysfs.CpuView(i, capacity=t.capacities[sid])
    checks = {c.name: c for c in expect.verify(t, p, g, cluster_level=False).checks}
    assert checks["CPU capacities"].ok and checks["CPU capacities"].expected == "0-3: 250 | 4-5: 620 | 6-7: 1024"
    g.cpus[5] = sysfs.CpuView(5, capacity=1024)
    checks = {c.name: c for c in expect.verify(t, p, g, cluster_level=False).checks}
    assert checks["CPU capacities"].status == "FAIL" and "CPU 5: 1024" in checks["CPU capacities"].actual


def test_import_of_an_arm64_capture_with_capacities(tmp_path):
    m = ss.build(cores_per_cluster=8)
    m.vendor = "ARM"
    f = ss.files(m, "mask")
    for c in range(8):
        f[f"sys/devices/system/cpu/cpu{c}/cpu_capacity"] = "1024\n" if c >= 6 else ("620\n" if c >= 4 else "250\n")
    view = sysfs.read_capture(ss.write(f, tmp_path))
    text, notes = importer.view_to_spec(view, "phone", "cap")
    t = topology.loads(text)
    assert t.arch == "arm64" and t.capacities == topology.load("tensor-gs101").capacities
    assert any("3 capacities" in n and "SD_ASYM_CPUCAPACITY" in n for n in notes)


def test_import_of_an_x86_hybrid_capture_names_what_is_lost(tmp_path):
    m = ss.build(cores_per_cluster=8)
    f = ss.files(m)
    for c in range(8):
        f[f"sys/devices/system/cpu/cpu{c}/cpu_capacity"] = "1024\n" if c < 4 else "600\n"
    text, notes = importer.view_to_spec(sysfs.read_capture(ss.write(f, tmp_path)), "hy", "cap")
    assert not topology.loads(text).capacities
    assert any("hybrid core types" in n for n in notes)


def test_no_dtc_refuses_a_machine_with_capacities():
    t = topology.load("tensor-gs101")
    with pytest.raises(Exception, match="install device-tree-compiler"):
        qemu.plan(t, dataclasses.replace(HOST, dtc=False))
