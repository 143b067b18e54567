"""Kernel sources: a pristine tree per source, a patched work copy per build.

Sources (the ``source`` field of a recipe):

- ``debian:6.1`` / ``debian:6.12``: Debian's linux-source-6.1 / -6.12 package; its tarball is unpacked once
  into ``cache_dir()/sources/`` and only ever read.
- a path (absolute, ``~/...``, or relative to the recipe): the user's own tree,
  only ever read.
- ``git+URL@REF``: cloned into ``cache_dir()/sources/git-*`` and exported at REF.

Patches are applied to a work copy (``cache_dir()/work/<recipe>-<arch>/src``),
never to the source itself.  The copy is refreshed file by file (size + mtime), so
make's incremental rebuild still works across builds.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .. import paths, proc
from ..errors import InfraError, UserError
from ..limits import sha256_file
from .recipe import Patch
from .store import swap_dirs

DEBIAN_TARBALLS = {
    "6.1": Path("/usr/src/linux-source-6.1.tar.xz"),
    "6.12": Path("/usr/src/linux-source-6.12.tar.xz"),  # bookworm-security
}


@dataclass(frozen=True)
class Source:
    spec: str
    tree: Path  # a pristine tree: never written to
    identity: str  # stable text naming exactly this content
    timestamp: str  # KBUILD_BUILD_TIMESTAMP, from the source, not the clock

    def as_dict(self) -> dict:
        return {"spec": self.spec, "tree": str(self.tree), "identity": self.identity}


def resolve(spec: str, *, relative_to: Path | None = None) -> Source:
    """Make *spec* available as a pristine tree (unpacking or cloning if needed)."""
    if spec.startswith("debian:"):
        return _debian(spec)
    if spec.startswith("git+"):
        return _git(spec)
    p = Path(spec.removeprefix("path:")).expanduser()
    if not p.is_absolute() and relative_to is not None:
        p = relative_to / p
    if not (p / "Makefile").is_file() or not (p / "Kconfig").is_file():
        raise UserError(
            f"kernel source '{spec}': {p} is not a kernel tree (no Makefile/Kconfig); "
            "use 'debian:6.1', a path to a kernel tree, or 'git+URL@REF'"
        )
    return _local(spec, p.resolve())


def _stamp(ts: float) -> str:
    return email.utils.format_datetime(datetime.fromtimestamp(int(ts), UTC))


def _debian(spec: str) -> Source:
    ver = spec.split(":", 1)[1]
    tarball = DEBIAN_TARBALLS.get(ver)
    if tarball is None:
        raise UserError(
            f"kernel source '{spec}': lab knows debian:{', debian:'.join(DEBIAN_TARBALLS)}"
        )
    if not tarball.is_file():
        raise UserError(
            f"kernel source '{spec}': {tarball} is missing; "
            f"install it with: apt-get install linux-source-{ver}"
        )
    pkgver = _dpkg_version(f"linux-source-{ver}")
    st = tarball.stat()
    top = paths.cache_dir() / "sources"
    dest = top / f"debian-linux-source-{ver}-{pkgver}"
    marker = dest / ".lab-source.json"
    if marker.is_file():
        info = json.loads(marker.read_text())
        if info.get("tarball_size") == st.st_size and info.get("tarball_mtime") == st.st_mtime_ns:
            return Source(spec, dest / "tree", info["identity"], info["timestamp"])
    with _unpacking(dest) as tmp:
        # Unpack once; everything else only reads this tree.
        proc.run(["tar", "-xf", tarball, "-C", tmp], timeout=1800)
        inner = [d for d in tmp.iterdir() if d.is_dir()]
        if len(inner) != 1:
            raise InfraError(f"{tarball}: expected one top directory, found {len(inner)}")
        inner[0].rename(tmp / "tree")
        sha = sha256_file(tarball)
        info = {
            "identity": f"debian:linux-source-{ver}={pkgver} sha256:{sha}",
            "timestamp": _stamp((tmp / "tree" / "Makefile").stat().st_mtime),
            "tarball": str(tarball),
            "tarball_size": st.st_size,
            "tarball_mtime": st.st_mtime_ns,
        }
        (tmp / ".lab-source.json").write_text(json.dumps(info, indent=2))
    return Source(spec, dest / "tree", info["identity"], info["timestamp"])


@contextmanager
def _unpacking(dest: Path) -> Iterator[Path]:
    """A new directory beside *dest* for the block to unpack into; it becomes *dest*
    (_publish) when the block succeeds and is removed when it fails.  One unpacked tree
    is a GB: one left by a lab that was killed (its pid in the name) is removed by the
    next unpack."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    paths.clean_stale(dest.parent)
    tmp = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix(dest.name), dir=dest.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        _publish(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _publish(tmp: Path, dest: Path) -> None:
    """Put the unpacked tree *tmp* at *dest*: a build copying from the old tree never sees
    it vanish (the two are exchanged in one step where the filesystem can), then the old
    one is removed."""

    if dest.exists():
        swap_dirs(tmp, dest)
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(dest)


def _dpkg_version(pkg: str) -> str:
    try:
        cp = proc.run(["dpkg-query", "-W", "-f=${Version}", pkg], check=False)
    except UserError:
        return "unknown"
    out = cp.stdout.decode().strip()
    return out if cp.returncode == 0 and out else "unknown"


def git_dirty(tree: Path) -> tuple[str | None, int]:
    """A digest of a git tree's uncommitted code (None when there is none) and how many
    files git does not track yet: the diff against HEAD, and every untracked file that
    is not ignored (a new file is part of the code being judged)."""
    diff = proc.run(["git", "-C", tree, "diff", "HEAD", "--binary"], check=False).stdout
    others = proc.run(["git", "-C", tree, "ls-files", "--others", "--exclude-standard", "-z"], check=False).stdout
    new = sorted(x for x in others.split(b"\0") if x)
    if not diff and not new:
        return None, 0
    h = hashlib.sha256(diff)
    for rel in new:
        h.update(b"\0new:" + rel + b"\0")
        try:
            h.update((tree / rel.decode(errors="surrogateescape")).read_bytes())
        except OSError:  # gone since, or not a file
            continue
    return h.hexdigest()[:16], len(new)


def _local(spec: str, tree: Path) -> Source:
    """A user's tree: identity from git (HEAD + the diff) if it is a repo, else stat data."""
    if (tree / ".git").exists():
        head = proc.run(["git", "-C", tree, "rev-parse", "HEAD"], check=False)
        if head.returncode == 0:
            sha = head.stdout.decode().strip()
            digest, _ = git_dirty(tree)
            when = proc.run(["git", "-C", tree, "log", "-1", "--format=%ct"]).stdout
            ts = _stamp(float(when.decode().strip() or 0))
            dirty = f" dirty:{digest}" if digest else ""
            return Source(spec, tree, f"git:{sha}{dirty}", ts)
    h = hashlib.sha256()
    newest = 0.0
    for rel, st in _walk(tree):
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        newest = max(newest, st.st_mtime)
    return Source(spec, tree, f"tree:{tree}:{h.hexdigest()}", _stamp(newest))


_GIT_RE = re.compile(r"^git\+(?P<url>.+?)(?:@(?P<ref>[^@/:]+))?$")


def _git(spec: str) -> Source:
    m = _GIT_RE.match(spec)
    if not m:
        raise UserError(f"kernel source '{spec}': expected git+URL@REF")
    url, ref = m["url"], m["ref"] or "HEAD"
    top = paths.cache_dir() / "sources"
    repo = top / f"git-{hashlib.sha256(url.encode()).hexdigest()[:16]}"
    if not (repo / "HEAD").exists():
        top.mkdir(parents=True, exist_ok=True)
        proc.run(["git", "init", "--bare", "-q", repo])
    proc.run(["git", "-C", repo, "fetch", "--depth=1", "-q", url, ref], timeout=3600)
    sha = proc.run(["git", "-C", repo, "rev-parse", "FETCH_HEAD"]).stdout.decode().strip()
    dest = top / f"git-{sha}"
    if not (dest / "tree" / "Makefile").is_file():
        with _unpacking(dest) as tmp:
            (tmp / "tree").mkdir()
            tarball = tmp / "src.tar"
            proc.run(["git", "-C", repo, "archive", "-o", tarball, sha], timeout=1800)
            proc.run(["tar", "-xf", tarball, "-C", tmp / "tree"], timeout=1800)
            tarball.unlink()
    when = proc.run(["git", "-C", repo, "show", "-s", "--format=%ct", sha]).stdout.decode()
    return Source(spec, dest / "tree", f"git:{sha}", _stamp(float(when.strip() or 0)))


# --- work copies --------------------------------------------------------------------------

_SKIP_TOP = {".git", ".lab-patched"}


def _walk(root: Path):
    """(relative path, lstat) of every file and symlink under *root*, skipping .git."""
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(root / rel if rel else root) as it:
            for e in it:
                r = f"{rel}/{e.name}" if rel else e.name
                if not rel and e.name in _SKIP_TOP:
                    continue
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(r)
                else:
                    yield r, st


def mirror(src: Path, dest: Path, force: AbstractSet[str] = frozenset(), changed: list[str] | None = None) -> int:
    """Make *dest* a copy of *src*, copying only files whose size or mtime differ
    (and those in *force*), and deleting files *src* does not have.  Returns the
    number of files copied; *changed*, if given, gets the relative path of every file
    copied or deleted."""
    dest.mkdir(parents=True, exist_ok=True)
    have = dict(_walk(dest))
    copied = 0
    seen = set()
    for rel, st in _walk(src):
        seen.add(rel)
        d = have.get(rel)
        if (
            d is not None
            and rel not in force
            and d.st_size == st.st_size
            and d.st_mtime_ns == st.st_mtime_ns
            and stat.S_IFMT(d.st_mode) == stat.S_IFMT(st.st_mode)
        ):
            continue
        # A symlink's own mtime is when it was made, so the copy's never matches: the same
        # target is the same link (not copied again, not a change).
        if d is not None and rel not in force and stat.S_ISLNK(st.st_mode) and stat.S_ISLNK(d.st_mode):
            if os.readlink(src / rel) == os.readlink(dest / rel):
                continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if d is not None:
            target.unlink()
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src / rel), target)
        else:
            shutil.copy2(src / rel, target)
            if not os.access(target, os.W_OK):
                target.chmod(st.st_mode | stat.S_IWUSR)
        copied += 1
        if changed is not None:
            changed.append(rel)
    for rel in have.keys() - seen:
        (dest / rel).unlink()
        if changed is not None:
            changed.append(rel)
    return copied


def patched_copy(source: Source, patches: tuple[Patch, ...], work: Path, changed: list[str] | None = None) -> Path:
    """A work copy of *source* at ``work/src`` with *patches* applied in order; *changed*,
    if given, gets every file the copy wrote or deleted (the patched ones included)."""
    src = work / "src"
    marker = src / ".lab-patched"
    force = set(marker.read_text().split("\n")) - {""} if marker.is_file() else set()
    # A copy in progress is marked as patched-everything: if we are killed midway the
    # next run re-checks every file it touches.
    # Files patched last time are re-copied and re-patched; when the result is the
    # same as before, they get their old mtime back so make does not recompile them.
    before = {}
    for rel in force:
        f = src / rel
        if f.is_file():
            before[rel] = (hashlib.sha256(f.read_bytes()).digest(), f.stat().st_mtime_ns)
    mirror(source.tree, src, force, changed)
    touched: set[str] = set()
    for p in patches:
        touched |= apply_patch(p, src)
    if changed is not None:
        changed.extend(sorted(touched - set(changed)))
    for rel in touched:
        f = src / rel
        if rel in before and f.is_file():
            digest, mtime = before[rel]
            if hashlib.sha256(f.read_bytes()).digest() == digest:
                os.utime(f, ns=(mtime, mtime))
    if touched:
        marker.write_text("\n".join(sorted(touched)) + "\n")
    elif marker.exists():
        marker.unlink()
    return src


_HUNK_RE = re.compile(r"Hunk #(\d+) FAILED at (\d+)")
_FILE_RE = re.compile(r"^(?:patching|checking) file '?([^']+?)'?$")


def apply_patch(patch: Patch, tree: Path) -> set[str]:
    """Apply *patch* (reversed if patch.revert) to *tree*; return the files it touches.

    A patch that does not apply raises UserError naming the patch, the file and the
    hunk, and leaves *tree* unchanged (a dry run comes first)."""
    argv = ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-d", str(tree)]
    if patch.revert:
        argv = [a for a in argv if a != "--forward"] + ["-R"]
    cp = proc.run([*argv, "--dry-run", "-i", str(patch.path)], check=False)
    out = cp.stdout.decode(errors="replace")
    files, failed, current = [], [], None
    for line in out.splitlines():
        m = _FILE_RE.match(line.strip())
        if m:
            current = m[1]
            files.append(current)
            continue
        m = _HUNK_RE.search(line)
        if m:
            failed.append(f"hunk #{m[1]} of {current} (at line {m[2]})")
    if cp.returncode != 0:
        verb = "revert" if patch.revert else "apply"
        if failed:
            what = ", ".join(failed)
        elif "Reversed (or previously applied) patch detected" in out:
            what = "it looks already applied (use revert = true to undo it)"
        else:
            tail = [ln for ln in (out + cp.stderr.decode(errors="replace")).splitlines() if ln]
            what = tail[-1] if tail else f"patch exited {cp.returncode}"
        raise UserError(f"patch {patch.path} does not {verb}: {what}")
    proc.run([*argv, "-i", str(patch.path)])
    return set(files)
