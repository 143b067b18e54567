"""lab.arch: the one table of per-architecture facts, its lookups, and its consistency."""

from __future__ import annotations

import os
import platform
import sys

import pytest

from lab import arch, topology
from lab.errors import UserError
from lab.image import tools
from lab.kernel import recipe


def test_get():
    assert arch.get("x86_64") is arch.X86_64
    assert arch.get("arm64") is arch.ARM64
    assert arch.NAMES == ("x86_64", "arm64")
    assert all(arch.get(n).name == n for n in arch.NAMES)


@pytest.mark.parametrize("name", ["mips", "aarch64", "amd64", ""])
def test_get_unknown_names_the_known(name):
    # Other spellings (uname's, Debian's) are not lab's names: from_uname/from_debian read them.
    with pytest.raises(UserError, match=f"unknown architecture '{name}' \\(known: x86_64, arm64\\)"):
        arch.get(name)


@pytest.mark.parametrize(
    "machine, want",
    [("x86_64", "x86_64"), ("amd64", "x86_64"), ("AMD64", "x86_64"), ("aarch64", "arm64"), ("arm64", "arm64"), ("riscv64", None)],
)
def test_from_uname(machine, want):
    a = arch.from_uname(machine)
    assert (a.name if a else None) == want


@pytest.mark.parametrize("deb, want", [("amd64", "x86_64"), ("arm64", "arm64"), ("i386", None), ("x86_64", None)])
def test_from_debian(deb, want):
    a = arch.from_debian(deb)
    assert (a.name if a else None) == want


@pytest.mark.parametrize("vendor, want", [("intel", "x86_64"), ("amd", "x86_64"), ("hisilicon", "arm64"), ("ampere", "arm64"), ("arm", "arm64"), ("generic", None)])
def test_from_vendor(vendor, want):
    a = arch.from_vendor(vendor)
    assert (a.name if a else None) == want


def test_from_kernel_image():
    bz = bytearray(0x400)
    bz[0x202:0x206] = b"HdrS"
    image = bytearray(0x400)
    image[0x38:0x3C] = b"ARM\x64"
    assert arch.from_kernel_image(bytes(bz)) is arch.X86_64
    assert arch.from_kernel_image(bytes(image)) is arch.ARM64
    assert arch.from_kernel_image(b"\x7fELF" + bytes(0x400)) is None
    assert arch.from_kernel_image(b"") is None


def test_host():
    a = arch.host()
    assert a is arch.from_uname(platform.machine())
    assert arch.host_name() == (a.name if a else platform.machine())
    assert [x.name for x in arch.ARCHES.values() if x.is_host()] == ([a.name] if a else [])


@pytest.mark.parametrize("a", list(arch.ARCHES.values()), ids=arch.NAMES)
def test_facts_agree(a):
    """The fields that the kernel build, image builder, QEMU and Debian code read fit together."""
    assert arch.ARCHES[a.name] is a
    # kernel build: ARCH=<kernel_arch> puts <image> in arch/<kernel_arch>/boot/
    assert a.image_path == f"arch/{a.kernel_arch}/boot/{a.image}"
    assert a.image_path.endswith("/" + a.image)
    # GNU triplet: its machine is what uname says on such a host; cross tools are named after it
    assert a.triplet.endswith("-linux-gnu") and a.triplet.split("-")[0] in a.uname
    gcc, libc = a.cross_packages
    assert a.cross_compile == f"{a.triplet}-" and gcc.startswith("gcc-") and libc.startswith("libc6-dev-")
    assert a.cross_gcc_packages == f"{gcc} and {libc}"
    assert a.debian in libc and a.debian in a.uname
    # QEMU: the emulator, its package and console
    assert a.qemu.startswith("qemu-system-") and a.qemu_package.startswith("qemu-system-")
    assert a.console.startswith("tty")
    # the rest
    assert a.uname == tuple(m.lower() for m in a.uname)
    off, magic = a.image_magic
    assert off > 0 and len(magic) == 4
    assert a.kconfig.isupper()
    assert set(a.vendors) < set(topology.VENDORS) and "generic" not in a.vendors
    assert recipe.load(a.recipe).arch == a.name


def test_no_fact_is_shared():
    """Two arches never share a value that code looks an arch up by."""
    arches = list(arch.ARCHES.values())
    for field in ("kernel_arch", "debian", "triplet", "elf_machine", "qemu", "console", "image_magic", "kconfig", "recipe"):
        values = [getattr(a, field) for a in arches]
        assert len(set(values)) == len(values), field
    for f in ("uname", "vendors"):
        seen = [x for a in arches for x in getattr(a, f)]
        assert len(set(seen)) == len(seen), f


def test_elf_machine_is_the_hosts():
    a = arch.host()
    if a is None:
        pytest.skip(f"lab knows no arch for {platform.machine()}")
    assert tools.read_elf(os.path.realpath(sys.executable)).machine == a.elf_machine
