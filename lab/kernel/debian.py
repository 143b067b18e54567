"""Debian's prebuilt kernels: ``lab kernel fetch debian`` (6.1) and ``debian-6.12``.

``apt-get download`` of the newest package of the line (6.1: linux-image-6.1.0-NN-<arch>
from bookworm; 6.12: linux-image-6.12.NN+deb12-<arch>-unsigned, which bookworm ships in
bookworm-security), unpacked with dpkg-deb into ``cache_dir()/kernels/debian-<release>/``:

- ``vmlinuz`` (x86_64 bzImage) or ``Image`` (arm64, decompressed: QEMU -kernel
  wants the raw arm64 Image, and Debian ships it gzipped)
- ``config``
- ``lib/modules/<release>/`` with every .ko.xz/.ko.zst decompressed (busybox insmod
  loads plain .ko only) and modules.dep rewritten to match.

Debian builds the virtio transport and console as modules; metadata.json lists
which of them are ``=m`` so the initramfs builder knows what to insmod.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .. import arch as archs
from .. import proc
from .. import progress as progress_mod
from ..errors import InfraError, UserError
from ..lock import cache_lock
from ..progress import Progress
from . import store
from .artifact import KernelArtifact
from .config import read_config

# What the guest needs from the kernel: PCI transport, virtio-serial, and friends.
# (virtio_ring.ko has no symbol of its own: it comes with VIRTIO and is a
# dependency that module_paths() adds.)
VIRTIO_SYMBOLS = {
    "VIRTIO": "virtio",
    "VIRTIO_PCI_LIB": "virtio_pci_modern_dev",
    "VIRTIO_PCI_LIB_LEGACY": "virtio_pci_legacy_dev",
    "VIRTIO_PCI": "virtio_pci",
    "VIRTIO_CONSOLE": "virtio_console",
}
_DEBS = "|".join(a.debian for a in archs.ARCHES.values())


@dataclass(frozen=True)
class Line:
    """A Debian kernel line: its --kernel name, the apt-cache search pattern and the
    package name's shape (group 1: the release without the arch, 2: the version sorted
    on, 3: the Debian arch)."""

    name: str
    search: str  # with {deb} for the Debian arch
    pkg_re: re.Pattern


LINES = {
    "debian": Line("debian", r"^linux-image-6\.1\.0-[0-9]+-{deb}$", re.compile(rf"^linux-image-(6\.1\.0-(\d+))-({_DEBS})$")),
    # Debian signs its 6.12 images for Secure Boot; the -unsigned package is the same
    # kernel without the signature wrapper (and is what depends on nothing else).
    "debian-6.12": Line(
        "debian-6.12",
        r"^linux-image-6\.12\.[0-9]+\+deb12-{deb}-unsigned$",
        re.compile(rf"^linux-image-(6\.12\.(\d+)\+deb12)-({_DEBS})-unsigned$"),
    ),
}
_PKG_RE = LINES["debian"].pkg_re


def line(name: str) -> Line:
    try:
        return LINES[name]
    except KeyError:
        raise UserError(f"no Debian kernel line {name!r} (lines: {', '.join(LINES)})") from None
# apt-get update and a ~100 MB download on a slow mirror.
FETCH_LOCK_TIMEOUT = 3600.0


def installed_entries(arch: str, name: str = "debian") -> list[KernelArtifact]:
    return [a for a in store.entries() if a.name == name and a.arch == arch]


def newest_package(arch: str, name: str = "debian") -> tuple[str, str]:
    """(package name, release) of the newest package of the line *name* apt knows."""
    deb = archs.get(arch).debian
    ln = line(name)
    found = _search(deb, ln)
    if not found:
        if deb != _native_deb_arch():
            # Foreign architecture packages are only listed once dpkg knows the arch.  That
            # is a change to the machine's package manager: the user's to make (setup.sh
            # says it will and does), never lab's behind their back.
            foreign = proc.run(["dpkg", "--print-foreign-architectures"]).stdout.decode().split()
            if deb not in foreign:
                raise UserError(
                    f"Debian's {arch} kernel is a package of dpkg architecture {deb}, which this "
                    f"machine's dpkg does not know; run: dpkg --add-architecture {deb} && apt-get update "
                    "(scripts/setup.sh does, after saying so)"
                )
        # A fresh machine (or container) may have no package lists yet.
        proc.run(["apt-get", "update", "-q"], timeout=1200)
        found = _search(deb, ln)
    if not found:
        raise UserError(
            f"no package matching {ln.search.format(deb=deb)} known to apt; run apt-get update "
            "(Debian 12 'bookworm' sources are needed, and bookworm-security for 6.12)"
        )
    found.sort(key=lambda t: t[0])
    _, pkg, release = found[-1]
    return pkg, release


def _native_deb_arch() -> str:
    return proc.run(["dpkg", "--print-architecture"]).stdout.decode().strip()


def _search(deb: str, ln: Line) -> list[tuple[int, str, str]]:
    cp = proc.run(["apt-cache", "search", "--names-only", ln.search.format(deb=deb)], check=False)
    out = []
    for text in cp.stdout.decode().splitlines():
        name = text.split(" ", 1)[0]
        m = ln.pkg_re.match(name.removesuffix(f":{deb}"))
        if m and m[3] == deb:
            out.append((int(m[2]), name, f"{m[1]}-{deb}"))
    return out


def fetch_debian(arch: str = "x86_64", *, refresh: bool = False, name: str = "debian", progress: Progress | None = None) -> KernelArtifact:
    """Download and unpack Debian's newest kernel of the line *name* for *arch* (once),
    saying what it is at through *progress*'s current step."""
    if arch not in archs.NAMES:
        raise UserError(f"arch '{arch}': Debian kernels are fetched for {' or '.join(archs.NAMES)}")
    line(name)
    # One lab at a time asks apt and downloads (apt-get update takes apt's own lock and
    # fails if another holds it); a second one then finds the kernel in the store.  The
    # lock is apt's, so every line shares it.
    with cache_lock(f"fetch-debian-{arch}", f"fetching Debian's {arch} kernel", timeout=FETCH_LOCK_TIMEOUT) as waited:
        have = installed_entries(arch, name)
        if waited and have and not refresh:
            return have[0]
        return _fetch(arch, have, refresh, name, progress_mod.of(progress))


def _fetch(arch: str, have: list[KernelArtifact], refresh: bool, name: str, progress: Progress) -> KernelArtifact:
    progress.update(f"apt-get: which {name} kernel is newest")
    try:
        pkg, release = newest_package(arch, name)
    except (UserError, InfraError):
        if have and not refresh:
            return have[0]  # offline: what we have is fine
        raise
    entry_id = f"debian-{release}"
    existing = store.get(entry_id)
    if existing is not None and existing.id == entry_id:
        return existing
    deb = archs.get(arch).debian
    with tempfile.TemporaryDirectory(prefix="lab-deb-") as td:
        tdp = Path(td)
        spec = pkg if deb == _native_deb_arch() else f"{pkg}:{deb}"
        # apt-get download writes into the current directory and drops privileges to
        # _apt, which must be able to write there.
        os.chmod(tdp, 0o777)
        progress.update(f"apt-get download {spec}")
        proc.run(["apt-get", "download", "-q", spec], cwd=tdp, timeout=1800)
        debs = list(tdp.glob("*.deb"))
        if len(debs) != 1:
            raise InfraError(f"apt-get download {spec} left {len(debs)} .deb files in {tdp}")
        version = proc.run(["dpkg-deb", "-f", debs[0], "Version"]).stdout.decode().strip()
        with store.staging(entry_id) as tmp:
            progress.update(f"unpacking {debs[0].name} (modules decompressed for busybox insmod)")
            root = tmp / "root"
            proc.run(["dpkg-deb", "-x", debs[0], root], timeout=1800)
            _install(root, tmp, arch, release, pkg, version, name)
    return KernelArtifact.from_entry(store.root() / entry_id)


def _install(root: Path, tmp: Path, arch: str, release: str, pkg: str, version: str, name: str = "debian") -> None:
    boot = root / "boot"
    vmlinuz = boot / f"vmlinuz-{release}"
    if not vmlinuz.is_file():
        raise InfraError(f"{pkg}: no /boot/vmlinuz-{release} in the package")
    a = archs.get(arch)
    if a.debian_vmlinuz_gzipped:
        data = vmlinuz.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        (tmp / a.image).write_bytes(data)
        image = a.image
    else:
        shutil.copy2(vmlinuz, tmp / "vmlinuz")
        image = "vmlinuz"
    shutil.copy2(boot / f"config-{release}", tmp / "config")
    if (boot / f"System.map-{release}").is_file():
        shutil.copy2(boot / f"System.map-{release}", tmp / "System.map")
    mods_src = root / "lib" / "modules" / release
    mods = tmp / "lib" / "modules" / release
    mods.parent.mkdir(parents=True)
    mods_src.rename(mods)
    shutil.rmtree(root)
    n = decompress_modules(mods)
    if not (mods / "modules.dep").exists():
        # The .deb ships no modules.dep (the postinst runs depmod); module_paths() needs it.
        proc.run(["depmod", "-b", str(tmp), release], timeout=600)

    cfg = read_config(tmp / "config")
    virtio = {sym: cfg.get(sym, "n") for sym in VIRTIO_SYMBOLS}
    as_modules = [VIRTIO_SYMBOLS[s] for s, v in virtio.items() if v == "m"]
    meta = {
        "id": f"debian-{release}",
        "name": name,
        "arch": arch,
        "image": image,
        "config": "config",
        "modules": f"lib/modules/{release}",
        "release": release,
        "features": [],
        "description": f"Debian's {pkg} {version}",
        "inputs": {"package": pkg, "version": version},
        "virtio_config": virtio,
        # insmod these (module_paths() adds their dependencies) for virtio-serial.
        "guest_modules": as_modules,
        "modules_decompressed": n,
        "image_size": (tmp / image).stat().st_size,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (tmp / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")


def decompress_modules(mods: Path) -> int:
    """Decompress .ko.xz/.ko.gz (and .ko.zst with zstd) in place; fix modules.dep."""

    def one(ko: Path) -> int:
        ext, out = ko.suffix, ko.with_suffix("")
        if ext == ".xz":
            out.write_bytes(lzma.decompress(ko.read_bytes()))
        elif ext == ".gz":
            out.write_bytes(gzip.decompress(ko.read_bytes()))
        elif ext == ".zst":
            proc.run(["zstd", "-q", "-d", "-f", ko, "-o", out])
        else:
            return 0
        ko.unlink()
        return 1

    # lzma releases the GIL, so threads use every core.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        n = sum(pool.map(one, list(mods.rglob("*.ko.*"))))
    for name in (
        "modules.dep",
        "modules.order",
        "modules.builtin",
        "modules.alias",
        "modules.softdep",
    ):
        f = mods / name
        if f.is_file():
            f.write_text(re.sub(r"\.ko\.(xz|zst|gz)\b", ".ko", f.read_text()))
    for stale in (
        "modules.dep.bin",
        "modules.alias.bin",
        "modules.symbols.bin",
        "modules.builtin.bin",
        "modules.builtin.alias.bin",
    ):
        (mods / stale).unlink(missing_ok=True)
    return n
