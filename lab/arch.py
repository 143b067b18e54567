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

    @property
    def cross_compile(self) -> str:
        """CROSS_COMPILE for building on another arch's host."""
        return f"{self.triplet}-"

    @property
    def cross_gcc_packages(self) -> str:
        """The Debian packages of the cross compiler and its libc headers."""
        return f"gcc-{self.triplet.replace('_', '-')} and libc6-dev-{self.debian}-cross"

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


def host_name() -> str:
    """This host's arch in lab's spelling (the raw machine name if lab knows no such arch)."""
    a = from_uname(platform.machine())
    return a.name if a else platform.machine()
