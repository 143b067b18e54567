"""Bug-report bundles: one tarball holding everything needed to reproduce a run, and
the one safe way lab opens one.

A bundle (``lab report bundle RUN_DIR -o FILE.tar.gz``) is a gzipped tar of plain
files, no links and no directories of its own::

    manifest.json          format, lab version, what the run was, sha256 + size of every member
    run/...                the run directory: command, plan.json, qemu.argv, console and agent logs,
                           job.sh, results.json, junit.xml, out/ (traces), guest/ (snapshot)
    topology/NAME.toml     the topology spec the run used
    scenario/NAME.py       the scenario's source
    kernel/metadata.json   the kernel's identity (Debian's package and version, or the
                           recipe's inputs and hashes); kernel/config: its final .config
    kernel/kernels/...     for a recipe: the recipe and every fragment and patch it uses,
                           laid out as lab's kernels/ so replay can rebuild it
    kernel/tree.json, kernel/tree.diff   for a --kernel-tree run: the tree's describe,
                           the diff's hash, and the diff itself when the tree still has it
    host.json              lab, QEMU and Python versions, host kernel, accelerator and why

Opening one (``extract``) trusts nothing in it: members are read in one pass of a
stream whose decompressed bytes are counted, each header is checked before anything is
written (a plain relative name, a regular file, a size within what is left of the
budget), files are created inside a target directory lab makes itself, never through
a link, and every member must match the manifest's hash.  Anything else is a one-line
``UserError`` and the target is removed, so nothing of a refused bundle stays behind.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import io
import json
import os
import platform
import shlex
import shutil
import tarfile
import time
import tomllib
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from .. import __version__, atomic, expect, iterate, paths, proc, rundir
from .. import scenario as sc
from ..errors import UserError, storage_error
from ..integrity import read_record
from ..kernel import recipe as krecipe
from ..kernel import store
from ..limits import size as show_size
from ..plan import VmPlan, read_plan_json
from ..runner import EXIT
from . import fidelity

FORMAT = 1  # the bundle layout this lab writes and the newest it reads
MANIFEST = "manifest.json"

# What opening a bundle may cost, whatever the bundle says of itself: bytes after
# decompression (headers and padding included: a stream of zeros is refused when it
# passes this, not when the disk is full), members, and one member's size.  A run's
# traces are at most buffer_kb per CPU and phase (4 MiB x 32 vCPUs for the seed
# scenarios), so 1 GiB holds any run lab makes with room to spare.
MAX_BYTES = 1 << 30
MAX_MEMBERS = 20_000
MAX_NAME = 255  # characters in one member's path
MAX_MANIFEST_BYTES = 16 << 20

# The run directory's files a bundle carries (everything else lab writes there is
# transient: the results tar, sockets, the initramfs).
RUN_FILES = rundir.FILES
RUN_DIRS = rundir.DIRS
# What the manifest's keys that name a member may name: (folder, ending).
MEMBER_KEYS = {"topology": ("topology", ".toml"), "scenario": ("scenario", ".py")}


@dataclass(frozen=True)
class Bundle:
    """An opened (extracted, checked) bundle."""

    root: Path
    manifest: dict[str, Any]

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    def file(self, key: str) -> Path | None:
        """The member the manifest names under *key* (topology: topology/NAME.toml,
        scenario: scenario/NAME.py), if any.  It must be a member the manifest lists (and
        extract() checked) in that folder: a path outside the bundle is refused."""
        rel = self.manifest.get(key)
        if rel is None or rel == "":
            return None
        folder, ext = MEMBER_KEYS.get(key, (key, ""))
        members = self.manifest.get("members")
        p = PurePosixPath(rel) if isinstance(rel, str) else None
        if (
            p is None
            or not isinstance(members, dict)
            or rel not in members
            or len(p.parts) != 2
            or p.parts[0] != folder
            or not p.name.endswith(ext)
        ):
            raise UserError(f"{self.root}: {MANIFEST}'s {key!r} is {str(rel)[:80]!r}, not one of the bundle's own {folder}/*{ext} members; refused")
        return self.root / rel

    def sha256(self, key: str) -> str:
        """The manifest's sha256 of the member named under *key* (checked on extract)."""
        rel = self.manifest.get(key)
        m = (self.manifest.get("members") or {}).get(rel) if isinstance(rel, str) else None
        return str(m.get("sha256", "")) if isinstance(m, dict) else ""

    @property
    def kernel(self) -> dict[str, Any]:
        k = self.manifest.get("kernel")
        return k if isinstance(k, dict) else {}


# ---- making one ------------------------------------------------------------------------------


def make(run_dir: Path, out: Path) -> dict[str, Any]:
    """Write the bundle of *run_dir* to *out*; returns its manifest."""

    plan = VmPlan.read(run_dir)

    results, why = read_record(run_dir)
    if results is None:
        raise UserError(f"{run_dir}: {why}")
    if results.get("status") not in EXIT:
        raise UserError(f"{run_dir}: the run has no verdict (results.json says {results.get('status')!r}); bundle a finished run")
    members: dict[str, bytes | Path] = {}
    for name in RUN_FILES:
        p = run_dir / name
        if p.is_file() and not p.is_symlink():
            members[f"run/{name}"] = p
    for p in sorted(run_dir.glob("trace*.dat")):  # lab.trace.tracedat's, for trace-cmd and KernelShark
        if p.is_file() and not p.is_symlink():
            members[f"run/{p.name}"] = p
    for d in RUN_DIRS:
        for p in sorted((run_dir / d).rglob("*")) if (run_dir / d).is_dir() else []:
            if p.is_file() and not p.is_symlink():
                members[f"run/{p.relative_to(run_dir).as_posix()}"] = p
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "lab_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "scenario_name": results.get("scenario"),
        "topology_name": plan.topo.name,
        "status": results.get("status"),
        "command": _read_text(run_dir / rundir.COMMAND).strip(),
        "accel": plan.accel,
        "accel_reason": plan.accel_reason,
        "qemu_version": ".".join(map(str, plan.qemu_version)),
    }
    rec = sc_record(run_dir)
    if rec is not None:  # the scenario's parameters (and a data scenario's commands), as plan.json has them
        manifest["scenario_params"] = rec.get("params") or {}
        if rec.get("kind") == "data":
            manifest["scenario_commands"] = rec.get("commands") or []
    # The topology spec as the run loaded it.
    if plan.topo.path and Path(plan.topo.path).is_file():
        rel = f"topology/{Path(plan.topo.path).name}"
        members[rel] = Path(plan.topo.path)
        manifest["topology"] = rel
    # The scenario's source (scenarios are one self-contained file).

    src = _scenario_file(str(results.get("scenario") or ""), manifest["command"], run_dir)
    if src is not None:
        rel = f"scenario/{src.name}"
        members[rel] = src
        manifest["scenario"] = rel
    else:
        manifest["scenario"] = None  # a scenario this lab no longer has: the run still reproduces by hand
    manifest["kernel"] = _kernel_members(plan, results, members)

    manifest["fidelity"] = fidelity.stamp(plan.topo, read_plan_json(run_dir / rundir.PLAN), results, expect.deviations(plan.topo, plan)).to_dict()
    members["host.json"] = json.dumps(_host(plan), indent=1).encode()
    return _write(out, manifest, members)


def sc_record(run_dir: Path) -> dict[str, Any] | None:
    rec = sc.recorded_in(run_dir)
    return rec if isinstance(rec, dict) else None


def _scenario_file(name: str, command: str, run_dir: Path) -> Path | None:
    """The source of the run's scenario: a scenario file its command named (`lab run
    ./mine.py`, relative to where lab ran, else to the run directory's parent) whose class
    declares that name, else lab's scenario of that name.  The file is read as text and
    parsed, never imported: a run directory is data, and its command file could name any
    file on this host."""

    try:
        args = shlex.split(command)
    except ValueError:
        args = []
    for a in args:
        if a.endswith(".py"):
            for p in (Path(a), run_dir.parent / a):
                if p.is_file() and _declares_scenario(p, name):
                    return p
    if name in sc.names():
        try:
            return Path(sc.load(name).path)
        except UserError:
            pass
    return None


def _declares_scenario(path: Path, name: str) -> bool:
    """Whether *path* (Python source, parsed not run) has a class with ``name = "<name>"``."""

    try:
        if path.stat().st_size > 1 << 20:
            return False
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for st in node.body:
                if (
                    isinstance(st, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "name" for t in st.targets)
                    and isinstance(st.value, ast.Constant)
                    and st.value.value == name
                ):
                    return True
    return False


def _read_text(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


def _kernel_members(plan, results: dict[str, Any], members: dict[str, bytes | Path]) -> dict[str, Any]:
    """The kernel's identity, and the files that rebuild or name it."""

    ref = plan.kernel
    ki = results.get("kernel_info")
    info: dict[str, Any] = ki if isinstance(ki, dict) else {}
    k: dict[str, Any] = {"name": ref.name if ref else "?", "id": ref.id if ref else "?", "release": ref.release if ref else "?"}
    art = store.get(ref.id) if ref and ref.id not in ("?", "") else None
    if info.get("tree"):
        k["kind"] = "tree"
        tree = {x: info.get(x) for x in ("tree", "git_describe", "diff_sha256", "untracked_files") if info.get(x)}
        members["kernel/tree.json"] = json.dumps(tree, indent=1).encode()
        diff = _tree_diff(Path(str(info["tree"])), str(info.get("diff_sha256") or ""))
        if diff is not None:
            members["kernel/tree.diff"] = diff
        k["tree"] = tree
    elif k["name"] == "debian":
        k["kind"] = "debian"
    elif art is not None and art.metadata.get("inputs", {}).get("recipe"):
        k["kind"] = "recipe"
    elif art is None and k["name"] in _recipe_names():
        # The build is gone from this lab's store: the recipe still names its inputs.
        k["kind"] = "recipe"
        k["recipe"] = k["name"]
        k["note"] = "the kernel is no longer in this lab's store: its .config and hashes are not bundled"
        _recipe_members({"recipe": str(paths.KERNELS / k["name"] / "recipe.toml")}, members)
    else:
        k["kind"] = "image"
    if art is not None:
        members["kernel/metadata.json"] = json.dumps(art.metadata, indent=1).encode()
        if art.config is not None and art.config.is_file():
            members["kernel/config"] = art.config
        inputs = art.metadata.get("inputs", {})
        if k["kind"] == "debian":
            k["package"], k["version"] = inputs.get("package"), inputs.get("version")
        if k["kind"] in ("recipe", "tree"):
            k["recipe"] = art.metadata.get("name")
            k["recipe_digest"] = inputs.get("recipe_digest")
            k["config_sha256"] = art.metadata.get("hashes", {}).get("config_sha256")
            _recipe_members(inputs, members)
    return k


def _recipe_names() -> list[str]:
    return krecipe.names()


def _recipe_members(inputs: dict[str, Any], members: dict[str, bytes | Path]) -> None:
    """The recipe (and the ones it extends), every fragment and patch, as kernels/."""

    recipe = inputs.get("recipe")
    if not recipe or not Path(recipe).is_file():
        return
    f = Path(recipe)
    kdir = f.parent.parent if f.parent.parent.name == "kernels" else paths.KERNELS
    # A recipe and what it names are small text files: take the recipe's folder and
    # lab's shared fragments and patches whole rather than second-guess `extends`.
    for d in [f.parent, *(kdir / x for x in ("fragments", "patches"))]:
        for p in sorted(d.rglob("*")) if d.is_dir() else []:
            if p.is_file() and not p.is_symlink():
                members[f"kernel/kernels/{p.relative_to(d.parent).as_posix()}"] = p
    # Parents named by `extends` live beside it.
    seen = {f.parent.name}
    todo = [f]
    while todo:
        try:
            data = tomllib.loads(todo.pop().read_text())
        except (OSError, tomllib.TOMLDecodeError):
            continue
        parent = data.get("extends")
        if isinstance(parent, str) and parent not in seen and (kdir / parent / "recipe.toml").is_file():
            seen.add(parent)
            pf = kdir / parent / "recipe.toml"
            members[f"kernel/kernels/{parent}/recipe.toml"] = pf
            todo.append(pf)


def _tree_diff(tree: Path, want: str) -> bytes | None:
    """The tree's uncommitted diff, when the tree is still as the run judged it."""

    if not (tree / ".git").exists():
        return None
    try:
        if iterate.describe(tree).get("diff_sha256") != want:
            return None
        return proc.run(["git", "-C", tree, "diff", "HEAD", "--binary"], check=False).stdout
    except Exception:  # noqa: BLE001 - the diff is extra evidence; its absence is recorded
        return None


def _host(plan) -> dict[str, Any]:
    qemu = ""
    try:
        r = proc.run([plan.qemu, "--version"], check=False, timeout=30)
        qemu = r.stdout.decode(errors="replace").splitlines()[0] if r.stdout else ""
    except Exception:  # noqa: BLE001 - QEMU gone since the run: plan.json has its version
        pass
    return {
        "lab_version": __version__,
        "qemu": plan.qemu,
        "qemu_version": ".".join(map(str, plan.qemu_version)),
        "qemu_version_now": qemu,
        "qemu_origin": plan.qemu_origin,  # system | lab | debian-backports | path
        "qemu_debian_version": plan.qemu_debian_version,
        "accel": plan.accel,
        "accel_reason": plan.accel_reason,
        "python": platform.python_version(),
        "host_kernel": platform.release(),
        "host_machine": platform.machine(),
        "host_cpus": os.cpu_count() or 1,  # the replay's fidelity check compares it (lab.report.fidelity)
    }


def _write(out: Path, manifest: dict[str, Any], members: dict[str, bytes | Path]) -> dict[str, Any]:
    """Two passes over the members, never more than one chunk of a file in memory: their
    hashes for the manifest (the first member, so a reader checks as it goes), then the
    tar itself."""
    listed: dict[str, dict[str, Any]] = {}
    for name, src in sorted(members.items()):
        listed[name] = _digest(src)
    total = sum(m["size"] for m in listed.values())
    if total > MAX_BYTES or len(listed) + 1 > MAX_MEMBERS:
        raise UserError(f"the run holds {show_size(total)} in {len(listed)} files; a bundle holds at most "
                        f"{show_size(MAX_BYTES)} and {MAX_MEMBERS} files (what lab opens)")  # fmt: skip
    manifest["members"] = listed
    mtime = int(time.time())
    head = json.dumps(manifest, indent=1).encode()
    with atomic.atomic_file(out, what="the bundle") as tmp, open(tmp, "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=mtime) as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for name, src in [(MANIFEST, head), *sorted(members.items())]:
                ti = tarfile.TarInfo(name)
                ti.mtime, ti.mode = mtime, 0o644
                ti.size = listed[name]["size"] if name in listed else len(head)
                if isinstance(src, bytes):
                    tf.addfile(ti, io.BytesIO(src))
                else:
                    with open(src, "rb") as fh:
                        tf.addfile(ti, fh)
    return manifest


def _digest(src: bytes | Path) -> dict[str, Any]:
    if isinstance(src, bytes):
        return {"size": len(src), "sha256": hashlib.sha256(src).hexdigest()}
    h, n = hashlib.sha256(), 0
    with open(src, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            n += len(chunk)
    return {"size": n, "sha256": h.hexdigest()}


# ---- opening one -----------------------------------------------------------------------------


class _Counted(io.RawIOBase):
    """A read-only stream that refuses to hand out more than *limit* bytes in all."""

    def __init__(self, raw: Any, limit: int, where: str):
        self.raw, self.limit, self.where, self.n = raw, limit, where, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.raw.read(len(b))
        self.n += len(data)
        if self.n > self.limit:
            raise UserError(f"{self.where}: unpacks to more than {show_size(self.limit)}, the most lab reads from a bundle (a decompression bomb?)")
        b[: len(data)] = data
        return len(data)


def _member_path(name: str, where: str) -> PurePosixPath:
    """*name* as a plain relative path, or a one-line refusal saying what is wrong."""
    if len(name) > MAX_NAME:
        raise UserError(f"{where}: a member's name is {len(name)} characters long (at most {MAX_NAME})")
    shown = name.encode("unicode_escape").decode()[:120]
    if name.startswith("/") or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        raise UserError(f"{where}: member '{shown}' has an absolute path; a bundle holds relative paths only")
    p = PurePosixPath(name)
    parts = [x for x in p.parts if x != "."]
    if ".." in parts:
        raise UserError(f"{where}: member '{shown}' leads out of the bundle ('..'); refused")
    if not parts or any(not x or "\x00" in x or "\\" in x for x in parts):
        raise UserError(f"{where}: member '{shown}' is not a plain relative path; refused")
    return PurePosixPath(*parts)


_KINDS = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.CONTTYPE: "a contiguous file",
}


def _members(f: IO[bytes], where: str) -> Iterator[tuple[tarfile.TarInfo, PurePosixPath, IO[bytes] | None]]:
    """The members of the gzipped tar *f*, each checked before its data is read."""
    budget = MAX_BYTES
    count = 0
    counted = io.BufferedReader(_Counted(gzip.GzipFile(fileobj=f, mode="rb"), MAX_BYTES, where))
    with tarfile.open(fileobj=counted, mode="r|") as tf:
        for m in tf:
            count += 1
            if count > MAX_MEMBERS:
                raise UserError(f"{where}: more than {MAX_MEMBERS} members, the most lab reads from a bundle")
            rel = _member_path(m.name, where)
            if m.isdir():
                yield m, rel, None
                continue
            if not m.isreg():
                what = _KINDS.get(m.type, f"an entry of type {m.type!r}")
                raise UserError(f"{where}: member '{rel}' is {what}; a bundle holds regular files only")
            if m.size > budget:
                raise UserError(f"{where}: member '{rel}' is {show_size(m.size)}, more than the {show_size(MAX_BYTES)} lab reads from a bundle (a decompression bomb?)")
            budget -= m.size
            yield m, rel, tf.extractfile(m)


def extract(path: Path, target: Path) -> Bundle:
    """Open the bundle at *path* into *target* (made here; it must not exist), checked
    member by member and against its manifest.  Any refusal removes *target*."""
    where = str(path)
    if not path.is_file():
        raise UserError(f"{path}: no such bundle" if not path.exists() else f"{path}: not a file")
    try:
        target.mkdir(parents=False)
    except FileExistsError:
        raise UserError(f"{target}: already exists; a bundle is opened into a new directory") from None
    except OSError as e:
        raise storage_error(e, "a directory for the bundle", target) or UserError(f"{target}: cannot be made: {e.strerror}") from None
    try:
        return _extract_into(path, target, where)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise


def _extract_into(path: Path, target: Path, where: str) -> Bundle:
    digests: dict[str, tuple[int, str]] = {}
    manifest: dict[str, Any] | None = None
    root_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with open(path, "rb") as f:
            try:
                for m, rel, fh in _members(f, where):
                    if fh is None:
                        continue  # directories are made for the files in them
                    name = rel.as_posix()
                    if name in digests:
                        raise UserError(f"{where}: member '{name}' appears twice; refused")
                    data = fh.read(m.size + 1)
                    if len(data) != m.size:
                        raise UserError(f"{where}: member '{name}' is cut short")
                    digests[name] = (len(data), hashlib.sha256(data).hexdigest())
                    if name == MANIFEST:
                        manifest = _manifest(data, where)
                        continue
                    _create(root_fd, rel, data, where)
            except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise UserError(f"{where}: not a readable bundle (a gzipped tar): {msg}") from None
    finally:
        os.close(root_fd)
    if manifest is None:
        raise UserError(f"{where}: no {MANIFEST}; not a lab bundle")
    listed = manifest.get("members")
    if not isinstance(listed, dict):
        raise UserError(f"{where}: {MANIFEST} lists no members")
    for name, (n, digest) in digests.items():
        if name == MANIFEST:
            continue
        want = listed.get(name)
        if not isinstance(want, dict):
            raise UserError(f"{where}: member '{name}' is not in the manifest; refused")
        if want.get("sha256") != digest or want.get("size") != n:
            raise UserError(f"{where}: member '{name}' does not match its sha256 in the manifest")
    missing = sorted(set(listed) - set(digests))
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise UserError(f"{where}: member '{missing[0]}'{more} of the manifest is missing")
    (target / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return Bundle(target, manifest)


def _manifest(data: bytes, where: str) -> dict[str, Any]:
    if len(data) > MAX_MANIFEST_BYTES:
        raise UserError(f"{where}: {MANIFEST} is larger than {show_size(MAX_MANIFEST_BYTES)}")
    try:
        d = json.loads(data)
    except ValueError as e:
        raise UserError(f"{where}: {MANIFEST} is not JSON ({e})") from None
    if not isinstance(d, dict):
        raise UserError(f"{where}: {MANIFEST} is not a JSON object")
    fmt, ver = d.get("format"), str(d.get("lab_version", "?"))
    if not isinstance(fmt, int) or fmt < 1:
        raise UserError(f"{where}: {MANIFEST} has no format number; not a lab bundle")
    if fmt > FORMAT or _version_key(ver) > _version_key(__version__):
        raise UserError(
            f"{where}: made by lab {ver} (bundle format {fmt}); this lab is {__version__} and reads bundle format {FORMAT} "
            "and older: upgrade lab to open it"
        )
    return d


def _version_key(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split("."):
        digits = "".join(c for c in part if c.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def _create(root_fd: int, rel: PurePosixPath, data: bytes, where: str) -> None:
    """Write *data* at *rel* under the directory *root_fd*, through directories this
    function made and never through a link (O_NOFOLLOW, O_EXCL at every step)."""
    fds = [root_fd]
    try:
        for part in rel.parts[:-1]:
            try:
                os.mkdir(part, 0o755, dir_fd=fds[-1])
            except FileExistsError:
                pass
            try:
                fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
            except OSError:
                raise UserError(f"{where}: member '{rel}' goes through '{part}', which is a file; refused") from None
        try:
            fd = os.open(rel.parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fds[-1])
        except FileExistsError:
            raise UserError(f"{where}: member '{rel}' names a directory of another member; refused") from None
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    finally:
        for fd in fds[1:]:
            os.close(fd)
