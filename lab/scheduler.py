"""sched_ext BPF schedulers: built by lab against a kernel's BTF, cached by content,
packed into the guest and started by lab's agent before the workload.

A scheduler is named on the command line as ``NAME[:ARGS]`` (``--scheduler
scx_qmap:-s 20000``): NAME is one of the kernel tree's own example schedulers
(tools/sched_ext), ARGS its arguments, split into words like a shell's on the host
(``shlex.split``) and handed to the guest one word per file, so the guest never
parses them: a ``;`` or a ``$(...)`` reaches the scheduler as those characters.
``eevdf`` or ``cfs`` (or nothing) is the kernel's own scheduler.  NAME may also be one
of the scx project's Rust schedulers from crates.io (``scx_bpfland[@VERSION]``, CRATES):
``cargo install``-ed once at a pinned version, one binary for any sched_ext kernel (its
BPF programs are relocated against the running kernel's BTF when it loads, CO-RE).

Layout under ``cache_dir()``:

- ``work/scx-<kernel id>/``      the build tree (tools/, include/, ... of the kernel's
  source) and ``build.log``
- ``schedulers/<id>/``           the store entry: the binary (static, or a user's
  dynamic one with its loader and libraries under ``root/``), metadata.json,
  build.log; *id* is a hash of the source's identity, the kernel's BTF, the name and
  the toolchain's versions (a user's binary: its content, and its libraries'; a crate:
  its name and version, the clang and rustc versions and the arch)
- ``work/crate-<name>-<version>-*/`` a crate's cargo root and target dir while it builds
  (removed after)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from . import arch as archs
from . import paths, proc
from . import progress as progress_mod
from .errors import BuildError, UserError, unknown
from .kernel.artifact import KernelArtifact
from .lock import cache_lock

# The kernel's own scheduler: no BPF scheduler is loaded.
KERNEL_OWN = ("eevdf", "cfs")
# tools/sched_ext's schedulers and the name each one's sched_ext_ops gives the kernel
# (what /sys/kernel/sched_ext/root/ops says once it is loaded).
TREE = {"scx_simple": "simple", "scx_qmap": "qmap", "scx_central": "central", "scx_flatcg": "flatcg"}


@dataclass(frozen=True)
class Crate:
    """One of the scx project's Rust schedulers on crates.io that lab builds: its crate
    *name*, the *version* pinned as the default (one that builds here), the ops name
    its sched_ext_ops gives the kernel (which adds ``_VERSION_TRIPLE``; ops_match), and
    the clang its BPF programs are compiled with (scx_cargo's BPF_CLANG)."""

    name: str
    version: str
    ops: str
    clang: str


# The crates lab builds, each at a version whose build script takes bookworm's clang-16
# (scx_utils/scx_cargo 1.0.x; 1.1.x asks for clang 18 and -mcpu=v4: bench/bench_scx_crate.py
# builds those with zig's clang).  Tried and left out: scx_lavd 1.0.20, whose BPF program
# crashes clang-16 in code generation (bench/results/bench_scx_crate-20261126-143725.json).
CRATES = {
    "scx_bpfland": Crate("scx_bpfland", "1.0.20", "bpfland", "clang-16"),
    "scx_rusty": Crate("scx_rusty", "1.0.20", "rusty", "clang-16"),
}
CRATE_ORIGIN = "crates.io"
# bindgen (the schedulers' interface headers) loads Debian's libclang of the same LLVM.
LIBCLANG_PATH = "/usr/lib/llvm-16/lib"
_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")
# The recipe that builds a kernel with sched_ext, per arch.
SCHED_EXT_RECIPE = {"x86_64": "lab-6.12-scx", "arm64": "lab-6.12-scx-arm64"}
LAYOUT = "1"  # bump when how a scheduler is built or stored changes
BUILD_LOCK_TIMEOUT = 3600.0
LOG_TAIL = 40
# The source's parts tools/sched_ext builds from (libbpf, bpftool, the uapi headers).
TREE_PARTS = ("tools", "include", "scripts", "Makefile", "kernel/bpf")  # kernel/bpf: disasm.[ch] for bpftool
# Debian 12's packages a scheduler build needs (scripts/setup.sh installs them).
PACKAGES = "clang-16 llvm-16 libelf-dev libzstd-dev zlib1g-dev"
CLANG = "clang-16"
LLVM_STRIP = "llvm-strip-16"
# Statically linked, so the binary runs in lab's busybox initramfs with no libraries: the
# Makefile links it against the shared libraries, lab links its object again with these
# (LDFLAGS on make's command line would reach libbpf's sub-make, whose libbpf.so cannot
# be linked -static).
STATIC_LIBS = ("-static", "-lelf", "-lz", "-lzstd", "-lpthread")
# bpftool: the tree's own (tools/bpf/bpftool, built by the Makefile with the host's gcc).
# Debian 12's bpftool 7.1.0 cannot be used: its skeletons have no struct_ops members
# (skel->struct_ops.NAME, skel->maps.NAME for a struct_ops map), which 6.12's
# tools/sched_ext/include/scx/compat.h uses, so every scheduler failed to compile.

BTF_FILE = "vmlinux.btf"  # in a kernel's store entry (lab.kernel.build.BTF_FILE)
# How long the guest's agent waits for the scheduler to be enabled (loading under TCG
# runs the BPF verifier on an emulated CPU: seconds, not minutes).
ENABLE_WAIT_S = 120
LIBS_DIR = "root"  # in a store entry: a dynamic binary's loader and libraries at their guest paths
# A scheduler for a kernel of another arch (arm64 on an x86_64 host) is cross-built: the
# BPF program is clang's -target bpf either way (the arch only picks vmlinux.h, from the
# kernel's BTF, and -D__TARGET_ARCH_<arch>, the Makefile's ARCH=); libbpf and the
# userspace loader are compiled by the arch's gcc (Debian's gcc-<triplet>, which the
# kernel's cross build uses too) against Debian's -dev packages of that arch, fetched
# and unpacked by lab's private apt (lab.image.debian_pkgs.dev_root, as the guest tools
# are), and linked statically with them.  bpftool runs on the host: a native make of it
# first, handed to the cross make (BPFTOOL=).
CROSS_BUILDS = {("x86_64", "arm64")}  # (host, kernel arch) pairs lab cross-builds schedulers for
CROSS_DEV_PACKAGES = ("libelf-dev", "zlib1g-dev", "libzstd-dev")


@dataclass(frozen=True)
class Spec:
    """A scheduler as the command line names it: one of the kernel tree's (*name*), or a
    user's own at *path* (a source directory or a prebuilt binary, *kind* "source" or
    "binary"), whose ops name *user_ops* lab read from it ("" when it could not)."""

    name: str
    args: tuple[str, ...] = ()
    path: str = ""
    kind: str = ""
    user_ops: str = ""
    version: str = ""  # a crate's (kind "crate"), "" for its pinned default

    @property
    def ops(self) -> str:
        """The name its sched_ext_ops gives the kernel (/sys/kernel/sched_ext/root/ops);
        "" for a user's scheduler whose name lab could not read: any is accepted."""
        if self.kind == "crate":
            return CRATES[self.name].ops
        return self.user_ops if self.path else TREE[self.name]

    @property
    def text(self) -> str:
        head = self.path or (f"{self.name}@{self.version}" if self.version else self.name)
        return head + (":" + shlex.join(self.args) if self.args else "")


def _is_path(name: str) -> bool:
    """A user's scheduler is named by a path: with a slash, or starting with ``.`` or
    ``~`` (``./mysched`` for one in the current directory)."""
    return "/" in name or name.startswith((".", "~"))


def parse_spec(text: str) -> Spec | None:
    """*text* (``NAME[:ARGS]`` or ``PATH[:ARGS]``) as a Spec; None for the kernel's own
    scheduler.  ARGS are split into words as a shell would split them, without running
    one.  A PATH is checked here (one line naming what is wrong with it)."""
    name, sep, rest = text.partition(":")
    name = name.strip()
    if name in ("", *KERNEL_OWN):
        if rest.strip():
            raise UserError(f"--scheduler {text!r}: the kernel's own scheduler takes no arguments")
        return None
    user = _is_path(name)
    crate, at, version = name.partition("@")
    if not user and at and crate in CRATES:
        check_version(crate, version, f"--scheduler {text!r}")
    elif not user and name in CRATES:
        crate, version = name, ""
    elif not user and name not in TREE:
        raise unknown("scheduler", name, [*TREE, *CRATES, *KERNEL_OWN])
    try:
        args = tuple(shlex.split(rest)) if sep else ()
    except ValueError as e:  # an unbalanced quote
        raise UserError(f"--scheduler {text!r}: its arguments cannot be split into words: {e}") from None
    for a in args:
        if "\0" in a:
            raise UserError(f"--scheduler {text!r}: an argument holds a NUL byte, which no program can be given")
    if user:
        return user_spec(name, args)
    if crate in CRATES and (at or name in CRATES):
        return Spec(crate, args, kind="crate", version=version)
    return Spec(name, args)


# ---- a user's own scheduler ------------------------------------------------------------------

# What a guest path and a make target can be named.
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
# The ops name in a .bpf.c: SCX_OPS_DEFINE(NAME, ..., .name = "OPS") (or a struct
# sched_ext_ops written out), the field the kernel shows in root/ops.
_OPS_DEFINE_RE = re.compile(r'SCX_OPS_DEFINE\s*\([^;]*?\.name\s*=\s*"([^"]+)"', re.S)
_OPS_NAME_RE = re.compile(r'\.name\s*=\s*"([^"]+)"')


def user_spec(path_text: str, args: tuple[str, ...] = ()) -> Spec:
    """The Spec of the user's scheduler at *path_text*: a directory with ``NAME.bpf.c``
    and ``NAME.c`` (tools/sched_ext's layout), or an ELF binary (a dynamically linked
    one goes to the guest with its loader and libraries).  Refused in one line: a
    missing path, a directory without the pair (or with two), a file that is not ELF, a
    dynamic binary whose libraries this host lacks or of another arch, a name that
    clashes with the tree's own."""
    where = f"--scheduler {path_text}"
    p = Path(path_text).expanduser()
    try:
        p = p.resolve(strict=True)
    except OSError:
        raise UserError(f"{where}: no such file or directory") from None
    if p.is_dir():
        bpf = sorted(f.name.removesuffix(".bpf.c") for f in p.glob("*.bpf.c") if f.is_file())
        pairs = [n for n in bpf if (p / f"{n}.c").is_file()]
        if not pairs:
            got = f" (it has {', '.join(b + '.bpf.c' for b in bpf)} without the matching .c)" if bpf else ""
            raise UserError(
                f"{where}: the directory holds no NAME.bpf.c with its NAME.c{got}; a source tree "
                "in tools/sched_ext's layout (a copy of scx_simple.bpf.c and scx_simple.c, renamed) is what lab builds"
            )
        if len(pairs) > 1:
            raise UserError(f"{where}: the directory holds {len(pairs)} schedulers ({', '.join(pairs)}); give one per directory")
        name = pairs[0]
        _check_name(where, name)
        ops = source_ops((p / f"{name}.bpf.c").read_text(errors="replace"))
        return Spec(name, args, str(p), "source", ops)
    if not p.is_file():
        raise UserError(f"{where}: neither a directory nor a file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise UserError(f"{where}: cannot be read: {e.strerror}") from None
    if elf_arch(data) is None:
        raise UserError(f"{where}: neither a source directory nor an ELF binary")
    if not elf_static(data):
        binary_libraries(p, where)  # one line now when its libraries cannot be packed
    name = p.name
    _check_name(where, name)
    return Spec(name, args, str(p), "binary", binary_ops(name, data))


def _check_name(where: str, name: str) -> None:
    if not _NAME_RE.match(name):
        raise UserError(f"{where}: the scheduler's name {name!r} must be letters, digits, '_', '.' or '-' (at most 64)")
    if name in TREE:
        raise UserError(
            f"{where}: {name} is the name of the kernel tree's own scheduler; rename your copy "
            f"(its files and the skeleton header it includes) or use --scheduler {name}"
        )


def source_ops(text: str) -> str:
    """The ops name a scheduler's .bpf.c gives the kernel ("" when it names none)."""
    m = _OPS_DEFINE_RE.search(text) or _OPS_NAME_RE.search(text)
    return m[1] if m else ""


def binary_ops(name: str, data: bytes) -> str:
    """The ops name of a prebuilt scheduler, from its strings: tools/sched_ext's
    convention (binary scx_FOO, ops FOO), when FOO is among the binary's NUL-terminated
    strings (the embedded BPF object's struct_ops data holds it); else "" (unknown)."""
    short = name.removeprefix("scx_")
    if short and short != name and b"\0" + short.encode() + b"\0" in data:
        return short
    return ""


def elf_static(data: bytes) -> bool:
    """Whether a 64-bit little-endian ELF binary needs no program interpreter (static,
    or static-pie): it has no PT_INTERP program header."""
    if len(data) < 64 or data[4] != 2:
        return False
    phoff = int.from_bytes(data[32:40], "little")
    phentsize = int.from_bytes(data[54:56], "little")
    phnum = int.from_bytes(data[56:58], "little")
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 4 > len(data):
            return False
        if int.from_bytes(data[off : off + 4], "little") == 3:  # PT_INTERP
            return False
    return True


def binary_libraries(path: Path, where: str) -> list:
    """A dynamically linked binary's ELF interpreter and shared libraries, from this host,
    at the paths the guest's ld.so looks (lab.image.tools' staging, as for perf): the
    guest's initramfs has no libraries of its own.  Empty for a static binary."""
    try:
        static = elf_static(path.read_bytes())
    except OSError as e:
        raise UserError(f"{where}: cannot be read: {e.strerror}") from None
    if static:
        return []
    # deferred: CLI start (lab.image.tools)
    from .image import tools

    return tools.library_entries(path, where)


def _libraries_key(entries: list) -> dict[str, str]:
    """What a dynamic binary's libraries add to its store key: each guest path's
    sha256, or where its symlink points (a host library upgrade is a new entry)."""
    out = {}
    for e in entries:
        if e.link is not None:
            out[e.guest] = "-> " + e.link
        else:
            try:
                out[e.guest] = hashlib.sha256(Path(e.source).read_bytes()).hexdigest()
            except OSError as err:
                raise UserError(f"{e.source}: cannot be read: {err.strerror}") from None
    return out


def user_files(spec: Spec) -> dict[str, str]:
    """The sha256 of each file a user's scheduler is made of (part of its store key:
    an edit rebuilds, an unchanged tree does not)."""
    p = Path(spec.path)
    names = [f"{spec.name}.bpf.c", f"{spec.name}.c"] if spec.kind == "source" else [p.name]
    base = p if spec.kind == "source" else p.parent
    out = {}
    for n in names:
        try:
            out[n] = hashlib.sha256((base / n).read_bytes()).hexdigest()
        except OSError as e:
            raise UserError(f"--scheduler {spec.path}: {n} cannot be read: {e.strerror}") from None
    return out


def has_sched_ext(kernel: KernelArtifact) -> bool | None:
    """Whether *kernel* was built with CONFIG_SCHED_CLASS_EXT (None: no config to tell)."""
    v = kernel.config_value("SCHED_CLASS_EXT")
    return None if v is None else v == "y"


def skip_reason(kernel: KernelArtifact) -> str | None:
    """Why no BPF scheduler can load into *kernel* (a SKIP before booting), or None."""
    have = has_sched_ext(kernel)
    if have:
        return None
    recipe = SCHED_EXT_RECIPE.get(kernel.arch)
    where = (
        f"the recipe {recipe} has it (--kernel {recipe})" if recipe
        else f"lab has no {kernel.arch} recipe with it yet (x86_64: {SCHED_EXT_RECIPE['x86_64']})"
    )
    what = "is not set" if have is False else "cannot be read (the kernel has no config)"
    return f"kernel {kernel.label} has no sched_ext: CONFIG_SCHED_CLASS_EXT {what}; {where}"


# ---- the store ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scheduler:
    """A built scheduler in the store."""

    name: str
    arch: str
    binary: Path
    id: str
    metadata: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def ops(self) -> str:
        """Its ops name ("" when lab could not read a user's binary's: any is accepted)."""
        if "ops" in self.metadata:
            return str(self.metadata["ops"])
        return TREE.get(self.name, self.name.removeprefix("scx_"))

    @property
    def version(self) -> str:
        return str(self.metadata.get("version", "?"))

    @property
    def label(self) -> str:
        return f"{self.name}@{self.id[:8]}"

    @classmethod
    def from_entry(cls, entry: Path) -> Scheduler:
        meta = json.loads((entry / "metadata.json").read_text())
        if not isinstance(meta, dict):
            raise ValueError("metadata.json is not a JSON object")
        for k in ("name", "arch", "binary", "id"):
            if not isinstance(meta.get(k), str) or not meta[k]:
                raise ValueError(f"metadata.json: {k!r} must be a string")
        if "/" in meta["binary"] or meta["binary"].startswith("."):
            raise ValueError("metadata.json: 'binary' must name a file inside the entry")
        binary = entry / meta["binary"]
        if not binary.is_file():
            raise ValueError(f"its binary {meta['binary']} is gone")
        return cls(meta["name"], meta["arch"], binary, meta["id"], meta)

    def record(self, args: tuple[str, ...] = ()) -> dict:
        """What a run records of the scheduler it ran (plan.json's ``scheduler``)."""
        return {
            "name": self.name,
            "ops": self.ops,
            "args": list(args),
            "version": self.version,
            "id": self.id,
            "binary_sha256": self.metadata.get("binary_sha256", ""),
            "kernel": self.metadata.get("kernel", {}).get("label", ""),
        }


def root() -> Path:
    d = paths.cache_dir() / "schedulers"
    d.mkdir(parents=True, exist_ok=True)
    return d


def entries() -> list[Scheduler]:
    out = []
    for d in sorted(root().iterdir()):
        if d.name.startswith(".") or not (d / "metadata.json").is_file():
            continue
        try:
            out.append(Scheduler.from_entry(d))
        except (ValueError, OSError, json.JSONDecodeError):
            continue  # damaged or half-written by another tool: never used
    return out


def get(spec: str) -> Scheduler | None:
    """The stored scheduler named by *spec*: an id or a unique prefix, or a label."""
    if not spec.strip():
        return None
    name, _, idp = spec.partition("@")
    found = [
        s for s in entries()
        if s.id.startswith(spec) or (idp and s.name == name and s.id.startswith(idp))
    ]
    if len(found) > 1:
        raise UserError(f"scheduler {spec!r} is ambiguous: {', '.join(s.label for s in found[:5])}")
    return found[0] if found else None


# ---- building ------------------------------------------------------------------------------


def cross_prefix(arch: str) -> str:
    """CROSS_COMPILE for a scheduler of a kernel of *arch*: "" for the host's own arch,
    the arch's gcc prefix for a cross build lab makes (CROSS_BUILDS); a one-line
    UserError for any other."""
    host = archs.host_name()
    if arch == host:
        return ""
    if (host, arch) not in CROSS_BUILDS:
        made = ", ".join(f"for {k} on {h}" for h, k in sorted(CROSS_BUILDS))
        raise UserError(f"scheduler builds for {arch} kernels on this {host} host are not supported (lab cross-builds {made})")
    return archs.get(arch).cross_compile


def toolchain(arch: str | None = None) -> dict[str, str]:
    """The versions of what builds a scheduler for a kernel of *arch* (default: the
    host's; another arch's gcc for a cross build); a one-line UserError naming the
    Debian packages when one is missing."""
    prefix = cross_prefix(arch) if arch else ""
    need = {"clang": CLANG, "llvm-strip": LLVM_STRIP, "gcc": f"{prefix}gcc", "make": "make"}
    out = {}
    for key, tool in need.items():
        path = shutil.which(tool)
        if path is None:
            pkgs = archs.get(arch).cross_gcc_packages if prefix and key == "gcc" and arch else PACKAGES
            raise UserError(
                f"{tool} not found: a scheduler build needs Debian's {pkgs} "
                "(scripts/setup.sh --system installs them)"
            )
        out[key] = proc.first_line([path, "--version"]) or "unknown"
    if prefix:
        return out  # the static libraries are Debian's of that arch (cross_libs), fetched when built
    for lib in ("libelf.a", "libz.a", "libzstd.a"):
        if not any(Path(d, lib).is_file() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib")):
            raise UserError(f"{lib} not found: a static scheduler needs Debian's {PACKAGES}")
    return out


def kernel_btf(kernel: KernelArtifact) -> Path:
    """The BTF a scheduler for *kernel* is built against; a one-line UserError when the
    kernel has no sched_ext or lab kept no BTF of it."""
    why = skip_reason(kernel)
    if why:
        raise UserError(why)
    btf = kernel.image.parent / BTF_FILE
    if not btf.is_file():
        raise UserError(
            f"kernel {kernel.label} has sched_ext but lab kept no BTF of it ({btf.name}: built before lab "
            f"kept it, or not by lab); rebuild it: lab kernel build {kernel.name} --force"
        )
    return btf


def kernel_source(kernel: KernelArtifact):
    """The recipe *kernel* was built from and its source (unpacked if it has to be)."""
    # deferred: CLI start (lab.kernel.build, lab.kernel.recipe)
    from .kernel import build as kbuild
    from .kernel import recipe as krecipe

    inputs = kernel.metadata.get("inputs", {})
    rec = inputs.get("recipe")
    if isinstance(rec, str) and Path(rec).is_file():
        r = krecipe.load(rec)
        return r, kbuild._resolve_source(r)
    # The recipe file it was built from is gone (built from another checkout): this
    # checkout's recipe of the same name will do if it names the same source.
    spec = (inputs.get("source") or {}).get("spec") if isinstance(inputs.get("source"), dict) else None
    if isinstance(rec, str) and spec and kernel.name in krecipe.names():
        r = krecipe.load(kernel.name)
        if r.source == spec:
            return r, kbuild._resolve_source(r)
    raise UserError(
        f"kernel {kernel.label}: lab does not know its source tree (not built from a recipe here), "
        "so it cannot build tools/sched_ext for it"
    )


def key(name: str, kernel: KernelArtifact, tools: dict[str, str], spec: Spec | None = None, libs: list | None = None) -> dict:
    """Everything a scheduler build's output depends on; its hash is the store id.  A
    user's source tree (*spec*) adds its files' content hashes; a user's prebuilt binary
    is keyed by its own content (and a dynamic one's libraries: *libs*, as
    binary_libraries() gives them, resolved here when not given)."""
    if spec is not None and spec.kind == "binary":
        out: dict = {"layout": LAYOUT, "name": spec.name, "arch": kernel.arch, "user": {"kind": "binary", "files": user_files(spec)}}
        if libs is None:
            libs = binary_libraries(Path(spec.path), f"--scheduler {spec.path}")
        if libs:  # a static binary's key (and store id) is as before
            out["libraries"] = _libraries_key(libs)
        return out
    btf = kernel_btf(kernel)
    k = kernel.metadata.get("key", {})
    out = {
        "layout": LAYOUT,
        "name": name,
        "arch": kernel.arch,
        "source": k.get("source"),
        "patches": k.get("patches"),
        "btf_sha256": hashlib.sha256(btf.read_bytes()).hexdigest(),
        "toolchain": {t: v for t, v in tools.items() if t in ("clang", "gcc")},
        "ldflags": list(STATIC_LIBS),
    }
    if kernel.arch != archs.host_name():  # a cross build (a native one's key, and id, is as before)
        out["cross"] = {"prefix": archs.get(kernel.arch).cross_compile, "libraries": list(CROSS_DEV_PACKAGES)}
    if spec is not None and spec.path:
        out["user"] = {"kind": spec.kind, "files": user_files(spec)}
    return out


def entry_id(k: dict) -> str:
    return hashlib.sha256(json.dumps(k, sort_keys=True).encode()).hexdigest()[:32]


def tree_parts(arch: str) -> tuple[str, ...]:
    """The source's parts a scheduler build for a kernel of *arch* takes: TREE_PARTS, and
    for a cross build the arch's uapi headers (tools/include/uapi/asm/bpf_perf_event.h
    includes arch/arm64's when the compiler is aarch64's)."""
    if arch == archs.host_name():
        return TREE_PARTS
    return (*TREE_PARTS, f"arch/{archs.get(arch).kernel_arch}/include/uapi")


@dataclass(frozen=True)
class Cross:
    """A cross build of a scheduler for a kernel of *arch*: its gcc's *prefix*, Debian's
    -dev packages of that arch unpacked under *libroot* (dev_root), the host's
    *bpftool* (bpftool_argv made it)."""

    arch: str
    prefix: str
    libroot: Path
    bpftool: Path

    @property
    def gcc(self) -> str:
        return f"{self.prefix}gcc"

    @property
    def libdirs(self) -> list[Path]:
        t = archs.get(self.arch).triplet
        return [self.libroot / "usr" / "lib" / t, self.libroot / "lib" / t]

    def ldflags(self) -> str:
        """The Makefile's LDFLAGS (its own dynamic link, and libbpf.so's): the arch's
        libraries found in *libroot*, and what they need (-rpath-link)."""
        dirs = self.libdirs
        return " ".join([*(f"-L{d}" for d in dirs), f"-Wl,-rpath-link={':'.join(map(str, dirs))}", "-lelf", "-lz", "-lpthread"])

    def env(self) -> dict[str, str]:
        """libelf's and zlib's headers of the arch, for libbpf (CPATH: after -I, before
        the compiler's own directories, for gcc and clang alike)."""
        return {"CPATH": str(self.libroot / "usr" / "include")}


def make_argv(tree: Path, out: Path, name: str, btf: Path, jobs: int, *, user: bool = False, cross: Cross | None = None) -> list[str]:
    """The make command that builds *name* from *tree*'s tools/sched_ext into *out*; a
    user's scheduler (*user*) is made the Makefile's only target (c-sched-targets names
    the tree's own four), built by the same rules as they are.  A *cross* build gives
    the Makefile the arch and gcc, the host's bpftool, and the libbpf it links with: its
    HOST_BPFOBJ (which it links userspace with) is otherwise a host libbpf it has no
    rule to make."""
    cross_args = [
        f"ARCH={archs.get(cross.arch).kernel_arch}", f"CROSS_COMPILE={cross.prefix}", f"BPFTOOL={cross.bpftool}",
        f"HOST_BPFOBJ={out / 'build' / 'obj' / 'libbpf' / 'libbpf.a'}", f"LDFLAGS={cross.ldflags()}",
    ] if cross else []  # fmt: skip
    return [
        "make", "-C", str(tree / "tools" / "sched_ext"), f"O={out}", f"-j{jobs}",
        f"CLANG={CLANG}", f"LLVM_STRIP={LLVM_STRIP}", f"VMLINUX_BTF={btf}", *cross_args,
        *([f"c-sched-targets={name}"] if user else []), name,
    ]  # fmt: skip


def bpftool_argv(tree: Path, out: Path, btf: Path, jobs: int) -> list[str]:
    """The native make of tools/sched_ext's bpftool (and its libbpf) into *out*, for a
    cross build (the Makefile's own rule for it wants a host libbpf it cannot make when
    cross-building); the binary is bpftool_path(out)."""
    return [
        "make", "-C", str(tree / "tools" / "sched_ext"), f"O={out}", f"-j{jobs}",
        f"CLANG={CLANG}", f"LLVM_STRIP={LLVM_STRIP}", f"VMLINUX_BTF={btf}", str(bpftool_path(out)),
    ]  # fmt: skip


def bpftool_path(out: Path) -> Path:
    return out / "build" / "sbin" / "bpftool"  # the Makefile's DEFAULT_BPFTOOL


def link_argv(out: Path, name: str, dest: Path, cross: Cross | None = None) -> list[str]:
    """The link that makes *name* static, from the objects make left in *out* (a
    *cross* one: by the arch's gcc, with Debian's libraries of the arch)."""
    obj = out / "build" / "obj"
    gcc, dirs = (cross.gcc, [f"-L{d}" for d in cross.libdirs]) if cross else ("gcc", [])
    return [gcc, "-o", str(dest), str(obj / "sched_ext" / f"{name}.o"), str(obj / "libbpf" / "libbpf.a"), *dirs, *STATIC_LIBS]


def build(
    name: str, kernel: KernelArtifact, *, jobs: int = 2, force: bool = False, progress=None, spec: Spec | None = None,
) -> Scheduler:
    """Build scheduler *name* (tools/sched_ext) for *kernel*, or find it built; a user's
    (*spec* with a path): its source tree built the same way inside the kernel's
    tools/sched_ext, or its prebuilt binary checked and stored."""
    # deferred: CLI start (lab.kernel.source)
    from .kernel import source as ksource

    user = spec is not None and bool(spec.path)
    if user and spec is not None:
        name = spec.name
        if spec.kind == "binary":
            return import_binary(spec, kernel, force=force)
    elif name not in TREE:
        raise unknown("scheduler", name, list(TREE))
    cross_prefix(kernel.arch)  # one line when lab does not build for that arch here
    tools = toolchain(kernel.arch)
    k = key(name, kernel, tools, spec if user else None)
    sid = entry_id(k)
    final = root() / sid
    if not force and (final / "metadata.json").is_file():
        return Scheduler.from_entry(final)
    btf = kernel_btf(kernel)
    with cache_lock(f"scheduler-{sid}", f"building scheduler {name}", timeout=BUILD_LOCK_TIMEOUT) as waited:
        if waited and not force and (final / "metadata.json").is_file():
            return Scheduler.from_entry(final)
        t0 = time.monotonic()
        recipe, src = kernel_source(kernel)
        work = paths.cache_dir() / "work" / f"scx-{kernel.id[:16]}"
        tree = work / "src"
        with cache_lock(f"work-scx-{kernel.id[:16]}", f"building schedulers for {kernel.label}", timeout=BUILD_LOCK_TIMEOUT):
            if progress:
                progress("source", f"tools/sched_ext of {src.spec}")
            for part in tree_parts(kernel.arch):
                s = src.tree / part
                if s.is_dir():
                    ksource.mirror(s, tree / part)
                elif s.is_file():
                    tree.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(s, tree / part)
            if user and spec is not None:
                # The user's two files beside the tree's examples, fresh mtimes so make
                # rebuilds from them (the next mirror deletes them again).
                for f in (f"{name}.bpf.c", f"{name}.c"):
                    shutil.copyfile(Path(spec.path) / f, tree / "tools" / "sched_ext" / f)
            t1 = time.monotonic()
            out = work / "obj"
            out.mkdir(parents=True, exist_ok=True)  # tools/scripts/Makefile.include wants O= to exist
            log = work / f"build-{name}.log"
            env = {"LC_ALL": "C", "TZ": "UTC"}
            cross = _cross(kernel.arch, tree, work, btf, jobs, env, progress) if kernel.arch != archs.host_name() else None
            argv = make_argv(tree, out, name, btf, jobs, user=user, cross=cross)
            if cross:
                env = {**env, **cross.env()}
            header = f"# {shlex.join(argv)}\n"
            if progress:
                progress("make", name)
            rc = proc.logged(argv, log, lambda line: None, env=env, header=header)
            if rc != 0:
                lines = log.read_text(errors="replace").splitlines()
                raise _build_failed(name, rc, lines, log)
            binary = out / f"{name}.static"
            link = link_argv(out, name, binary, cross)
            cp = proc.run(link, check=False, env=env)
            with open(log, "a") as fh:
                fh.write(f"# {shlex.join(link)}\n" + (cp.stdout or b"").decode(errors="replace") + (cp.stderr or b"").decode(errors="replace"))
            if cp.returncode != 0 or not binary.is_file():
                lines = log.read_text(errors="replace").splitlines()
                raise _build_failed(name, cp.returncode, lines, log)
            static = proc.run(["file", "-L", str(binary)], check=False).stdout.decode(errors="replace")
            if "statically linked" not in static and "static-pie" not in static:
                # The guest's initramfs has no shared libraries for it: it would never start.
                raise _build_failed(name, 0, [f"{binary} is not statically linked: {static.strip()}"], log)
            data = binary.read_bytes()
            got = elf_arch(data)
            if got != kernel.arch:
                raise _build_failed(name, 0, [f"{binary} is a {got or 'non-ELF'} binary, the kernel is {kernel.arch}"], log)
            with _staging(sid, force) as tmp:
                shutil.copy2(binary, tmp / name)
                proc.run([LLVM_STRIP, "--strip-debug", str(tmp / name)], check=False)
                shutil.copy2(log, tmp / "build.log")
                stripped = (tmp / name).read_bytes()
                meta = {
                    "id": sid,
                    "name": name,
                    "ops": spec.ops if user and spec is not None else TREE[name],
                    "arch": kernel.arch,
                    "binary": name,
                    "binary_sha256": hashlib.sha256(stripped).hexdigest(),
                    "binary_size": len(stripped),
                    "unstripped_size": len(data),
                    "static": "statically linked" in static or "static-pie" in static,
                    "version": (
                        f"{spec.path} ({name}.bpf.c sha256 {k['user']['files'][name + '.bpf.c'][:12]}) for {src.identity}"
                        if user and spec is not None else f"{src.identity} tools/sched_ext/{name}"
                    ),
                    "kernel": {"id": kernel.id, "label": kernel.label, "release": kernel.release, "recipe": recipe.name},
                    "key": k,
                    "toolchain": tools,
                    "build_command": shlex.join(argv),
                    "link_command": shlex.join(link),
                    "timings": {"source_s": round(t1 - t0, 1), "build_s": round(time.monotonic() - t1, 1)},
                    "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "log": "build.log",
                }
                if user and spec is not None:
                    meta["user"] = {"kind": "source", "path": spec.path, "ops_known": bool(spec.ops)}
                if cross:
                    meta["cross"] = {"prefix": cross.prefix, "env": cross.env(), "libraries": _root_packages(cross.libroot)}
                (tmp / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    return Scheduler.from_entry(final)


def _cross(arch: str, tree: Path, work: Path, btf: Path, jobs: int, env: dict[str, str], progress=None) -> Cross:
    """What a cross build for *arch* needs before its make: Debian's -dev packages of the
    arch (fetched and unpacked once), the host's bpftool (made once per work tree)."""
    # deferred: CLI start (lab.image.debian_pkgs)
    from .image import debian_pkgs

    if progress:
        progress("libraries", f"Debian's {' '.join(CROSS_DEV_PACKAGES)} of {arch}")
    libroot = debian_pkgs.dev_root(arch, CROSS_DEV_PACKAGES)
    host = work / "host"
    host.mkdir(parents=True, exist_ok=True)
    argv = bpftool_argv(tree, host, btf, jobs)
    log = work / "build-bpftool.log"
    if progress:
        progress("make", "bpftool (for the host)")
    rc = proc.logged(argv, log, lambda line: None, env=env, header=f"# {shlex.join(argv)}\n")
    if rc != 0 or not bpftool_path(host).is_file():
        raise _build_failed("bpftool (the host's, for a cross build)", rc, log.read_text(errors="replace").splitlines(), log)
    return Cross(arch, archs.get(arch).cross_compile, libroot, bpftool_path(host))


def _root_packages(libroot: Path) -> dict:
    try:
        return dict(json.loads((libroot / ".lab-packages.json").read_text()).get("packages", {}))
    except (OSError, ValueError, AttributeError):
        return {}


_ELF_MACHINES = {0x3E: "x86_64", 0xB7: "arm64"}


def elf_arch(data: bytes) -> str | None:
    """The arch (lab's spelling) of a 64-bit little-endian ELF binary, else its e_machine
    number as text, or None for what is not ELF."""
    if data[:4] != b"\x7fELF" or len(data) < 20:
        return None
    m = int.from_bytes(data[18:20], "little")
    return _ELF_MACHINES.get(m, f"e_machine {m}")


class SchedulerBuildError(BuildError):
    """A scheduler that fails to build is the user's to fix (exit 2), with the compiler's
    output's tail."""

    exit_code = 2


def _build_failed(name: str, rc: int, lines: list[str], log: Path) -> SchedulerBuildError:
    # deferred: CLI start (lab.kernel.build)
    from .kernel.build import compiler_errors

    errs = compiler_errors(lines)
    tail = "\n".join(errs or lines[-LOG_TAIL:])
    first = next((ln.strip() for ln in (errs or reversed(lines)) if ln.strip()), "no output")
    return SchedulerBuildError(f"scheduler {name} failed to build (exit {rc}) at {first}; full log: {log}", detail=tail, log=str(log))


class _staging:
    """A temporary directory under the store that becomes entry *sid* if the block ends
    well (renamed into place: a failed or killed build never appears)."""

    def __init__(self, sid: str, replace: bool) -> None:
        self.sid, self.replace = sid, replace

    def __enter__(self) -> Path:
        self.tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{self.sid}-", dir=root()))
        return self.tmp

    def __exit__(self, et, ev, tb) -> None:
        if et is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        os.chmod(self.tmp, 0o755)
        final = root() / self.sid
        if final.exists():
            if not self.replace:
                shutil.rmtree(self.tmp, ignore_errors=True)
                return
            old = root() / f".old-{self.sid}-{os.getpid()}"
            os.rename(final, old)
            os.rename(self.tmp, final)
            shutil.rmtree(old, ignore_errors=True)
            return
        os.rename(self.tmp, final)


def import_binary(spec: Spec, kernel: KernelArtifact, *, force: bool = False) -> Scheduler:
    """A user's prebuilt binary, checked for *kernel*'s arch and stored (keyed by its
    content) like a built one; refused in one line for another arch."""
    where = f"--scheduler {spec.path}"
    try:
        data = Path(spec.path).read_bytes()
    except OSError as e:
        raise UserError(f"{where}: cannot be read: {e.strerror}") from None
    got = elf_arch(data)
    if got != kernel.arch:
        raise UserError(f"{where}: a binary for {got or 'no known arch (not ELF)'}; the guest (kernel {kernel.label}) is {kernel.arch}")
    libs = binary_libraries(Path(spec.path), where)
    k = key(spec.name, kernel, {}, spec, libs)
    sid = entry_id(k)
    final = root() / sid
    if not force and (final / "metadata.json").is_file():
        return Scheduler.from_entry(final)
    with _staging(sid, force) as tmp:
        (tmp / spec.name).write_bytes(data)
        os.chmod(tmp / spec.name, 0o755)
        if libs:  # the guest's paths under LIBS_DIR, as binary_layer copies them
            # deferred: CLI start (lab.image.tools)
            from .image import tools

            tools.place_entries(tmp / LIBS_DIR, libs)
        meta = {
            "id": sid,
            "name": spec.name,
            "ops": spec.ops,
            "arch": got,
            "binary": spec.name,
            "binary_sha256": hashlib.sha256(data).hexdigest(),
            "binary_size": len(data),
            "static": not libs,
            "libraries": [lib.guest for lib in libs],
            "version": f"{spec.path} (prebuilt, sha256 {hashlib.sha256(data).hexdigest()[:12]})",
            "kernel": {},
            "key": k,
            "user": {"kind": "binary", "path": spec.path, "ops_known": bool(spec.ops)},
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        (tmp / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    return Scheduler.from_entry(final)


def find_built(name: str | Spec, kernel: KernelArtifact) -> Scheduler | None:
    """The scheduler *name* (or a Spec, a user's too) built for *kernel* with today's
    toolchain, if the store has it."""
    spec = name if isinstance(name, Spec) else None
    if spec is not None and spec.kind == "crate":
        return find_crate(spec.name, spec.version) if kernel.arch == archs.host_name() else None
    try:
        if spec is not None and spec.kind == "binary":
            k = key(spec.name, kernel, {}, spec)
        else:
            k = key(spec.name if spec else str(name), kernel, toolchain(kernel.arch), spec if spec and spec.path else None)
        sid = entry_id(k)
    except UserError:
        return None
    final = root() / sid
    return Scheduler.from_entry(final) if (final / "metadata.json").is_file() else None


def resolve(spec: Spec, kernel: KernelArtifact, *, build_it: bool = True, progress=None) -> Scheduler:
    """The built scheduler *spec* names for *kernel*: from the store, else built now
    (if *build_it*; a step of *progress*)."""
    if spec.kind == "binary":
        return import_binary(spec, kernel)
    if spec.kind == "crate" and kernel.arch != archs.host_name():
        raise UserError(f"scheduler {spec.name}: lab builds crates for the host's arch ({archs.host_name()}); kernel {kernel.label} is {kernel.arch}")
    found = find_built(spec, kernel)
    if found is not None:
        return found
    what = spec.path or (f"{spec.name}@{spec.version}" if spec.version else spec.name)
    if spec.kind == "crate":
        if not build_it:
            raise UserError(f"scheduler {what} is not built; run: lab scheduler build {what}")
        with progress_mod.of(progress).step("build", f"scheduler {what} from {CRATE_ORIGIN} (once; later runs reuse it)") as pg:
            return build_crate(spec.name, spec.version, progress=pg.callback())
    if not build_it:
        raise UserError(f"scheduler {spec.name} is not built for kernel {kernel.label}; run: lab scheduler build {what} --kernel {kernel.name}")

    with progress_mod.of(progress).step("build", f"scheduler {spec.name} (once; later runs reuse it)") as pg:
        return build(spec.name, kernel, progress=pg.callback(), spec=spec if spec.path else None)

# ---- the scx project's Rust schedulers, from crates.io ---------------------------------------


def check_version(name: str, version: str, where: str) -> str:
    """*version* of crate *name* if it is spelled as crates.io spells one (MAJOR.MINOR.PATCH,
    maybe -PRE); a one-line UserError naming *where* otherwise."""
    if not _VERSION_RE.match(version):
        raise UserError(
            f"{where}: {version!r} is not a version of {name} (MAJOR.MINOR.PATCH, e.g. {CRATES[name].version}, "
            "the one lab pins)"
        )
    return version


def cargo_path() -> str | None:
    """cargo on PATH, else rustup's (~/.cargo/bin/cargo), else None."""
    found = shutil.which("cargo")
    if found:
        return found
    home = Path.home() / ".cargo" / "bin" / "cargo"
    return str(home) if home.is_file() and os.access(home, os.X_OK) else None


def _first_line(argv: list[str], env: dict[str, str] | None = None) -> str:
    return (proc.first_line(argv, env, with_stderr=True) or "").strip()


def crate_toolchain(crate: Crate) -> dict[str, str]:
    """What builds *crate*: cargo's and rustc's versions (rustup's, next to cargo), its
    BPF clang's (and the paths); a one-line UserError for what is missing."""
    cargo = cargo_path()
    if cargo is None:
        raise UserError(
            f"cargo not found: building {crate.name} from crates.io needs Rust's cargo and rustc "
            "(on PATH or in ~/.cargo/bin: https://rustup.rs)"
        )
    clang = shutil.which(crate.clang)
    if clang is None:
        raise UserError(f"{crate.clang} not found: {crate.name}'s BPF programs are compiled with it (Debian's {PACKAGES})")
    env = cargo_env(cargo, clang, Path(os.devnull))
    rustc = _first_line(["rustc", "--version"], env)
    if not rustc.startswith("rustc "):
        raise UserError(f"rustc not found next to {cargo}: building {crate.name} needs Rust's rustc (https://rustup.rs)")
    return {"cargo": cargo, "cargo_version": _first_line([cargo, "--version"], env), "rustc": rustc,
            "clang_path": clang, "clang": _first_line([clang, "--version"])}  # fmt: skip


def crate_key(name: str, version: str, tools: dict[str, str], arch: str) -> dict:
    """What a crate's binary depends on (its hash is the store id): the crate and version
    (--locked: its published Cargo.lock pins the rest), the clang and rustc that build it,
    the arch it is built for.  No kernel: the binary loads into any sched_ext kernel."""
    return {"layout": LAYOUT, "name": name, "origin": CRATE_ORIGIN, "crate": {"name": name, "version": version},
            "toolchain": {"clang": tools["clang"], "rustc": tools["rustc"]}, "arch": arch}  # fmt: skip


def cargo_argv(cargo: str, name: str, version: str, root: Path, jobs: int, *, force: bool = False) -> list[str]:
    """``cargo install`` of crate *name* at exactly *version*, the dependencies its
    published Cargo.lock pins (--locked), into *root*/bin."""
    return [cargo, "install", "--locked", *(["--force"] if force else []), "--root", str(root), "-j", str(jobs),
            name, "--version", version]  # fmt: skip


def cargo_env(cargo: str, clang: str, target_dir: Path, base_cflags: str | None = None) -> dict[str, str]:
    """The environment a scx crate's build needs (on top of the caller's): *clang* as the
    BPF compiler (scx_cargo and libbpf-cargo read BPF_CLANG), Debian's libclang for bindgen,
    cargo's own directory first on PATH (its rustc), the target dir; *base_cflags*, when
    given, replaces scx_cargo's base BPF flags (BPF_BASE_CFLAGS)."""
    env = {
        "BPF_CLANG": clang,
        "LIBCLANG_PATH": LIBCLANG_PATH,
        "CARGO_TARGET_DIR": str(target_dir),
        "PATH": os.pathsep.join([str(Path(cargo).parent), os.environ.get("PATH", "/usr/bin:/bin")]),
    }
    if base_cflags is not None:
        env["BPF_BASE_CFLAGS"] = base_cflags
    return env


def cargo_install(argv: list[str], env: dict[str, str], log: Path, on_line=None) -> tuple[int, float]:
    """Run *argv* (cargo_argv) with *env* (cargo_env), its output into *log*; its exit
    status and wall seconds."""
    t0 = time.monotonic()
    header = "# " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()) if k != "PATH") + f" {shlex.join(argv)}\n"
    rc = proc.logged(argv, log, on_line or (lambda line: None), env=env, header=header)
    return rc, time.monotonic() - t0


def _no_such_version(lines: list[str], name: str) -> str:
    """cargo's line saying crates.io has no such crate version ("" when it said none)."""
    for ln in lines:
        if f"could not find `{name}` in registry" in ln:
            return ln.removeprefix("error: ").strip()
    return ""


def build_crate(name: str, version: str = "", *, jobs: int = 2, force: bool = False, progress=None) -> Scheduler:
    """Build crate *name* (CRATES) at *version* (default: its pinned one) with cargo, or
    find it built: ``cargo install --locked --root <temporary dir>``, the binary (and, as
    it is dynamically linked, its loader and libraries) published into the store
    atomically.  One-line errors: an unknown crate, a version crates.io lacks, cargo
    missing, a failed build (the compiler's output's tail)."""
    if name not in CRATES:
        raise unknown("scheduler crate", name, list(CRATES))
    crate = CRATES[name]
    version = check_version(name, version, f"scheduler {name}@{version}") if version else crate.version
    tools = crate_toolchain(crate)
    arch = archs.host_name()
    k = crate_key(name, version, tools, arch)
    sid = entry_id(k)
    final = root() / sid
    if not force and (final / "metadata.json").is_file():
        return Scheduler.from_entry(final)
    with cache_lock(f"scheduler-{sid}", f"building scheduler {name} {version}", timeout=BUILD_LOCK_TIMEOUT) as waited:
        if waited and not force and (final / "metadata.json").is_file():
            return Scheduler.from_entry(final)
        work_base = paths.cache_dir() / "work"
        work_base.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"crate-{name}-{version}-", dir=work_base))
        try:
            argv = cargo_argv(tools["cargo"], name, version, work / "root", jobs)
            env = cargo_env(tools["cargo"], tools["clang_path"], work / "target")
            log = work / "build.log"
            if progress:
                progress("cargo", f"{name} {version} from {CRATE_ORIGIN}")
            rc, took = cargo_install(argv, env, log)
            lines = log.read_text(errors="replace").splitlines()
            binary = work / "root" / "bin" / name
            if rc != 0:
                missing = _no_such_version(lines, name)
                if missing:
                    raise UserError(f"scheduler {name}@{version}: {missing} (lab pins {crate.version})")
                kept = paths.cache_dir() / "work" / f"build-{name}-{version}.log"
                shutil.copyfile(log, kept)
                raise _build_failed(f"{name} {version}", rc, lines, kept)
            data = binary.read_bytes() if binary.is_file() else b""
            got = elf_arch(data)
            if got != arch:
                raise _build_failed(f"{name} {version}", 0, [f"cargo left {binary} as a {got or 'non-ELF'} file, not an {arch} binary"], log)
            libs = binary_libraries(binary, f"scheduler {name} {version}")
            with _staging(sid, force) as tmp:
                shutil.copy2(binary, tmp / name)
                os.chmod(tmp / name, 0o755)
                if libs:
                    # deferred: CLI start (lab.image.tools)
                    from .image import tools as image_tools

                    image_tools.place_entries(tmp / LIBS_DIR, libs)
                shutil.copy2(log, tmp / "build.log")
                meta = {
                    "id": sid,
                    "name": name,
                    "ops": crate.ops,
                    "arch": arch,
                    "binary": name,
                    "binary_sha256": hashlib.sha256(data).hexdigest(),
                    "binary_size": len(data),
                    "static": not libs,
                    "libraries": [lib.guest for lib in libs],
                    "origin": CRATE_ORIGIN,
                    "crate": {"name": name, "version": version, "pinned": crate.version},
                    "version": f"{name} {version} ({CRATE_ORIGIN})",
                    "kernel": {},
                    "key": k,
                    "toolchain": {"cargo": tools["cargo_version"], "rustc": tools["rustc"], "clang": tools["clang"]},
                    "build_command": shlex.join(argv),
                    "build_env": {e: v for e, v in env.items() if e in ("BPF_CLANG", "LIBCLANG_PATH")},
                    "timings": {"build_s": round(took, 1)},
                    "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "log": "build.log",
                }
                (tmp / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return Scheduler.from_entry(final)


def find_crate(name: str, version: str = "") -> Scheduler | None:
    """Crate *name* at *version* (default: pinned) built with today's toolchain, if the
    store has it (None also when the toolchain is missing)."""
    crate = CRATES[name]
    try:
        tools = crate_toolchain(crate)
    except UserError:
        return None
    final = root() / entry_id(crate_key(name, version or crate.version, tools, archs.host_name()))
    return Scheduler.from_entry(final) if (final / "metadata.json").is_file() else None


# ---- the guest ------------------------------------------------------------------------------

GUEST_DIR = "lab/sched"  # in the initramfs: the binary and its arguments, one per file


def guest_files(sched: Scheduler, args: tuple[str, ...]) -> dict[str, bytes]:
    """The job layer's files that tell the agent which scheduler to start: its
    arguments as data, one file each (``arg.0``, ``arg.1``, ...), read back in the
    guest byte for byte and never parsed by its shell."""
    files = {f"{GUEST_DIR}/arg.{i}": a.encode("utf-8", "surrogateescape") for i, a in enumerate(args)}
    files[f"{GUEST_DIR}/nargs"] = f"{len(args)}\n".encode()
    return files


def guest_config(sched: Scheduler, wait_s: int = ENABLE_WAIT_S) -> dict[str, str]:
    """The agent's settings (/lab/config) for *sched*: names only, never its arguments."""
    return {"LAB_SCHED": sched.name, "LAB_SCHED_OPS": sched.ops, "LAB_SCHED_WAIT": str(int(wait_s))}


def binary_layer(sched: Scheduler, progress=None) -> Path:
    """The initramfs layer holding the scheduler's binary (/lab/sched/bin/NAME), and a
    dynamic one's loader and libraries at the paths its ld.so looks (/lib64, /lib/...)."""
    # deferred: CLI start (lab.image.initramfs)
    from .image import initramfs

    def fill(r: Path) -> None:
        d = r / GUEST_DIR / "bin"
        d.mkdir(parents=True)
        shutil.copy2(sched.binary, d / sched.name)
        os.chmod(d / sched.name, 0o755)
        libs = sched.binary.parent / LIBS_DIR
        if libs.is_dir():
            shutil.copytree(libs, r, symlinks=True, dirs_exist_ok=True)

    return initramfs.cached_tree_layer("scheduler", f"{sched.id}:{sched.metadata.get('binary_sha256', '')}", fill, progress)


# ---- judging what the guest said --------------------------------------------------------------

# The kernel's word when it disables a BPF scheduler (kernel/sched/ext.c,
# scx_ops_disable_workfn): 'sched_ext: BPF scheduler "NAME" disabled (REASON)', then
# for an error exit 'sched_ext: NAME: MESSAGE'.
_DISABLED_RE = re.compile(r'sched_ext: BPF scheduler "([^"]*)" disabled \(([^)]*)\)')
_OUTPUT_TAIL = 20


def _read(d: Path, name: str) -> str | None:
    try:
        return (d / name).read_text(errors="replace").strip()
    except OSError:
        return None


def ops_match(shown: str, ops: str) -> bool:
    """Whether the ops name the kernel shows (root/ops, its log) is scheduler *ops*'s: the
    same, or *ops* with a suffix of ``_`` and more, as the scx project's Rust schedulers
    name themselves (``bpfland_1.0.20_x86_64_unknown_linux_gnu``); "" matches any (the
    guest's agent, lab/guest/init.sh's sched_ops_ok, says the same)."""
    return not ops or shown == ops or shown.startswith(ops + "_")


def kernel_reason(dmesg: str, ops: str = "") -> str:
    """What the kernel said when it disabled the scheduler: the exit kind and, for an
    error, its message ("" when the log says nothing)."""
    lines = dmesg.splitlines()
    for i, ln in enumerate(lines):
        m = _DISABLED_RE.search(ln)
        if not m or not ops_match(m[1], ops):
            continue
        reason = m[2]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        said = re.search(rf"sched_ext: {re.escape(m[1])}: (.*)$", nxt)
        return f"{reason}: {said[1].strip()}" if said else reason
    return ""


def output_tail(d: Path, n: int = _OUTPUT_TAIL) -> str:
    out = _read(d, "output") or ""
    return "\n".join(out.splitlines()[-n:])


def outcome(out_dir: Path, name: str, ops: str) -> tuple[str, str]:
    """The scheduler's part of a run's verdict from the agent's record
    (out/scheduler/): ("", "") when it stayed enabled throughout; ("ERROR", why) when it
    never reached enabled (its output, where libbpf prints the verifier's log) or the
    record is missing; ("FAIL", why) when the kernel ejected it during the run, with
    the kernel's reason."""
    d = out_dir / "scheduler"
    status = _read(d, "status")
    if status is None:
        return "ERROR", f"scheduler {name}: the guest's agent left no record of it (out/scheduler/status)"
    if status != "enabled":
        state = _read(d, "state") or "?"
        tail = output_tail(d)
        said = kernel_reason(_read(out_dir, "dmesg") or "", ops)
        return "ERROR", (
            f"scheduler {name} never reached enabled (sched_ext state {state}, exit {_read(d, 'exit') or '?'})"
            + (f"; the kernel said: {said}" if said else "")
            + (f"; its output (out/scheduler/output) ends:\n{tail}" if tail else "; it printed nothing")
        )
    during = _read(d, "during")
    if during is None:
        return "ERROR", f"scheduler {name}: the agent did not record whether it stayed enabled (out/scheduler/during)"
    if during == "ejected":
        said = kernel_reason(_read(out_dir, "dmesg") or "", ops)
        state = _read(d, "state_after") or "?"
        tail = output_tail(d, 5)
        return "FAIL", (
            f"sched_ext ejected scheduler {name} during the run (state {state} after the workload): "
            + (said or "the kernel log names no reason")
            + (f"; its output ends:\n{tail}" if tail else "")
        )
    return "", ""
