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
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from .. import arch as archs
from .. import proc
from .. import progress as progress_mod
from ..atomic import atomic_file
from ..errors import InfraError, UserError
from ..lock import cache_lock
from ..paths import cache_dir, clean_stale, tmp_prefix
from ..progress import Progress
from . import cpio

GUEST = Path(__file__).resolve().parent.parent / "guest"
AGENT = GUEST / "init.sh"
GUEST_FILES = {"lab/lib.sh": GUEST / "lib.sh", "bin/labsel": GUEST / "labsel", "bin/labcpu": GUEST / "labcpu"}
LAYOUT_VERSION = "1"  # bump when the layout of a layer changes
LAYER_LOCK_TIMEOUT = 600.0  # a layer takes seconds; busybox a small download


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
    with cache_lock(f"busybox-{arch}", f"fetching busybox-static for {arch}", timeout=LAYER_LOCK_TIMEOUT):
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
    dest.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(dest.parent)
    work = Path(tempfile.mkdtemp(prefix=tmp_prefix("deb"), dir=dest.parent))
    # apt-get download drops privileges to _apt, which must be able to write here.
    os.chmod(work, 0o777)
    try:
        cp = proc.run(
            ["apt-get", "download", f"busybox-static:{arch}"], cwd=work, check=False, timeout=300
        )
        if cp.returncode != 0:
            said = proc.tail(cp.stderr, 1)
            raise UserError(
                f"cannot download busybox-static:{arch} (run: dpkg --add-architecture {arch} "
                f"&& apt-get update)" + (f": {said}" if said else "")
            )
        debs = list(work.glob("busybox-static_*.deb"))
        if len(debs) != 1:
            raise InfraError(f"apt-get download busybox-static:{arch} left {len(debs)} .deb files")
        proc.run(["dpkg-deb", "-x", str(debs[0]), str(work / "x")])
        with atomic_file(dest, mode=0o755) as tmp:
            shutil.copyfile(work / "x" / "bin" / "busybox", tmp)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


def base_layer(arch: str) -> Path:
    bb = busybox(arch)
    agent = AGENT.read_bytes()
    extras = {dst: src.read_bytes() for dst, src in GUEST_FILES.items()}
    key = _sha("base", LAYOUT_VERSION, arch, bb.read_bytes(), agent, *extras.keys(), *extras.values())
    out = images_dir() / f"base-{arch}-{key}.cpio"
    return _cached(out, lambda: _base_entries(bb, agent, extras))


def _base_entries(bb: Path, agent: bytes, extras: dict[str, bytes]) -> list[cpio.Entry]:
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
    return entries


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

    def entries() -> list[cpio.Entry]:
        order = "".join(f"{m.name}\n" for m in modules).encode()
        return [
            *(cpio.file(f"lib/modules/{m.name}", source=m) for m in modules),
            cpio.file("lab/modules", data=order),
        ]

    return _cached(out, entries)


def layer_path(kind: str, key: str) -> Path:
    """Where the layer of *kind* with inputs hash *key* is cached (it may not exist yet)."""
    return images_dir() / f"{kind}-{_sha(kind, LAYOUT_VERSION, key)}.cpio"


def tree_layer(kind: str, root: Path, key: str) -> Path:
    """Layer with everything under *root* at the archive root (tools, workloads)."""
    return _cached(layer_path(kind, key), lambda: cpio.tree(root))


def cached_tree_layer(kind: str, key: str, fill: Callable[[Path], object], progress: Progress | None = None) -> Path:
    """The layer of *kind* with inputs hash *key*: cached, or made by *fill* (which
    puts the layer's files under the directory it is given) and packed, a step of
    *progress* (compiling the workloads takes seconds).  One lab at a time fills a
    given layer; another one waits and reuses it."""
    out = layer_path(kind, key)
    if out.exists():
        return out
    with _layer_lock(out), progress_mod.of(progress).step("image", f"the guest's {kind} layer (once)"):
        if out.exists():
            return out
        with tempfile.TemporaryDirectory(prefix=f"lab-{kind}-") as td:
            root = Path(td) / "root"
            root.mkdir()
            fill(root)
            cpio.write(out, cpio.tree(root))
    return out


def _layer_lock(out: Path):
    return cache_lock(f"layer-{out.name}", f"building the initramfs layer {out.name}", timeout=LAYER_LOCK_TIMEOUT)


def _cached(out: Path, entries: Callable[[], Iterable[cpio.Entry]]) -> Path:
    """*out*, written from *entries()* unless it is there already.  The name is a hash
    of the inputs, so what is there is right; under the lock a second lab waits for
    the first and reuses its file rather than writing it again."""
    if out.exists():
        return out
    with _layer_lock(out):
        if not out.exists():
            cpio.write(out, entries())
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
    made = {"lab"}
    for name, data in (files or {}).items():
        # The kernel's unpacker makes no parent directories: each is an entry first.
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in made:
                made.add(d)
                entries.append(cpio.directory(d))
        entries.append(cpio.file(name, data=data, mode=0o755))
    cpio.write(dest, entries)
    return dest


def assemble(dest: Path, layers: Iterable[Path | None]) -> Path:
    """Concatenate *layers* (None skipped) into one initrd at *dest*."""
    with atomic_file(dest) as tmp, open(tmp, "wb") as out:
        for layer in layers:
            if layer is None:
                continue
            with open(layer, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
    return dest
