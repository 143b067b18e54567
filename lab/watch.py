"""Wait, without burning CPU, until files under a directory tree change.

``lab run --watch`` sits on a kernel tree (~5,000 directories, ~80,000 files) for
hours.  Re-walking it every second costs about half a second of CPU per walk on a
2-core box, so the wait uses inotify (one watch per directory, added as directories
appear) and wakes only on writes, renames, deletions and attribute changes; the
caller's fingerprint of the tree decides whether a change is real.  Where inotify is
unavailable or its watch limit is too low for the tree, it polls, more slowly.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
import time
from collections.abc import Callable
from pathlib import Path

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_ISDIR = 0x40000000
IN_Q_OVERFLOW = 0x4000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
MASK = IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF
_EVENT = struct.Struct("iIII")

# Directories whose changes are not source changes (git's own bookkeeping: `git status`
# rewrites .git/index; editors' and build tools' scratch).
SKIP_DIRS = {".git", ".hg", ".svn", ".pc", "__pycache__"}
# Editor scratch files: vim's swap files and its 4913 probe, emacs locks and backups.
_SCRATCH_SUFFIX = (".swp", ".swx", ".swo", "~", ".tmp")


def scratch(name: str) -> bool:
    return name == "4913" or name.startswith(".#") or name.endswith(_SCRATCH_SUFFIX)


class Watcher:
    """inotify watches on every directory under *root*; ``wait()`` returns the changed
    paths.  ``mode`` says what is used: 'inotify' or 'poll' (and ``why`` says why)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.fd = -1
        self.wds: dict[int, str] = {}
        self.mode = "poll"
        self.why = ""
        try:
            # The C library Python runs on: ctypes.util.find_library("c") would run
            # `ldconfig -p` (or gcc) on every round of --watch to find it.
            self._libc = ctypes.CDLL(None, use_errno=True)
            fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError) as e:
            self.why = f"no inotify ({e})"
            return
        if fd < 0:
            self.why = f"inotify_init1: {os.strerror(ctypes.get_errno())}"
            return
        self.fd = fd
        try:
            self._add_tree(str(self.root))
        except OSError as e:
            self.close()
            self.why = (
                f"inotify: {e.strerror} adding watches for {self.root} (raise fs.inotify.max_user_watches)"
                if e.errno == errno.ENOSPC
                else f"inotify: {e}"
            )
            return
        self.mode = "inotify"

    def _add(self, path: str) -> None:
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR):  # gone already
                return
            raise OSError(err, os.strerror(err), path)
        self.wds[wd] = path

    def _add_tree(self, top: str) -> None:
        for dirpath, dirnames, _ in os.walk(top):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            self._add(dirpath)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self) -> list[str]:
        changed: list[str] = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return changed
            off = 0
            while off < len(buf):
                wd, mask, _cookie, size = _EVENT.unpack_from(buf, off)
                name = buf[off + _EVENT.size : off + _EVENT.size + size].rstrip(b"\0").decode(errors="surrogateescape")
                off += _EVENT.size + size
                if mask & IN_Q_OVERFLOW:
                    changed.append(str(self.root))
                    continue
                base = self.wds.get(wd)
                if base is None:
                    continue
                path = os.path.join(base, name) if name else base
                if mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO) and name not in SKIP_DIRS:
                    try:
                        self._add_tree(path)
                    except OSError:
                        pass
                    changed.append(path)
                elif name and not scratch(name):
                    changed.append(path)

    def wait(self, timeout: float | None = None, settle: float = 0.3) -> list[str]:
        """Block until something under the root changes (or *timeout* passes: []).
        Once it does, keep reading until the tree has been quiet for *settle* seconds,
        so an editor's save or a `git checkout` is one change, not dozens."""
        if self.mode != "inotify":
            time.sleep(timeout if timeout is not None else 5.0)
            return [str(self.root)]
        deadline = None if timeout is None else time.monotonic() + timeout
        changed: list[str] = []
        while not changed:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                return []
            changed = self._read()
        while True:
            r, _, _ = select.select([self.fd], [], [], settle)
            if not r:
                return list(dict.fromkeys(changed))  # each path once, in order
            changed += self._read()


def wait_for_change(root: Path, fingerprint: Callable[[], str], since: str, on_mode=None) -> tuple[str, list[str]]:
    """Return the tree's new fingerprint once it differs from *since*, and the paths
    (relative to *root*) seen changing; none when the change happened before the
    wait began.  The watches are set before the first comparison, so a change made
    while the caller was busy (a build, a boot) is seen at once and none made
    afterwards is missed."""
    seen: list[str] = []
    with Watcher(root) as w:
        if on_mode:
            on_mode(w.mode, w.why)
        while True:
            fp = fingerprint()
            if fp != since:
                return fp, list(dict.fromkeys(os.path.relpath(p, root) for p in seen))
            if w.mode == "inotify":
                seen += w.wait()
            else:
                w.wait()
