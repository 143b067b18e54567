"""trace.dat from a guest's raw ring-buffer pages (recorded from a real Debian-kernel
run: tests/fixtures/raw/): `trace-cmd report` reads it back, with the same events at
the same times on the same CPUs as the run's text trace."""

import shutil
import subprocess
from pathlib import Path

import pytest

from lab.errors import UserError
from lab.trace import tracedat
from lab.trace.parser import parse_file

RAW = Path(__file__).parent.parent / "fixtures" / "raw" / "pinned-forks-tiny-debian"


def _trace_cmd() -> str:
    exe = shutil.which("trace-cmd")
    if exe is None:
        pytest.skip("trace-cmd missing: apt-get install trace-cmd (scripts/setup.sh installs it)")
    return exe


def _events_of_report(text: str) -> list[tuple[int, str, str]]:
    out = []
    for line in text.splitlines():
        parts = line.split()
        cpu = next((p for p in parts if p.startswith("[") and p.endswith("]")), None)
        ev = next((p for p in parts if p.endswith(":") and p[:-1].startswith("sched_")), None)
        ts = next((p for p in parts if p.endswith(":") and p[:-1].replace(".", "").isdigit()), None)
        if cpu and ev and ts:
            out.append((int(cpu[1:-1]), ts[:-1], ev[:-1]))
    return sorted(out)


def test_trace_cmd_reads_it_back(tmp_path):
    exe = _trace_cmd()
    dat = tracedat.assemble(RAW / "trace.main.raw", tmp_path / "trace.dat")
    r = subprocess.run([exe, "report", "-i", str(dat)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "cpus=8" in r.stdout
    got = _events_of_report(r.stdout)
    want = sorted((e.cpu, f"{e.ts:.6f}", type(e).__name__) for e in parse_file(RAW / "trace.main.txt"))
    names = {"SchedSwitch": "sched_switch", "SchedWakeupNew": "sched_wakeup_new",
             "SchedMigrateTask": "sched_migrate_task", "SchedProcessExit": "sched_process_exit"}  # fmt: skip
    want = sorted((c, ts, names[n]) for c, ts, n in want)
    assert len(got) == 163 and got == want
    # Fields the text trace's parser knows come back from the binary events too.
    assert "stream:17" in r.stdout and "sched_wakeup_new" in r.stdout


def test_a_run_directory_gets_trace_dat(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RAW, run / "out")
    assert [p.name for p in tracedat.assemble_run(run)] == ["trace.dat"]
    head = (run / "trace.dat").read_bytes()[:12]
    assert head == b"\x17\x08\x44tracing6\x00"


def test_raw_dumps_it_cannot_use_are_refused(tmp_path):
    raw = tmp_path / "trace.main.raw"
    shutil.copytree(RAW / "trace.main.raw", raw)
    (raw / "page_size").write_text("banana\n")
    with pytest.raises(UserError, match="page_size: not a number"):
        tracedat.assemble(raw, tmp_path / "trace.dat")
    (raw / "page_size").write_text("4096\n")
    shutil.rmtree(raw / "events")
    with pytest.raises(UserError, match="no event formats"):
        tracedat.assemble(raw, tmp_path / "trace.dat")
    assert not (tmp_path / "trace.dat").exists()
