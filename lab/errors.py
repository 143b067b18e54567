"""The two kinds of error lab raises.

Library code raises these; only ``lab.cli`` turns them into a one-line message
and an exit code.  Nothing below ``cli`` calls ``sys.exit``.
"""

from __future__ import annotations

import errno
import os


class LabError(Exception):
    """Base class.  ``str(err)`` is the one-line message shown to the user.

    ``detail`` (optional) is evidence printed below that line under ``detail_title``:
    the compiler's errors of a failed build, the console tail of a lost guest."""

    exit_code = 2
    detail: str = ""
    detail_title: str = ""


class UserError(LabError):
    """The user's input is wrong: a bad spec, an unknown name, a missing tool.

    The message says what is wrong, where (file and field), and how to fix it.
    """

    exit_code = 2


class InfraError(LabError):
    """Something lab depends on failed: QEMU died, the guest hung, make failed.

    The message says what failed and where the log is.
    """

    exit_code = 3


class BuildError(InfraError):
    """make failed: the message names the first compiler error and the log; ``detail``
    holds the compiler's errors with their context."""

    detail_title = "build errors"

    def __init__(self, message: str, detail: str = "", log: str | None = None):
        super().__init__(message)
        self.detail = detail
        self.log = log


class LostGuest(InfraError):
    """The guest never reported back (hung, panicked, or was killed)."""

    detail_title = "console tail"

    def __init__(self, message: str, console_tail: str = "", log: str | None = None):
        super().__init__(message)
        self.detail = console_tail
        self.log = log


class WriteError(InfraError):
    """lab could not write a file: the disk is full, the quota spent, the file system
    read-only or the folder not writable.  The message names the file and what it is."""


# What the storage, not lab, refused.  Any other OSError is a bug and keeps its traceback.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES})


def storage_error(e: OSError, what: str = "", path: str | os.PathLike | None = None) -> WriteError | None:
    """*e* as one line naming the file (*path*, else the one *e* names) and *what* was
    being written, when the storage refused it (STORAGE_ERRNOS); None otherwise."""
    if e.errno not in STORAGE_ERRNOS:
        return None
    where = os.fsdecode(path) if path is not None else (os.fsdecode(e.filename) if e.filename is not None else "")
    reason = e.strerror or os.strerror(e.errno or 0)
    # ENOSPC, EDQUOT and EROFS only come from writing; EACCES may be a read too.
    verb = "cannot write" if what or e.errno != errno.EACCES else "cannot access"
    target = " ".join(x for x in (what, where) if x) or "a file (lab does not know which)"
    return WriteError(f"{verb} {target}: {reason}")


def nearest(name: str, choices: list[str] | tuple[str, ...], n: int = 3) -> list[str]:
    """Names in *choices* closest to *name*, for 'did you mean' hints."""
    # deferred: CLI start (difflib)
    import difflib

    close = difflib.get_close_matches(name, list(choices), n=n, cutoff=0.4)
    if not close:
        close = [c for c in choices if name.lower() in c.lower()][:n]
    return close


def unknown(kind: str, name: str, choices: list[str] | tuple[str, ...]) -> UserError:
    """A UserError for an unknown name, suggesting the nearest known ones."""
    close = nearest(name, choices)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    known = f" (known: {', '.join(sorted(choices))})" if not close and choices else ""
    return UserError(f"unknown {kind} '{name}'{hint}{known}")
