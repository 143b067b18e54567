"""Every external process lab starts goes through here.

argv lists only (never shell strings); the command is logged with shlex.join;
output is captured so an error can quote it.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from . import arch as archs
from .errors import InfraError, UserError

log = logging.getLogger("lab.proc")


def run(
    argv: Sequence[str | os.PathLike],
    *,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    check: bool = True,
    capture: bool = True,
    input: bytes | None = None,
    stdout=None,
    stderr=None,
) -> subprocess.CompletedProcess:
    """Run *argv*; raise InfraError with the output's tail if it fails and *check*."""
    args = [str(a) for a in argv]
    log.debug("run: %s", shlex.join(args))
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    if capture and stdout is None:
        stdout = subprocess.PIPE
    if capture and stderr is None:
        stderr = subprocess.PIPE
    try:
        cp = subprocess.run(
            args,
            cwd=cwd,
            env=full_env,
            timeout=timeout,
            input=input,
            stdout=stdout,
            stderr=stderr,
        )
    except FileNotFoundError as e:
        raise UserError(f"command not found: {args[0]} ({hint_package(args[0])})") from e
    except subprocess.TimeoutExpired as e:
        raise InfraError(f"timed out after {timeout:.0f}s: {shlex.join(args)}") from e
    if check and cp.returncode != 0:
        said = tail(cp.stderr) or tail(cp.stdout)
        raise InfraError(
            f"command failed (exit {cp.returncode}): {shlex.join(args)}"
            + (f": {said}" if said else "")
        )
    return cp


def first_line(argv: Sequence[str | os.PathLike], env: Mapping[str, str] | None = None, with_stderr: bool = False) -> str | None:
    """The first line *argv* prints (a tool's ``--version``): None if it is not found, ""
    if it prints nothing; stdout, then stderr too with *with_stderr*; never raises on
    its exit status."""
    try:
        cp = run(argv, check=False, env=env)
    except UserError:  # not found
        return None
    data = (cp.stdout or b"") + ((cp.stderr or b"") if with_stderr else b"")
    out = data.decode(errors="replace").strip().splitlines()
    return out[0] if out else ""


def popen(
    argv: Sequence[str | os.PathLike], *, cwd=None, env: Mapping[str, str] | None = None, **kw
) -> subprocess.Popen:
    """Start *argv* in the background (for QEMU and make).  Same logging as run().
    Inside signals_held(), the child starts with the signal mask lab had before."""
    args = [str(a) for a in argv]
    log.debug("popen: %s", shlex.join(args))
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    if _child_mask is not None:
        mask, inner = _child_mask, kw.pop("preexec_fn", None)

        def _restore_mask() -> None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            if inner is not None:
                inner()

        kw["preexec_fn"] = _restore_mask
    try:
        return subprocess.Popen(args, cwd=cwd, env=full_env, **kw)
    except FileNotFoundError as e:
        raise UserError(f"command not found: {args[0]} ({hint_package(args[0])})") from e


_UNWIND = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_child_mask: set | None = None


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP (lab unwinds on them) for the block: a signal that
    lands while Popen is returning would otherwise unwind before the caller holds the
    process, and skip the clause that stops it.  A held signal is raised as the block
    ends, so start the block inside the try whose finally stops the child:

        p = None
        try:
            with proc.signals_held():
                p = proc.popen(...)
            ...
        finally:
            if p is not None:
                stop(p)
    """
    global _child_mask
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _UNWIND)
    except (AttributeError, ValueError, OSError):  # not the main thread, or no pthreads
        yield
        return
    _child_mask = old
    try:
        yield
    finally:
        _child_mask = None
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def tail(data: bytes | str | None, lines: int = 3) -> str:
    """The last *lines* non-empty lines of a process's output, on one line."""
    if not data:
        return ""
    if isinstance(data, bytes):
        data = data.decode(errors="replace")
    out = [ln.strip() for ln in data.strip().splitlines() if ln.strip()]
    return " | ".join(out[-lines:])


# Debian package that provides each tool lab may call (the one tool-to-package map).
PACKAGES = {
    **{a.qemu: a.qemu_package for a in archs.ARCHES.values()},
    **{f"{a.cross_compile}gcc": a.cross_packages[0] for a in archs.ARCHES.values()},
    "busybox": "busybox-static",
    "cpio": "cpio",
    "patch": "patch",
    "zstd": "zstd",
    "depmod": "kmod",
    "ccache": "ccache",
    "gcc": "gcc",
    "make": "make",
    "dtc": "device-tree-compiler",
    "perf": "linux-perf",
    "hackbench": "rt-tests",
    "stress-ng": "stress-ng",
    "numactl": "numactl",
    "apt-get": "apt",
    "dpkg-deb": "dpkg",
    "virsh": "libvirt-clients",
    "vng": "virtme-ng (pip install virtme-ng)",
}


def hint_package(tool: str) -> str:
    name = Path(tool).name
    pkg = PACKAGES.get(name)
    return f"install the Debian package {pkg}" if pkg else "is it installed and on PATH?"


def stop_group(p: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop a child started with start_new_session=True (QEMU, make) and everything it
    started: TERM its process group, then KILL; never leave it running."""
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:  # stuck in the kernel; say so rather than hang
            log.warning("pid %d survived SIGKILL for 30 s; state %s", p.pid, _proc_state(p.pid))


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A preexec_fn: the kernel sends the child *sig* when lab dies, even by SIGKILL
    (PR_SET_PDEATHSIG).  SIGTERM lets a child that is lab itself unwind and stop its VM."""

    def preexec() -> None:
        try:
            # deferred: CLI start (ctypes)
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except Exception:  # noqa: BLE001 - not Linux or no libc: the parent's finally clause still stops it
            pass

    return preexec


def logged(
    argv: Sequence[str | os.PathLike], log_path: Path, on_line: Callable[[str], None], *,
    env: Mapping[str, str] | None = None, header: str = "",
) -> int:
    """Run a build tool (make, ninja) in a session of its own, every output line written
    to *log_path* as it comes (``tail -f`` follows along) and handed to *on_line* (the
    progress); the exit status.  An interrupt or any error stops it with all its
    children (stop_group) before unwinding."""
    with open(log_path, "w") as log:
        if header:
            log.write(header)
            log.flush()
        p = None
        try:
            with signals_held():  # p is set before an interrupt can unwind
                p = popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            assert p.stdout is not None
            for raw in p.stdout:
                line = raw.decode(errors="replace")
                log.write(line)
                log.flush()
                on_line(line)
            return p.wait()
        except BaseException:
            if p is not None:
                stop_group(p, grace=10)
            raise


def pid_stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first: field 3 of
    proc(5) is [0]); the name may hold spaces and parentheses.  OSError if it is gone."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()


def _proc_state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return "unknown"
    state = next((ln.split(":", 1)[1].strip() for ln in status.splitlines() if ln.startswith("State:")), "?")
    return f"{state}, wchan {wchan or '?'}"
