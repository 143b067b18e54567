"""Failure paths with a real guest: a guest that never reports, a workload that fails.
Each must give a one-line error, keep what was gathered, and leave no QEMU running."""

import json
import re
import subprocess

import pytest
from click.testing import CliRunner

from lab.backends import qemu as backend
from lab.cli import main

from .procs import qemu_running, stuck


def test_guest_that_never_reports_is_lost_and_killed(debian_kernel, monkeypatch, tmp_path):
    from lab import host
    from lab.image import initramfs

    # A guest that really never reports: its /init waits forever.  A short timeout alone
    # raced the boot (a quiet host brought lab's agent up in 3.0 s and the test saw PASS).
    agent = tmp_path / "init.sh"
    agent.write_text("#!/bin/sh\nwhile :; do /bin/busybox sleep 3600; done\n")
    monkeypatch.setattr(initramfs, "AGENT", agent)
    monkeypatch.setattr(backend, "boot_timeout", lambda plan: 3.0)
    # 3 s of wall time, not host time: on a busy host the stretched deadline (host.HostClock,
    # tested on its own) would let this guest get ready.
    monkeypatch.setattr(host, "MIN_SHARE", 1.0)
    r = CliRunner().invoke(main, ["verify", "xeon-2s22c-mini"])
    assert r.exit_code == 3, r.output
    assert "never reported ready within 3s" in r.output and "console:" in r.output
    # Before the kill, QEMU was asked where the vCPUs were (32 vCPUs, x86: halted or not).
    assert re.search(r"(\d+ of 32 vCPUs running: CPU [-,\d]+ at [0-9a-f]+|all 32 vCPUs halted)", r.output), r.output
    (lost,) = (tmp_path / "runs").glob("*/lost.registers")
    assert lost.read_text().count("CPU#") == 32
    assert not qemu_running(str(tmp_path))


def test_failing_workload_is_an_error_with_its_stderr(debian_kernel, tmp_path):
    p = tmp_path / "fails.py"
    p.write_text(
        '''from lab.scenario import Expectation, Scenario


class Fails(Scenario):
    name = "fails"
    summary = "a workload that exits 3"
    claim = "'never reached': the run is an ERROR before check()"
    topologies = ["xeon-2s22c-mini"]
    events = ["sched:sched_switch"]
    workloads = False

    def steps(self, topo):
        return "lab_trace_on\\nlab_run bad sh -c 'echo went wrong >&2; exit 3'\\nlab_trace_off\\n"

    def check(self, r):
        return [Expectation("never reached", True, claim=True)]
'''
    )
    r = CliRunner().invoke(main, ["run", str(p)])
    assert r.exit_code == 3, r.output
    assert "workload step 'bad' exited 3: went wrong" in r.output
    runs = list((tmp_path / "runs").glob("*-fails-*"))
    assert len(runs) == 1
    res = json.loads((runs[0] / "results.json").read_text())
    assert res["status"] == "ERROR" and "went wrong" in res["message"]
    assert (runs[0] / "command").read_text().startswith("lab run")
    assert (runs[0] / "out" / "trace.main.txt").exists()  # what was gathered is kept
    assert not qemu_running(str(tmp_path))


def test_killed_lab_leaves_no_vm(debian_kernel, tmp_path):
    """SIGTERM unwinds (QEMU stopped by the backend), also when lab's parent left SIGTERM
    blocked (an inherited mask once made lab deaf to it); even SIGKILL takes QEMU down
    (PR_SET_PDEATHSIG)."""
    import signal
    import sys
    import time
    from pathlib import Path

    def blocked_term():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    lab = str(Path(sys.executable).parent / "lab")
    for sig, pre in ((signal.SIGTERM, None), (signal.SIGTERM, blocked_term), (signal.SIGKILL, None)):
        how = f"{sig.name}{' (blocked by the parent)' if pre else ''}"
        errlog = tmp_path / f"lab.{sig.name}.{bool(pre)}.stderr"
        with open(errlog, "wb") as err:
            p = subprocess.Popen(
                [lab, "boot", "xeon-2s22c-mini", "--", "sleep", "120"], stdout=subprocess.DEVNULL, stderr=err,
                preexec_fn=pre,
            )
        deadline = time.monotonic() + 60
        while not qemu_running(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert qemu_running(str(tmp_path)), "the guest never started"
        p.send_signal(sig)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"lab ignored {how} for 30 s: {stuck(p, errlog)}")
        assert rc == (130 if sig == signal.SIGTERM else -sig), f"{how}: exit {rc}"
        deadline = time.monotonic() + 10
        while qemu_running(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not qemu_running(str(tmp_path)), f"QEMU survived {how}"


@pytest.mark.parametrize("jobs", [1, 2])
def test_run_interrupted_during_boot_says_so(debian_kernel, tmp_path, jobs):
    """SIGINT while the guest boots: QEMU is stopped, the run directory keeps what was
    gathered and says why it has no verdict, and `lab recheck` says the same (exit 3)
    instead of judging whatever files are there.  With a verdict's runs side by side
    (--jobs 2; also what `lab run` does by itself on an idle host) each run's directory
    says so, naming the signal (CI on an idle host once found "KeyboardInterrupt")."""
    import signal
    import sys
    import time
    from pathlib import Path

    lab = str(Path(sys.executable).parent / "lab")
    errlog = tmp_path / "lab.stderr"
    with open(errlog, "wb") as err:
        p = subprocess.Popen([lab, "run", "llc-spread-pinned", "--jobs", str(jobs)], stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 120
    stages: list = []
    while time.monotonic() < deadline and p.poll() is None:
        res = sorted((tmp_path / "runs").glob("*/results.json"))
        stages = [json.loads(r.read_text())["integrity"].get("stage") for r in res]
        # QEMU has started and made its files (on a loaded host that takes a moment).
        if len(res) == jobs and set(stages) == {"boot"} and qemu_running(str(tmp_path)) and all((r.parent / "console.log").exists() for r in res):
            break
        time.sleep(0.1)
    assert stages == ["boot"] * jobs and qemu_running(str(tmp_path)), f"never saw the guest booting: {stages} {errlog.read_text()}"
    p.send_signal(signal.SIGINT)
    try:
        assert p.wait(timeout=30) == 130
    except subprocess.TimeoutExpired:
        pytest.fail(f"lab ignored SIGINT for 30 s: {stuck(p, errlog)}")
    runs = sorted((tmp_path / "runs").glob("*-llc-spread-pinned-*"))
    assert len(runs) == jobs, runs
    cause = "the run did not finish: interrupted by SIGINT during boot"
    for run in runs:
        res = json.loads((run / "results.json").read_text())
        assert res["status"] == "ERROR" and res["message"] == cause, res
        assert res["integrity"] == {**res["integrity"], "finished": False, "stage": "boot", "interrupted": "SIGINT"}
        assert cause in errlog.read_text() and str(run) in errlog.read_text()
        assert (run / "console.log").exists() and (run / "qemu.argv").exists()  # what was gathered is kept
        r = CliRunner().invoke(main, ["recheck", str(run)])
        assert r.exit_code == 3 and cause in r.output and "Traceback" not in r.output, r.output
    assert not qemu_running(str(tmp_path))


def test_a_live_run_writes_its_verdict_whatever_check_returns(debian_kernel, tmp_path):
    """check() returning figures JSON cannot hold as they are (a tuple key, an int of 5000
    digits, inf) once left results.json RUNNING and no junit.xml (issue 38): they are
    normalised, and the verdict is written."""
    p = tmp_path / "odd.py"
    p.write_text(
        '''from lab.scenario import Expectation, Scenario


class Odd(Scenario):
    name = "odd-figures"
    summary = "figures keyed by a tuple, huge and infinite"
    claim = "'ran': the job ran"
    topologies = ["xeon-2s22c-mini"]
    events = ["sched:sched_switch"]
    workloads = False

    def steps(self, topo):
        return "lab_trace_on\\nlab_run ok true\\nlab_trace_off\\n"

    def check(self, r):
        return [Expectation("ran", r.step("ok").rc == 0, claim=True, figures={(1, 2): 3, "big": 10**5000, "inf": float("inf")})]
'''
    )
    r = CliRunner().invoke(main, ["run", str(p)])
    assert r.exit_code == 0, r.output
    (run,) = (tmp_path / "runs").glob("*-odd-figures-*")
    res = json.loads((run / "results.json").read_text())
    assert res["status"] == "PASS" and res["expectations"][0]["figures"] == {"(1, 2)": 3, "big": ">1e30", "inf": "inf"}
    assert (run / "junit.xml").is_file() and not qemu_running(str(tmp_path))
