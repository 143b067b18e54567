"""The ftrace text parser: seed 000's lines, every event type, lost events, odd comms."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.trace import (
    GenericEvent,
    SchedMigrateTask,
    SchedMoveNuma,
    SchedProcessExit,
    SchedProcessFork,
    SchedStickNuma,
    SchedSwapNuma,
    SchedSwitch,
    SchedWakeup,
    SchedWakeupNew,
    SchedWaking,
    parse,
    parse_file,
    parse_line,
)
from lab.trace.parser import BATCH_LINES

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"


# ---- seed 000 ------------------------------------------------------------------------------


def test_seed000_tip_lines():
    reader = parse_file(TRACES / "seed000-tip.txt")
    events = list(reader)
    assert [type(e) for e in events] == [SchedWakeupNew] * 7
    first = events[0]
    assert (first.cpu, first.comm, first.pid, first.flags) == (16, "stream", 5313, "d..2.")
    assert first.ts == pytest.approx(627.005036)
    assert (first.task_comm, first.task_pid, first.prio) == ("stream", 5315, 120)
    assert [e.task_pid for e in events] == list(range(5315, 5322))
    # target_cpu is printed %03d: '032' is CPU 32, '000' is CPU 0
    assert [e.target_cpu for e in events] == [32, 48, 0, 16, 16, 16, 16]
    assert reader.stats.events == {"sched_wakeup_new": 7}
    assert reader.stats.lost_events == 0 and not reader.stats.lossy
    assert reader.stats.unparsed_lines == 0
    assert reader.stats.first_ts == pytest.approx(627.005036)
    assert reader.stats.last_ts == pytest.approx(627.005295)


def test_seed000_fixed_lines():
    events = list(parse_file(TRACES / "seed000-fixed.txt"))
    assert [e.target_cpu for e in events] == [32, 48, 0, 112, 96, 80, 64]
    assert {e.pid for e in events} == {4485}


# ---- every event type -----------------------------------------------------------------------


def test_all_event_types_from_trace_file():
    reader = parse_file(TRACES / "all-events.txt")
    ev = list(reader)
    assert [e.name for e in ev] == [
        "sched_process_fork",
        "sched_wakeup_new",
        "sched_switch",
        "sched_waking",
        "sched_wakeup",
        "sched_switch",
        "sched_migrate_task",
        "sched_move_numa",
        "sched_swap_numa",
        "sched_stick_numa",
        "sched_process_exit",
        "sched_process_free",
        "sched_switch",
    ]
    fork, wnew, sw1, waking, wakeup, sw2, mig, move, swap, stick, exit_, free, sw3 = ev

    assert fork == SchedProcessFork(
        1, 100.0001, "bash", 412, None, "d..2.", "bash", 412, "bash", 500
    )
    assert wnew == SchedWakeupNew(1, 100.00015, "bash", 412, None, "d..2.", "bash", 500, 120, 2)
    assert sw1 == SchedSwitch(
        2, 100.0002, "<idle>", 0, None, "dNh2.", "swapper/2", 0, 120, "R", "bash", 500, 120
    )
    assert sw1.preempted
    assert type(waking) is SchedWaking and isinstance(waking, SchedWakeup)
    assert (waking.comm, waking.task_comm, waking.task_pid, waking.target_cpu) == (
        "kworker/0:1",
        "perf-exec",
        501,
        3,
    )
    assert type(wakeup) is SchedWakeup
    assert (sw2.prev_state, sw2.next_comm, sw2.next_pid, sw2.next_prio) == (
        "D|K",
        "my prog",
        502,
        139,
    )
    assert not sw2.preempted
    assert mig == SchedMigrateTask(
        3, 100.0005, "my prog", 502, None, "d..2.", "my prog", 502, 139, 3, 0
    )
    assert move == SchedMoveNuma(2, 100.001, "stream", 600, None, "d..2.", 600, 600, 0, 2, 1, 0, 0)
    assert swap == SchedSwapNuma(
        3, 100.002, "stream", 601, None, "d..2.", 601, 600, 600, 3, 1, 700, 700, 0, 1, 0
    )
    assert stick == SchedStickNuma(
        3, 100.003, "stream", 602, None, "d..2.", 602, 600, 600, 3, 1, 0, 0, 0, -1, -1
    )
    assert exit_ == SchedProcessExit(2, 100.004, "bash", 500, None, "d..2.", "bash", 500, 120)
    assert isinstance(free, GenericEvent)
    assert free.fields() == {"comm": "bash", "pid": "500", "prio": "120"}
    assert (sw3.prev_state, sw3.next_pid) == ("X", 0)

    s = reader.stats
    assert s.lost_markers == 2
    assert s.lost_events == 5  # the second marker has no count
    assert s.lost_unknown == 1
    assert s.lost_by_cpu == {2: 5}
    assert s.lossy
    assert (s.entries_in_buffer, s.entries_written, s.header_cpus, s.overwritten) == (15, 15, 4, 0)
    assert s.total_events == 13
    assert s.events["sched_switch"] == 3
    assert s.unparsed_lines == 0
    assert s.lines == 12 + 15


def test_trace_pipe_with_tgid_column_and_odd_comms():
    ev = list(parse_file(TRACES / "pipe-tgid.txt"))
    a, b, c, d = ev
    assert (a.comm, a.pid, a.tgid, a.cpu) == ("kworker/0:1-events", 45, 45, 0)
    assert (b.comm, b.pid, b.tgid) == ("<...>", 123, None)  # '(-------)': tgid unknown
    assert b.prev_comm == "<...>"
    assert (c.flags, c.tgid, c.orig_cpu, c.dest_cpu) == ("", 14, 1, 1023)  # irq-info off
    assert (d.cpu, d.flags, d.tgid, d.target_cpu) == (1023, "dN.h2", 899, 1022)
    assert d.ts == pytest.approx(5012.1237)


@pytest.mark.parametrize(
    "line, comm, pid",
    [
        (
            "       perf-exec-77      [000] d..2.   1.000001: sched_process_exit: comm=x pid=1 prio=1",
            "perf-exec",
            77,
        ),
        ("a-1-2 [000] d..2. 1.000001: sched_process_exit: comm=x pid=1 prio=1", "a-1", 2),
        ("  my - prog-3   [000] 1.5: sched_process_exit: comm=x pid=1 prio=1", "my - prog", 3),
        ("-5 [000] 1.5: sched_process_exit: comm=x pid=1 prio=1", "", 5),
    ],
)
def test_comm_with_dashes_and_spaces(line, comm, pid):
    ev = parse_line(line)
    assert ev is not None
    assert (ev.comm, ev.pid) == (comm, pid)


def test_irq_info_of_other_widths_and_integer_timestamps():
    old = parse_line("  sh-9  [002] d.h1 12.5: sched_wakeup: comm=a pid=3 prio=100 target_cpu=001")
    assert old is not None and old.flags == "d.h1" and old.target_cpu == 1
    wide = parse_line("  sh-9  [002] dNhs2.X 7: sched_wakeup: comm=a pid=3 prio=-1 target_cpu=1")
    assert wide is not None and wide.flags == "dNhs2.X" and wide.ts == 7.0 and wide.prio == -1
    # counter/x86-tsc clocks print a bare integer
    tsc = parse_line("  sh-9  [002] d..2. 123456789012: sched_process_exit: comm=a pid=3 prio=1")
    assert tsc is not None and tsc.ts == 123456789012.0


def test_old_sched_stick_numa_format():
    # Before the pair template, sched_stick_numa printed sched_move_numa's fields.
    ev = parse_line(
        " t-5 [001] d..2. 3.0: sched_stick_numa: pid=5 tgid=4 ngid=4 src_cpu=1 src_nid=0 dst_cpu=-1 dst_nid=-1"
    )
    assert isinstance(ev, SchedStickNuma)
    assert (ev.src_pid, ev.src_tgid, ev.src_ngid, ev.src_cpu, ev.src_nid) == (5, 4, 4, 1, 0)
    assert (ev.dst_pid, ev.dst_cpu, ev.dst_nid) == (0, -1, -1)


def test_old_sched_wakeup_success_field():
    ev = parse_line(
        " t-5 [001] d..2. 3.0: sched_wakeup: comm=x pid=6 prio=120 success=1 target_cpu=002"
    )
    assert isinstance(ev, SchedWakeup) and ev.target_cpu == 2


def test_known_event_with_unexpected_body_is_counted_and_skipped():
    # Yielded as a GenericEvent named sched_switch, it reached a scenario's check() as an
    # AttributeError (no prev_pid): a known event is typed or not yielded at all.
    reader = parse([" t-5 [001] d..2. 3.0: sched_switch: something else entirely"])
    assert list(reader) == []
    assert reader.stats.mismatched == {"sched_switch": 1}
    assert reader.stats.events == {"sched_switch": 1}


def test_unparsed_lines_are_counted_with_samples():
    lines = ["garbage\n", "\n", "   \n", "CPU:x [LOST 3 EVENTS]\n"] + [
        f"junk {i}\n" for i in range(30)
    ]
    reader = parse(lines)
    assert list(reader) == []
    assert reader.stats.unparsed_lines == 32
    assert reader.stats.unparsed_samples[0] == "garbage"
    assert len(reader.stats.unparsed_samples) == 20
    assert reader.stats.lost_markers == 0


def test_overwritten_entries_and_buffer_started_make_trace_lossy():
    reader = parse(
        [
            "# entries-in-buffer/entries-written: 100/250   #P:8\n",
            "##### CPU 3 buffer started ####\n",
        ]
    )
    list(reader)
    assert reader.stats.overwritten == 150
    assert reader.stats.buffer_started == {3}
    assert reader.stats.lossy


def test_crlf_and_no_trailing_newline():
    ev = list(
        parse(
            [
                " a-1 [000] d..2. 1.0: sched_process_exit: comm=b pid=2 prio=3\r\n",
                " a-1 [000] 2.0: x: y",
            ]
        )
    )
    assert isinstance(ev[0], SchedProcessExit) and ev[0].prio == 3
    assert isinstance(ev[1], GenericEvent) and ev[1].body == "y"


def test_only_skips_building_but_counts():
    reader = parse_file(TRACES / "all-events.txt", only={"sched_switch"})
    ev = list(reader)
    assert [e.name for e in ev] == ["sched_switch"] * 3
    assert reader.stats.total_events == 13
    assert reader.stats.last_ts == pytest.approx(100.0042)


# ---- streaming ------------------------------------------------------------------------------


def test_streaming_reads_at_most_one_batch_ahead():
    line = " a-1 [000] d..2. 1.0: sched_process_exit: comm=b pid=2 prio=3\n"
    consumed = 0

    def endless():
        nonlocal consumed
        for _ in itertools.count():
            consumed += 1
            yield line

    reader = parse(endless())
    first = list(itertools.islice(reader, 5))
    assert len(first) == 5
    # Lines are taken in batches for the fast path: at most one batch ahead, counted whole.
    assert 5 <= consumed <= BATCH_LINES
    reader.close()
    assert reader.stats.lines == consumed
    assert reader.stats.events == {"sched_process_exit": consumed}


def test_parse_file_gz(tmp_path):
    raw = (TRACES / "seed000-tip.txt").read_bytes()
    gz = tmp_path / "trace.txt.gz"
    gz.write_bytes(gzip.compress(raw))
    assert [e.target_cpu for e in parse_file(gz)] == [32, 48, 0, 16, 16, 16, 16]


def test_non_utf8_comm_is_replaced(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b" \xff\xfeab-7 [000] d..2. 1.0: sched_process_exit: comm=\xff pid=7 prio=120\n")
    (ev,) = list(parse_file(p))
    assert ev.pid == 7 and "\ufffd" in ev.comm


def test_events_are_frozen_and_equal_to_normally_built_ones():
    ev = parse_line(" a-1 [000] d..2. 1.0: sched_process_exit: comm=b pid=2 prio=3")
    with pytest.raises(AttributeError):
        ev.pid = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ev.other = 5  # type: ignore[attr-defined]  # no __dict__: a tuple with named fields
    assert ev == SchedProcessExit(0, 1.0, "a", 1, None, "d..2.", "b", 2, 3)
    assert hash(ev) == hash(SchedProcessExit(0, 1.0, "a", 1, None, "d..2.", "b", 2, 3))
    assert ev.to_dict()["event"] == "sched_process_exit"


# ---- round trip: lines formatted the way the kernel prints them parse back ------------------

COMM = st.text(alphabet="abcxyz09-/:._<> ", min_size=1, max_size=15).map(str.strip).filter(bool)
PID = st.integers(0, 4194304)
CPU = st.integers(0, 4095)


def _ctx(comm, pid, cpu, flags, usecs, tgid):
    s = f"{comm:>16}-{pid:<7} "
    if tgid is not None:
        s += f"({tgid:>7}) "
    s += f"[{cpu:03d}] "
    if flags:
        s += flags + " "
    return s + f" {usecs // 1_000_000:5d}.{usecs % 1_000_000:06d}: "


@given(
    comm=COMM,
    pid=PID,
    cpu=CPU,
    flags=st.sampled_from(["", "d..2.", "dNh1", "....", "Dnhs3.X"]),
    usecs=st.integers(0, 10**12),
    tgid=st.none() | PID,
    prev=COMM,
    nxt=COMM,
    ppid=PID,
    npid=PID,
    state=st.sampled_from(["R", "R+", "S", "D", "D|K", "I", "X", "Z"]),
)
def test_round_trip_sched_switch(comm, pid, cpu, flags, usecs, tgid, prev, nxt, ppid, npid, state):
    line = _ctx(comm, pid, cpu, flags, usecs, tgid) + (
        f"sched_switch: prev_comm={prev} prev_pid={ppid} prev_prio=120 prev_state={state} ==> "
        f"next_comm={nxt} next_pid={npid} next_prio=100\n"
    )
    ev = parse_line(line)
    assert isinstance(ev, SchedSwitch), line
    assert (ev.comm, ev.pid, ev.cpu, ev.flags, ev.tgid) == (comm, pid, cpu, flags, tgid)
    assert ev.ts == pytest.approx(usecs / 1e6, abs=1e-6)
    assert (ev.prev_comm, ev.prev_pid, ev.prev_state) == (prev, ppid, state)
    assert (ev.next_comm, ev.next_pid, ev.next_prio) == (nxt, npid, 100)


@given(comm=COMM, pid=PID, cpu=CPU, wakee=COMM, wpid=PID, target=CPU, new=st.booleans())
def test_round_trip_wakeup(comm, pid, cpu, wakee, wpid, target, new):
    name = "sched_wakeup_new" if new else "sched_wakeup"
    line = _ctx(comm, pid, cpu, "d..2.", 1, None) + (
        f"{name}: comm={wakee} pid={wpid} prio=120 target_cpu={target:03d}"
    )
    ev = parse_line(line)
    assert type(ev) is (SchedWakeupNew if new else SchedWakeup)
    assert (ev.comm, ev.pid, ev.cpu, ev.task_comm, ev.task_pid, ev.target_cpu) == (
        comm,
        pid,
        cpu,
        wakee,
        wpid,
        target,
    )
