"""A real build of lab-6.1 (marker ``build``), then a boot check under QEMU.

Cold this takes ~8-10 min on 2 cores; with a warm ccache or an existing store
entry it takes seconds.  It uses the shared cache (LAB_CACHE or ~/.cache/lab) so
the kernel it builds is the one the VM tests boot.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.build

TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


@pytest.fixture(scope="module")
def lab61():
    if not TARBALL.is_file():
        pytest.skip(f"{TARBALL} missing: apt-get install linux-source-6.1")
    if shutil.which("gcc") is None or shutil.which("flex") is None or shutil.which("bison") is None:
        pytest.skip(
            "kernel build tools missing: apt-get install gcc make flex bison bc libelf-dev libssl-dev"
        )
    from lab.kernel import build, recipe

    return build.build(recipe.load("lab-6.1"))


def test_lab61_entry(lab61):
    from lab.kernel import image_arch, image_release, resolve

    a = lab61
    assert a.arch == "x86_64" and a.modules is None
    assert a.release.startswith("6.1.")
    assert "node_reclaim_distance_param" in a.features
    data = a.image.read_bytes()
    assert image_arch(data) == "x86_64" and image_release(data, "x86_64") == a.release
    m = a.metadata
    assert m["timings"]["build_s"] >= 0 and m["toolchain"]["cc"]
    assert m["inputs"]["source"]["identity"].startswith("debian:linux-source-6.1=")
    for sym in (
        "SCHED_MC",
        "SCHED_SMT",
        "SCHED_CLUSTER",
        "NUMA",
        "NUMA_BALANCING",
        "SCHEDSTATS",
        "SCHED_DEBUG",
        "VIRTIO_PCI",
        "VIRTIO_CONSOLE",
        "ACPI_NUMA",
        "X86_X2APIC",
        "DEBUG_FS",
        "FTRACE",
        "BLK_DEV_INITRD",
        "DEVTMPFS",
        "FUTEX",
        "UNIX",
    ):
        assert a.config_value(sym) == "y", sym
    assert int(a.config_value("NR_CPUS")) >= 256
    # The recipe name resolves to this entry without rebuilding.
    assert resolve("lab-6.1", "x86_64", build=False).id == a.id


def _initramfs(tmp: Path) -> Path:
    busybox = shutil.which("busybox")
    root = tmp / "root"
    (root / "bin").mkdir(parents=True)
    shutil.copy2(busybox, root / "bin" / "busybox")
    (root / "bin" / "sh").symlink_to("busybox")
    init = root / "init"
    init.write_text(
        "#!/bin/sh\n"
        "/bin/busybox mkdir -p /proc /sys\n"
        "/bin/busybox mount -t proc proc /proc\n"
        "/bin/busybox mount -t sysfs sysfs /sys\n"
        "/bin/busybox mount -t debugfs debugfs /sys/kernel/debug\n"
        "echo LAB-NODES $(/bin/busybox cat /sys/devices/system/node/online)\n"
        "echo LAB-DOMAINS $(/bin/busybox ls /sys/kernel/debug/sched/domains/cpu0)\n"
        "for d in /sys/kernel/debug/sched/domains/cpu0/domain*; do\n"
        "  echo LAB-FLAGS $(/bin/busybox cat $d/name) $(/bin/busybox cat $d/flags)\n"
        "done\n"
        "echo LAB-SCHEDSTAT $(/bin/busybox head -1 /proc/schedstat)\n"
        "echo LAB-PORT $(/bin/busybox cat /sys/class/virtio-ports/*/name)\n"
        "echo LAB-DONE\n"
        "/bin/busybox reboot -f\n"
    )
    init.chmod(0o755)
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
    cpio = subprocess.run(
        ["cpio", "-o", "-H", "newc", "--quiet"],
        cwd=root,
        input=files,
        capture_output=True,
        check=True,
    ).stdout
    out = tmp / "initramfs.cpio.gz"
    out.write_bytes(gzip.compress(cpio))
    return out


def test_lab61_boots_with_numa_and_param(lab61, tmp_path):
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None or shutil.which("busybox") is None or shutil.which("cpio") is None:
        pytest.skip("boot check needs qemu-system-x86 busybox-static cpio")
    initrd = _initramfs(tmp_path)
    # TCG, like lab's topology-faithful guests (and nested KVM can be slower than TCG).
    accel = "tcg,thread=multi"
    argv = [
        qemu,
        "-accel",
        accel,
        "-m",
        "1G",
        "-smp",
        "4,sockets=2,cores=2,threads=1",
        "-object",
        "memory-backend-ram,id=m0,size=512M",
        "-object",
        "memory-backend-ram,id=m1,size=512M",
        "-numa",
        "node,nodeid=0,cpus=0-1,memdev=m0",
        "-numa",
        "node,nodeid=1,cpus=2-3,memdev=m1",
        "-numa",
        "dist,src=0,dst=1,val=32",
        "-device",
        "virtio-serial-pci",
        "-chardev",
        "null,id=c0",
        "-device",
        "virtserialport,chardev=c0,name=lab.results",
        "-nographic",
        "-no-reboot",
        "-kernel",
        str(lab61.image),
        "-initrd",
        str(initrd),
        "-append",
        "console=ttyS0 panic=-1 node_reclaim_distance=32",
    ]
    cp = subprocess.run(argv, capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    out = cp.stdout.decode(errors="replace")
    assert "LAB-DONE" in out, out[-3000:]
    assert "LAB-NODES 0-1" in out
    assert "domain0" in out and "domain1" in out
    numa = [ln for ln in out.splitlines() if ln.startswith("LAB-FLAGS NUMA")]
    # distance 32 is not above node_reclaim_distance=32: the NUMA level keeps fork balancing
    assert numa and "SD_BALANCE_FORK" in numa[0] and "SD_WAKE_AFFINE" in numa[0], out[-3000:]
    assert "node_reclaim_distance=32 (boot parameter, was 30)" in out
    assert "LAB-PORT lab.results" in out  # virtio-pci + virtio-console built in
