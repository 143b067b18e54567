"""`lab boot TOPO -- CMD`: the command's arguments reach the guest and its output
reaches lab's stdout and stderr byte for byte (CR, bytes that are not UTF-8)."""

from __future__ import annotations

import os
import subprocess

from click.testing import CliRunner
from test_plan import _session  # tests/unit is on sys.path (pytest's "prepend" import mode)

from lab import session
from lab.backends import qemu
from lab.cli import main
from lab.cli.vm import guest_script

OUT = b"a\r\nb\xff\n"
ERR = b"\xfe\r\nwarning: \xc3\x28\n"


def test_boot_passes_the_output_through_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.setattr(session, "prepare", lambda topo, vm, **kw: _session(topo.name))
    jobs = []

    def boot(plan, kernel, run_dir, job, **kw):
        jobs.append(job)
        out = run_dir / "out"
        out.mkdir()
        (out / "stdout").write_bytes(OUT)
        (out / "stderr").write_bytes(ERR)
        return qemu.BootResult(run_dir, out, [], "tcg", wall_s=1.0, ready_s=0.5, guest_ready_uptime=0.4, rc=5)

    monkeypatch.setattr(qemu, "boot", boot)
    r = CliRunner().invoke(main, ["boot", "xeon-2s22c-mini", "--", "printf", "a\\r\\nb\\377\\n"])
    assert r.exit_code == 5, r.output
    assert r.stdout_bytes == OUT
    assert ERR in r.stderr_bytes
    assert jobs[0].script == "#!/bin/sh\nprintf 'a\\r\\nb\\377\\n'\n"


def test_guest_script_keeps_every_argument_byte(tmp_path):
    raw = os.fsdecode(b"\xff\xfe bytes\n\n")  # how Python holds an argv word that is not UTF-8
    cmd = ["printf", "[%s]", "it's", "a b", "", raw, "\u00e9"]
    script = guest_script(cmd)
    script.encode()  # the guest's job file is UTF-8 text
    (tmp_path / "job.sh").write_text(script)
    got = subprocess.run(["sh", str(tmp_path / "job.sh")], capture_output=True, check=True).stdout
    assert got == b"[it's][a b][][\xff\xfe bytes\n\n][\xc3\xa9]"
