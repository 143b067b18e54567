"""lab.rundir.RunDir reads every recorded run under tests/fixtures/runs: its results,
plan, command, snapshot and traces are where the layout says, and the names every
module uses come from it."""

from pathlib import Path

import pytest

from lab import rundir
from lab.errors import UserError
from lab.plan import VmPlan
from lab.rundir import RunDir

RUNS = sorted(p for p in (Path(__file__).resolve().parents[1] / "fixtures" / "runs").iterdir() if p.is_dir())


def test_there_are_fixtures():
    assert len(RUNS) >= 10


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_readers_on_every_recorded_run(run: Path):
    rd = RunDir(run)
    assert rd.is_run() and rd.has_results()
    res = rd.read_results()
    assert res.get("status") in ("PASS", "FAIL", "ERROR", "INCONCLUSIVE", "SKIP")
    plan = rd.read_json(rundir.PLAN)
    assert isinstance(plan, dict) and "topology" in plan
    assert VmPlan.read(run).topo.n_cpus > 0
    cmd = rd.read_command()
    assert cmd == "" if not rd.command.exists() else cmd.startswith("lab ")
    assert rd.out.is_dir()
    snap = rd.snapshot()
    if (run / "guest").is_dir() or (run / "out" / "guest").is_dir():
        assert snap is not None and (snap / "sysfs.txt").exists()
    traces = [p.name for p in rd.out.iterdir() if p.name.startswith("trace") and p.name.endswith(".dat")]
    for name in traces:
        phase = "main" if name == "trace.dat" else name[len("trace.") : -len(".dat")]
        assert rd.trace(phase).name == name
    # every file it holds that a bundle carries is one of the layout's names
    kept = {p.name for p in run.iterdir() if p.is_file()}
    assert kept <= set(rundir.FILES) | {rundir.RESULTS_TAR, rundir.NUMBERING}


def test_missing_file_is_one_line(tmp_path: Path):
    with pytest.raises(UserError, match="results.json: no such file"):
        RunDir(tmp_path).read_results()
    (tmp_path / rundir.RESULTS).write_text("{")
    with pytest.raises(UserError, match="cannot be read"):
        RunDir(tmp_path).read_results()


def test_writers_round_trip(tmp_path: Path):
    rd = RunDir(tmp_path)
    rd.write_command(["run", "llc-spread-pinned", "--topology", "zen3-2s-mini"])
    assert rd.read_command() == "lab run llc-spread-pinned --topology zen3-2s-mini"
    rd.write_results({"status": "PASS"})
    assert rd.read_results() == {"status": "PASS"}
    rd.write_argv(["qemu-system-x86_64", "-smp", "4"])
    assert rd.qemu_argv.read_text() == "qemu-system-x86_64 -smp 4\n"


def test_label():
    assert rundir.label("run", "zen3 2s", "lab-6.1", stamp="20261126-010203") == "20261126-010203-run-zen3_2s-lab-6.1"


def test_boot_files_and_integrity_name_the_layout():
    from lab import integrity
    from lab.render.qemu import BootFiles

    f = BootFiles(Path())
    assert str(f.results) == rundir.RESULTS_TAR == integrity.RESULTS_TAR
    assert str(f.agent_log) == rundir.AGENT_LOG == integrity.AGENT_LOG
    assert str(f.console) == rundir.CONSOLE
