"""A verdict's runs side by side (issue 32 item 7): the same majority rule and the same
verdict as one run after another, never a run the sequential rule would not start, and
an interrupt reaches every run."""

from __future__ import annotations

import itertools
import threading
import time
from types import SimpleNamespace

import pytest

from lab import runner


def _outs(*statuses):
    return [runner.RunOutcome("s", "t", "k", st, None) for st in statuses]


def _sess():
    plan = SimpleNamespace(
        accel="tcg", tcg_threads="single", topo=SimpleNamespace(n_cpus=32, name="t")
    )
    return SimpleNamespace(plan=plan, topo=plan.topo, kernel=SimpleNamespace(name="k"))


def _replay(seq):
    """A run_once whose runs give *seq*'s statuses in start order."""
    it = iter(seq)
    return lambda s, sess, **kw: _outs(next(it))[0]


def _sequential(seq, of):
    """What one run after another takes: runs until the majority is decided."""
    outs = []
    for st in seq:
        if outs and runner.majority(outs, of).decided:
            break
        outs.extend(_outs(st))
    return outs


@pytest.mark.parametrize("of", [1, 3, 5])
@pytest.mark.parametrize("jobs", [1, 2, 3, 8])
def test_side_by_side_gives_the_sequential_verdict_and_never_more_runs(monkeypatch, of, jobs):
    """Every sequence of run results, in start order: the verdict is the sequential one,
    and the runs are at most the sequential runs (a run side by side that the sequential
    rule would not start happens only after an ERROR/SKIP/INCONCLUSIVE, which ends it)."""
    for seq in itertools.product(["PASS", "FAIL"], repeat=of):
        monkeypatch.setattr(runner, "run_once", _replay(seq))
        got = runner.run_verdict(SimpleNamespace(name="s"), _sess(), of, jobs=jobs)
        want = _sequential(seq, of)
        assert runner.majority(got, of) == runner.majority(want, of), seq
        assert [o.status for o in got] == [o.status for o in want], (seq, jobs)


def test_the_fewest_runs_that_could_decide():
    assert (
        runner.still_needed([], 3) == 2
        and runner.still_needed([], 5) == 3
        and runner.still_needed([], 1) == 1
    )
    assert runner.still_needed(_outs("PASS", "FAIL"), 3) == 1
    assert runner.still_needed(_outs("PASS", "PASS"), 3) == 0
    assert runner.still_needed(_outs("PASS", "FAIL", "FAIL"), 5) == 1
    assert runner.still_needed(_outs("PASS", "ERROR"), 3) == 0  # an ERROR ends it


def test_an_error_run_side_by_side_is_still_an_error(monkeypatch):
    monkeypatch.setattr(runner, "run_once", _replay(["PASS", "ERROR"]))
    got = runner.run_verdict(SimpleNamespace(name="s"), _sess(), 3, jobs=2)
    assert runner.majority(got, 3).status == "ERROR" and len(got) == 2


def test_how_many_side_by_side():
    sess = _sess()
    assert (
        runner.side_by_side(sess.plan, None, idle=1.95, host_cpus=2) == 2
    )  # two idle cores: two TCG guests
    assert (
        runner.side_by_side(sess.plan, None, idle=1.0, host_cpus=2) == 1
    )  # another guest holds a core
    assert runner.side_by_side(sess.plan, None, idle=0.2, host_cpus=2) == 1  # always at least one
    assert runner.side_by_side(sess.plan, 3, idle=0.0, host_cpus=2) == 3  # the user's --jobs
    mt = SimpleNamespace(accel="tcg", tcg_threads="multi", topo=SimpleNamespace(n_cpus=4))
    assert (
        runner.guest_cores(mt, host_cpus=2) == 2
        and runner.side_by_side(mt, None, idle=2.0, host_cpus=2) == 1
    )
    kvm = SimpleNamespace(accel="kvm", tcg_threads="multi", topo=SimpleNamespace(n_cpus=8))
    assert runner.side_by_side(kvm, None, idle=16.0, host_cpus=16) == 2


def test_idle_cpus_from_proc_stat():
    stats = iter(
        ["cpu  100 0 100 800 0 0 0 0\n", "cpu  150 0 150 1700 0 0 0 0\n"]
    )  # 100 busy of 1000
    assert runner.host_idle_cpus(
        read_stat=lambda: next(stats), sleep=lambda s: None, cpus=2
    ) == pytest.approx(1.8)
    assert runner.host_idle_cpus(read_stat=lambda: "garbage", sleep=lambda s: None, cpus=2) == 0.0


def test_an_interrupt_reaches_every_run_side_by_side(monkeypatch):
    """Ctrl-C while two runs go: each run gets the KeyboardInterrupt (as one run in the
    main thread does: its run directory says interrupted, its QEMU is stopped), then it
    goes on to the caller with each run's note."""
    started, stopped = threading.Barrier(3), []

    def run_once(s, sess, **kw):
        started.wait()
        try:
            while True:
                time.sleep(0.01)
        except KeyboardInterrupt as e:
            stopped.append(threading.current_thread().name)
            e.add_note(f"what was gathered is in run{len(stopped)}")
            raise

    monkeypatch.setattr(runner, "run_once", run_once)

    def interrupt_main():
        started.wait()
        time.sleep(0.1)
        import _thread

        _thread.interrupt_main()

    threading.Thread(target=interrupt_main, daemon=True).start()
    with pytest.raises(KeyboardInterrupt) as ei:
        runner.run_verdict(SimpleNamespace(name="s"), _sess(), 3, jobs=2)
    assert sorted(stopped) == ["lab-run-1", "lab-run-2"]
    assert sorted(ei.value.__notes__) == [
        "what was gathered is in run1",
        "what was gathered is in run2",
    ]


def test_a_run_s_own_error_is_raised_after_both_ended(monkeypatch):
    from lab.errors import UserError

    ended = []

    def run_once(s, sess, **kw):
        if threading.current_thread().name == "lab-run-1":
            raise UserError("a tool that cannot be packed")
        time.sleep(0.05)
        ended.append(1)
        return _outs("PASS")[0]

    monkeypatch.setattr(runner, "run_once", run_once)
    with pytest.raises(UserError, match="cannot be packed"):
        runner.run_verdict(SimpleNamespace(name="s"), _sess(), 3, jobs=2)
    assert ended == [1]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_each_run_side_by_side_knows_which_signal_stopped_it(monkeypatch, sig):
    """A run in a thread of its own cannot set signal handlers, so the main thread notes
    the signal for it: its run directory says "interrupted by SIGINT", as one run's does
    (CI on an idle host ran llc-spread-pinned's runs side by side and its run directories
    said "interrupted by KeyboardInterrupt")."""
    import os
    import signal

    started, seen = threading.Barrier(3), []

    def run_once(s, sess, *, caught, **kw):
        started.wait()
        try:
            while True:
                time.sleep(0.01)
        except KeyboardInterrupt:
            seen.append([signal.Signals(c).name for c in caught])
            raise

    monkeypatch.setattr(runner, "run_once", run_once)

    def send():
        started.wait()
        time.sleep(0.1)
        os.kill(os.getpid(), getattr(signal, sig))

    def as_interrupt(signum, frame):  # what lab.cli does with SIGTERM
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, as_interrupt)
    try:
        threading.Thread(target=send, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            runner.run_verdict(SimpleNamespace(name="s"), _sess(), 3, jobs=2)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert seen == [[sig], [sig]]


def test_runs_side_by_side_take_their_run_directories_in_start_order(monkeypatch):
    """The second run's directory is "<name>-2" even when it is ready first: CI saw run 2
    take the plain name, and a reader (and test_iterate_build) took "-2" for the later
    run.  Here run 1 is slow to open its directory; it still opens first."""
    from lab import session
    from lab.errors import UserError

    order = []

    def open_run(name, sess, record):
        me = threading.current_thread().name
        if me == "lab-run-1":
            time.sleep(0.3)
        order.append(me)
        raise UserError("stop here")  # the rest of a run is not this test's

    monkeypatch.setattr(session, "open_run", open_run)
    s = SimpleNamespace(name="s", skip_reason=lambda topo, kernel: None, record=lambda: {}, version=1)
    sess = _sess()
    sess.skip = None
    with pytest.raises(UserError, match="stop here"):
        runner.run_verdict(s, sess, 3, jobs=2)
    assert order == ["lab-run-1", "lab-run-2"]
