"""Every fact lab knows about a guest architecture, in one table.

Each module asks ``arch.get(name)`` (or ``arch.host()``) instead of keeping its own
dict keyed by "x86_64" / "arm64": the kernel's arch/ folder, Debian's name, the
QEMU binary and its package, the console, the cross compiler, the boot image.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

from .errors import UserError


@dataclass(frozen=True)
class Arch:
    name: str  # lab's name, as topologies and recipes spell it: "x86_64" | "arm64"
    kernel_arch: str  # the kernel's ARCH= / SRCARCH (arch/<kernel_arch>/)
    debian: str  # Debian's architecture (linux-image-*-<debian>, dpkg --add-architecture)
    uname: tuple[str, ...]  # what `uname -m` / platform.machine() says on such a host
    triplet: str  # GNU multiarch triplet (/usr/lib/<triplet>, <triplet>-gcc)
    elf_machine: int  # ELF e_machine of its binaries
    qemu: str  # QEMU system emulator
    qemu_package: str  # the Debian package that ships it
    console: str  # the serial console the guest kernel writes to
    image: str  # the kernel image QEMU's -kernel takes, as the build names it
    image_path: str  # ... and where the kernel build puts it
    image_magic: tuple[int, bytes]  # (offset, bytes) that mark a boot image of this arch
    debian_vmlinuz_gzipped: bool  # Debian's /boot/vmlinuz is a gzipped `image` (QEMU wants it raw)
    kconfig: str  # the symbol a .config for this arch sets: CONFIG_<kconfig>=y
    vendors: tuple[str, ...]  # topology cpu.vendor values of this arch ("generic" fits any)
    recipe: str  # lab's default kernel recipe for this arch (kernels/<recipe>/)
    loader: str  # the glibc dynamic loader its binaries name in PT_INTERP

    @property
    def cross_compile(self) -> str:
        """CROSS_COMPILE for building on another arch's host."""
        return f"{self.triplet}-"

    @property
    def cross_packages(self) -> tuple[str, str]:
        """The Debian packages of the cross compiler (<cross_compile>gcc) and of its
        C library (headers and the static libc)."""
        return f"gcc-{self.triplet.replace('_', '-')}", f"libc6-dev-{self.debian}-cross"

    @property
    def cross_gcc_packages(self) -> str:
        """The Debian packages of the cross compiler and its libc headers."""
        return " and ".join(self.cross_packages)

    def is_host(self) -> bool:
        return platform.machine().lower() in self.uname


X86_64 = Arch(
    name="x86_64",
    kernel_arch="x86",
    debian="amd64",
    uname=("x86_64", "amd64"),
    triplet="x86_64-linux-gnu",
    elf_machine=62,
    qemu="qemu-system-x86_64",
    qemu_package="qemu-system-x86",
    console="ttyS0",
    image="bzImage",
    image_path="arch/x86/boot/bzImage",
    image_magic=(0x202, b"HdrS"),  # the boot protocol's setup header
    debian_vmlinuz_gzipped=False,  # vmlinuz is the bzImage
    kconfig="X86_64",
    vendors=("intel", "amd"),
    recipe="lab-6.1",
    loader="/lib64/ld-linux-x86-64.so.2",
)
ARM64 = Arch(
    name="arm64",
    kernel_arch="arm64",
    debian="arm64",
    uname=("aarch64", "arm64"),
    triplet="aarch64-linux-gnu",
    elf_machine=183,
    qemu="qemu-system-aarch64",
    qemu_package="qemu-system-arm",
    console="ttyAMA0",
    image="Image",
    image_path="arch/arm64/boot/Image",
    image_magic=(0x38, b"ARM\x64"),  # the arm64 Image header's magic
    debian_vmlinuz_gzipped=True,
    kconfig="ARM64",
    vendors=("hisilicon", "ampere", "arm"),
    recipe="lab-6.1-arm64",
    loader="/lib/ld-linux-aarch64.so.1",
)

ARCHES: dict[str, Arch] = {a.name: a for a in (X86_64, ARM64)}
NAMES: tuple[str, ...] = tuple(ARCHES)


def get(name: str) -> Arch:
    """The Arch called *name* (lab's spelling); UserError for any other."""
    try:
        return ARCHES[name]
    except KeyError:
        raise UserError(f"unknown architecture '{name}' (known: {', '.join(NAMES)})") from None


def from_uname(machine: str) -> Arch | None:
    """The Arch of a host whose `uname -m` is *machine*, or None."""
    m = machine.lower()
    return next((a for a in ARCHES.values() if m in a.uname), None)


def from_debian(name: str) -> Arch | None:
    return next((a for a in ARCHES.values() if a.debian == name), None)


def from_vendor(vendor: str) -> Arch | None:
    """The Arch whose machines have CPUs of *vendor* (topology spelling), or None."""
    return next((a for a in ARCHES.values() if vendor in a.vendors), None)


def from_kernel_image(data: bytes) -> Arch | None:
    """The Arch of the kernel boot image *data* (bzImage, arm64 Image), by its magic."""
    for a in ARCHES.values():
        off, magic = a.image_magic
        if data[off : off + len(magic)] == magic:
            return a
    return None


def host() -> Arch | None:
    """This host's Arch, or None if lab knows no such arch."""
    return from_uname(platform.machine())


def host_name() -> str:
    """This host's arch in lab's spelling (the raw machine name if lab knows no such arch)."""
    a = host()
    return a.name if a else platform.machine()
