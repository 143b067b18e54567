"""What the boot code gets: a kernel image and what it needs to know about it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError, nearest
from ..plan import KernelRef


@dataclass(frozen=True)
class KernelArtifact:
    name: str  # recipe name, "debian", or the image file's name
    arch: str  # "x86_64" | "arm64"
    image: Path  # bzImage, or an uncompressed arm64 Image (what QEMU -kernel takes)
    release: str  # uname -r
    modules: Path | None  # a /lib/modules/<release> tree, None when all is built in
    config: Path | None
    features: frozenset[str]  # e.g. "node_reclaim_distance_param"
    id: str  # store hash, or "debian-<release>", or "file-<sha>"
    metadata: dict = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_entry(cls, entry: Path) -> KernelArtifact:
        """The artifact for a store directory holding metadata.json; ValueError saying what
        is wrong when the metadata is not one lab wrote or the image is not the one it
        names (gone, or not image_size bytes: a damaged entry is never booted)."""
        meta = json.loads((entry / "metadata.json").read_text())
        if not isinstance(meta, dict):
            raise ValueError("metadata.json is not a JSON object")
        for k in ("name", "arch", "image", "release", "id"):
            if not isinstance(meta.get(k), str):
                raise ValueError(f"metadata.json: {k!r} must be a string")
        for k in ("image", "modules", "config"):
            v = meta.get(k)
            if v is not None and (not isinstance(v, str) or not v or v.startswith("/") or ".." in v.split("/")):
                raise ValueError(f"metadata.json: {k!r} must name a file inside the entry")
        size = meta.get("image_size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise ValueError("metadata.json: 'image_size' must be a whole number of bytes")
        if not isinstance(meta.get("features", []), list):
            raise ValueError("metadata.json: 'features' must be a list")
        img = entry / meta["image"]
        try:
            have = img.stat().st_size
        except OSError:
            raise ValueError(f"its image {meta['image']} is gone") from None
        if size is not None and have != size:
            raise ValueError(f"its image {meta['image']} is {have} bytes, metadata.json says {size}")
        modules = meta.get("modules")
        config = meta.get("config")
        return cls(
            name=meta["name"],
            arch=meta["arch"],
            image=entry / meta["image"],
            release=meta["release"],
            modules=entry / modules if modules else None,
            config=entry / config if config else None,
            features=frozenset(meta.get("features", [])),
            id=meta["id"],
            metadata=meta,
        )

    @property
    def label(self) -> str:
        """The name that tells this kernel from every other in the store: Debian's by its
        release and arch (``debian-6.1.0-56-amd64``, its id), a build by its recipe and
        short id (``lab-6.1@1a2b3c4d``), an image file by its id."""
        if self.id.startswith(("debian-", "file-")) or not self.name:
            return self.id
        return f"{self.name}@{self.id[:8]}"

    def ref(self) -> KernelRef:
        """What a run records of this kernel (plan.json)."""

        return KernelRef(name=self.name, id=self.id, release=self.release, arch=self.arch, image=str(self.image))

    def config_value(self, symbol: str) -> str | None:
        """The value of CONFIG_<symbol> in this kernel's config ("n" if not set)."""
        if self.config is None or not self.config.is_file():
            return None  # unknown: a bare image's, or a config deleted since
        # deferred: CLI start (lab.kernel.config)
        from .config import read_config

        return read_config(self.config).get(symbol.removeprefix("CONFIG_"), "n")

    def system_map(self) -> Path | None:
        """The kernel's System.map when it has real addresses and they are the ones the
        guest runs at (no KASLR).  Debian's is a placeholder pointing to the -dbg package."""
        path = self.image.parent / "System.map"
        if not path.is_file() or self.config_value("RANDOMIZE_BASE") not in ("n", None):
            return None
        with open(path, errors="replace") as f:
            head = f.readline()
        return None if "real System.map" in head else path

    def module_paths(self, names: list[str]) -> list[Path]:
        """The .ko files for module *names* and their dependencies, dependencies
        first (the order to insmod them).  Built-in modules are skipped.  Empty for
        kernels without modules."""
        if self.modules is None or not names:
            return []
        deps = _modules_dep(self.modules)
        builtin = _builtin(self.modules)
        by_name = {_modname(p): p for p in deps}
        out: list[str] = []

        def visit(rel: str, stack: tuple[str, ...]) -> None:
            if rel in out or rel in stack:
                return
            for d in deps.get(rel, []):
                visit(d, (*stack, rel))
            out.append(rel)

        for n in names:
            key = n.replace("-", "_")
            if key in by_name:
                visit(by_name[key], ())
            elif key not in builtin:
                close = nearest(key, list(by_name))
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise UserError(f"kernel {self.id}: no module '{n}' in {self.modules}{hint}")
        return [self.modules / rel for rel in out]


def _modname(rel: str) -> str:
    base = rel.rsplit("/", 1)[-1]
    for ext in (".ko.xz", ".ko.zst", ".ko.gz", ".ko"):
        if base.endswith(ext):
            base = base[: -len(ext)]
            break
    return base.replace("-", "_")


def _modules_dep(moddir: Path) -> dict[str, list[str]]:
    f = moddir / "modules.dep"
    if not f.is_file():
        raise UserError(f"{f} is missing; re-fetch the kernel (lab kernel fetch debian)")
    out = {}
    for line in f.read_text().splitlines():
        if ":" not in line:
            continue
        mod, _, rest = line.partition(":")
        out[mod.strip()] = rest.split()
    return out


def _builtin(moddir: Path) -> set[str]:
    f = moddir / "modules.builtin"
    if not f.is_file():
        return set()
    return {_modname(line.strip()) for line in f.read_text().splitlines() if line.strip()}
