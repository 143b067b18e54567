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


_PROGRESS = re.compile(r"\[ *(\d+\.\d)s\] (\w+)(: done \((\d+\.\d)s\))?")  # lab.progress's plain lines


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
        if m.group(3):
            done.append(m.group(2))
        elif not started or started[-1] != m.group(2) or (done and done[-1] == m.group(2)):
            started.append(m.group(2))
    return started, done


def assert_slow_steps_said_done(stderr: str, steps: list[str], outer: str = "") -> None:
    """Each of *steps* that took clearly longer than progress.SLOW_S (from its start line
    to the next step's start, or to the last line) said it was done; a quick one may not.
    *outer*, the command's own step, spans all lines.  How long a boot takes depends on
    the host: the rule is what is checked."""
    from lab.progress import SLOW_S

    lines = [m for m in map(_PROGRESS.match, stderr.splitlines()) if m]
    _, done = progress_steps(stderr)
    for name in steps:
        i = next((k for k, m in enumerate(lines) if m.group(2) == name and not m.group(3)), None)
        assert i is not None, f"no {name} step in {stderr}"
        t0 = float(lines[i].group(1))
        later = [float(m.group(1)) for m in lines[i + 1 :] if m.group(2) != name]
        took = (later[0] if later else float(lines[-1].group(1))) - t0
        if name == outer:
            took = float(lines[-1].group(1)) - t0
        if took > SLOW_S + 0.2:  # the printed times are rounded to 0.1 s
            assert name in done, f"{name} took {took:.1f}s and did not say done: {stderr}"
