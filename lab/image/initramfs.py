"""The guest's initramfs, built as stacked cpio layers.

* base: busybox (static) + lab's agent as /init.  Tiny; enough for `lab verify`.
* modules: the drivers a kernel built as modules (Debian's virtio_pci, virtio_console).
* tools: real host tools (perf, hackbench, stress-ng, numactl) with their libraries.
* workloads: lab's own static workloads (images/workloads/*.c).
* job: per run, the job script and its config.

Every layer but the job is content-addressed by its inputs and cached under
cache_dir()/images, so an image is rebuilt only when an input changes.  The
kernel unpacks concatenated archives in order, so a run's initrd is the
concatenation of the layers it needs.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from .. import arch as archs
from .. import proc
from ..errors import UserError
from ..paths import cache_dir
from . import cpio

GUEST = Path(__file__).resolve().parent.parent / "guest"
AGENT = GUEST / "init.sh"
GUEST_FILES = {"lab/lib.sh": GUEST / "lib.sh", "bin/labsel": GUEST / "labsel"}
LAYOUT_VERSION = "1"  # bump when the layout of a layer changes


def images_dir() -> Path:
    d = cache_dir() / "images"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _sha(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:16]


def busybox(arch: str) -> Path:
    """A static busybox for *arch*: the host's busybox-static, or Debian's package for
    the other arch."""
    a = archs.ARCHES.get(arch)
    if a is None:
        raise UserError(f"no busybox for arch {arch!r}")
    if a.is_host():
        for cand in ("/bin/busybox", "/usr/bin/busybox"):
            p = Path(cand)
            if p.exists() and _is_static(p):
                return p
        raise UserError(
            f"no static busybox for {arch} guests (install the Debian package busybox-static)"
        )
    dest = cache_dir() / "busybox" / arch / "busybox"
    if dest.exists():
        return dest
    return _fetch_foreign_busybox(a.debian, dest)


def _is_static(p: Path) -> bool:
    cp = proc.run(["file", "-L", str(p)], check=False)
    out = cp.stdout.decode(errors="replace")
    return "statically linked" in out or "static-pie" in out


def _fetch_foreign_busybox(arch: str, dest: Path) -> Path:
    """Download Debian's busybox-static for another architecture (multiarch; *arch*
    in Debian's spelling)."""
    work = dest.parent / "deb"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cp = proc.run(
        ["apt-get", "download", f"busybox-static:{arch}"], cwd=work, check=False, timeout=300
    )
    if cp.returncode != 0:
        raise UserError(
            f"cannot download busybox-static:{arch} (run: dpkg --add-architecture {arch} && apt-get update): "
            + cp.stderr.decode(errors="replace").strip().splitlines()[-1:][0]
            if cp.stderr
            else ""
        )
    debs = list(work.glob("busybox-static_*.deb"))
    proc.run(["dpkg-deb", "-x", str(debs[0]), str(work / "x")])
    src = work / "x" / "bin" / "busybox"
    tmp = dest.with_name("busybox.tmp")
    shutil.copy2(src, tmp)
    os.replace(tmp, dest)
    shutil.rmtree(work, ignore_errors=True)
    return dest


def base_layer(arch: str) -> Path:
    bb = busybox(arch)
    agent = AGENT.read_bytes()
    extras = {dst: src.read_bytes() for dst, src in GUEST_FILES.items()}
    key = _sha("base", LAYOUT_VERSION, arch, bb.read_bytes(), agent, *extras.keys(), *extras.values())
    out = images_dir() / f"base-{arch}-{key}.cpio"
    if out.exists():
        return out
    entries = [
        cpio.directory(d)
        for d in (
            "bin",
            "sbin",
            "usr/bin",
            "usr/sbin",
            "proc",
            "sys",
            "dev",
            "tmp",
            "run",
            "lab",
            "etc",
        )
    ]
    entries.append(cpio.file("bin/busybox", source=bb, mode=0o755))
    entries.append(cpio.symlink("bin/sh", "busybox"))
    entries.append(cpio.file("init", data=agent, mode=0o755))
    for dst, data in extras.items():
        entries.append(cpio.file(dst, data=data, mode=0o755))
    entries.append(cpio.file("etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n"))
    entries.append(cpio.file("etc/group", data=b"root:x:0:\n"))
    cpio.write(out, entries)
    return out


def modules_layer(release: str, modules: list[Path]) -> Path | None:
    """Layer with the given .ko files under /lib/modules and /lab/modules listing load order."""
    if not modules:
        return None
    h = hashlib.sha256()
    for m in modules:
        h.update(m.name.encode())
        h.update(m.read_bytes())
    key = _sha("modules", LAYOUT_VERSION, release, h.hexdigest())
    out = images_dir() / f"modules-{release}-{key}.cpio"
    if out.exists():
        return out
    entries = [cpio.file(f"lib/modules/{m.name}", source=m) for m in modules]
    order = "".join(f"{m.name}\n" for m in modules).encode()
    entries.append(cpio.file("lab/modules", data=order))
    cpio.write(out, entries)
    return out


def layer_path(kind: str, key: str) -> Path:
    """Where the layer of *kind* with inputs hash *key* is cached (it may not exist yet)."""
    return images_dir() / f"{kind}-{_sha(kind, LAYOUT_VERSION, key)}.cpio"


def tree_layer(kind: str, root: Path, key: str) -> Path:
    """Layer with everything under *root* at the archive root (tools, workloads)."""
    out = layer_path(kind, key)
    if out.exists():
        return out
    cpio.write(out, cpio.tree(root))
    return out


def job_layer(
    dest: Path,
    job: str | None,
    config: Mapping[str, str] | None = None,
    interactive: bool = False,
    files: Mapping[str, bytes] | None = None,
) -> Path:
    entries: list[cpio.Entry] = [cpio.directory("lab")]
    if job is not None:
        entries.append(cpio.file("lab/job.sh", data=job.encode(), mode=0o755))
    if config:
        text = "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in config.items())
        entries.append(cpio.file("lab/config", data=text.encode()))
    if interactive:
        entries.append(cpio.file("lab/interactive", data=b"1\n"))
    for name, data in (files or {}).items():
        entries.append(cpio.file(name, data=data, mode=0o755))
    cpio.write(dest, entries)
    return dest


def assemble(dest: Path, layers: Iterable[Path | None]) -> Path:
    """Concatenate *layers* (None skipped) into one initrd at *dest*."""
    tmp = dest.with_name(dest.name + ".tmp")
    with open(tmp, "wb") as out:
        for layer in layers:
            if layer is None:
                continue
            with open(layer, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
    os.replace(tmp, dest)
    return dest
