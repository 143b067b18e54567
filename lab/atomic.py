"""Files that matter are written whole or not at all.

A reader (``lab recheck``, the next ``lab run --watch`` round, a script reading
verify.json) sees the old file or the new one, never a truncated one; a write the disk
refuses leaves no temporary file behind and raises one WriteError naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import storage_error


def write_text(path: Path, text: str, what: str) -> Path:
    """Write *text* (UTF-8) to *path* atomically; *what* names it in errors."""
    return write_bytes(path, text.encode(), what)


def write_bytes(path: Path, data: bytes, what: str) -> Path:
    """Write *data* to *path* atomically: a temporary file beside it, flushed to disk,
    then renamed over it.  *what* says what the file is ("the run's results")."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # one writer per process
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # else a crash after the rename can leave an empty file
        os.replace(tmp, path)
    except BaseException as e:  # KeyboardInterrupt too: no temporary file survives
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        if isinstance(e, OSError) and (err := storage_error(e, what, path)) is not None:
            raise err from e
        raise
    return path
