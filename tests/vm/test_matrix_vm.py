"""`lab matrix` on real guests with Debian's kernel: a 2 x 2 matrix at -j2 (the JUnit
checked with a JUnit parser), and a matrix interrupted (Ctrl-C) or killed (SIGKILL) while
a guest runs leaves no VM behind and keeps what it gathered.

The 2 x 2 is a seed scenario (soft-affinity) and a one-second one made for lab's own
tests (a scenario file: tests/fixtures/scenarios/pinned_stays.py, which must pass), on
two minis with two NUMA nodes or more; the seed scenarios' own cost is
tests/vm/test_scenarios_vm.py's.  Debian's kernel has no soft affinity, seed 004's claim,
so soft-affinity's cells are SKIPs decided before booting (issue 31) and the JUnit says
so; pinned-stays' two cells boot, two at a time."""

import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import junitparser
import pytest
from click.testing import CliRunner

from lab.cli import main

from .procs import qemu_running, stuck

PINNED = Path(__file__).resolve().parent.parent / "fixtures" / "scenarios" / "pinned_stays.py"
SCENARIOS = ["pinned-stays", "soft-affinity"]
TOPOLOGIES = ["xeon-2s22c-mini", "numa4-96-mini"]


@pytest.mark.vm
def test_two_by_two_matrix_at_j2(debian_kernel, tmp_path):
    out = tmp_path / "matrix"
    args = ["matrix", "--topologies", ",".join(TOPOLOGIES), "--scenarios", f"{PINNED},soft-affinity", "-j", "2", "-o", str(out)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code in (0, 1), r.output  # an ERROR (exit 3) fails the test
    doc = json.loads((out / "matrix.json").read_text())
    cells = doc["cells"]
    assert doc["finished"] and len(cells) == 4 and doc["host"]["jobs"] == 2
    assert {(c["cell"]["scenario"], c["cell"]["topology"]) for c in cells} == {(s, t) for s in SCENARIOS for t in TOPOLOGIES}
    # Two at a time: some cell started before the one before it ended.
    spans = sorted((c["started_s"], c["started_s"] + c["wall_s"]) for c in cells)
    assert any(b[0] < a[1] for a, b in itertools.pairwise(spans)), spans
    for c in cells:
        if c["cell"]["scenario"] == "soft-affinity":
            assert c["status"] == "SKIP" and "lacks soft affinity" in c["message"], c
            continue
        assert c["status"] == "PASS", c
        res = json.loads((Path(c["run_dirs"][-1]) / "results.json").read_text())
        assert (res["status"], res["topology"], res["scenario"]) == (c["status"], c["cell"]["topology"], c["cell"]["scenario"])
        failed = [e for e in res["expectations"] if e["status"] == "FAIL"]
        assert all(e["note"] for e in failed), [e["name"] for e in failed if not e["note"]]
        if failed:  # the cell's one line: the first failed expectation and its first evidence line
            assert c["message"].startswith(failed[0]["name"])
    # The JUnit file, read by a JUnit parser: one testcase per cell.
    xml = junitparser.JUnitXml.fromfile(str(out / "junit.xml"))
    cases = [c for suite in xml for c in suite]
    assert sorted(c.classname for c in cases) == sorted(
        f"lab.{s.replace('-', '_')}.{t.replace('-', '_')}" for s in SCENARIOS for t in TOPOLOGIES
    )
    assert {c.name for c in cases} == {"debian"}
    assert not any(isinstance(x, (junitparser.Error, junitparser.Failure)) for c in cases for x in c.result)
    skipped = sorted(c.classname for c in cases if any(isinstance(x, junitparser.Skipped) for x in c.result))
    assert skipped == [f"lab.soft_affinity.{t.replace('-', '_')}" for t in sorted(TOPOLOGIES)]
    for s in SCENARIOS:
        assert s in r.output
    assert not qemu_running(str(tmp_path))


@pytest.mark.vm
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_stopped_matrix_leaves_no_vm(debian_kernel, tmp_path, sig):
    """SIGINT: the matrix asks its running cell to stop (its lab run stops QEMU and writes
    its results) and records the cell as interrupted.  SIGKILL: the kernel sends the
    cell's lab run SIGTERM (PR_SET_PDEATHSIG), which stops its QEMU the same way."""
    out = tmp_path / "matrix"
    lab = str(Path(sys.executable).parent / "lab")
    errlog = tmp_path / "matrix.stderr"
    with open(errlog, "wb") as err:
        p = subprocess.Popen([lab, "matrix", "--topologies", "xeon-2s22c-mini", "--scenarios", str(PINNED), "-o", str(out)],
                             stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
    deadline = time.monotonic() + 120
    while not qemu_running(str(out)) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    assert qemu_running(str(out)), f"the guest never started: {errlog.read_text()}"
    p.send_signal(sig)
    try:
        rc = p.wait(timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"lab matrix ignored {sig.name} for 90 s: {stuck(p, errlog)}")
    deadline = time.monotonic() + 60
    while qemu_running(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not qemu_running(str(out)), f"QEMU survived {sig.name} of lab matrix"
    if sig == signal.SIGINT:
        assert rc == 130, errlog.read_text()
        doc = json.loads((out / "matrix.json").read_text())
        (cell,) = doc["cells"]
        assert not doc["finished"] and cell["status"] == "ERROR" and "interrupted" in cell["message"], cell
        # The cell's own run directory says where it stopped.
        res = json.loads((Path(cell["run_dirs"][-1]) / "results.json").read_text())
        assert res["status"] == "ERROR" and "interrupted by SIGTERM" in res["message"], res
        assert str(out) in errlog.read_text()
    else:
        assert rc == -signal.SIGKILL
