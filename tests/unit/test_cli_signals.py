"""lab stops on SIGINT even when its parent left SIGINT ignored (a background job of a
script, `nohup lab ... &`, some CI runners), and keeps an inherited SIGHUP ignore (nohup)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A lab with one more command, `wait`, that only waits: the signal handling under test
# is the one `lab` sets up before any command runs.
CHILD = """
import time
from lab.cli import main

@main.command()
def wait():
    print("waiting", flush=True)
    time.sleep(60)

main(["wait"])
"""


def _ignore(*sigs):
    def pre():
        for s in sigs:
            signal.signal(s, signal.SIG_IGN)

    return pre


def _start(pre):
    p = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=pre)  # fmt: skip
    assert p.stdout is not None and p.stdout.readline() == b"waiting\n"
    return p


def test_sigint_stops_lab_even_when_the_parent_ignored_it():
    p = _start(_ignore(signal.SIGINT))
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("lab ignored SIGINT")
    assert rc == 130
    assert p.stderr is not None and p.stderr.read().decode().splitlines() == ["lab: interrupted"]


def test_sighup_ignored_by_nohup_stays_ignored():
    p = _start(_ignore(signal.SIGHUP))
    try:
        p.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert p.poll() is None, "lab died of a SIGHUP its parent (nohup) had ignored"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 130
    finally:
        p.kill()
