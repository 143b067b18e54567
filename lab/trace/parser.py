"""Streaming parser for the ftrace text format.

Reads what /sys/kernel/tracing/trace or trace_pipe print (6.1's
trace_print_context(): ``%16s-%-7d [(%7d) ][%03d] [irq-info ] %5lu.%06lu: name: body``),
with or without the ``# tracer:`` header, one line at a time, so memory does
not grow with the trace.  Lines that are not events are accounted for in
``TraceStats`` instead of being silently dropped: the ``CPU:N [LOST n EVENTS]``
markers (the ring buffer overflowed; a run with any is not trustworthy), the
header's entries-in-buffer/entries-written (overwritten events), and any
line that could not be parsed.

What the parser yields is typed and in range: a line whose context cannot be read
(or is longer than limits.MAX_TRACE_LINE, or names a CPU past MAX_CPUS) is counted in
``unparsed_lines``; a known event whose body does not decode into its fields is
counted in ``mismatched`` and skipped, never yielded half-built.  Only events lab has
no class for come out as ``GenericEvent``.

Two paths, one result.  The fast path (lab/trace/_scan.c, a C extension built by
``pip install``) takes blocks of whole lines and builds the typed events of the lines
it is sure of, exactly as the patterns below would; every other line (headers, LOST
markers, unknown events, mismatched bodies, values out of range, non-ASCII text) comes
back to the Python path, which does all the accounting.  Without the extension every
line takes the Python path (bench/bench_parser.py gives both rates).  Memory is bounded
either way: the file is read in blocks of BLOCK_CHARS characters, a line longer than
limits.MAX_TRACE_LINE is cut there and counted as unparsed.
"""

from __future__ import annotations

import gzip
import io
import lzma
import re
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..limits import MAX_COMM, MAX_CPUS, MAX_NODES, MAX_PID, MAX_TRACE_LINE, open_regular
from .events import (
    EVENT_CLASSES,
    Event,
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
    fast_constructor,
)

_fast: Any
try:  # the C fast path (setup.py builds it; optional)
    from . import _scan as _fast  # type: ignore[attr-defined, no-redef]
except ImportError:  # pragma: no cover - a build without a C compiler
    _fast = None

BLOCK_CHARS = 1 << 20  # the file is read this much at a time
BATCH_LINES = 4096  # parse(lines) hands the fast path this many lines at a time

# Every pattern below is linear in the line, whatever the line holds (issue 13).  A
# comm may hold spaces, so its end is found by looking for the next key; that search is
# bounded to MAX_COMM characters ('(.{0,64}?)'), so it cannot run to the end of the line
# once per earlier candidate.  Unbounded ('(.*?) prev_pid=... next_comm=(.*?)'), a
# 400 KB sched_switch or sched_process_fork line took tens of seconds; ' *(.*?)-' at the
# start of the context took seconds on 40 KB of spaces (the spaces were given back one at
# a time and the comm rescanned after each; both timed by hand, not kept), hence the
# possessive ' *+'.  Numbers have
# at most as many digits as their field can need, so int() never sees thousands of
# them; their ranges are checked after the match (_cpu_ok, _pid_ok, ...).  re.ASCII: \d is 0-9.
_C = rf"(.{{0,{MAX_COMM}}}?)"  # a comm
_PID = r"(\d{1,7})"  # PID_MAX_LIMIT is 4194304
_NUM = r"(-?\d{1,10})"  # prio, ngid, nid, cpu where the kernel prints %d

# The context part of a line.  The comm is right-aligned in 16 columns and may
# itself hold spaces and dashes ('kworker/0:1-events', 'perf-exec'); the lazy
# match stops at the last '-<digits>' that is followed by the tgid or CPU
# column, so 'perf-exec-123  [001]' gives comm 'perf-exec', pid 123.  The
# irq-info column ('d..2.', 'dNh1.', older kernels' 4-wide 'd.h1') is optional
# because the irq-info trace option can turn it off; it never holds ':' so it
# cannot swallow the timestamp.  Timestamps are 'secs.usecs' for the
# nanosecond clocks and a bare integer for counter/tsc clocks.
_LINE = re.compile(
    rf" *+{_C}-{_PID} +(?:\( *(\d{{1,7}}|-+)\) +)?\[(\d{{1,5}})\] +(?:([^ :]{{1,16}}) +)?"
    r"(\d{1,20}(?:\.\d{1,12})?): (\w{1,128}):(?: |$)",
    re.ASCII,
)
_LOST = re.compile(r"CPU:(\d{1,5}) \[LOST (?:(\d{1,20}) )?EVENTS\]", re.ASCII)
_ENTRIES = re.compile(r"# entries-in-buffer/entries-written: (\d{1,20})/(\d{1,20}) +#P:(\d{1,5})", re.ASCII)
_STARTED = re.compile(r"##### CPU (\d{1,5}) buffer started ####", re.ASCII)

# Body formats (include/trace/events/sched.h, 6.1).  Comms are matched lazily up to
# the next key, so a comm holding spaces still parses.  A final number ends at a space
# or the line's end, (?!\S): 'target_cpu=12345678' is not CPU 1234, 'child_pid=5x' not 5.
_WAKEUP = re.compile(
    rf"comm={_C} pid={_PID} prio={_NUM}(?: success=\d{{1,10}})? target_cpu=(\d{{1,5}})(?!\S)", re.ASCII
)
_SWITCH = re.compile(
    rf"prev_comm={_C} prev_pid={_PID} prev_prio={_NUM} prev_state=(\S{{1,32}}) ==> "
    rf"next_comm={_C} next_pid={_PID} next_prio={_NUM}(?!\S)",
    re.ASCII,
)
_MIGRATE = re.compile(
    rf"comm={_C} pid={_PID} prio={_NUM} orig_cpu=(\d{{1,5}}) dest_cpu=(\d{{1,5}})(?!\S)", re.ASCII
)
_MOVE_NUMA = re.compile(
    rf"pid={_PID} tgid={_PID} ngid={_PID} src_cpu={_NUM} src_nid={_NUM} dst_cpu={_NUM} dst_nid={_NUM}(?!\S)",
    re.ASCII,
)
_NUMA_PAIR = re.compile(
    rf"src_pid={_PID} src_tgid={_PID} src_ngid={_PID} src_cpu={_NUM} src_nid={_NUM} "
    rf"dst_pid={_PID} dst_tgid={_PID} dst_ngid={_PID} dst_cpu={_NUM} dst_nid={_NUM}(?!\S)",
    re.ASCII,
)
_FORK = re.compile(rf"comm={_C} pid={_PID} child_comm={_C} child_pid={_PID}(?!\S)", re.ASCII)
_EXIT = re.compile(rf"comm={_C} pid={_PID} prio={_NUM}(?!\S)", re.ASCII)

_UNPARSED_SAMPLES = 20  # keep a few bad lines for the error message, not all of them
_SAMPLE_CHARS = 200  # and only their start


def _cpu_ok(c: int) -> bool:
    return 0 <= c < MAX_CPUS


def _cpu_or_none_ok(c: int) -> bool:
    """NUMA events print -1 for 'no CPU' / 'no node'."""
    return -1 <= c < MAX_CPUS


def _nid_ok(n: int) -> bool:
    return -1 <= n < MAX_NODES


def _pid_ok(p: int) -> bool:
    return p <= MAX_PID


@dataclass
class TraceStats:
    """What the parser saw besides events.  Complete once iteration has finished."""

    lines: int = 0
    events: Counter[str] = field(default_factory=Counter)
    lost_events: int = 0  # sum of the n in 'CPU:N [LOST n EVENTS]'
    lost_markers: int = 0  # number of LOST lines, including those without a count
    lost_unknown: int = 0  # 'CPU:N [LOST EVENTS]' lines: the kernel could not count them
    lost_by_cpu: Counter[int] = field(default_factory=Counter)
    entries_in_buffer: int | None = None  # from the '# entries-in-buffer/...' header
    entries_written: int | None = None
    header_cpus: int | None = None  # '#P:N' in that header
    buffer_started: set[int] = field(default_factory=set)  # '##### CPU N buffer started'
    unparsed_lines: int = 0
    unparsed_samples: list[str] = field(default_factory=list)  # first few, for messages
    mismatched: Counter[str] = field(default_factory=Counter)  # known event, unexpected body
    first_ts: float | None = None
    last_ts: float | None = None

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    @property
    def overwritten(self) -> int:
        """Events the ring buffer overwrote (written but no longer in the buffer)."""
        if self.entries_in_buffer is None or self.entries_written is None:
            return 0
        return max(0, self.entries_written - self.entries_in_buffer)

    @property
    def lossy(self) -> bool:
        """True when the trace is known to be missing events."""
        return bool(self.lost_markers or self.overwritten or self.buffer_started)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "events": dict(sorted(self.events.items())),
            "total_events": self.total_events,
            "lost_events": self.lost_events,
            "lost_markers": self.lost_markers,
            "lost_unknown": self.lost_unknown,
            "lost_by_cpu": {str(k): v for k, v in sorted(self.lost_by_cpu.items())},
            "entries_in_buffer": self.entries_in_buffer,
            "entries_written": self.entries_written,
            "overwritten": self.overwritten,
            "buffer_started": sorted(self.buffer_started),
            "unparsed_lines": self.unparsed_lines,
            "unparsed_samples": list(self.unparsed_samples),
            "mismatched": dict(sorted(self.mismatched.items())),
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "lossy": self.lossy,
        }


# ---- body decoders ---------------------------------------------------------------------
# Each takes the line's context fields, the line and where its body starts, and
# returns an Event, or None when the body does not match its format (the caller
# then yields a GenericEvent and counts a mismatch).


def _wakeup_decoder(cls: type[SchedWakeup]) -> Callable[..., Event | None]:
    make = fast_constructor(cls)
    match = _WAKEUP.match

    def decode(cpu, ts, comm, pid, tgid, flags, line, pos):
        m = match(line, pos)
        if m is None:
            return None
        c, p, pr, t = m.groups()
        target, task = int(t), int(p)
        if not (_cpu_ok(target) and _pid_ok(task)):
            return None
        return make(cpu, ts, comm, pid, tgid, flags, c, task, int(pr), target)

    return decode


def _switch_decoder() -> Callable[..., Event | None]:
    make = fast_constructor(SchedSwitch)
    match = _SWITCH.match

    def decode(cpu, ts, comm, pid, tgid, flags, line, pos):
        m = match(line, pos)
        if m is None:
            return None
        pc, pp, ppr, st, nc, np_, npr = m.groups()
        prev, nxt = int(pp), int(np_)
        if not (_pid_ok(prev) and _pid_ok(nxt)):
            return None
        return make(cpu, ts, comm, pid, tgid, flags, pc, prev, int(ppr), st, nc, nxt, int(npr))

    return decode


def _migrate_decoder() -> Callable[..., Event | None]:
    make = fast_constructor(SchedMigrateTask)
    match = _MIGRATE.match

    def decode(cpu, ts, comm, pid, tgid, flags, line, pos):
        m = match(line, pos)
        if m is None:
            return None
        c, p, pr, o, d = m.groups()
        task, orig, dest = int(p), int(o), int(d)
        if not (_pid_ok(task) and _cpu_ok(orig) and _cpu_ok(dest)):
            return None
        return make(cpu, ts, comm, pid, tgid, flags, c, task, int(pr), orig, dest)

    return decode


def _move_numa_decoder() -> Callable[..., Event | None]:
    make = fast_constructor(SchedMoveNuma)
    match = _MOVE_NUMA.match

    def decode(cpu, ts, comm, pid, tgid, flags, line, pos):
        m = match(line, pos)
        if m is None:
            return None
        p, tg, ng, sc, sn, dc, dn = map(int, m.groups())
        if not (_pid_ok(p) and _pid_ok(tg) and _pid_ok(ng) and _numa_ok(sc, sn, dc, dn)):
            return None
        return make(cpu, ts, comm, pid, tgid, flags, p, tg, ng, sc, sn, dc, dn)

    return decode


def _numa_ok(src_cpu: int, src_nid: int, dst_cpu: int, dst_nid: int) -> bool:
    return _cpu_or_none_ok(src_cpu) and _cpu_or_none_ok(dst_cpu) and _nid_ok(src_nid) and _nid_ok(dst_nid)


def _pair_decoder(cls: type[SchedSwapNuma] | type[SchedStickNuma]) -> Callable[..., Event | None]:
    make = fast_constructor(cls)
    match = _NUMA_PAIR.match
    old = _MOVE_NUMA.match

    def decode(cpu, ts, comm, pid, tgid, flags, line, pos):
        m = match(line, pos)
        if m is not None:
            sp, stg, sng, sc, sn, dp, dtg, dng, dc, dn = map(int, m.groups())
            if not (all(_pid_ok(x) for x in (sp, stg, sng, dp, dtg, dng)) and _numa_ok(sc, sn, dc, dn)):
                return None
            return make(cpu, ts, comm, pid, tgid, flags, sp, stg, sng, sc, sn, dp, dtg, dng, dc, dn)
        m = old(line, pos)  # pre-pair-template sched_stick_numa
        if m is None:
            return None
        p, tg, ng, sc, sn, dc, dn = map(int, m.groups())
        if not (_pid_ok(p) and _pid_ok(tg) and _pid_ok(ng) and _numa_ok(sc, sn, dc, dn)):
            return None
        return make(cpu, ts, comm, pid, tgid, flags, p, tg, ng, sc, sn, 0, 0, 0, dc, dn)

    return decode


def _fork_decoder() -> Callable[..., Event | None]:
    make = fast_constructor(SchedProcessFork)
    match = _FORK.match

    def decode(cpu, ts, comm, pid, tgid, flags, line, pos):
        m = match(line, pos)
        if m is None:
            return None
        c, p, cc, cp = m.groups()
        parent, child = int(p), int(cp)
        if not (_pid_ok(parent) and _pid_ok(child)):
            return None
        return make(cpu, ts, comm, pid, tgid, flags, c, parent, cc, child)

    return decode


def _exit_decoder() -> Callable[..., Event | None]:
    make = fast_constructor(SchedProcessExit)
    match = _EXIT.match

    def decode(cpu, ts, comm, pid, tgid, flags, line, pos):
        m = match(line, pos)
        if m is None:
            return None
        c, p, pr = m.groups()
        task = int(p)
        if not _pid_ok(task):
            return None
        return make(cpu, ts, comm, pid, tgid, flags, c, task, int(pr))

    return decode


def _decoders() -> dict[str, Callable[..., Event | None]]:
    # Built per parse() call: no module-level mutable state for tests to patch.
    return {
        "sched_switch": _switch_decoder(),
        "sched_wakeup": _wakeup_decoder(SchedWakeup),
        "sched_waking": _wakeup_decoder(SchedWaking),
        "sched_wakeup_new": _wakeup_decoder(SchedWakeupNew),
        "sched_migrate_task": _migrate_decoder(),
        "sched_move_numa": _move_numa_decoder(),
        "sched_swap_numa": _pair_decoder(SchedSwapNuma),
        "sched_stick_numa": _pair_decoder(SchedStickNuma),
        "sched_process_fork": _fork_decoder(),
        "sched_process_exit": _exit_decoder(),
    }


# ---- the stream --------------------------------------------------------------------------


class TraceReader:
    """An iterator of events whose ``stats`` are complete once it is exhausted.

    ``for ev in reader`` iterates the underlying generator directly, so the
    wrapper costs nothing per event.
    """

    def __init__(
        self, lines: Iterable[str], only: Iterable[str] | None = None, *, blocks: Iterable[str | list[str]] | None = None
    ):
        self.stats = TraceStats()
        wanted = frozenset(only) if only is not None else None
        if blocks is None:
            blocks = _line_blocks(lines)
        self._gen = _events(blocks, self.stats, wanted)

    def __iter__(self) -> Iterator[Event]:
        return self._gen

    def __next__(self) -> Event:
        return next(self._gen)

    def close(self) -> None:
        self._gen.close()


def parse(lines: Iterable[str], only: Iterable[str] | None = None) -> TraceReader:
    """Parse ftrace text lines into events, lazily.

    *only*, if given, is a set of event names to decode; other events are
    counted in the stats but not built (cheaper when a trace has many
    events the caller does not need).
    """
    return TraceReader(lines, only)


def open_trace(path: str | Path) -> IO[str]:
    """Open a trace file as text, decompressing .gz/.xz by suffix."""
    p = Path(path)
    # errors='replace': a comm is 16 arbitrary bytes and need not be UTF-8.
    if p.suffix == ".gz":
        return gzip.open(p, "rt", encoding="utf-8", errors="replace")
    if p.suffix == ".xz":
        return lzma.open(p, "rt", encoding="utf-8", errors="replace")
    return open(p, encoding="utf-8", errors="replace")


def parse_file(path: str | Path, only: Iterable[str] | None = None, *, follow_symlinks: bool = True) -> TraceReader:
    """Parse a trace file; the file is closed when iteration ends.  With
    ``follow_symlinks=False`` (a run's own trace, which lab unpacked as a plain file) it
    must be an uncompressed regular file: anything else is a UserError when iteration
    begins (limits.open_regular), never a read that waits on a FIFO."""

    def blocks() -> Iterator[str]:
        if follow_symlinks:
            f = open_trace(path)
        else:
            f = io.TextIOWrapper(open_regular(path, follow_symlinks=False), encoding="utf-8", errors="replace")
        with f:
            yield from bounded_blocks(f)

    return TraceReader((), only, blocks=blocks())


def bounded_lines(f: IO[str], limit: int = MAX_TRACE_LINE) -> Iterator[str]:
    """The lines of *f*, each at most limit + 1 characters: a longer line is cut there
    (the parser counts it as unparsed) and the rest of it is read in pieces and dropped,
    so a trace of one 1 GB line costs no more memory than a short one."""
    read = f.readline
    while line := read(limit + 1):
        if len(line) > limit and not line.endswith("\n"):
            while (rest := read(limit)) and not rest.endswith("\n"):
                pass
        yield line


def bounded_blocks(f: IO[str], limit: int = MAX_TRACE_LINE, size: int = BLOCK_CHARS) -> Iterator[str]:
    """*f*'s text in blocks of whole lines (the last may lack its newline), each about
    *size* characters; a line longer than *limit* comes as its first limit + 1
    characters, on its own line, the rest dropped (as bounded_lines does), so memory
    stays within size + limit whatever the file holds."""
    read = f.read
    carry = ""
    skipping = False  # dropping the rest of an overlong line, up to its newline
    while block := read(size):
        if skipping:
            nl = block.find("\n")
            if nl < 0:
                continue
            block, skipping = block[nl + 1 :], False
        data = carry + block if carry else block
        cut = data.rfind("\n") + 1
        carry = data[cut:]
        head = data[:cut]
        if len(carry) > limit:  # a line with no end in sight: keep its start, drop the rest
            head += carry[: limit + 1] + "\n"
            carry, skipping = "", True
        if head:
            yield head
    if carry:
        yield carry


def _line_blocks(lines: Iterable[str]) -> Iterator[str | list[str]]:
    """Lines (each ending in a newline but maybe the last) joined into blocks for the
    fast path; a batch whose lines are not like that stays a list, for the Python path."""
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == BATCH_LINES:
            yield _joined(batch)
            batch = []
    if batch:
        yield _joined(batch)


def _joined(batch: list[str]) -> str | list[str]:
    text = "".join(batch)
    whole = batch[-1].endswith("\n")
    if text.count("\n") == len(batch) - (not whole) and all(line.endswith("\n") for line in batch[:-1]):
        return text
    return list(batch)


def _split(text: str) -> list[str]:
    """*text*'s lines, split at newlines only (as a file is read), each keeping its own."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    return lines


def parse_line(line: str) -> Event | None:
    """Parse one line; None when it is not an event (header, LOST marker, junk)."""
    for ev in parse([line]):
        return ev
    return None


def _events(blocks: Iterable[str | list[str]], stats: TraceStats, only: frozenset[str] | None) -> Generator[Event, None, None]:
    """The events of *blocks* (text made of whole lines, or a list of lines), in order."""
    one = _LineParser(stats, only)
    kinds = _fast.KINDS if _fast is not None else ()
    classes = tuple(EVENT_CLASSES[k] for k in kinds)
    build = tuple(only is None or k in only for k in kinds)
    counts = stats.events
    n = 0
    first_ts: str | None = None  # kept as text: float() once, at the end
    last_ts: str | None = None
    try:
        for text in blocks:
            if _fast is None or not isinstance(text, str) or not text.isascii():
                for line in _split(text) if isinstance(text, str) else text:
                    n += 1
                    ev, ts_s = one(line)
                    if ts_s is not None:
                        if first_ts is None:
                            first_ts = ts_s
                        last_ts = ts_s
                    if ev is not None:
                        yield ev
                continue
            items, fallback, lines, first, last = _fast.scan(
                text, classes, build, counts, MAX_CPUS, MAX_PID, MAX_NODES, MAX_TRACE_LINE
            )
            n += lines
            for pos, index, line in fallback:  # lines the fast path left to this one, in order
                ev, ts_s = one(line)
                items[pos] = ev
                if ts_s is not None:
                    if first is None or index < first[0]:
                        first = (index, ts_s)
                    if last is None or index > last[0]:
                        last = (index, ts_s)
            if first is not None:
                if first_ts is None:
                    first_ts = first[1]
                last_ts = last[1]
            yield from filter(None, items) if fallback else items
    finally:
        # Runs on exhaustion and on close(): the stats are right even if the
        # consumer stopped early (up to the block it stopped in).
        stats.lines += n
        if first_ts is not None and stats.first_ts is None:
            stats.first_ts = float(first_ts)
        if last_ts is not None:
            stats.last_ts = float(last_ts)


class _LineParser:
    """The Python path: one line -> (its event or None, its timestamp text when it is an
    event line).  Every line's accounting happens here or in the fast path, never both."""

    def __init__(self, stats: TraceStats, only: frozenset[str] | None):
        self.stats, self.only = stats, only
        self.match = _LINE.match
        self.decoders = _decoders()
        self.generic = fast_constructor(GenericEvent)

    def __call__(self, line: str) -> tuple[Event | None, str | None]:
        stats = self.stats
        if len(line) > MAX_TRACE_LINE:
            # Not a line ftrace wrote (see limits.MAX_TRACE_LINE): never scanned.
            _unparsed(line, stats)
            return None, None
        m = self.match(line)
        if m is None:
            _other_line(line, stats)
            return None, None
        comm, pid_s, tgid_s, cpu_s, flags, ts_s, name = m.groups()
        counts = stats.events
        counts[name] += 1
        if self.only is not None and name not in self.only:
            return None, ts_s
        ts = float(ts_s)
        tgid = (int(tgid_s) if tgid_s[0] != "-" else None) if tgid_s is not None else None
        cpu = int(cpu_s)
        pid = int(pid_s)
        if cpu >= MAX_CPUS or pid > MAX_PID or (tgid is not None and tgid > MAX_PID):
            # The digits are bounded by _LINE; the values are checked here, where they
            # are converted anyway (lines *only* leaves out are counted, not built).
            counts[name] -= 1
            if not counts[name]:
                del counts[name]
            _unparsed(line, stats)
            return None, ts_s
        if flags is None:
            flags = ""
        dec = self.decoders.get(name)
        if dec is not None:
            # The body regex runs on the line from the header's end: no slice copy.
            ev = dec(cpu, ts, comm, pid, tgid, flags, line, m.end())
            if ev is None:
                # A known event whose fields cannot be decoded (cut short, garbled,
                # out of range) is counted and skipped: as a GenericEvent named
                # sched_switch it reached check() as an AttributeError.
                stats.mismatched[name] += 1
            return ev, ts_s
        return self.generic(cpu, ts, comm, pid, tgid, flags, name, line[m.end() :].rstrip()), ts_s


def _other_line(line: str, stats: TraceStats) -> None:
    s = line.strip()
    if not s:
        return
    if s[0] == "#":
        m = _ENTRIES.match(s)
        if m:
            stats.entries_in_buffer = int(m.group(1))
            stats.entries_written = int(m.group(2))
            stats.header_cpus = int(m.group(3))
        else:
            m = _STARTED.match(s)
            if m:
                stats.buffer_started.add(int(m.group(1)))
        return
    m = _LOST.match(s)
    if m:
        cpu = int(m.group(1))
        stats.lost_markers += 1
        if m.group(2) is None:
            stats.lost_unknown += 1
        else:
            k = int(m.group(2))
            stats.lost_events += k
            stats.lost_by_cpu[cpu] += k
        return
    _unparsed(s, stats)


def _unparsed(line: str, stats: TraceStats) -> None:
    stats.unparsed_lines += 1
    if len(stats.unparsed_samples) < _UNPARSED_SAMPLES:
        s = line.strip()
        stats.unparsed_samples.append(s if len(s) <= _SAMPLE_CHARS else s[:_SAMPLE_CHARS] + "...")
