"""`lab run --workload CMD --check EXPR` for real (issue 36 item 2): hackbench, packed from
the host as `--tools` packs it, runs in the guest from its argv files, is traced, and the
check expression judges it; the run directory is like any scenario's (plan.json records the
commands, `lab recheck` judges it again from the run alone)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .procs import qemu_running


@pytest.mark.vm
def test_workload_from_the_command_line_passes_and_rechecks(debian_kernel):
    runs = Path(os.environ["LAB_RUNS"])
    cp = subprocess.run(
        [sys.executable, "-m", "lab", "run", "--workload", "hackbench -g 2 -l 200", "--check", "starvation < 1s",
         "--topology", "zen3-2s-mini", "--json"],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    run = json.loads(cp.stdout)["runs"][0]
    assert run["status"] == "PASS" and run["scenario"] == "workload"
    claim = [e for e in run["expectations"] if e.get("claim")]
    assert [e["name"] for e in claim] == ["--check starvation < 1s"] and claim[0]["status"] == "PASS"
    run_dir = Path(run["run_dir"])
    assert run_dir.parent == runs
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["scenario"]["commands"] == [["hackbench", "-g", "2", "-l", "200"]]
    assert (run_dir / "out" / "w1-hackbench.rc").read_text().strip() == "0"
    again = subprocess.run([sys.executable, "-m", "lab", "recheck", str(run_dir)], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert not qemu_running(run_dir.name)


@pytest.mark.vm
@pytest.mark.parametrize(("check", "want", "rc"), [("starvation < 1s", "PASS", 0), ("starvation < 1us", "FAIL", 1)])
def test_a_matrix_row_of_a_workload_judges_it(debian_kernel, tmp_path, check, want, rc):
    """`lab matrix --workload CMD --check EXPR`: the commands are a row, each cell a `lab
    run` of their TOML file; the check decides the cell both ways (no task waits a
    microsecond is a bound no run meets)."""
    out = tmp_path / "m"
    cp = subprocess.run(
        [sys.executable, "-m", "lab", "matrix", "--workload", "hackbench -g 2 -l 200", "--check", check,
         "--topologies", "zen3-2s-mini", "-o", str(out)],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert cp.returncode == rc, cp.stdout[-3000:] + cp.stderr[-3000:]
    doc = json.loads((out / "matrix.json").read_text())
    (cell,) = doc["cells"]
    assert (cell["cell"]["scenario"], cell["status"]) == ("workload", want), cell
