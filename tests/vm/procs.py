"""Process checks the VM tests share."""

import re
from pathlib import Path


def qemu_running(marker: str) -> bool:
    """A QEMU whose command line or working directory mentions *marker* (read from
    /proc: ps truncates; lab runs QEMU in the run directory, naming files relative to it)."""
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmd.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = str((cmd.parent / "cwd").readlink()) if "qemu-system" in args else ""
        except OSError:
            continue
        if "qemu-system" in args and (marker in args or marker in cwd):
            return True
    return False


def stuck(p, errlog: Path) -> str:
    """Where a lab process that will not exit is: kernel state, and its Python stack
    (lab prints it on SIGUSR1).  Kills it afterwards."""
    import signal
    import time

    try:
        status = Path(f"/proc/{p.pid}/status").read_text()
        state = next((ln for ln in status.splitlines() if ln.startswith("State:")), "State: ?")
        wchan = Path(f"/proc/{p.pid}/wchan").read_text()
    except OSError:
        state, wchan = "State: gone", "?"
    p.send_signal(signal.SIGUSR1)
    time.sleep(1)
    p.kill()
    p.wait()
    stack = errlog.read_text(errors="replace")[-3000:] if errlog.exists() else ""
    return f"{state}, wchan {wchan}\n{stack}"


_PROGRESS = re.compile(r"\[ *\d+\.\ds\] (\w+)(: done \(\d+\.\ds\))?")  # lab.progress's plain lines


def progress_steps(stderr: str) -> tuple[list[str], list[str]]:
    """The steps lab.progress's plain lines on *stderr* started, in order, and those
    that said they were done (a step over progress.SLOW_S).  A step's detail updates
    repeat its name: counted once."""
    started: list[str] = []
    done: list[str] = []
    for line in stderr.splitlines():
        m = _PROGRESS.match(line)
        if not m:
            continue
        if m.group(2):
            done.append(m.group(1))
        elif not started or started[-1] != m.group(1) or (done and done[-1] == m.group(1)):
            started.append(m.group(1))
    return started, done
