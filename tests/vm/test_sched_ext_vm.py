"""sched_ext in a guest (issue 35): scx_simple, built by lab against lab-6.12-scx's BTF,
loads before the command and stays enabled through a scenario's run.

Hand-run: the kernel is a full 6.12 build with debug info (BTF), about an hour on this
2-core host (kernels/README.md); once it and the scheduler are in the cache, each test
is one TCG boot.  `pytest -m handrun tests/vm/test_sched_ext_vm.py`."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main

pytestmark = [pytest.mark.build, pytest.mark.handrun]

KERNEL = "lab-6.12-scx"
MINI = "zen3-2s-mini"


def test_scx_simple_is_enabled_when_the_command_runs():
    r = CliRunner().invoke(main, ["boot", MINI, "--kernel", KERNEL, "--scheduler", "scx_simple", "--", "cat", "/sys/kernel/sched_ext/state", "/sys/kernel/sched_ext/root/ops"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "enabled\nsimple\n"
    assert "scheduler scx_simple stayed enabled throughout" in r.stderr
    run_dir = sorted(Path(os.environ["LAB_RUNS"]).glob(f"*-boot-{MINI}-*"))[-1]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["scheduler"]["name"] == "scx_simple" and plan["scheduler"]["args"] == []
    assert plan["options"]["scheduler"] == "scx_simple"
    assert (run_dir / "out" / "scheduler" / "during").read_text().strip() == "kept"


def test_a_scenario_runs_under_scx_simple():
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", MINI, "--kernel", KERNEL, "--scheduler", "scx_simple",
                                  "--runs-per-verdict", "1", "--json"])  # fmt: skip
    # The scenario's expectations are about the kernel's own fork placement: under a
    # BPF scheduler PASS and FAIL are both answers; an ERROR (no verdict) is not.
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.stdout)
    run = doc["runs"][0]
    assert run["status"] in ("PASS", "FAIL"), run
    assert run["integrity"]["scheduler"] == "kept", run
    assert "ejected" not in run["message"]
    plan = json.loads((Path(run["run_dir"]) / "plan.json").read_text())
    assert plan["scheduler"]["ops"] == "simple"


def test_a_kernel_without_sched_ext_is_a_skip_before_booting():
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", MINI, "--kernel", "debian-6.12", "--scheduler", "scx_simple", "--json"])
    assert r.exit_code == 0, r.output
    run = json.loads(r.stdout)["runs"][0]
    assert run["status"] == "SKIP" and run["run_dir"] is None
    assert "CONFIG_SCHED_CLASS_EXT" in run["message"] and KERNEL in run["message"]


def test_a_scheduler_that_never_loads_is_an_error_with_its_output():
    """An argument scx_simple refuses: it prints its usage and exits, the command never runs
    (the argument reaches it as data: `$(reboot)` is a word, not a command)."""
    r = CliRunner().invoke(main, ["boot", MINI, "--kernel", KERNEL, "--scheduler", 'scx_simple:-Z "$(reboot)"', "--", "echo", "ran"])
    assert r.exit_code == 3, r.output
    assert r.stdout == ""
    assert "lab: ERROR: scheduler scx_simple never reached enabled" in r.stderr
    assert "invalid option -- 'Z'" in r.stderr and "Usage: scx_simple" in r.stderr


def test_an_ejection_during_the_command_is_a_fail_with_the_kernels_reason():
    """scx_qmap -e COUNT calls scx_bpf_error() after COUNT enqueues: the kernel disables it
    while the command runs (measured: enabled at 14.6 s, ejected before the command ends)."""
    job = "for i in $(seq 1500); do /bin/true; done; cat /sys/kernel/sched_ext/state"
    r = CliRunner().invoke(main, ["boot", MINI, "--kernel", KERNEL, "--scheduler", "scx_qmap:-e 5000", "--", "sh", "-c", job])
    assert r.exit_code == 1, r.output
    assert r.stdout == "disabled\n"
    assert "lab: FAIL: sched_ext ejected scheduler scx_qmap during the run" in r.stderr
    assert "scx_bpf_error: test triggering error" in r.stderr
