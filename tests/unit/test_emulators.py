"""Which QEMU a boot uses (lab.emulators): the system's where it can express the machine,
lab's built QEMU where it cannot, --qemu to override; lab's store of built QEMUs; the
build's apt options never touch the system's apt configuration."""

from __future__ import annotations

import json
import os

import pytest

from lab import emulators, topology
from lab import host as host_mod
from lab.emulators import Emulator
from lab.errors import UserError
from lab.plan import VmOptions
from lab.render.qemu import plan

LAB10 = Emulator("x86_64", "/cache/qemu/store/10.0.13-abc/bin/qemu-system-x86_64", (10, 0, 13), "lab", "10.0.13-abc")
LAB10_ARM = Emulator("arm64", "/cache/qemu/store/10.0.13-abc/bin/qemu-system-aarch64", (10, 0, 13), "lab", "10.0.13-abc")
BARE = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")
BUILT = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test",
                      built=(LAB10, LAB10_ARM))  # fmt: skip
CLUSTERS = """
[cpu]
vendor = "intel"
[topology]
sockets = 1
clusters_per_llc = 2
cores_per_cluster = 2
"""


@pytest.mark.parametrize(
    ("name", "host", "want"),
    [
        ("zen3-2s-mini", BARE, ("qemu-system-x86_64", (7, 2, 0))),  # 7.2 can: the system's
        ("zen3-2s-mini", BUILT, ("qemu-system-x86_64", (7, 2, 0))),  # a built one does not displace it
        ("zen3-2s", BUILT, (LAB10.path, (10, 0, 13))),  # 256 vCPUs under TCG: x2APIC, 9.0+
        ("kunpeng920-2s-mini", BUILT, ("qemu-system-aarch64", (7, 2, 0))),  # arm64 clusters: 7.0+
    ],
)
def test_auto_takes_the_system_qemu_where_it_can_express_the_machine(name, host, want):
    p = plan(topology.load(name), host)
    assert (p.qemu, p.qemu_version) == want
    lab_note = [n for n in p.notes if n.startswith("QEMU ")]
    assert bool(lab_note) == (want[0] == LAB10.path)
    if lab_note:
        assert "needs 9.0.0+" in lab_note[0] and LAB10.path in lab_note[0]


def test_x86_clusters_take_the_built_qemu_and_7_2_alone_refuses_naming_the_command():
    t = topology.loads(CLUSTERS)
    with pytest.raises(UserError, match=r"x86 clusters \(-smp modules= with an L2 per module through -machine smp-cache\): needs QEMU 9\.2\.0 or newer \(here: 7\.2\.0 \(system\)\); `lab qemu build`"):
        plan(t, BARE)
    e = emulators.choose(BUILT.emulators("x86_64"), "x86_64", "auto", *emulators.required(t, "tcg"))
    assert e == LAB10


def test_qemu_option_overrides_and_is_refused_when_it_cannot_express_the_machine(tmp_path):
    mini, full = topology.load("zen3-2s-mini"), topology.load("zen3-2s")
    assert plan(mini, BUILT, VmOptions(qemu="lab")).qemu == LAB10.path
    assert plan(mini, BUILT, VmOptions(qemu="system")).qemu == "qemu-system-x86_64"
    with pytest.raises(UserError, match=r"--qemu system is 7\.2\.0; `lab qemu build`"):
        plan(full, BUILT, VmOptions(qemu="system"))
    with pytest.raises(UserError, match=r"--qemu lab: lab has built no QEMU for x86_64; run `lab qemu build`"):
        plan(mini, BARE, VmOptions(qemu="lab"))
    fake = tmp_path / "qemu-system-x86_64"
    fake.write_text("#!/bin/sh\necho 'QEMU emulator version 9.2.1 (v9.2.1)'\n")
    fake.chmod(0o755)
    p = plan(full, BARE, VmOptions(qemu=str(fake)))
    assert (p.qemu, p.qemu_version) == (str(fake), (9, 2, 1))
    silent = tmp_path / "not-qemu"
    silent.write_text("#!/bin/sh\necho hello\n")
    silent.chmod(0o755)
    with pytest.raises(UserError, match="does not say a QEMU version"):
        plan(mini, BARE, VmOptions(qemu=str(silent)))


def test_store_lists_whole_entries_only(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    good = emulators.store() / "10.0.13-0123456789ab"
    (good / "bin").mkdir(parents=True)
    for b in ("qemu-system-x86_64", "qemu-system-aarch64"):
        (good / "bin" / b).write_text("")
    (good / "metadata.json").write_text(json.dumps({"version": "10.0.13", "binaries": {
        "x86_64": "bin/qemu-system-x86_64", "arm64": "bin/qemu-system-aarch64"}}))  # fmt: skip
    half = emulators.store() / f".tmp-{os.getpid()}-10.0.13-x"  # a build still publishing
    half.mkdir()
    (half / "metadata.json").write_text(json.dumps({"version": "10.0.13", "binaries": {}}))
    broken = emulators.store() / "9.2.0-ffffffffffff"
    broken.mkdir()
    (broken / "metadata.json").write_text("{not json")
    got = emulators.built()
    assert {(e.arch, e.version, e.origin, e.entry) for e in got} == {
        ("x86_64", (10, 0, 13), "lab", good.name), ("arm64", (10, 0, 13), "lab", good.name)}  # fmt: skip


def test_the_build_reads_only_labs_private_apt_sources(tmp_path):
    opts = emulators._apt_options(tmp_path)
    pairs = dict(o.split("=", 1) for o in opts if o != "-o")
    assert pairs["Dir::Etc::SourceList"] == str(tmp_path / "sources.list")
    assert pairs["Dir::Etc::SourceParts"] == "/dev/null"  # not /etc/apt/sources.list.d
    assert pairs["Dir::State::Lists"].startswith(str(tmp_path))
    assert pairs["Dir::Cache"].startswith(str(tmp_path))
    assert not any("/etc/apt" in v for v in pairs.values())


def test_configure_builds_only_labs_emulators_with_system_firmware(tmp_path):
    args = emulators.configure_args(tmp_path / "stage", tmp_path / "py", ("x86_64", "arm64"))
    assert "--target-list=x86_64-softmmu,aarch64-softmmu" in args
    assert "--cc=ccache gcc" in args
    assert f"--firmwarepath={emulators.FIRMWARE_PATH}" in args
    assert "--disable-download" in args and "--disable-user" in args


def test_strip_keeps_the_program_and_drops_its_debug_info(tmp_path):
    """lab qemu build strips what it publishes (QEMU's build keeps -g); a binary built
    with -g here stands for it."""
    import shutil
    import subprocess

    if not shutil.which("gcc") or not shutil.which("strip"):
        pytest.skip("gcc and strip (binutils) are not installed")
    src = tmp_path / "p.c"
    src.write_text('#include <stdio.h>\nstatic int f(int x) { return x * 7; }\nint main(void) { printf("%d\\n", f(6)); return 0; }\n')
    exe = tmp_path / "p"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(exe), str(src)], check=True)
    before = exe.stat().st_size
    assert b".debug_info" in exe.read_bytes()
    emulators.strip(exe)
    assert exe.stat().st_size < before and b".debug_info" not in exe.read_bytes()
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "42\n"


def test_of_two_builds_of_one_version_the_latest_is_taken(tmp_path, monkeypatch):
    import json

    monkeypatch.setattr(emulators, "store", lambda: tmp_path)
    for entry, built in (("10.0.13-aaaa", "2026-11-23T18:00:00Z"), ("10.0.13-bbbb", "2026-11-23T23:00:00Z")):
        (tmp_path / entry / "bin").mkdir(parents=True)
        (tmp_path / entry / "bin" / "qemu-system-x86_64").write_text("")
        (tmp_path / entry / "metadata.json").write_text(json.dumps(
            {"version": "10.0.13", "binaries": {"x86_64": "bin/qemu-system-x86_64"}, "built": built}))
    assert [e.entry for e in emulators.built()] == ["10.0.13-bbbb", "10.0.13-aaaa"]  # not the name's order
