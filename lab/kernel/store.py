"""The kernel store: ``cache_dir()/kernels/<id>/`` with ``metadata.json`` beside the image.

An entry appears only by renaming a complete temporary directory into place, so a
build that fails or is killed never shows up, and it disappears the same way.
Temporary directories are named ``.tmp-<pid>-*`` (paths.tmp_prefix) and removed once
their process is gone.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .. import paths
from ..errors import InfraError, UserError, unknown
from .artifact import KernelArtifact


def root() -> Path:
    d = paths.cache_dir() / "kernels"
    d.mkdir(parents=True, exist_ok=True)
    return d


def entries() -> list[KernelArtifact]:
    """Every usable entry, newest first."""
    out = []
    for d in root().iterdir():
        if d.name.startswith(".") or not (d / "metadata.json").is_file():
            continue
        try:
            out.append(KernelArtifact.from_entry(d))
        except (ValueError, KeyError, OSError):
            continue
    out.sort(key=lambda a: a.metadata.get("built_at", ""), reverse=True)
    return out


def damaged() -> list[tuple[str, str]]:
    """(entry id, what is wrong) for each store entry lab will not boot."""
    out = []
    for d in sorted(root().iterdir()):
        if d.name.startswith(".") or not (d / "metadata.json").is_file():
            continue
        try:
            KernelArtifact.from_entry(d)
        except ValueError as e:
            out.append((d.name, str(e)))
        except (KeyError, OSError):
            continue
    return out


def matches(spec: str, arch: str | None = None) -> list[KernelArtifact]:
    """The entries *spec* names: its id or label (``lab kernel list``) in full, else
    every entry whose id or label starts with it; of *arch* only, if given."""
    found = [a for a in entries() if arch is None or a.arch == arch]
    exact = [a for a in found if spec in (a.id, a.label)]
    return exact or [a for a in found if a.id.startswith(spec) or a.label.startswith(spec)]


def get(id_or_prefix: str, arch: str | None = None) -> KernelArtifact | None:
    """The entry whose id or label is, or uniquely starts with, *id_or_prefix* (None if
    none does); several is an error that names them."""
    if not id_or_prefix or id_or_prefix.startswith(".") or "/" in id_or_prefix:
        return None  # never a name outside the store (kernel rm ../../x)
    d = root() / id_or_prefix
    if (d / "metadata.json").is_file():
        try:
            a = KernelArtifact.from_entry(d)
            if arch is None or a.arch == arch:
                return a
        except ValueError as e:  # damaged: named, never booted
            raise UserError(f"kernel store entry {d} is damaged ({e}): fetch or build it again (the good entry replaces it), or remove it with `lab kernel rm {d.name}`") from None
        except (KeyError, OSError):
            pass  # removed meanwhile, or not an entry: look the way entries() does
    found = matches(id_or_prefix, arch)
    if len(found) > 1:
        names = ", ".join(f"{a.label} ({a.arch})" for a in found[:6])
        more = f" and {len(found) - 6} more" if len(found) > 6 else ""
        hint = "" if arch else " or --arch"
        raise UserError(
            f"kernel '{id_or_prefix}' is ambiguous: matches {names}{more}; give more characters{hint}"
        )
    return found[0] if found else None


def find(**match) -> KernelArtifact | None:
    """The newest entry whose metadata has all of *match*."""
    for a in entries():
        if all(a.metadata.get(k) == v for k, v in match.items()):
            return a
    return None


def remove(id_or_prefix: str, arch: str | None = None) -> KernelArtifact | None:
    """Take entry *id_or_prefix* (of *arch*, if given) out of the store: it disappears at
    once (renamed to a temporary name), then its files are deleted, with the vmlinux lab
    extracted from it.  A damaged entry named by its id goes too (None is returned)."""
    try:
        a = get(id_or_prefix, arch)
    except UserError:
        d = root() / id_or_prefix
        if "/" in id_or_prefix or id_or_prefix.startswith(".") or not (d / "metadata.json").is_file():
            raise
        a = None  # a damaged entry, named by its id: removed as it is
    outside = not id_or_prefix or "/" in id_or_prefix or id_or_prefix.startswith(".")
    if a is None and (outside or not (root() / id_or_prefix / "metadata.json").is_file()):
        raise unknown("kernel", id_or_prefix, [e.label for e in entries() if arch is None or e.arch == arch])
    entry = a.image.parent if a is not None else root() / id_or_prefix
    kid = a.id if a is not None else id_or_prefix
    aside = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix(f"rm-{entry.name}"), dir=root()))
    try:
        os.rename(entry, aside / "entry")
    except FileNotFoundError:
        pass  # another lab removed it first
    except OSError as e:
        raise InfraError(f"cannot remove kernel {kid} from the store: {e}") from e
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    for derived in (paths.cache_dir() / "vmlinux").glob(f"{kid}-*.elf"):  # what was made from it
        derived.unlink(missing_ok=True)
    return a


def _stale_owner(name: str) -> int | None:
    pid = paths.tmp_owner(name)
    if pid is None and name.startswith(".tmp-"):
        # Made by an older lab: .tmp-<entry id>-<pid>.
        last = name.rsplit("-", 1)[1]
        pid = int(last) if last.isdigit() else None
    return pid


def clean_stale() -> None:
    """Remove temporary directories left by builds that died."""
    for d in root().iterdir():
        pid = _stale_owner(d.name)
        if pid is not None and not paths.pid_alive(pid):
            shutil.rmtree(d, ignore_errors=True)


@contextmanager
def staging(entry_id: str, *, replace: bool = False) -> Iterator[Path]:
    """A temporary directory that becomes entry *entry_id* if the block succeeds.

    The block must write metadata.json into it.  On any exception the directory
    is removed and nothing appears in the store.  If the entry exists by then
    (another lab made the same kernel meanwhile), it is kept and this one dropped:
    the id is a hash of everything the kernel's content depends on.  With *replace*
    the new one takes its place in one step (readers see the old entry or the new
    one, never none)."""
    clean_stale()
    tmp = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix(entry_id), dir=root()))
    try:
        yield tmp
        if not (tmp / "metadata.json").is_file():
            raise RuntimeError("store entry without metadata.json")
        # Validate before publishing.
        json.loads((tmp / "metadata.json").read_text())
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        final = root() / entry_id
        try:
            os.rename(tmp, final)
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            if replace or _damaged(final):  # a damaged entry is replaced by the good one made now
                swap_dirs(tmp, final)
            # Either way what is at tmp now is the entry nobody will see again.
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InfraError(f"cannot add kernel {entry_id} to the store {root()}: {e}") from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _damaged(entry: Path) -> bool:
    try:
        KernelArtifact.from_entry(entry)
    except ValueError:
        return True
    except (KeyError, OSError):
        return False
    return False


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def swap_dirs(new: Path, final: Path) -> None:
    """Put directory *new* at *final* and the old *final* at *new*, atomically where the
    filesystem can exchange two names (renameat2 RENAME_EXCHANGE, Linux 3.15)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        if fn(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(final), _RENAME_EXCHANGE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), str(final))
    # No exchange here: move the old entry aside, then the new one in.  Readers may
    # miss the entry between the two renames.
    old = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix(f"old-{final.name}"), dir=final.parent))
    os.rename(final, old / "entry")
    try:
        os.rename(new, final)
    except OSError:
        os.rename(old / "entry", final)  # put the old one back rather than lose both
        old.rmdir()
        raise
    os.rename(old, new)
