"""Every size lab accepts from a spec, a capture, a guest or a trace, in one place.

Input beyond these is refused with a one-line ``UserError`` naming the file and the
field (a trace line is counted as unparsed instead) *before* anything proportional to
it is built: a cpulist '0-999999999' is refused from its text, not after making a
billion ints.  The readers below are the only way lab reads a file it did not write
itself: they never block on a FIFO, never follow a link where one is not expected, and
never read more than the limit.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import IO

from .errors import UserError

# CPU ids are below this, so a machine has at most this many CPUs.  4096 is the NR_CPUS
# that distribution kernels commonly build with (x86 MAXSMP allows 8192); QEMU caps a
# guest far lower (q35 in 7.2: 288 vCPUs, arm64 virt with GICv3: 512), so only specs of
# real machines come near it.
MAX_CPUS = 4096

# Node ids are below this.  Linux's MAX_NUMNODES is 1 << NODES_SHIFT, and NODES_SHIFT is
# at most 10 (arch/x86/Kconfig, arch/arm64/Kconfig).
MAX_NODES = 1024

# Guest memory in all nodes together, in MiB (1 TiB).  QEMU maps it lazily, but nothing a
# scenario runs needs more than a few GiB per node, and a typo of three zeros should be
# refused here, not by QEMU or the host's OOM killer.
MAX_MEMORY_MB = 1 << 20

# x86's CPUID family is the base family (at most 0xf) plus the extended family (at most
# 0xff, added only when the base is 0xf).
MAX_CPU_FAMILY = 0xF + 0xFF

# One file that holds a fixed-size value: a sysfs attribute (the kernel formats those
# into one page; a cpulist or cpumask of MAX_CPUS CPUs is a few KiB), a spec (a groups-form
# spec of MAX_CPUS CPUs is ~100 KiB).
MAX_FILE_BYTES = 1 << 20

# One file whose size grows with the CPU count: /proc/cpuinfo (~1.5 KiB per CPU),
# /proc/schedstat (a cpumask and ~40 counters per CPU and domain level: ~35 MiB at
# MAX_CPUS CPUs with six levels), the guest's sysfs.txt (~2.5 KiB per CPU).
MAX_TABLE_BYTES = 64 << 20

# One file of a run's output that a scenario's check() reads whole (Result.text: a
# workload's stdout or stderr, a value the job saved).  A phase's trace is streamed
# line by line instead (MAX_TRACE_LINE).
MAX_RESULT_BYTES = 64 << 20

# A whole capture: the bytes of the files read from it together (of a tarball, every
# member's, read or skipped: skipping one in a compressed tarball decompresses it), and
# how many files it may hand over (of a tarball, every entry: tarfile keeps them all).
# A capture holds ~40 files per CPU.
MAX_CAPTURE_BYTES = 128 << 20
MAX_CAPTURE_FILES = 64 * MAX_CPUS

# One ftrace line.  The kernel formats each line in one trace_seq: a page in 6.1
# (include/linux/trace_seq.h; up to 64 KiB on arm64), 8 KiB since 6.7.  A longer line is
# not something ftrace wrote: it is counted as unparsed, never regex-scanned or held whole.
MAX_TRACE_LINE = 64 << 10

# A task's comm in a trace line.  The kernel's TASK_COMM_LEN is 16 (15 characters); the
# bound leaves room for a longer comm in future kernels and keeps every pattern that
# looks for the end of a comm (which may hold spaces) linear.
MAX_COMM = 64

# Linux's PID_MAX_LIMIT on 64-bit (include/linux/threads.h): 4 * 1024 * 1024.
MAX_PID = 4 * 1024 * 1024


def size(n: int) -> str:
    """1048576 -> '1 MiB' (for messages)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} bytes"


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind(mode: int) -> str:
    """What a non-regular file is, for messages ('a FIFO')."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


class Unreadable(UserError):
    """The file exists but could not be opened or read (permissions, debugfs not mounted)."""


def too_big(where: str, limit: int, what: str) -> UserError:
    return UserError(f"{where}: larger than {size(limit)}, the most lab reads from {what}")


def read_file(
    path: str | Path,
    limit: int,
    what: str,
    where: str | None = None,
    follow_symlinks: bool = True,
) -> bytes:
    """The bytes of a regular file of at most *limit* bytes, or a one-line UserError.

    *what* names the kind of file for the message ('a sysfs file'); *where* is how the
    message names the file (default: the path).  What open_regular() refuses is refused;
    the file's reported size is not trusted (sysfs says 4096, /proc says 0): at most
    limit + 1 bytes are read.
    """
    where = str(path) if where is None else where
    st = _stat(path, where, follow_symlinks)
    if st.st_size > limit:
        raise too_big(where, limit, what)
    with _open(path, where, follow_symlinks) as f:
        return read_stream(f, limit, what, where)


def read_head(path: str | Path, n: int, where: str | None = None, follow_symlinks: bool = False) -> bytes:
    """The first *n* bytes of a regular file (however long it is), refusing what
    open_regular() refuses: the start of a log, a count that should be short."""
    where = str(path) if where is None else where
    with open_regular(path, where, follow_symlinks) as f:
        try:
            return f.read(n)
        except OSError as e:
            raise Unreadable(f"{where}: cannot read: {e.strerror or e}") from None


def open_regular(path: str | Path, where: str | None = None, follow_symlinks: bool = True) -> IO[bytes]:
    """A regular file opened for reading, or a one-line UserError.

    FIFOs, devices, sockets and directories are refused without reading (a FIFO is
    opened non-blocking, so nothing waits for a writer); with ``follow_symlinks=False``
    so are symbolic links, checked both before opening and by the open itself
    (O_NOFOLLOW), so a link swapped in between is refused too."""
    where = str(path) if where is None else where
    _stat(path, where, follow_symlinks)
    return _open(path, where, follow_symlinks)


def _stat(path: str | Path, where: str, follow_symlinks: bool) -> os.stat_result:
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except OSError as e:
        raise Unreadable(f"{where}: cannot read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{where}: {kind(st.st_mode)}, not a regular file")
    return st


def _open(path: str | Path, where: str, follow_symlinks: bool) -> IO[bytes]:
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW met a link that was not there at stat()
            raise UserError(f"{where}: a symbolic link, not a regular file") from None
        raise Unreadable(f"{where}: cannot read: {e.strerror}") from None
    f = os.fdopen(fd, "rb")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        f.close()
        raise UserError(f"{where}: {kind(st.st_mode)}, not a regular file")
    return f


def read_stream(f: IO[bytes], limit: int, what: str, where: str) -> bytes:
    """At most *limit* bytes from *f*; a UserError if there are more."""
    try:
        data = f.read(limit + 1)
    except OSError as e:
        raise Unreadable(f"{where}: cannot read: {e.strerror or e}") from None
    if len(data) > limit:
        raise too_big(where, limit, what)
    return data


def show(value: object, n: int = 60) -> str:
    """repr() of a value for a one-line message, cut to about *n* characters."""
    r = repr(value)
    return r if len(r) <= n else r[: n - 3] + "..."


# A figure's integer longer than this many digits is kept as a string: JSON holds it, but
# arithmetic on it (means, t-tests) would not end well (scenario.normalise, integrity).
MAX_FIGURE_DIGITS = 30


def sha256_file(p: Path) -> str:
    """The sha256 of file *p*, read 1 MiB at a time (a kernel image, a package)."""

    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
