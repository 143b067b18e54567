"""A full disk (or quota, read-only file system, folder not writable) is one line naming
the file and exit 3; files that matter are whole or absent; no temporary file stays."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_plan import _session  # tests/unit is on sys.path (pytest's "prepend" import mode)

from lab import atomic, iterate, session
from lab.backends import qemu
from lab.cli import main
from lab.errors import WriteError


def _no_room(*a, **kw):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_atomic_write_refused_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    f = tmp_path / "results.json"
    atomic.write_text(f, '{"status": "PASS"}', "the run's results")
    monkeypatch.setattr(os, "fsync", _no_room)  # the data reaches the disk at fsync or close
    with pytest.raises(WriteError) as e:
        atomic.write_text(f, '{"status": "FAIL"}', "the run's results")
    assert str(e.value) == f"cannot write the run's results {f}: No space left on device"
    assert json.loads(f.read_text()) == {"status": "PASS"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_atomic_write_keeps_other_errors(tmp_path):
    (tmp_path / "x.json").mkdir()
    with pytest.raises(IsADirectoryError):  # not the storage refusing: lab's bug, with its traceback
        atomic.write_text(tmp_path / "x.json", "{}", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # and no temporary left


def test_run_directory_that_cannot_get_its_plan_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS", str(tmp_path))
    s = _session()
    real = Path.write_bytes

    def full_for_plans(self, data, *a, **kw):  # the plan's temporary file, as lab.atomic names it
        if "plan.json" in self.name:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
        return real(self, data, *a, **kw)

    monkeypatch.setattr(Path, "write_bytes", full_for_plans)
    with pytest.raises(WriteError, match=r"cannot write the run's plan .*/plan.json: Disk quota exceeded"):
        session.open_run("boot", s)
    assert list(tmp_path.iterdir()) == []


def test_saved_verdict_refused_leaves_no_temporary(tmp_path, monkeypatch):
    from lab.kernel import build as kbuild

    monkeypatch.setattr(kbuild, "work_dir", lambda r: tmp_path / "work")
    monkeypatch.setattr(os, "fsync", _no_room)
    o = type("O", (), {"status": "PASS", "scenario": "s", "topology": "t", "kernel": "k", "run_dir": None})()
    with pytest.raises(WriteError, match="cannot write the tree's last verdict .*last-verdict.json"):
        iterate.save_verdict(tmp_path, "x86_64", None, o, {})
    assert list((tmp_path / "work").iterdir()) == []


def _boot_into(monkeypatch, tmp_path, fake_boot):
    monkeypatch.setenv("LAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr(session, "prepare", lambda topo, vm, **kw: _session(topo.name))
    monkeypatch.setattr(qemu, "boot", fake_boot)
    return CliRunner().invoke(main, ["boot", "xeon-2s22c-mini", "--", "true"])


def test_a_write_refused_anywhere_is_one_line_naming_the_file(tmp_path, monkeypatch):
    def boot(plan, kernel, run_dir, job, **kw):
        with open(run_dir / "results.tar", "wb") as f:
            f.write(b"x")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as write(2) says it: no file named

    r = _boot_into(monkeypatch, tmp_path, boot)
    assert r.exit_code == 3, r.output
    (run,) = (tmp_path / "runs").iterdir()
    assert r.stderr.splitlines()[-1] == f"lab: error: cannot write {run / 'results.tar'}: No space left on device"
    assert isinstance(r.exception, SystemExit)


def test_other_os_errors_still_show_as_the_bugs_they_are(tmp_path, monkeypatch):
    def boot(plan, kernel, run_dir, job, **kw):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    r = _boot_into(monkeypatch, tmp_path, boot)
    assert isinstance(r.exception, OSError) and r.exception.errno == errno.EBADF
    assert "lab: error" not in r.output


def test_a_refused_read_says_access_not_write(tmp_path, monkeypatch):
    def boot(plan, kernel, run_dir, job, **kw):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/srv/images/base.cpio")

    r = _boot_into(monkeypatch, tmp_path, boot)
    assert r.exit_code == 3
    assert r.stderr.splitlines()[-1] == "lab: error: cannot access /srv/images/base.cpio: Permission denied"


# A real full disk: a small tmpfs as LAB_RUNS (root only).


@contextlib.contextmanager
def _tmpfs(where: Path, options: str):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _boot_on(tmp_path, monkeypatch, options: str):
    """`lab boot` with its run directory on a tmpfs mounted with *options*."""
    with _tmpfs(tmp_path / "fs", options) as fs:
        monkeypatch.setenv("LAB_RUNS", str(fs))
        monkeypatch.setattr(session, "prepare", lambda topo, vm, **kw: _session(topo.name))
        r = CliRunner().invoke(main, ["boot", "xeon-2s22c-mini", "--", "true"])
        left = sorted(str(p.relative_to(fs)) for p in fs.rglob("*"))
    return r, left


def test_disk_full_at_the_plan(tmp_path, monkeypatch):
    # One page: the command file fits, the plan does not.
    r, left = _boot_on(tmp_path, monkeypatch, "size=4k")
    assert r.exit_code == 3, r.output
    assert isinstance(r.exception, SystemExit)
    (line,) = r.stderr.splitlines()
    assert line.startswith("lab: error: cannot write the run's plan ") and line.endswith(
        "/plan.json: No space left on device"
    ), line
    assert left == [], "a run directory without its plan, or a temporary file, was left behind"


def test_read_only_runs_folder(tmp_path, monkeypatch):
    r, left = _boot_on(tmp_path, monkeypatch, "ro,size=64k")
    assert r.exit_code == 3, r.output
    (line,) = r.stderr.splitlines()
    assert line.startswith("lab: error: cannot write a run directory ") and line.endswith(": Read-only file system")


def test_disk_full_at_the_initramfs_is_one_line(tmp_path, monkeypatch):
    # The command and plan fit, the 2 MB initramfs does not.
    r, left = _boot_on(tmp_path, monkeypatch, "size=64k")
    assert r.exit_code == 3, r.output
    assert isinstance(r.exception, SystemExit)
    line = r.stderr.splitlines()[-1]
    assert line.startswith("lab: error: cannot write ") and "initrd.cpio" in line, r.stderr
    assert line.endswith(": No space left on device")


def test_disk_full_at_the_initramfs_leaves_no_temporary(tmp_path, monkeypatch):
    r, left = _boot_on(tmp_path, monkeypatch, "size=64k")
    assert not [p for p in left if p.endswith(".tmp") or "/.tmp-" in p], left


def test_results_json_refused_is_one_line_and_keeps_the_last_record(tmp_path, monkeypatch):
    """results.json is rewritten at every stage of a run: a full disk then is one line
    naming it (it was an OSError with a traceback), and the record written before stays."""
    from lab import runner

    o = runner.RunOutcome("s", "t", "k", "RUNNING", tmp_path)
    runner.write_results(o, tmp_path, final=False)
    o.status = "PASS"
    monkeypatch.setattr(os, "fsync", _no_room)
    with pytest.raises(WriteError) as e:
        runner.write_results(o, tmp_path)
    assert str(e.value) == f"cannot write the run's results {tmp_path / 'results.json'}: No space left on device"
    assert json.loads((tmp_path / "results.json").read_text())["status"] == "RUNNING"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
