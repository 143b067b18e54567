"""Kernels: recipes, checked configs, builds, the store, and Debian's prebuilt kernel.

The boot code calls :func:`resolve`; recipes are documented in kernels/README.md.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

from .. import arch as archs
from .. import atomic, paths
from .. import progress as progress_mod
from ..errors import UserError, unknown
from ..progress import Progress
from .artifact import KernelArtifact

__all__ = ["KernelArtifact", "resolve", "fetch_debian", "DEFAULT"]

DEFAULT = "debian"


DEBIAN_LINES = ("debian", "debian-6.12")


def fetch_debian(arch: str = "x86_64", *, refresh: bool = False, name: str = "debian", progress: Progress | None = None) -> KernelArtifact:
    """Download Debian's newest kernel of the line *name* ("debian": 6.1, "debian-6.12")
    for *arch* into the store (once)."""
    # deferred: CLI start (lab.kernel.debian)
    from .debian import fetch_debian as _fetch

    return _fetch(arch, refresh=refresh, name=name, progress=progress)


def resolve(spec: str, arch: str, *, build: bool = True, progress: Progress | None = None) -> KernelArtifact:
    """The kernel *spec* names, for *arch* ("x86_64" or "arm64").

    *spec* is, in the order tried:

    - ``debian``: Debian's prebuilt 6.1 kernel, ``debian-6.12`` its 6.12 (fetched if
      missing and *build*);
    - a path to a bzImage / arm64 Image (or a gzipped arm64 vmlinuz);
    - a store id or label (``debian-6.1.0-56-amd64``, ``lab-6.1@1a2b3c4d``: ``lab kernel
      list``) or a unique prefix of one;
    - a recipe name (``kernels/<name>/recipe.toml``), built on demand if *build*.

    A fetch or a build on demand is a step of *progress* (minutes, so it is shown).
    """
    # deferred: CLI start (lab.kernel.recipe, lab.kernel.store)
    from . import recipe as krecipe
    from . import store

    if arch not in archs.NAMES:
        raise UserError(f"arch '{arch}': lab kernels are {' or '.join(archs.NAMES)}")
    spec = spec or DEFAULT
    if spec in DEBIAN_LINES:
        have = [a for a in store.entries() if a.name == spec and a.arch == arch]
        if have:
            return max(have, key=lambda a: _release_key(a.release))
        if not build:
            raise UserError(
                f"Debian's {arch} kernel ({spec}) is not fetched yet; run: lab kernel fetch {spec} --arch {arch}"
            )
        with progress_mod.of(progress).step("fetch", f"Debian's {arch} kernel ({spec}; apt-get download, once)") as pg:
            return fetch_debian(arch, name=spec, progress=pg)

    p = Path(spec).expanduser()
    if "/" in spec or p.is_file():
        if not p.is_file():
            raise UserError(f"kernel image {p} does not exist")
        return from_image(p, arch)

    if spec in krecipe.names():
        r = krecipe.load(spec)
        _check_arch(r.arch, arch, f"recipe {spec}")
        # deferred: CLI start (lab.kernel.build)
        from . import build as kbuild

        found = kbuild.lookup_built(r)
        if found is not None:
            return found
        if not build:
            older = [a.label for a in store.entries() if a.name == spec and a.arch == r.arch]
            was = f" (its files changed since {', '.join(older[:3])}, still usable by that name)" if older else ""
            raise UserError(f"kernel recipe {spec} is not built{was}; run: lab kernel build {spec}")
        with progress_mod.of(progress).step("build", f"kernel {spec} (once; later runs reuse it)") as pg:
            return kbuild.build(r, progress=pg.callback())

    if len(spec) >= 4 or spec.startswith("debian-"):
        a = store.get(spec, arch)  # debian-6.1.0-56 names the arch's own
        if a is not None:
            return a
        other = store.matches(spec)
        if other:
            _check_arch(other[0].arch, arch, f"kernel {other[0].label}")

    choices = krecipe.names() + list(DEBIAN_LINES) + [a.label for a in store.entries()]
    raise unknown("kernel (recipe, store id, 'debian' or a path)", spec, choices)


def spec_arch(spec: str, default: str) -> str:
    """The arch of the kernel *spec* names when it tells one by itself: a recipe's, or
    that of the store entries it matches (all of one arch); else *default* (Debian's
    lines, a path, an unknown name: resolve() then decides)."""
    # deferred: CLI start (lab.kernel.recipe, lab.kernel.store)
    from . import recipe as krecipe
    from . import store

    if spec in krecipe.names():
        return krecipe.load(spec).arch
    if spec in DEBIAN_LINES or "/" in spec or len(spec) < 4:
        return default
    found = {a.arch for a in store.matches(spec)}
    return found.pop() if len(found) == 1 else default


def _check_arch(have: str, want: str, what: str) -> None:
    if have != want:
        raise UserError(f"{what} is {have}, but an {want} kernel was asked for")


def _release_key(release: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"[.+-]", release))


def from_image(path: Path, arch: str) -> KernelArtifact:
    """An artifact for a bare image file; a gzipped arm64 image is decompressed into
    the cache, because QEMU's -kernel needs the raw arm64 Image."""

    path = path.resolve()
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    image = path
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
        out = paths.cache_dir() / "images" / f"{sha[:16]}-Image"
        if not out.is_file():
            # Named by content: a lab doing the same at once writes the same bytes.
            with atomic.atomic_file(out) as tmp:
                tmp.write_bytes(data)
        image = out
    kind = image_arch(data)
    if kind is None:
        kinds = " nor ".join(f"an {a.kernel_arch} {a.image}" for a in archs.ARCHES.values())
        raise UserError(f"{path} is neither {kinds}")
    _check_arch(kind, arch, f"{path}")
    release = image_release(data, kind) or "unknown"
    meta: dict = {}
    features: frozenset[str] = frozenset()
    side = path.parent / "metadata.json"
    if side.is_file():
        try:
            meta = json.loads(side.read_text())
            features = frozenset(meta.get("features", []))
        except ValueError:
            meta = {}
    config = path.parent / "config" if (path.parent / "config").is_file() else None
    return KernelArtifact(
        name=path.name,
        arch=kind,
        image=image,
        release=release,
        modules=None,
        config=config,
        features=features,
        id=f"file-{sha[:16]}",
        metadata={"source_path": str(path), **meta},
    )


def image_arch(data: bytes) -> str | None:
    a = archs.from_kernel_image(data)
    return a.name if a else None


def image_release(data: bytes, arch: str) -> str | None:
    """uname -r of an image: from the bzImage header's version string, or the
    'Linux version' banner of an uncompressed arm64 Image."""
    if arch == "x86_64":
        off = int.from_bytes(data[0x20E:0x210], "little") + 0x200
        s = data[off : off + 256].split(b"\0", 1)[0].decode(errors="replace")
        return s.split(" ", 1)[0] or None
    m = re.search(rb"Linux version (\S+)", data)
    return m[1].decode(errors="replace") if m else None
