"""Recipe -> checked .config -> kernel build -> store entry.

Layout under ``cache_dir()``:

- ``work/<recipe>-<arch>/src``   patched copy of the source (refreshed per build)
- ``work/<recipe>-<arch>/obj``   make O= directory (kept, so rebuilds are incremental)
- ``work/<recipe>-<arch>/build.log``  the full log of the last build
- ``kernels/<id>/``             the store entry (see store.py)

src and obj are siblings and CCACHE_BASEDIR is their parent, so ccache sees the
same relative paths for every recipe and reuses objects across recipes.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .. import arch as archs
from .. import atomic, paths, proc
from ..errors import BuildError, InfraError, UserError
from ..lock import cache_lock
from . import config as kconfig
from . import source as ksource
from . import store
from .artifact import KernelArtifact
from .recipe import Recipe, input_digest

LOG_TAIL = 40


@dataclass(frozen=True)
class Toolchain:
    arch: str
    cross_compile: str
    cc: str  # what make gets as CC (with ccache in front when available)
    versions: dict = field(hash=False, compare=False)

    @classmethod
    def for_arch(cls, arch: str) -> Toolchain:
        a = archs.get(arch)
        prefix = "" if a.is_host() else a.cross_compile
        gcc = f"{prefix}gcc"
        if shutil.which(gcc) is None:
            raise UserError(f"{gcc} not found: {proc.hint_package(gcc)} to build {arch} kernels")
        for tool in ("make", "flex", "bison", "bc"):
            if shutil.which(tool) is None:
                raise UserError(
                    f"{tool} not found: install the Debian package {tool} to build kernels"
                )
        ccache = shutil.which("ccache")
        versions = {
            "cc": _first_line([gcc, "--version"]),
            "ld": _first_line([f"{prefix}ld", "--version"]),
            "make": _first_line(["make", "--version"]),
            "ccache": _first_line(["ccache", "--version"]) if ccache else None,
            "host": f"{platform.system()} {platform.machine()}",
        }
        return cls(arch, prefix, f"ccache {gcc}" if ccache else gcc, versions)

    def make_args(self) -> list[str]:
        args = [f"ARCH={archs.get(self.arch).kernel_arch}"]
        if self.cross_compile:
            args.append(f"CROSS_COMPILE={self.cross_compile}")
        args.append(f"CC={self.cc}")
        return args

    def identity(self) -> dict:
        # ccache does not change the output; leave it out of the content hash.
        return {k: v for k, v in self.versions.items() if k in ("cc", "ld")}


def _first_line(argv: list[str]) -> str:
    line = proc.first_line(argv)
    return "absent" if line is None else line or "unknown"


@dataclass
class Prepared:
    """A recipe with its source ready and its .config made and checked."""

    recipe: Recipe
    source: ksource.Source
    toolchain: Toolchain
    work: Path
    src: Path
    obj: Path
    requests: dict[str, kconfig.Request]
    problems: list[kconfig.Problem]
    config_sha256: str
    timings: dict

    @property
    def key(self) -> dict:
        """Everything the kernel's content depends on; its hash is the store id."""
        r = self.recipe
        return {
            "source": self.source.identity,
            "patches": [
                {"name": p.name, "sha256": p.sha256(), "revert": p.revert} for p in r.patches
            ],
            "config_sha256": self.config_sha256,
            "arch": r.arch,
            "toolchain": self.toolchain.identity(),
            "make_vars": dict(r.make_vars),
            "targets": list(self.targets),
            "timestamp": self.source.timestamp,
        }

    @property
    def targets(self) -> tuple[str, ...]:
        return self.recipe.targets or (self.recipe.image_target(),)

    @property
    def id(self) -> str:
        return hashlib.sha256(json.dumps(self.key, sort_keys=True).encode()).hexdigest()[:32]

    def make_env(self) -> dict[str, str]:
        return {
            "KBUILD_BUILD_TIMESTAMP": self.source.timestamp,
            "KBUILD_BUILD_USER": "lab",
            "KBUILD_BUILD_HOST": "lab",
            "CCACHE_BASEDIR": str(self.work),
            "CCACHE_NOHASHDIR": "1",
            "LC_ALL": "C",
            "TZ": "UTC",
        }

    def make_argv(self, *targets: str, jobs: int | None = None) -> list[str]:
        argv = ["make", "-C", str(self.src), f"O={self.obj}"]
        if jobs:
            argv.append(f"-j{jobs}")
        argv += self.toolchain.make_args()
        argv += [f"{k}={v}" for k, v in self.recipe.make_vars]
        return argv + list(targets)


def work_dir(recipe: Recipe) -> Path:
    name = f"{recipe.name}-{recipe.arch}" + (f"-{recipe.variant}" if recipe.variant else "")
    return paths.cache_dir() / "work" / name


# A kernel build on this 2-core class of host takes minutes; a second lab waits that long.
BUILD_LOCK_TIMEOUT = 3 * 3600.0
SOURCE_LOCK_TIMEOUT = 3600.0


def _locked(recipe: Recipe, doing: str):
    """The work directory's lock: one lab at a time prepares or builds *recipe* (a
    second one waits, then finds the kernel in the store)."""
    work = work_dir(recipe)
    work.mkdir(parents=True, exist_ok=True)
    return cache_lock(f"work-{work.name}", f"{doing} {recipe.name}", timeout=BUILD_LOCK_TIMEOUT)


Progress = Callable[[str, str], None]  # (stage, detail)


def _noop(stage: str, detail: str) -> None:
    pass


def configure(recipe: Recipe, *, progress: Progress = _noop) -> Prepared:
    """Source, patches and .config for *recipe*, with the kconfiglib check done
    (``lab kernel config``).  Takes the work directory's lock."""
    with _locked(recipe, "preparing"):
        return _configure(recipe, progress=progress)


# The last clean configure of a work directory: what it was made from (config_inputs) and
# the .config it made, so a build whose source changed only in files Kconfig never reads
# (config_reusable) keeps that .config instead of making and checking it again.
CONFIG_RECORD = "config-inputs.json"
# What Kconfig and the config targets never read: C, assembler and Rust sources and headers,
# outside scripts/ and tools/ (which hold the config programs themselves).
_NOT_CONFIG_SUFFIXES = (".c", ".h", ".S", ".rs")


def config_inputs(recipe: Recipe, toolchain: Toolchain, digest: str | None = None) -> str:
    """A digest of what a recipe's .config is made from besides the source's Kconfig
    files: the recipe's own files (input_digest: base, fragments, patches, make
    variables, arch; *digest* when the caller has it already) and the toolchain (ccache
    aside)."""
    tools = {k: v for k, v in toolchain.versions.items() if k != "ccache"}
    mine = digest if digest is not None else input_digest(recipe)
    return hashlib.sha256(json.dumps([mine, tools], sort_keys=True).encode()).hexdigest()


def config_reusable(record: dict | None, inputs: str, config: Path, changed: list[str]) -> tuple[str | None, str]:
    """(the .config sha256 to keep, "") if the last clean configure's *record* still holds:
    the same *inputs*, the .config it made unchanged, and every file the source copy
    *changed* one Kconfig never reads (config_inputs, _NOT_CONFIG_SUFFIXES); else (None,
    why it is made again)."""
    if not record:
        return None, "no clean configure recorded"
    if record.get("inputs") != inputs:
        return None, "the recipe's config inputs changed"
    if not config.is_file():
        return None, "no .config"
    for rel in changed:
        if not rel.endswith(_NOT_CONFIG_SUFFIXES) or rel.startswith(("scripts/", "tools/")):
            return None, f"{rel} changed"
    sha = hashlib.sha256(config.read_bytes()).hexdigest()
    return (sha, "") if sha == record.get("config_sha256") else (None, ".config changed since it was checked")


def _read_record(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _configure(recipe: Recipe, *, progress: Progress = _noop, reuse: bool = False, digest: str | None = None) -> Prepared:
    """Source, patches and .config for *recipe*, checked; with *reuse*, the last clean
    .config is kept when nothing it depends on changed (config_reusable)."""
    t0 = time.monotonic()
    toolchain = Toolchain.for_arch(recipe.arch)
    for f in recipe.all_fragments():
        kconfig.parse_fragment(f)  # bad lines fail before any slow step
    progress("source", recipe.source)
    src_info = _resolve_source(recipe)
    work = work_dir(recipe)
    progress("patch", f"{len(recipe.patches)} patches")
    changed: list[str] = []
    src = ksource.patched_copy(src_info, recipe.patches, work, changed)
    t1 = time.monotonic()
    obj = work / "obj"
    obj.mkdir(exist_ok=True)
    p = Prepared(recipe, src_info, toolchain, work, src, obj, {}, [], "", {})
    requests = kconfig.merge(recipe.all_fragments())
    inputs = config_inputs(recipe, toolchain, digest)
    record_path = work / CONFIG_RECORD
    kept, why = config_reusable(_read_record(record_path), inputs, obj / ".config", changed) if reuse else (None, "")
    if kept is not None:
        progress("config", f"{recipe.base}: kept (only {len(changed)} source files changed since it was checked)")
        p.requests, p.problems, p.config_sha256 = requests, [], kept
        p.timings = {"source_s": round(t1 - t0, 1), "config_s": round(time.monotonic() - t1, 1), "config_kept": True}
        return p
    record_path.unlink(missing_ok=True)  # until this configure is checked clean
    progress("config", recipe.base)
    env = p.make_env()
    if recipe.base.startswith("file:"):
        shutil.copyfile(recipe.base[5:], obj / ".config")
        base_cfg = obj / ".config"
        proc.run(p.make_argv("olddefconfig"), env=env, timeout=600)
    else:
        proc.run(p.make_argv(recipe.base), env=env, timeout=600)
    base_cfg = work / "base.config"
    shutil.copyfile(obj / ".config", base_cfg)
    kconfig.write_merged(base_cfg, requests, obj / ".config")
    proc.run(p.make_argv("olddefconfig"), env=env, timeout=600)
    progress("check", "kconfiglib")
    kver = proc.run(p.make_argv("-s", "kernelversion"), env=env).stdout.decode().strip()
    kenv = kconfig.kconfig_env(src, recipe.arch, toolchain.cc, f"{toolchain.cross_compile}ld", kver)
    kconf = kconfig.load_kconfig(src, kenv, obj / ".config")
    p.requests = requests
    p.problems = kconfig.check(kconf, requests)
    p.config_sha256 = hashlib.sha256((obj / ".config").read_bytes()).hexdigest()
    p.timings = {"source_s": round(t1 - t0, 1), "config_s": round(time.monotonic() - t1, 1), **({"config_made_because": why} if why else {})}
    if not p.problems:
        atomic.write_text(record_path, json.dumps({"inputs": inputs, "config_sha256": p.config_sha256}), "the build's config record")
    return p


def _resolve_source(recipe: Recipe) -> ksource.Source:
    """The recipe's source, unpacked or fetched into the cache if it has to be.  Recipes
    share sources (every debian:6.1 recipe), and their builds hold different work
    locks, so unpacking one takes the source's own lock."""
    rel = recipe.file.parent if recipe.file else None
    if not recipe.source.startswith(("debian:", "git+")):
        return ksource.resolve(recipe.source, relative_to=rel)  # a local tree: only read
    name = "source-" + hashlib.sha256(recipe.source.encode()).hexdigest()[:16]
    with cache_lock(name, f"unpacking {recipe.source}", timeout=SOURCE_LOCK_TIMEOUT):
        return ksource.resolve(recipe.source, relative_to=rel)


_STAGE_RE = re.compile(r"^\s+([A-Z][A-Z0-9_]{1,11})\s+(\S.*)$")


def build(
    recipe: Recipe,
    *,
    jobs: int | None = None,
    progress: Progress = _noop,
    force: bool = False,
) -> KernelArtifact:
    """Build *recipe* (or find it already built) and return the store entry."""
    digest = input_digest(recipe)
    t0 = time.monotonic()
    work = work_dir(recipe)
    with _locked(recipe, "building") as waited:
        if waited and not force:
            # Another lab built it while we waited: reuse its kernel.
            found = lookup_built(recipe)
            if found is not None:
                return found
        p = _configure(recipe, progress=progress, reuse=not force, digest=digest)
        if p.problems:
            raise UserError(
                f"kernel recipe {recipe.name}: config check failed: "
                + "; ".join(str(x) for x in p.problems)
            )
        existing = store.get(p.id) if not force else None
        if existing is not None and len(existing.id) == len(p.id):
            _note_digest(existing, digest)
            return existing
        jobs = jobs or os.cpu_count() or 1
        log_path = work / "build.log"
        argv = p.make_argv(*p.targets, jobs=jobs)
        t_build = time.monotonic()
        _run_make(argv, p.make_env(), log_path, progress)
        build_s = time.monotonic() - t_build
        release = (
            proc.run(p.make_argv("-s", "kernelrelease"), env=p.make_env()).stdout.decode().strip()
        )
        a = archs.get(recipe.arch)
        image = p.obj / a.image_path
        if not image.is_file():
            raise InfraError(f"make succeeded but {image} is missing; see {log_path}")
        with store.staging(p.id, replace=force) as tmp:
            shutil.copy2(image, tmp / a.image)
            shutil.copy2(p.obj / ".config", tmp / "config")
            for extra in ("System.map", "vmlinux"):
                if (p.obj / extra).is_file() and extra == "System.map":
                    shutil.copy2(p.obj / extra, tmp / extra)
            btf = extract_btf(p.obj / "vmlinux", tmp / BTF_FILE)
            shutil.copy2(log_path, tmp / "build.log")
            meta = {
                "id": p.id,
                "name": recipe.name,
                "arch": recipe.arch,
                "image": a.image,
                "config": "config",
                "modules": None,
                "release": release,
                "features": sorted(recipe.all_features()),
                "description": recipe.description,
                "inputs": {
                    "recipe": str(recipe.file) if recipe.file else None,
                    "recipe_digest": digest,
                    "source": p.source.as_dict(),
                    "base": recipe.base,
                    "fragments": [
                        {"path": str(f), "sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
                        for f in recipe.all_fragments()
                    ],
                    "patches": p.key["patches"],
                    "make_vars": dict(recipe.make_vars),
                },
                "key": p.key,
                "hashes": {
                    "config_sha256": p.config_sha256,
                    "image_sha256": hashlib.sha256(image.read_bytes()).hexdigest(),
                },
                "image_size": image.stat().st_size,
                "btf": BTF_FILE if btf else None,
                "timings": {
                    **p.timings,
                    "build_s": round(build_s, 1),
                    "total_s": round(time.monotonic() - t0, 1),
                },
                "toolchain": p.toolchain.versions,
                "jobs": jobs,
                "build_command": shlex.join(argv),
                "build_env": p.make_env(),
                "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "log": "build.log",
            }
            (tmp / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
        return KernelArtifact.from_entry(store.root() / p.id)


# The kernel's BTF (its .BTF section, raw: what /sys/kernel/btf/vmlinux holds), kept
# in the store entry of a kernel built with CONFIG_DEBUG_INFO_BTF: BPF schedulers are
# built against it (lab scheduler build) without keeping the much larger vmlinux.
BTF_FILE = "vmlinux.btf"


def extract_btf(vmlinux: Path, dest: Path) -> bool:
    """Write *vmlinux*'s .BTF section, byte for byte, to *dest*; False when it has none.
    Read from the ELF section table here (``objcopy -O binary`` pads the section out to
    its load address: 30 MB for 2.6 MB of BTF)."""
    try:
        data = elf_section(vmlinux, ".BTF")
    except (OSError, ValueError):
        return False
    # A raw BTF blob starts with the magic 0xeB9F (little-endian on both arches lab builds).
    if data is None or data[:2] != b"\x9f\xeb":
        return False
    dest.write_bytes(data)
    return True


def elf_section(path: Path, name: str) -> bytes | None:
    """The contents of section *name* of the 64-bit little-endian ELF file *path*
    (None when it has no such section; ValueError when it is not such a file)."""

    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        secs = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
        strtab = secs[shstrndx]
        f.seek(strtab[4])
        names = f.read(strtab[5])
        for sec in secs:
            end = names.index(b"\0", sec[0])
            if names[sec[0]:end] == name.encode():
                f.seek(sec[4])
                return f.read(sec[5])
    return None


def _note_digest(a: KernelArtifact, digest: str) -> None:
    """Remember that this recipe digest maps to entry *a* (for the fast lookup)."""
    f = a.image.parent / "recipe-digests"
    known = set(f.read_text().split()) if f.is_file() else set()
    if digest not in known and digest != a.metadata.get("inputs", {}).get("recipe_digest"):
        with open(f, "a") as fh:
            fh.write(digest + "\n")


def lookup_built(recipe: Recipe) -> KernelArtifact | None:
    """A store entry built from exactly this recipe's files, without touching the
    source or running make (the fast path for ``--kernel RECIPE``).  Sources are
    checked cheaply: a Debian source by its package version, a local tree not at
    all (None then, so the caller prepares and hashes it)."""
    if not (recipe.source.startswith("debian:") or recipe.source.startswith("git+")):
        return None
    if recipe.source.startswith("git+") and "@" not in recipe.source.removeprefix("git+"):
        return None
    digest = input_digest(recipe)
    try:
        tc = Toolchain.for_arch(recipe.arch).identity()
    except UserError:
        tc = None
    for a in store.entries():
        if a.arch != recipe.arch or a.name != recipe.name:
            continue
        digs = {a.metadata.get("inputs", {}).get("recipe_digest")}
        f = a.image.parent / "recipe-digests"
        if f.is_file():
            digs |= set(f.read_text().split())
        if digest not in digs:
            continue
        if tc is not None and a.metadata.get("key", {}).get("toolchain") != tc:
            continue
        if recipe.source.startswith("debian:"):
            ver = recipe.source.split(":", 1)[1]
            pkgver = ksource._dpkg_version(f"linux-source-{ver}")
            if f"={pkgver} " not in a.metadata.get("key", {}).get("source", ""):
                continue
        return a
    return None


def _run_make(argv: list[str], env: dict, log_path: Path, progress: Progress) -> None:
    """Run make, streaming its output to *log_path* and stage lines to *progress*."""
    def on_line(line: str) -> None:
        m = _STAGE_RE.match(line)
        if m:
            progress(m[1], m[2].strip())

    header = f"# {shlex.join(f'{k}={v}' for k, v in env.items())} {shlex.join(argv)}\n"
    rc = proc.logged(argv, log_path, on_line, env=env, header=header)
    if rc != 0:
        lines = log_path.read_text(errors="replace").splitlines()
        errs = compiler_errors(lines)
        if errs:
            first = next(e for e in errs if _ERROR_RE.search(e)).strip()
            detail = "\n".join(errs)
        else:
            first = next((ln.strip() for ln in reversed(lines) if "***" in ln), "no compiler error in the log")
            detail = "\n".join(lines[-LOG_TAIL:])
        raise BuildError(f"make failed (exit {rc}) at {first}; full log: {log_path}", detail=detail, log=str(log_path))


# What the compiler, assembler, linker or modpost said was wrong, as gcc/ld print it.
_ERROR_RE = re.compile(r"(:\d+(:\d+)?: (fatal )?error: )|(^ERROR: )|(undefined reference to )|(^\S*ld(\.\w+)?: .*error)|(^Error: )")
_IN_FUNCTION_RE = re.compile(r": In function |^In file included from |^\s+from ")
_CONTEXT_RE = re.compile(r"^\s+(\d+ )?\|")


def compiler_errors(lines: list[str], limit: int = 40) -> list[str]:
    """The build log's error lines, each with what gcc prints around it (the function
    it is in, the source line and the caret), in log order, at most *limit* lines."""
    out: list[str] = []
    taken: set[int] = set()
    for i, ln in enumerate(lines):
        if not _ERROR_RE.search(ln):
            continue
        j = i
        while j > 0 and i - j < 4 and _IN_FUNCTION_RE.search(lines[j - 1]):
            j -= 1
        k = i + 1
        while k < len(lines) and k - i <= 4 and _CONTEXT_RE.match(lines[k]):
            k += 1
        for n in range(j, k):
            if n not in taken:
                taken.add(n)
                out.append(lines[n])
        if len(out) >= limit:
            break
    return out[:limit]
