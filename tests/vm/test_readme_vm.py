"""The README's commands that boot a guest (tests/readme_commands.py, kind "vm"), run as
a user types them: bash, the checkout's `lab` on PATH; the interactive console on a
pseudo-terminal, ended the way its banner says ('reboot -f')."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from readme_commands import CHECKS, ROOT, commands  # tests/ is on sys.path (its conftest.py)

from .procs import qemu_running

BIN = Path(sys.executable).parent

VM_COMMANDS = [
    pytest.param(c, marks=[pytest.mark.xfail(strict=True, reason=CHECKS[c].xfail)] if CHECKS[c].xfail else [], id=c)
    for c in commands() if CHECKS.get(c) and CHECKS[c].kind == "vm"
]  # fmt: skip


def _console(line: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> tuple[int, str]:
    """Run *line* with a terminal for stdin/stdout; answer the guest's shell with
    'reboot -f' once it says it is there.  (exit status, what the terminal showed)"""
    master, slave = pty.openpty()
    p = subprocess.Popen(["bash", "-c", line], cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    seen, sent = b"", False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 1.0)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other side closed: lab exited
                    break
                if not chunk:
                    break
                seen += chunk
            if not sent and b"'reboot -f' ends the VM" in seen:
                time.sleep(1)  # let the shell start reading
                os.write(master, b"echo lab-readme-$((6*7))\nreboot -f\n")
                sent = True
        return p.wait(timeout=max(1.0, deadline - time.monotonic())), seen.decode(errors="replace")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)


@pytest.mark.vm
@pytest.mark.parametrize("cmd", VM_COMMANDS)
def test_readme_vm_command(cmd, debian_kernel, tmp_path):
    check = CHECKS[cmd]
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    if check.interactive:
        rc, shown = _console(cmd, tmp_path, env)
        assert "lab-readme-42" in shown, shown[-3000:]  # the guest's shell ran what was typed
    else:
        if check.setup == "checkout":  # names a file of the checkout, as tests/unit/test_readme.py runs it
            cmd = cmd.replace("tests/fixtures/", f"{ROOT}/tests/fixtures/")
        p = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        rc, shown = p.returncode, p.stdout + p.stderr
    print(f"README command: {cmd!r} -> exit {rc}")
    assert rc in check.exit, f"{cmd}: exit {rc}\n{shown[-3000:]}"
    assert not qemu_running(os.environ["LAB_RUNS"])
