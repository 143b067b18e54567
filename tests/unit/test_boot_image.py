"""PVH boot: an x86 kernel with CONFIG_PVH boots from its uncompressed vmlinux."""

import gzip
import lzma
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab.backends import guest as backend

ELF = b"\x7fELF" + bytes(range(256)) * 40


@dataclass
class K:
    image: Path
    pvh: str
    arch: str = "x86_64"
    id: str = "test-kernel"
    name: str = "test"

    def config_value(self, sym):
        return self.pvh if sym == "PVH" else "n"


@pytest.mark.parametrize("pack", [lambda b: lzma.compress(b, format=lzma.FORMAT_XZ), gzip.compress])
def test_vmlinux_extracted_once(tmp_path, monkeypatch, pack):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    bz = tmp_path / "bzImage"
    # A false gzip magic before the real payload, as setup code may contain.
    bz.write_bytes(b"MZ" + b"\x1f\x8b\x08junk" + b"\0" * 100 + pack(ELF) + b"\0" * 64)
    out = backend.boot_image(K(bz, "y"))
    assert out != bz and out.read_bytes() == ELF
    assert backend.boot_image(K(bz, "y")) == out  # cached


def test_without_pvh_the_bzimage_boots(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    bz = tmp_path / "bzImage"
    bz.write_bytes(b"MZ" + lzma.compress(ELF, format=lzma.FORMAT_XZ))
    assert backend.boot_image(K(bz, "n")) == bz
    assert backend.boot_image(K(bz, "y", arch="arm64")) == bz


def test_many_vcpus_boot_the_bzimage(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    bz = tmp_path / "bzImage"
    bz.write_bytes(b"MZ" + lzma.compress(ELF, format=lzma.FORMAT_XZ))
    assert backend.boot_image(K(bz, "y"), vcpus=backend.PVH_MAX_VCPUS) != bz
    assert backend.boot_image(K(bz, "y"), vcpus=backend.PVH_MAX_VCPUS + 1) == bz
