"""proc.signals_held: an interrupt during Popen waits until the caller holds the child,
and the child does not inherit the held mask."""

import os
import signal
import subprocess

import pytest

from lab import proc


def _sigblk(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigBlk line")


def test_a_term_during_popen_is_raised_after_the_child_is_held():
    def _interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, _interrupt)
    p = None
    try:
        with pytest.raises(KeyboardInterrupt):
            try:
                with proc.signals_held():
                    p = proc.popen(["sleep", "30"], stdout=subprocess.DEVNULL)
                    os.kill(os.getpid(), signal.SIGTERM)  # lands "inside Popen"
                    held_child = p  # still here: the signal waits for the block's end
                raise AssertionError("the held SIGTERM was never raised")
            finally:
                assert p is not None and held_child is p
                # The child must not keep lab's held mask (it would ignore SIGTERM).
                assert _sigblk(p.pid) & (1 << (signal.SIGTERM - 1)) == 0
                p.terminate()
                assert p.wait(timeout=10) == -signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, old)
    assert _sigblk(os.getpid()) & (1 << (signal.SIGTERM - 1)) == 0


def test_preexec_fn_still_runs_inside_signals_held(tmp_path):
    mark = tmp_path / "ran"
    with proc.signals_held():
        p = proc.popen(["true"], preexec_fn=lambda: mark.write_text("x"))
    assert p.wait(timeout=10) == 0
    assert mark.read_text() == "x"
