"""The parser's C fast path (lab/trace/_scan.c) gives exactly what its Python path gives:
the same events (type and every field), the same stats (counts, mismatches, unparsed
lines, lost events, first and last timestamps), on the kernel's own lines, on lines
with odd comms and numbers at their bounds, on every prefix of a line, and on
randomly damaged lines.  Both paths run on the same input; neither is the reference
for a hard-coded answer."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.limits import MAX_CPUS, MAX_NODES, MAX_PID, MAX_TRACE_LINE
from lab.trace import parser

pytestmark = pytest.mark.skipif(parser._fast is None, reason="the C fast path is not built (pip install -e . builds it)")


def both(text: str, only=None):
    """(events, stats) from the fast path and from the Python path, for *text*."""
    out = []
    for fast in (parser._fast, None):
        saved = parser._fast
        parser._fast = fast
        try:
            r = parser.TraceReader((), only, blocks=[text])
            evs = list(r)
        finally:
            parser._fast = saved
        out.append(([(type(e).__name__, tuple(e)) for e in evs], r.stats.to_dict()))
    return out


def same(text: str, only=None) -> None:
    (fe, fs), (pe, ps) = both(text, only)
    assert fe == pe, text[:2000]
    assert fs == ps, text[:2000]


COMMS = ["stream", "kworker/0:1-events", "perf-exec", "my prog", "a-1", "x", "<...>", "-", "a b-2 [3]", "sh", "0", "c" * 15, "d" * 64, "e" * 65]
NUMS = ["0", "1", "120", "-1", "-100", "999", "4096", str(MAX_CPUS - 1), str(MAX_CPUS), str(MAX_PID), str(MAX_PID + 1),
        "9999999", "12345678", "9999999999", "99999999999", "-", "1a", "", "007"]


def ctx(comm="bash", pid="412", cpu="001", flags="d..2.", ts="100.000100", tgid=None) -> str:
    t = f"({tgid:>7}) " if tgid is not None else ""
    f = f"{flags} " if flags else ""
    return f"{comm:>16}-{pid:<7} {t}[{cpu}] {f}{ts}: "


BODIES = {
    "sched_switch": "prev_comm={c} prev_pid={n} prev_prio={n} prev_state={s} ==> next_comm={c} next_pid={n} next_prio={n}",
    "sched_wakeup": "comm={c} pid={n} prio={n} target_cpu={n}",
    "sched_waking": "comm={c} pid={n} prio={n} success=1 target_cpu={n}",
    "sched_wakeup_new": "comm={c} pid={n} prio={n} target_cpu={n}",
    "sched_migrate_task": "comm={c} pid={n} prio={n} orig_cpu={n} dest_cpu={n}",
    "sched_move_numa": "pid={n} tgid={n} ngid={n} src_cpu={n} src_nid={n} dst_cpu={n} dst_nid={n}",
    "sched_swap_numa": "src_pid={n} src_tgid={n} src_ngid={n} src_cpu={n} src_nid={n} dst_pid={n} dst_tgid={n} dst_ngid={n} dst_cpu={n} dst_nid={n}",
    "sched_stick_numa": "pid={n} tgid={n} ngid={n} src_cpu={n} src_nid={n} dst_cpu={n} dst_nid={n}",
    "sched_process_fork": "comm={c} pid={n} child_comm={c} child_pid={n}",
    "sched_process_exit": "comm={c} pid={n} prio={n}",
    "sched_stat_runtime": "comm={c} pid={n} runtime={n} [ns]",
}


def fill(fmt: str, rng: random.Random, good: bool) -> str:
    out = []
    for part in fmt.split("{"):
        if "}" not in part:
            out.append(part)
            continue
        key, rest = part.split("}", 1)
        if key == "c":
            out.append(rng.choice(COMMS[:4]) if good else rng.choice(COMMS))
        elif key == "s":
            out.append(rng.choice(["S", "R", "R+", "D|K", "I"] if good else ["S", "", "x" * 32, "x" * 33, "R+ R"]))
        else:
            out.append(str(rng.randrange(0, 64)) if good else rng.choice(NUMS))
        out.append(rest)
    return "".join(out)


def lines(rng: random.Random, n: int, good_share: float) -> list[str]:
    out = []
    for _ in range(n):
        name = rng.choice(list(BODIES))
        good = rng.random() < good_share
        c = ctx(
            comm=rng.choice(COMMS[:4] if good else COMMS),
            pid=str(rng.randrange(0, 5000)) if good else rng.choice(NUMS),
            cpu=f"{rng.randrange(0, 64):03d}" if good else rng.choice(NUMS),
            flags=rng.choice(["d..2.", "dNh1.", "d.h1", "", "...."] + ([] if good else ["x" * 17])),
            ts=rng.choice(["100.000100", "5.1", "123", "1" * 20 + ".5"] + ([] if good else ["1" * 21, "1.1234567890123", "1.", ".5"])),
            tgid=rng.choice([None, None, "1000", "-------"] + ([] if good else ["12345678"])),
        )
        out.append(c + name + ": " + fill(BODIES[name], rng, good))
    return out


def test_well_formed_lines():
    rng = random.Random(7)
    text = "\n".join(lines(rng, 3000, 1.0)) + "\n"
    same(text)
    same(text, only={"sched_switch", "sched_wakeup"})
    assert both(text)[0][1]["total_events"] == 3000


def test_the_bench_trace(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import bench_parser

    p = tmp_path / "t.txt"
    bench_parser.generate(p, 20000)
    text = p.read_text()
    same(text)
    (_, fs), _ = both(text)
    assert fs["total_events"] == 20000 and fs["lost_events"] == 17 and not fs["unparsed_lines"]
    # The fast path took every event line; only the header and the LOST marker came back.
    kinds = parser._fast.KINDS
    classes = tuple(parser.EVENT_CLASSES[k] for k in kinds)
    counts: dict = {}
    _, fallback, n, _, _ = parser._fast.scan(text, classes, (True,) * len(kinds), counts, MAX_CPUS, MAX_PID, MAX_NODES, MAX_TRACE_LINE)
    assert n == 20005 and sum(counts.values()) == 20000
    assert [line for _, _, line in fallback] == [
        "# tracer: nop\n", "#\n", "# entries-in-buffer/entries-written: 20000/20000   #P:16\n", "#\n", "CPU:3 [LOST 17 EVENTS]\n"
    ]


@pytest.mark.parametrize("seed", range(8))
def test_damaged_lines(seed):
    rng = random.Random(seed)
    base = lines(rng, 400, 0.5)
    damaged = []
    for line in base:
        chars = list(line)
        for _ in range(rng.randrange(0, 4)):
            i = rng.randrange(0, len(chars) + 1)
            op = rng.random()
            if op < 0.4 and chars:
                del chars[min(i, len(chars) - 1)]
            elif op < 0.8:
                chars.insert(i, rng.choice(" -=:[]()0123456789x\t.>"))
            else:
                chars[min(i, len(chars) - 1) if chars else 0:] = []
        damaged.append("".join(chars))
    extras = ["CPU:3 [LOST 17 EVENTS]", "CPU:1 [LOST EVENTS]", "# entries-in-buffer/entries-written: 5/9   #P:4", "#", "",
              "   ", "##### CPU 2 buffer started ####", "\t", "x" * (MAX_TRACE_LINE + 5), " " * (MAX_TRACE_LINE + 1)]
    for k, extra in enumerate(extras):
        damaged[k * 37] = extra
    same("\n".join(damaged) + "\n")
    same("\n".join(damaged))  # the last line without its newline
    (events, stats), _ = both("\n".join(damaged))
    typed = [e for e in events if e[0] != "GenericEvent"]
    assert len(typed) > 30 and stats["mismatched"] and stats["unparsed_lines"]  # every kind of outcome


def test_every_prefix_of_every_line():
    rng = random.Random(1)
    for line in lines(rng, 40, 0.7):
        same("\n".join(line[:i] for i in range(len(line) + 1)) + "\n")


def test_bounds():
    for cpu in ("0", str(MAX_CPUS - 1), str(MAX_CPUS), "99999", "100000"):
        for pid in ("0", str(MAX_PID), str(MAX_PID + 1), "9999999", "10000000"):
            for nid in ("-1", "0", str(MAX_NODES - 1), str(MAX_NODES), "-2"):
                same(
                    ctx(cpu=cpu, pid=pid) + f"sched_move_numa: pid={pid} tgid=1 ngid=0 src_cpu={cpu} src_nid={nid} dst_cpu=-1 dst_nid=0\n"
                    + ctx(tgid=pid) + f"sched_wakeup: comm=a pid={pid} prio=-{pid} target_cpu={cpu}\n"
                )


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" -=:[]()0123456789abcdx_.>\t|<", max_size=200), st.sampled_from(sorted(BODIES)))
def test_arbitrary_text_after_a_context(body, name):
    same(ctx() + name + ": " + body + "\n" + ctx(comm=body[:20]) + name + ": " + body + "\n")


def test_non_ascii_blocks_take_the_python_path():
    text = ctx(comm="bä") + "sched_process_exit: comm=ü pid=2 prio=120\n" + ctx() + "sched_process_exit: comm=b pid=2 prio=120\n"
    same(text)
    assert len(both(text)[0][0]) == 2
