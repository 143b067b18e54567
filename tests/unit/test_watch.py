"""`lab run --kernel-tree --watch` waiting for changes, and what a failed build says.

The watch test runs lab for real on lab's fake kernel tree (tests/fixtures/fakelinux,
whose make fails on request): the build fails, lab shows the compiler's error, the
log and the verdict that stands, then waits without using the CPU until a file
changes, rebuilds, and stops on Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lab import iterate, watch
from lab.kernel import build

FAKE = Path(__file__).parent.parent / "fixtures" / "fakelinux"
ROOT = Path(__file__).resolve().parent.parent.parent


def test_watcher_wakes_on_a_change_and_not_on_scratch_files(tmp_path):
    (tmp_path / "kernel" / "sched").mkdir(parents=True)
    fair = tmp_path / "kernel" / "sched" / "fair.c"
    fair.write_text("int x;\n")
    with watch.Watcher(tmp_path) as w:
        assert w.mode == "inotify", w.why
        assert w.wait(timeout=0.3) == []  # a quiet tree: nothing to report
        (tmp_path / "kernel" / "sched" / ".fair.c.swp").write_text("vim")
        (tmp_path / "kernel" / "sched" / "4913").write_text("")
        assert w.wait(timeout=0.3) == []  # editor scratch is not a change
        fair.write_text("int y;\n")
        assert w.wait(timeout=5) == [str(fair)]
        # a directory made after the watch started is watched too
        (tmp_path / "kernel" / "new").mkdir()
        assert str(tmp_path / "kernel" / "new") in w.wait(timeout=5)
        (tmp_path / "kernel" / "new" / "x.c").write_text("")
        assert w.wait(timeout=5) == [str(tmp_path / "kernel" / "new" / "x.c")]


def test_wait_for_change_sees_a_change_made_before_it_began(tmp_path):
    f = tmp_path / "a.c"
    f.write_text("1")
    fp = iterate.fingerprint(tmp_path)
    f.write_text("22")  # changed while lab was busy building or booting
    t0 = time.monotonic()
    new, changed = watch.wait_for_change(tmp_path, lambda: iterate.fingerprint(tmp_path), fp)
    assert new != fp and changed == [] and time.monotonic() - t0 < 2


def test_compiler_errors_from_real_gcc(tmp_path):
    src = tmp_path / "kernel" / "sched" / "fair.c"
    src.parent.mkdir(parents=True)
    src.write_text("int ok(void) { return 0; }\nint broken(void)\n{\n\treturn nope;\n}\n")
    p = subprocess.run(["gcc", "-c", "kernel/sched/fair.c", "-o", "/dev/null"], cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    assert p.returncode != 0
    log = ["  CC      kernel/sched/core.o", "  CC      kernel/sched/fair.o", *p.stderr.splitlines(),
           "make[3]: *** [scripts/Makefile.build:250: kernel/sched/fair.o] Error 1", "make: *** [Makefile:2012: .] Error 2"]  # fmt: skip
    errs = build.compiler_errors(log)
    assert errs[0] == "kernel/sched/fair.c: In function 'broken':"
    assert errs[1].startswith("kernel/sched/fair.c:4:") and "error: 'nope' undeclared" in errs[1]
    assert any("return nope;" in e for e in errs)  # gcc's source line comes along
    assert not any(e.startswith(("  CC", "make")) for e in errs)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Output:
    """A process's output, line by line, as it comes.  A thread reads it: select() on the
    pipe says nothing is there once readline() has pulled several lines into its buffer,
    so waiting that way for the next line missed lines that had already arrived (lab
    prints its error, the log, the verdict kept and "watching" at once; a test process
    that got the CPU late read them in one go and then waited for "watching" in vain)."""

    def __init__(self, p: subprocess.Popen):
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(p.stdout,), daemon=True).start()

    def _pump(self, f) -> None:
        for line in f:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, timeout: float) -> str | None:
        """The next line within *timeout* seconds; None if none came (or the output ended)."""
        try:
            line = self.lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if line is not None:
            self.seen.append(line)
        return line

    def until(self, needle: str, timeout: float) -> str:
        """Lines until one contains *needle*."""
        deadline = time.monotonic() + timeout
        while (line := self.next(deadline - time.monotonic())) is not None:
            if needle in line:
                return line
        pytest.fail(f"no {needle!r} within {timeout:.0f}s; lab said:\n{''.join(self.seen)}")


# The deadlines below are hang guards, not what is tested.  A round (lab starting, a
# failed build of the fake tree, its report) takes under a second on an idle 2-core
# host and ~20 s with other VMs keeping the load at 5-10, so fixed deadlines of a few
# times the idle figure failed there.  The first round gets FIRST_ROUND; it is timed,
# and every later wait, for less work than a whole round, gets PACE times as long (and
# at least LATER_MIN): a host that slows down slows them all alike.
FIRST_ROUND = 300.0
PACE = 10
LATER_MIN = 30.0


@pytest.mark.parametrize("as_json", [False, True])
def test_watch_on_a_failing_tree(tmp_path, monkeypatch, fake_kernels, as_json):
    kdir, tree = fake_kernels()
    env = {**os.environ, "LAB_CACHE": str(tmp_path / "cache"), "LAB_KERNELS": str(kdir), "FAKE_FAIL": "1",
           "LAB_RUNS": str(tmp_path / "runs"), "COLUMNS": "200", "TERM": "dumb", "PYTHONPATH": str(ROOT),
           # The fake tree's make runs python3 twice a round: this interpreter, not a version
           # manager's shim in front of it (pyenv's starts some 30 shells and tools a call).
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}  # fmt: skip
    # A verdict from an earlier run on this tree, which the failed builds must leave standing.
    from lab import paths
    from lab.runner import RunOutcome

    monkeypatch.setenv("LAB_CACHE", env["LAB_CACHE"])
    monkeypatch.setattr(paths, "KERNELS", kdir)
    o = RunOutcome("llc-spread-pinned", "zen3-2s-mini", "k", "PASS", tmp_path / "runs" / "earlier")
    iterate.save_verdict(tree.resolve(), "x86_64", "fake", o, iterate.describe(tree))
    argv = [sys.executable, "-c", "from lab.cli import main; main()", "run", "llc-spread-pinned",
            "--topology", "zen3-2s-mini", "--kernel-tree", str(tree), "--recipe", "fake", "--watch"] + (["--json"] if as_json else [])  # fmt: skip
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    out = Output(p)

    def first_round() -> float:
        return t0 + FIRST_ROUND - time.monotonic()

    try:
        if as_json:  # the verdict stream on stdout says ERROR, with the verdict that stands
            doc = json.loads(out.until('{"status": "ERROR"', first_round()))
            assert "fake failure" in doc["message"] and doc["previous_verdict"]["status"] == "PASS"
        err = out.until("error:", first_round())
        # gcc's path into lab's mirror (../src/kernel/...) named as the developer's file
        assert f"make failed (exit 2) at {tree.resolve()}/kernel/sched/fair.c:1:1: error: fake failure; full log: " in err
        assert Path(err.rsplit("full log: ", 1)[1].strip()).is_file()
        out.until("previous verdict kept: PASS for llc-spread-pinned on zen3-2s-mini", first_round())
        out.until("watching", first_round())
        later = max(LATER_MIN, PACE * (time.monotonic() - t0))
        # Quiet: no rebuild and next to no CPU while nothing changes.
        cpu0 = _cpu_seconds(p.pid)
        line = out.next(3.0)
        assert line is None, line
        assert _cpu_seconds(p.pid) - cpu0 < 0.3
        fair = tree / "kernel" / "sched" / "fair.c"
        fair.write_text(fair.read_text() + "/* edit */\n")
        line = out.until("rebuilding:", later)
        assert "kernel/sched/fair.c" in line
        out.until("error:", later)
        out.until("previous verdict kept: PASS", later)
        out.until("watching", later)
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=later) == 3  # the last result: the build error
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
