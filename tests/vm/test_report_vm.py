"""A bundle's round trip on Debian's kernel: run a short scenario, bundle the run,
delete everything the run used that is not lab's own (the topology spec, the run
directory), replay the bundle, and get the same verdict and figures."""

import json
import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from lab.cli import main

from .procs import qemu_running

SCENARIO = Path(__file__).parent.parent / "fixtures" / "scenarios" / "pinned_forks.py"
SPEC = """description = "test: 2 sockets x 2 LLCs x 2 cores"
arch = "x86_64"

[cpu]
vendor = "intel"
model = "test"
family = 6

[topology]
sockets = 2
nodes_per_socket = 1
llcs_per_node = 2
cores_per_cluster = 2
threads_per_core = 1
numbering = "linear"

[numa]
distances = [[10, 21], [21, 10]]
memory_mb = 256
"""


def test_bundle_replays_to_the_same_verdict(debian_kernel, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    spec = work / "tiny2s.toml"
    spec.write_text(SPEC)
    scen = work / "pinned_forks.py"
    shutil.copy(SCENARIO, scen)
    runs = tmp_path / "runs"
    monkeypatch.setenv("LAB_RUNS", str(runs))
    r = CliRunner().invoke(main, ["run", str(scen), "--topology", str(spec)])
    assert r.exit_code == 0, r.output
    (run_dir,) = runs.iterdir()
    before = json.loads((run_dir / "results.json").read_text())
    assert before["status"] == "PASS" and before["expectations"][0]["figures"]["wakeup_new"] == 2

    # The raw trace is also trace.dat, which trace-cmd reads back event for event.
    if shutil.which("trace-cmd"):
        import subprocess

        rep = subprocess.run(["trace-cmd", "report", "-i", str(run_dir / "trace.dat")], capture_output=True, text=True, timeout=60)
        assert rep.returncode == 0, rep.stderr
        text = (run_dir / "out" / "trace.main.txt").read_text()
        assert sum(" sched_" in ln for ln in rep.stdout.splitlines()) == sum(": sched_" in ln for ln in text.splitlines()) > 0

    out = tmp_path / "bug.tar.gz"
    r = CliRunner().invoke(main, ["report", "bundle", str(run_dir), "-o", str(out)])
    assert r.exit_code == 0, r.output
    # Nothing the run used outside lab stays: the bundle must carry it all.
    shutil.rmtree(work)
    shutil.rmtree(run_dir)

    # The bundle's scenario is code lab does not have: refused without --trust, naming the
    # file and its sha256, before anything boots.
    r = CliRunner().invoke(main, ["report", "replay", str(out), "--dir", str(tmp_path / "refused")])
    assert r.exit_code == 2 and "not one of lab's" in r.output and "--trust" in r.output, r.output
    assert re.search(r"sha256 [0-9a-f]{64}", r.output), r.output
    assert not list(runs.iterdir())  # nothing ran
    r = CliRunner().invoke(main, ["report", "replay", "--trust", str(out), "--dir", str(tmp_path / "opened")])
    assert r.exit_code == 0, r.output
    assert "the bundle's own scenario scenario/pinned_forks.py (sha256" in " ".join(r.output.split())
    assert "bundle PASS, now PASS (same verdict)" in r.stdout
    assert "PASS wakeup_new=2" in r.stdout.replace("\n", " ")
    assert max(map(len, r.stdout.splitlines())) <= 80  # the table pastes into a mail
    assert "replay:" in r.stderr  # progress goes to stderr
    new = [d for d in runs.iterdir() if d.name.endswith("-debian") and "pinned-forks" in d.name]
    assert len(new) == 1
    after = json.loads((new[0] / "results.json").read_text())
    assert after["status"] == before["status"] == "PASS"
    assert [e["figures"] for e in after["expectations"]] == [e["figures"] for e in before["expectations"]]
    assert after["topology"] == "tiny2s" and after["kernel"] == "debian"
    assert not qemu_running(str(new[0]))
    # The bundle renders as the run did.
    r = CliRunner().invoke(main, ["report", "render", str(out)])
    assert r.exit_code == 0 and "lab run pinned-forks on tiny2s: PASS" in r.output
