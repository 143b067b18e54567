"""lab bisect --scheduler (issue 35 item 3): every step's runs load the scheduler."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from lab.cli import main


def test_each_step_runs_under_the_scheduler():
    """The options the steps get (the state file's VmOptions, a round trip through
    to_dict) keep the scheduler, and a step's lab run line names it after the commit's
    kernel."""
    from lab import session, topology
    from lab.cli.bisect import _vm
    from lab.plan import VmOptions

    vm = _vm("scx_simple:-s 5000", "lab-6.12-scx", accel="auto")
    again = VmOptions.from_dict(vm.to_dict())
    assert again.scheduler == "scx_simple:-s 5000"
    import dataclasses

    argv = session.run_argv("scheduler-survives", topology.load("zen3-2s-mini"), dataclasses.replace(again, kernel="0123abcd"))
    assert argv == ["run", "scheduler-survives", "--topology", "zen3-2s-mini", "--kernel", "0123abcd",
                    "--scheduler", "scx_simple:-s 5000", "--runs-per-verdict", "1"]  # fmt: skip
    assert _vm("eevdf", None, accel="auto").scheduler == ""  # the kernel's own: no scheduler, any recipe


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--scheduler", "scx_nosuch", "--recipe", "lab-6.12-scx"], "scx_nosuch"),
        (["--scheduler", "scx_simple"], "--recipe lab-6.12-scx"),
    ],
)
def test_bisect_scheduler_bad_input_is_one_line(tmp_path, extra, match):
    r = CliRunner().invoke(main, ["bisect", "llc-spread-pinned", "--kernel-tree", str(tmp_path), "--good", "a", "--bad", "b", *extra])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("lab: error: ") and len(r.output.strip().splitlines()) == 1 and match in r.output, r.output


def test_bisecting_a_kernel_scheduler_claim_under_a_bpf_scheduler_is_refused_before_building(tmp_path):
    """Every commit would be INCONCLUSIVE (issue 35 item 6): one line naming why, no build."""
    r = CliRunner().invoke(main, ["bisect", "llc-spread-pinned", "--kernel-tree", str(tmp_path), "--good", "a", "--bad", "b",
                                  "--scheduler", "scx_simple:-s 5", "--recipe", "lab-6.12-scx"])  # fmt: skip
    assert r.exit_code == 2, r.output
    assert r.output.startswith("lab: error: lab bisect llc-spread-pinned --scheduler scx_simple: ") and len(r.output.strip().splitlines()) == 1
    assert "select_task_rq_fair()" in r.output and "INCONCLUSIVE under scx_simple at every commit" in r.output
    # a claim that holds for any scheduler goes on to the tree (here: not a git tree)
    r = CliRunner().invoke(main, ["bisect", "scheduler-survives", "--kernel-tree", str(tmp_path), "--good", "a", "--bad", "b",
                                  "--scheduler", "scx_simple", "--recipe", "lab-6.12-scx"])  # fmt: skip
    assert "kernel's own scheduler" not in r.output, r.output
