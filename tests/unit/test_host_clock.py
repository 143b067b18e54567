"""Deadlines in host time: a busy host stretches them by the share of its CPUs other
work took; a quiet one leaves them as wall time; never beyond 1/MIN_SHARE."""

import pytest

from lab import host


def stat(busy: int, idle: int, steal: int = 0) -> str:
    # cpu user nice system idle iowait irq softirq steal
    return f"cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 ...\n"


class Fake:
    """A host whose counters advance by what each step says."""

    def __init__(self):
        self.t, self.busy, self.idle, self.steal, self.ours = 0.0, 0, 0, 0, 0

    def step(self, seconds: float, *, ours: int, others: int, idle: int, steal: int = 0):
        self.t += seconds
        self.busy += ours + others
        self.idle += idle
        self.steal += steal
        self.ours += ours

    def clock(self, **kw):
        return host.HostClock(
            1, read_stat=lambda: stat(self.busy, self.idle, self.steal), read_proc=lambda pid: self.ours,
            clock=lambda: self.t,
        )  # fmt: skip


def test_quiet_host_runs_with_the_wall_clock():
    f = Fake()
    c = f.clock()
    for _ in range(10):
        f.step(1.0, ours=150, others=10, idle=40)  # 2 CPUs x 100 ticks: lab's guest has most of it
        c.tick()
    assert c.host_s == pytest.approx(9.5)
    assert c.describe() == ""


def test_a_busy_host_stretches_the_deadline():
    f = Fake()
    c = f.clock()
    for _ in range(10):
        f.step(1.0, ours=100, others=100, idle=0)  # another guest holds one of the two CPUs
        c.tick()
    assert c.host_s == pytest.approx(5.0)
    assert c.describe() == " of host time (10s wall: other work held the host's CPUs 50% of the time)"


def test_stolen_time_counts_as_taken_and_the_stretch_is_bounded():
    f = Fake()
    c = f.clock()
    f.step(10.0, ours=0, others=0, idle=0, steal=2000)
    assert c.tick() == pytest.approx(10.0 * host.MIN_SHARE)


def test_unreadable_proc_falls_back_to_wall_time():
    t = [0.0]
    c = host.HostClock(1, read_stat=lambda: "garbage", read_proc=lambda pid: 0, clock=lambda: t[0])
    t[0] = 3.0
    assert c.tick() == pytest.approx(3.0)


def test_a_real_process_is_measured():
    import os

    c = host.HostClock(os.getpid())
    assert 0.0 <= c.tick() <= c.wall_s + 1e-6


def test_no_pid_is_the_wall_clock_however_busy_this_host():
    """A guest on another host (libvirt over ssh): this host's load says nothing about it."""
    f = Fake()
    c = host.HostClock(None, read_stat=lambda: stat(f.busy, f.idle), read_proc=lambda pid: 0, clock=lambda: f.t)
    for _ in range(10):
        f.step(1.0, ours=0, others=200, idle=0)
        c.tick()
    assert c.host_s == pytest.approx(10.0)
    assert c.describe() == ""
