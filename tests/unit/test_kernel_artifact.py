"""KernelArtifact helpers: module load order, Debian module decompression, image sniffing."""

from __future__ import annotations

import gzip
import json
import lzma

import pytest

from lab.errors import UserError
from lab.kernel import KernelArtifact, from_image, image_arch, image_release
from lab.kernel.debian import decompress_modules

REL = "6.1.0-99-amd64"


@pytest.fixture
def entry(tmp_path):
    """A store-like entry for a Debian kernel whose virtio drivers are compressed modules."""
    mods = tmp_path / "lib" / "modules" / REL
    d = mods / "kernel" / "drivers" / "virtio"
    d.mkdir(parents=True)
    (mods / "kernel" / "drivers" / "char").mkdir(parents=True)
    for rel in (
        "kernel/drivers/virtio/virtio.ko.xz",
        "kernel/drivers/virtio/virtio_ring.ko.xz",
        "kernel/drivers/virtio/virtio_pci_modern_dev.ko.xz",
        "kernel/drivers/virtio/virtio_pci_legacy_dev.ko.xz",
        "kernel/drivers/virtio/virtio_pci.ko.xz",
        "kernel/drivers/char/virtio_console.ko.xz",
    ):
        (mods / rel).write_bytes(lzma.compress(b"\x7fELF " + rel.encode()))
    (mods / "modules.dep").write_text(
        "kernel/drivers/virtio/virtio.ko.xz:\n"
        "kernel/drivers/virtio/virtio_ring.ko.xz:\n"
        "kernel/drivers/virtio/virtio_pci_modern_dev.ko.xz:\n"
        "kernel/drivers/virtio/virtio_pci_legacy_dev.ko.xz:\n"
        "kernel/drivers/virtio/virtio_pci.ko.xz: kernel/drivers/virtio/virtio_pci_legacy_dev.ko.xz "
        "kernel/drivers/virtio/virtio_pci_modern_dev.ko.xz kernel/drivers/virtio/virtio_ring.ko.xz "
        "kernel/drivers/virtio/virtio.ko.xz\n"
        "kernel/drivers/char/virtio_console.ko.xz: kernel/drivers/virtio/virtio_ring.ko.xz "
        "kernel/drivers/virtio/virtio.ko.xz\n"
    )
    (mods / "modules.builtin").write_text("kernel/drivers/tty/serial/8250/8250.ko\n")
    (tmp_path / "vmlinuz").write_bytes(b"x")
    (tmp_path / "metadata.json").write_text(
        json.dumps(
            {
                "id": f"debian-{REL}",
                "name": "debian",
                "arch": "x86_64",
                "image": "vmlinuz",
                "release": REL,
                "modules": f"lib/modules/{REL}",
                "config": None,
            }
        )
    )
    return tmp_path


def test_decompress_and_module_order(entry):
    mods = entry / "lib" / "modules" / REL
    assert decompress_modules(mods) == 6
    assert not list(mods.rglob("*.xz"))
    assert (mods / "kernel/drivers/virtio/virtio.ko").read_bytes().startswith(b"\x7fELF")
    assert ".xz" not in (mods / "modules.dep").read_text()
    a = KernelArtifact.from_entry(entry)
    paths = a.module_paths(["virtio_pci", "virtio-console", "8250"])
    names = [p.name for p in paths]
    assert names.index("virtio.ko") < names.index("virtio_pci.ko")
    assert names.index("virtio_ring.ko") < names.index("virtio_console.ko")
    assert names.count("virtio_ring.ko") == 1 and len(names) == 6
    assert names[-1] == "virtio_console.ko"
    assert all(p.is_file() for p in paths)
    with pytest.raises(UserError, match="no module 'virtio_pcii'.*virtio_pci"):
        a.module_paths(["virtio_pcii"])


def test_lab_kernel_needs_no_modules(tmp_path):
    a = KernelArtifact(
        "lab-6.1", "x86_64", tmp_path / "bzImage", "6.1", None, None, frozenset(), "abc"
    )
    assert a.module_paths(["virtio_pci"]) == []


def _bzimage(ver: bytes) -> bytes:
    data = bytearray(0x400)
    data[0x202:0x206] = b"HdrS"
    data[0x20E:0x210] = (0x100).to_bytes(2, "little")
    data[0x300 : 0x300 + len(ver)] = ver
    return bytes(data)


def test_image_sniffing(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    bz = _bzimage(b"6.1.0-50-amd64 (debian-kernel@lists.debian.org) #1 SMP")
    assert image_arch(bz) == "x86_64" and image_release(bz, "x86_64") == "6.1.0-50-amd64"
    arm = bytearray(0x100)
    arm[0x38:0x3C] = b"ARM\x64"
    arm += b"\0Linux version 6.1.0-50-arm64 (debian) #1\0"
    p = tmp_path / "vmlinuz-arm64"
    p.write_bytes(gzip.compress(bytes(arm)))
    a = from_image(p, "arm64")
    assert a.release == "6.1.0-50-arm64" and a.image != p
    assert a.image.read_bytes()[:2] != b"\x1f\x8b"  # decompressed for QEMU -kernel
    with pytest.raises(UserError, match="is arm64"):
        from_image(p, "x86_64")
    junk = tmp_path / "junk"
    junk.write_bytes(b"hello")
    with pytest.raises(UserError, match="neither"):
        from_image(junk, "x86_64")
