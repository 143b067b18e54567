"""Files are written whole or not at all: the one way lab writes a file others read.

A writer gets a temporary name beside the file, unique to it (``.tmp-<pid>-<name>-...``,
see paths.tmp_prefix; paths.clean_stale removes those of writers that died), and
renames it over the file when done.  A reader (``lab recheck``, the next ``lab run
--watch`` round, another lab sharing the cache) sees the old file or the new one,
never a truncated one; a write the storage refuses (a full disk, a quota, a read-only
file system) leaves no temporary file and raises one WriteError naming the file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import storage_error
from .paths import clean_stale, tmp_prefix


@contextlib.contextmanager
def atomic_file(dest: Path, mode: int = 0o644, what: str = "") -> Iterator[Path]:
    """A new temporary file beside *dest* for the block to write; it replaces *dest*
    when the block succeeds and is removed when it fails (KeyboardInterrupt too).
    Concurrent writers each get their own, and the last rename wins (write the same
    content, or hold a lock).  *what* says what the file is, for the error."""
    dest = Path(dest)
    tmp: Path | None = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(dest.parent)
        fd, name = tempfile.mkstemp(prefix=tmp_prefix(dest.name), dir=dest.parent)
        os.close(fd)
        tmp = Path(name)
        os.chmod(tmp, mode)
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())  # else a crash after the rename can leave an empty file
        os.replace(tmp, dest)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if isinstance(e, OSError) and (err := storage_error(e, what, dest)) is not None:
            raise err from e
        raise


def write_text(path: Path, text: str, what: str = "") -> Path:
    """Write *text* (UTF-8) to *path* atomically; *what* names it in errors."""
    return write_bytes(path, text.encode(), what)


def write_bytes(path: Path, data: bytes, what: str = "") -> Path:
    """Write *data* to *path* atomically; *what* says what the file is ("the run's results")."""
    with atomic_file(path, what=what) as tmp:
        tmp.write_bytes(data)
    return path
