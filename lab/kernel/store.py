"""The kernel store: ``cache_dir()/kernels/<id>/`` with ``metadata.json`` beside the image.

An entry appears only by renaming a complete temporary directory into place, so a
build that fails or is killed never shows up.  Temporary directories are named
``.tmp-*-<pid>`` and removed once their process is gone.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .. import paths
from ..errors import UserError
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


def get(id_or_prefix: str) -> KernelArtifact | None:
    """The entry whose id is, or uniquely starts with, *id_or_prefix*."""
    d = root() / id_or_prefix
    if (d / "metadata.json").is_file() and not id_or_prefix.startswith("."):
        return KernelArtifact.from_entry(d)
    matches = [a for a in entries() if a.id.startswith(id_or_prefix)]
    if len(matches) > 1:
        ids = ", ".join(a.id[:12] for a in matches[:5])
        raise UserError(
            f"kernel '{id_or_prefix}' is ambiguous: matches {ids}; give more characters"
        )
    return matches[0] if matches else None


def find(**match) -> KernelArtifact | None:
    """The newest entry whose metadata has all of *match*."""
    for a in entries():
        if all(a.metadata.get(k) == v for k, v in match.items()):
            return a
    return None


def remove(id_or_prefix: str) -> KernelArtifact:
    a = get(id_or_prefix)
    if a is None:
        from ..errors import unknown

        raise unknown("kernel", id_or_prefix, [e.id[:12] for e in entries()])
    shutil.rmtree(a.image.parent)
    return a


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale() -> None:
    """Remove temporary directories left by builds that died."""
    for d in root().iterdir():
        if not d.name.startswith(".tmp-"):
            continue
        try:
            pid = int(d.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if not _pid_alive(pid):
            shutil.rmtree(d, ignore_errors=True)


@contextmanager
def staging(entry_id: str) -> Iterator[Path]:
    """A temporary directory that becomes entry *entry_id* if the block succeeds.

    The block must write metadata.json into it.  On any exception the directory
    is removed and nothing appears in the store."""
    clean_stale()
    tmp = root() / f".tmp-{entry_id}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if not (tmp / "metadata.json").is_file():
            raise RuntimeError("store entry without metadata.json")
        # Validate before publishing.
        json.loads((tmp / "metadata.json").read_text())
        final = root() / entry_id
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
