"""One lock per thing lab makes in its cache, shared by every lab process.

Two lab processes on one cache (two terminals, a CI job beside a developer) must not
make the same thing twice at once: the second would clobber the first's files or fail
on them.  Whatever fetches, builds or extracts into the cache holds the lock named
after what it makes, checks again once it holds it, and so reuses what the first one
made.  A process that has to wait says for whom, once, on stderr.

flock(2) on ``cache_dir()/locks/<name>.lock``: the kernel drops the lock when its holder
exits or is killed, so a dead lab never leaves one behind.  The holder writes its pid
and what it is doing into the file for the waiters' message.  Lock files are never
deleted (deleting one while another process waits on it would let a third take a
different lock of the same name).
"""

from __future__ import annotations

import fcntl
import math
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import paths
from .errors import InfraError, UserError

TIMEOUT_ENV = "LAB_LOCK_TIMEOUT"

# Names this thread holds: taking one again would wait on itself.  (Two threads wait
# for each other like two processes: flock locks belong to the open file.)
_local = threading.local()


def lock_path(name: str) -> Path:
    d = paths.cache_dir() / "locks"
    d.mkdir(parents=True, exist_ok=True)
    return d / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".lock")


def _holder(f) -> tuple[str, str]:
    """(pid, what) the holder wrote, or ("unknown", "") before it has written them."""
    try:
        f.seek(0)
        pid, _, what = f.read(4096).strip().partition(" ")
    except (OSError, ValueError):
        return "unknown", ""
    return (pid if pid.isdigit() else "unknown"), what


@contextmanager
def cache_lock(name: str, what: str, *, timeout: float = 600.0) -> Iterator[bool]:
    """Hold the cache lock *name* for the block; *what* says what the holder does
    ("building lab-6.1").  Yields True if another process held it first (so what it
    made may be there now).  Waits at most *timeout* seconds ($LAB_LOCK_TIMEOUT
    overrides), then raises InfraError."""
    held: set[str] = _local.__dict__.setdefault("held", set())
    if name in held:
        raise RuntimeError(f"cache lock {name} taken twice by one thread")
    env = os.environ.get(TIMEOUT_ENV)
    if env:
        try:
            timeout = float(env)
        except ValueError:
            timeout = math.nan
        if not (math.isfinite(timeout) and timeout >= 0):
            raise UserError(f"{TIMEOUT_ENV}={env[:40]!r}: expected a finite, non-negative number of seconds") from None
    path = lock_path(name)
    try:
        # "a+": opening must not truncate what the current holder wrote.
        f = open(path, "a+")
    except OSError as e:
        raise InfraError(f"cannot open the lock {path}: {e.strerror}") from None
    with f:
        waited = said = False
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            pid, doing = _holder(f)
            who = f"another lab {doing or what} (pid {pid}"
            late = time.monotonic() >= deadline
            # Said from the second try on: a wait of milliseconds is not news, and by
            # then the holder has written who it is.
            if not said and (waited or late):
                said = True
                print(f"lab: waiting for {who})", file=sys.stderr, flush=True)
            if late:
                raise InfraError(
                    f"gave up after {timeout:.0f}s waiting for {who}, lock {path}); "
                    f"set {TIMEOUT_ENV} to wait longer"
                )
            waited = True
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)
        held.add(name)
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()} {what}\n")
            f.flush()
            yield waited
        finally:
            held.discard(name)
            fcntl.flock(f, fcntl.LOCK_UN)
