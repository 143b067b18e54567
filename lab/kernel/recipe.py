"""Kernel recipes: kernels/<name>/recipe.toml, loaded into frozen dataclasses.

The format is documented in kernels/README.md.  Every error names the file and
the field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .. import arch as archs
from .. import paths
from ..errors import UserError, unknown

BASES = ("tinyconfig", "defconfig", "allnoconfig")
# lab's own fragments, merged before the recipe's: lab.config then lab-<arch>.config.
LAB_FRAGMENTS = ("lab",)


@dataclass(frozen=True)
class Patch:
    path: Path
    revert: bool = False
    features: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.path.name

    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Recipe:
    name: str
    arch: str
    source: str
    base: str
    fragments: tuple[Path, ...]
    patches: tuple[Patch, ...]
    make_vars: tuple[tuple[str, str], ...] = ()
    features: tuple[str, ...] = ()
    description: str = ""
    file: Path | None = None
    targets: tuple[str, ...] = field(default=())
    variant: str = ""  # set for one-off --patch builds: they get their own work dir
    kernels_dir: Path | None = None  # where the recipe was loaded from (fragments/ is here)

    def all_fragments(self, kernels_dir: Path | None = None) -> tuple[Path, ...]:
        """lab's fragments for this arch, then the recipe's own, in merge order."""
        frag_dir = (kernels_dir or self.kernels_dir or paths.KERNELS) / "fragments"
        out = []
        for base in LAB_FRAGMENTS:
            out.append(frag_dir / f"{base}.config")
            arch_frag = frag_dir / f"{base}-{self.arch}.config"
            if arch_frag.exists():
                out.append(arch_frag)
        return tuple(out) + self.fragments

    def all_features(self) -> frozenset[str]:
        feats = set(self.features)
        for p in self.patches:
            feats.update(p.features)
        return frozenset(feats)

    def image_target(self) -> str:
        return archs.get(self.arch).image

    def with_patches(self, extra: list[Path]) -> Recipe:
        """A copy with one-off patches (``--patch FILE``) applied after the series."""
        add = []
        for p in extra:
            p = Path(p).resolve()
            if not p.is_file():
                raise UserError(f"--patch {p}: no such file")
            add.append(Patch(p))
        if not add:
            return self
        h = hashlib.sha256(b"".join(p.path.read_bytes() for p in add)).hexdigest()[:8]
        return _replace(self, patches=self.patches + tuple(add), variant=f"p{h}")


def _replace(r: Recipe, **kw) -> Recipe:
    return dataclasses.replace(r, **kw)


def names(kernels_dir: Path | None = None) -> list[str]:
    d = _kernels(kernels_dir)
    if not d.is_dir():
        return []
    return sorted(p.parent.name for p in d.glob("*/recipe.toml"))


def _kernels(kernels_dir: Path | None) -> Path:
    """*kernels_dir*, else lab's kernels/ or $LAB_KERNELS, which must then be a folder."""
    d = kernels_dir or paths.KERNELS
    if kernels_dir is None and os.environ.get("LAB_KERNELS") and not d.is_dir():
        raise UserError(f"LAB_KERNELS: {d} is not a folder of kernel recipes")
    return d


def load(name: str, kernels_dir: Path | None = None, _seen: tuple[str, ...] = ()) -> Recipe:
    """Load recipe *name* (following ``extends``).  A name with a slash, or ending in
    .toml, is a path: a recipe.toml or a folder holding one, outside lab's kernels/
    (its fragments and patches are looked up beside it, then in lab's shared ones)."""
    d = _kernels(kernels_dir)
    if "/" in name or name.endswith(".toml"):
        f = Path(name).expanduser()
        if f.is_dir():
            f = f / "recipe.toml"
        if not f.is_file():
            raise UserError(f"kernel recipe {name}: no such file ({f})")
        f = f.resolve()
        key = str(f)
    else:
        f = d / name / "recipe.toml"
        if not f.is_file():
            raise unknown("kernel recipe", name, names(d))
        key = name
    if key in _seen:
        raise UserError(f"{f}: extends: cycle {' -> '.join((*_seen, key))}")
    try:
        data = tomllib.loads(f.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{f}: not valid TOML: {e}") from e
    return parse(data, f, kernels_dir=d, _seen=(*_seen, key))


_KEYS = {
    "description",
    "extends",
    "arch",
    "source",
    "base",
    "fragments",
    "patches",
    "make",
    "features",
    "targets",
}


def parse(
    data: dict, file: Path, *, kernels_dir: Path | None = None, _seen: tuple[str, ...] = ()
) -> Recipe:
    """Build a Recipe from parsed TOML *data* read from *file*."""
    d = kernels_dir or paths.KERNELS
    name = file.parent.name
    extra = set(data) - _KEYS
    if extra:
        bad = sorted(extra)[0]
        close = [k for k in _KEYS if k[:3] == bad[:3]]
        hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(sorted(_KEYS))})"
        raise UserError(f"{file}: unknown field '{bad}'{hint}")

    parent: Recipe | None = None
    if "extends" in data:
        ext = _str(data, "extends", file)
        parent = load(ext, d, _seen)

    def get(key: str, default):
        if key in data:
            return data[key]
        if parent is not None:
            return getattr(parent, {"make": "make_vars"}.get(key, key))
        return default

    arch = get("arch", None)
    if arch is None:
        raise UserError(f"{file}: missing field 'arch' (one of {', '.join(archs.NAMES)})")
    if arch not in archs.NAMES:
        raise UserError(f"{file}: arch: '{arch}' is not one of {', '.join(archs.NAMES)}")
    source = get("source", None)
    if not isinstance(source, str) or not source:
        raise UserError(
            f"{file}: source: expected a string like 'debian:6.1', a path, or 'git+URL@REF'"
        )
    base = get("base", "tinyconfig")
    if not isinstance(base, str) or not (base in BASES or base.startswith("file:")):
        raise UserError(f"{file}: base: '{base}' is not one of {', '.join(BASES)} or 'file:PATH'")
    if base.startswith("file:") and "base" in data:
        p = (file.parent / base[5:]).resolve()
        if not p.is_file():
            raise UserError(f"{file}: base: {p} does not exist")
        base = f"file:{p}"

    # Lists are inherited and extended: the parent's entries come first.
    fragments = parent.fragments if parent else ()
    for i, fr in enumerate(_list(data, "fragments", file)):
        if not isinstance(fr, str):
            raise UserError(f"{file}: fragments[{i}]: expected a string")
        fragments += (_find(fr, file, d / "fragments", ".config", f"fragments[{i}]"),)

    patches = parent.patches if parent else ()
    for i, entry in enumerate(_list(data, "patches", file)):
        where = f"patches[{i}]"
        if isinstance(entry, str):
            entry = {"file": entry}
        if not isinstance(entry, dict):
            raise UserError(f"{file}: {where}: expected a file name or a table")
        unknown_keys = set(entry) - {"file", "revert", "features"}
        if unknown_keys:
            raise UserError(f"{file}: {where}: unknown key '{sorted(unknown_keys)[0]}'")
        if "file" not in entry:
            raise UserError(f"{file}: {where}: missing 'file'")
        revert = entry.get("revert", False)
        if not isinstance(revert, bool):
            raise UserError(f"{file}: {where}.revert: expected true or false")
        feats = entry.get("features", [])
        if not isinstance(feats, list) or not all(isinstance(x, str) for x in feats):
            raise UserError(f"{file}: {where}.features: expected a list of strings")
        path = _find(entry["file"], file, d / "patches", ".patch", where)
        patches += (Patch(path, revert, tuple(feats)),)

    make_vars = dict(parent.make_vars) if parent else {}
    mk = data.get("make", {})
    if not isinstance(mk, dict):
        raise UserError(f'{file}: make: expected a table of VAR = "value"')
    for k, v in mk.items():
        if not isinstance(v, str | int):
            raise UserError(f"{file}: make.{k}: expected a string")
        make_vars[k] = str(v)

    features = tuple(parent.features) if parent else ()
    for i, x in enumerate(_list(data, "features", file)):
        if not isinstance(x, str):
            raise UserError(f"{file}: features[{i}]: expected a string")
        features += (x,)

    targets = tuple(_list(data, "targets", file)) or (parent.targets if parent else ())

    desc = data.get("description", "")
    return Recipe(
        name=name,
        arch=arch,
        source=source,
        base=base,
        fragments=fragments,
        patches=patches,
        make_vars=tuple(sorted(make_vars.items())),
        features=features,
        description=str(desc),
        file=file,
        targets=targets,
        kernels_dir=d,
    )


def _str(data: dict, key: str, file: Path) -> str:
    v = data[key]
    if not isinstance(v, str):
        raise UserError(f"{file}: {key}: expected a string")
    return v


def _list(data: dict, key: str, file: Path) -> list:
    v = data.get(key, [])
    if not isinstance(v, list):
        raise UserError(f"{file}: {key}: expected a list")
    return v


def _find(ref: str, file: Path, shared: Path, suffix: str, where: str) -> Path:
    """A file named in a recipe: next to the recipe first, then in the shared folder."""
    cands = [file.parent / ref, shared / ref]
    if not ref.endswith(suffix):
        cands += [file.parent / (ref + suffix), shared / (ref + suffix)]
    for c in cands:
        if c.is_file():
            return c.resolve()
    avail = sorted(p.name for p in shared.glob(f"*{suffix}")) if shared.is_dir() else []
    raise unknown(f"file in {file}: {where}", ref, avail)


def input_digest(recipe: Recipe, kernels_dir: Path | None = None) -> str:
    """A hash of everything in the recipe that is a file in this repo (recipe,
    fragments, patches), for the fast lookup of an already built kernel."""
    h = hashlib.sha256()
    h.update(repr((recipe.arch, recipe.source, recipe.base, recipe.make_vars)).encode())
    if recipe.base.startswith("file:"):
        h.update(Path(recipe.base[5:]).read_bytes())
    for f in recipe.all_fragments(kernels_dir):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    for p in recipe.patches:
        h.update(f"{p.name}:{p.revert}".encode() + b"\0" + p.path.read_bytes())
    return h.hexdigest()
