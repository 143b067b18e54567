"""Cache sizes per CPU (issue 34, item 3): `[caches] sizes` in the spec, the arm64 device
tree that carries them, `lab verify`'s check, and imports of captures whose core types
have caches of their own sizes (a DynamIQ phone)."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import expect, host, importer, sysfs, topology
from lab.cli import main
from lab.render import dtb, qemu

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _synth_sysfs as ss  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
QEMU_DTS = (HERE / "fixtures" / "dts" / "kunpeng920-2s-mini.qemu72.dts").read_text()
HOST = host.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")

PHONE = """arch = "{arch}"
[cpu]
vendor = "{vendor}"
model = "x"
capacity = {{ "0-3" = 250, "4-5" = 620, "6-7" = 1024 }}
[topology]
sockets = 1
cores_per_cluster = 8
[caches]
{sizes}
"""
SIZES = 'sizes = { L1d = { "0-3" = "32K", "4-7" = "64K" }, L2 = { "0-3" = "128K", "4-5" = "256K", "6-7" = "1M" }, L3 = "4M" }'


def phone(sizes: str = SIZES, arch: str = "arm64", vendor: str = "arm") -> topology.Topology:
    text = PHONE.format(arch=arch, vendor=vendor, sizes=sizes)
    if arch != "arm64":  # x86 CPUs cannot differ in capacity: only the sizes are under test
        text = text.replace('capacity = { "0-3" = 250, "4-5" = 620, "6-7" = 1024 }\n', "")
    return topology.loads(text, where="p.toml")


def test_sizes_per_cpu():
    t = phone()
    assert t.cache_size_kb("L2", 0) == 128 and t.cache_size_kb("L2", 5) == 256 and t.cache_size_kb("L2", 7) == 1024
    assert t.cache_size_kb("L3", 3) == 4096 and t.cache_size_kb("L1d", 4) == 64
    assert t.cache_size_kb("L1i", 0) is None  # not given: lab's default (none for L1)
    assert t.to_dict()["caches"]["size_kb"]["L2"]["6"] == 1024


@pytest.mark.parametrize(
    "sizes, arch, vendor, words",
    [
        ('sizes = { L2 = "512K" }', "x86_64", "intel", "caches.sizes: per-level cache sizes reach the guest through the arm64 device tree"),
        ('sizes = { L4 = "1M" }', "arm64", "arm", "caches.sizes.'L4': cache names are L1d, L1i, L2, L3"),
        ('sizes = { L2 = "12Q" }', "arm64", "arm", "caches.sizes.'L2': must be a size like \"512K\""),
        ('sizes = { L2 = "0K" }', "arm64", "arm", "caches.sizes.'L2': must be a size like"),
        ('sizes = { L2 = 512 }', "arm64", "arm", "caches.sizes.'L2': must be a size like"),
        ('sizes = { L2 = { "0-3" = "128K" } }', "arm64", "arm", "CPU 4 has no L2 size (4 CPUs missing)"),
        ('sizes = { L2 = { "0-4" = "128K", "4-7" = "1M" } }', "arm64", "arm", "CPU 4 is given an L2 size twice"),
        ('sizes = { L2 = { "0-8" = "128K" } }', "arm64", "arm", "CPU 8 is not a CPU of this machine"),
        ('sizes = { L3 = { "0-3" = "1M", "4-7" = "2M" } }', "arm64", "arm", "CPUs 0 and 4 share an L3 (one LLC) but are given 1024K and 2048K"),
        ("sizes = 5", "arm64", "arm", "caches.sizes: must be a table of cache name -> size"),
    ],
)
def test_bad_sizes_are_one_line_naming_the_field(sizes, arch, vendor, words):
    with pytest.raises(topology.SpecError) as e:
        phone(sizes, arch, vendor)
    assert words in str(e.value) and str(e.value).startswith("p.toml: caches.sizes") and "\n" not in str(e.value)


def test_a_core_s_threads_share_its_l2_size():
    text = PHONE.format(arch="arm64", vendor="arm", sizes='sizes = { L2 = { "0" = "1M", "1-15" = "512K" } }')
    text = text.replace("cores_per_cluster = 8", "cores_per_cluster = 8\nthreads_per_core = 2")
    text = text.replace('capacity = { "0-3" = 250, "4-5" = 620, "6-7" = 1024 }\n', "")
    with pytest.raises(topology.SpecError, match=r"CPUs 0 and 1 share an L2 \(one core\) but are given 1024K and 512K"):
        topology.loads(text, where="p.toml")


def kunpeng_with(sizes: dict[str, dict[int, int]]) -> topology.Topology:
    kp = topology.load("kunpeng920-2s-mini")
    return dataclasses.replace(kp, cache_kb=tuple((n, tuple(sorted(p.items()))) for n, p in sorted(sizes.items())))


def test_device_tree_carries_the_sizes():
    # Two core types on each socket's first node: CPUs 0-3 little (L1d 32K, L2 128K), the rest big.
    t = kunpeng_with({
        "L1d": {c: 32 if c < 4 else 64 for c in range(32)},
        "L2": {c: 128 if c < 4 else 1024 for c in range(32)},
        "L3": {c: 8192 for c in range(32)},
    })  # fmt: skip
    out = dtb.edit(QEMU_DTS, t)
    cpu = {int(m.group(1)): m.group(2) for m in re.finditer(r"\tcpu@(\d+) \{\n(.*?)\n\t\t\};", out, re.S)}
    assert "d-cache-size = <0x8000>;" in cpu[0] and "d-cache-size = <0x10000>;" in cpu[4]
    assert "d-cache-line-size = <0x40>;" in cpu[0] and "i-cache-size" not in cpu[0]  # L1i not given
    l2 = dict(re.findall(r"l2-cache(\d+) \{\n(?:.*\n)*?\t+cache-size = <0x([0-9a-f]+)>;", out))
    assert int(l2["0"], 16) == 128 * 1024 and int(l2["4"], 16) == 1024 * 1024
    l3 = re.findall(r"l3-cache\d+ \{\n(?:.*\n)*?\t+cache-size = <0x([0-9a-f]+)>;", out)
    assert {int(x, 16) for x in l3} == {8192 * 1024}
    # Without sizes the tree is what it was (test_dtb's golden pins it).
    assert "d-cache-size" not in dtb.edit(QEMU_DTS, topology.load("kunpeng920-2s-mini"))


def test_edited_tree_with_sizes_compiles(tmp_path):
    import shutil
    import subprocess

    if not shutil.which("dtc"):
        pytest.skip("dtc not installed")
    t = kunpeng_with({"L1i": {c: 64 for c in range(32)}, "L2": {c: 128 if c < 4 else 1024 for c in range(32)}})
    src = tmp_path / "x.dts"
    src.write_text(dtb.edit(QEMU_DTS, t))
    subprocess.run(["dtc", "-q", "-I", "dts", "-O", "dtb", "-o", str(tmp_path / "x.dtb"), str(src)], check=True)


def guest_view(t: topology.Topology, p, size_of) -> sysfs.MachineView:
    g = sysfs.MachineView(online=tuple(range(t.n_cpus)))
    for i, sid in enumerate(p.guest_to_spec):
        caches = [sysfs.Cache(lv, kind, (i,), size_of(sid, lv, kind)) for lv, kind in ((1, "Data"), (1, "Instruction"), (2, "Unified"))]
        caches.append(sysfs.Cache(3, "Unified", tuple(range(t.n_cpus)), size_of(sid, 3, "Unified")))
        g.cpus[i] = sysfs.CpuView(i, capacity=t.capacities.get(sid), caches=caches)
    return g


def test_verify_checks_the_sizes():
    t = phone()
    p = qemu.plan(t, HOST)
    name = {(1, "Data"): "L1d", (1, "Instruction"): "L1i", (2, "Unified"): "L2", (3, "Unified"): "L3"}

    def right(cpu, lv, kind):
        return t.cache_size_kb(name[(lv, kind)], cpu) or 48

    checks = {c.name: c for c in expect.verify(t, p, guest_view(t, p, right), cluster_level=False).checks}
    assert checks["L2 sizes"].ok and checks["L2 sizes"].expected == "0-3: 128K | 4-5: 256K | 6-7: 1024K"
    assert checks["L1d sizes"].ok and checks["L3 sizes"].ok and "L1i sizes" not in checks

    def wrong(cpu, lv, kind):  # what lab's tree gave before sizes: 512K for every L2
        return 512 if lv == 2 else right(cpu, lv, kind)

    checks = {c.name: c for c in expect.verify(t, p, guest_view(t, p, wrong), cluster_level=False).checks}
    assert checks["L2 sizes"].status == "FAIL" and checks["L2 sizes"].actual == "CPU 0: 512K; 8 CPUs differ"

    def missing(cpu, lv, kind):
        return None if lv == 3 else right(cpu, lv, kind)

    checks = {c.name: c for c in expect.verify(t, p, guest_view(t, p, missing), cluster_level=False).checks}
    assert checks["L3 sizes"].status == "FAIL" and checks["L3 sizes"].actual == "CPU 0: no L3 size; 8 CPUs differ"


def test_no_dtc_refuses_a_machine_with_sizes():
    spec = dataclasses.replace(phone(), dmips_mhz=())  # capacities would be refused first
    with pytest.raises(Exception, match="caches.sizes: cache sizes reach the guest through the device tree"):
        qemu.plan(spec, dataclasses.replace(HOST, dtc=False))


def phone_capture(tmp_path: Path, arch_vendor: str = "ARM", l3_split: bool = False) -> Path:
    """A DynamIQ phone: 4 little (L1d 32K, L2 128K), 2 mid (64K, 256K), 2 big (64K, 1M),
    one 4M L3; capacities 250/620/1024 (arm64 only)."""
    m = ss.build(cores_per_cluster=8)
    m.vendor = arch_vendor
    f = ss.files(m, "list")
    out = dict(f)
    for path in f:
        g = re.match(r"(.*/cpu(\d+)/cache/index(\d+))/level$", path)
        if not g:
            continue
        cpu, idx = int(g.group(2)), int(g.group(3))
        kind = [32 if cpu < 4 else 64, 32 if cpu < 4 else 64, 128 if cpu < 4 else (256 if cpu < 6 else 1024), 4096][idx]
        if idx == 3 and l3_split:
            kind = 4096 if cpu < 4 else 2048
        out[f"{g.group(1)}/size"] = f"{kind}K\n"
    if arch_vendor == "ARM":
        for c in range(8):
            out[f"sys/devices/system/cpu/cpu{c}/cpu_capacity"] = "1024\n" if c >= 6 else ("620\n" if c >= 4 else "250\n")
    return ss.write(out, tmp_path)


def test_import_of_a_phone_keeps_each_core_type_s_sizes(tmp_path):
    text, notes = importer.view_to_spec(sysfs.read_capture(phone_capture(tmp_path)), "phone", "cap")
    assert 'sizes = { L1d = { "0-3" = "32K", "4-7" = "64K" }, L1i = { "0-3" = "32K", "4-7" = "64K" }, ' \
        'L2 = { "0-3" = "128K", "4-5" = "256K", "6-7" = "1M" }, L3 = "4M" }' in text, text  # fmt: skip
    t = topology.loads(text)
    assert t.cache_size_kb("L2", 6) == 1024 and t.cache_size_kb("L3", 0) == 4096
    assert any(n == "L1d, L1i, L2 sizes differ between CPUs: the guest's device tree gives each CPU its own" for n in notes), notes
    assert not [n for n in notes if "not reproduced" in n]
    # Written again from the model (lab topo import --nearest keeps the ids): the same sizes.
    again = topology.loads(importer.groups_text(t, "p2", "# x"))
    assert again.cache_kb == t.cache_kb


def test_an_x86_capture_s_differing_sizes_are_still_named(tmp_path):
    _, notes = importer.view_to_spec(sysfs.read_capture(phone_capture(tmp_path, "GenuineIntel")), "hy", "cap")
    assert any(n.startswith("L2 sizes differ between CPUs (128K on CPUs 0-3, 256K on CPUs 4-5, 1024K on CPUs 6-7): not reproduced") for n in notes), notes


def test_a_size_that_differs_inside_an_llc_is_named_not_written(tmp_path):
    text, notes = importer.view_to_spec(sysfs.read_capture(phone_capture(tmp_path, l3_split=True)), "x", "cap")
    assert "L3 =" not in text and "L2 = {" in text
    assert "L3 sizes differ inside one LLC: not reproduced, the guest's L3 has lab's default size" in notes


def test_a_mini_keeps_uniform_sizes_only():
    kp = kunpeng_with({"L2": {c: 512 for c in range(32)}, "L1d": {c: 32 if c < 4 else 64 for c in range(32)}})
    text = importer.mini(kp, "kp-m", max_cpus=16)
    m = topology.loads(text)
    assert dict(m.cache_kb).keys() == {"L2"} and m.cache_size_kb("L2", 0) == 512
    assert "L1d sizes differ between the full machine's CPUs: the mini's are lab's defaults" in text


def test_bad_sizes_on_the_command_line_are_one_line(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text(PHONE.format(arch="arm64", vendor="arm", sizes='sizes = { L2 = "lots" }'))
    r = CliRunner().invoke(main, ["topo", "show", str(p)])
    assert r.exit_code == 2 and "caches.sizes.'L2': must be a size like" in r.output and "Traceback" not in r.output
