"""Is a run's data complete enough to judge?  One answer for `lab run` and `lab recheck`.

A verdict (PASS/FAIL) is given only on complete data.  Each of these is an ERROR (exit 3)
that names its cause instead:

* the run did not finish: lab was interrupted or killed (results.json still says
  RUNNING), the guest agent never said "done", the job left no exit status;
* the results stream from the guest was cut short: the agent says on lab.log how many
  bytes tar wrote to lab.out once they are all sent, and what reached the host must be
  exactly that, a tar archive whose members are whole and that ends with tar's two zero
  blocks (the byte count alone would miss nothing, but the end-of-archive check is what
  a run recorded by an older agent still offers);
* the job, a workload step or the guest's tar exited non-zero;
* a file the job promised is missing: every phase started (lib.sh's lab_trace_on writes
  lab.phases) has its trace, lost count and end time; every step started (lab_run writes
  lab.steps) has its exit status;
* a phase lost events: the per-CPU overrun/dropped count the guest saved, a
  ``[LOST n EVENTS]`` marker, entries-written above entries-in-buffer, a ``buffer
  started`` line;
* the trace parser skipped lines beyond the tolerance below.

Everything from the guest is data: file names it sent are never used as paths here (only
looked up among the files in out/), numbers are parsed strictly, quoted text is cut short.
The figures (stream bytes, lost and skipped counts per phase) go into results.json under
"integrity".
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import socket
import stat
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import proc, rundir
from .errors import UserError
from .limits import MAX_FIGURE_DIGITS, read_head
from .paths import pid_alive
from .rundir import RunDir
from .trace import parse_file

# What the parser may skip in a phase's trace before the phase is not judged.  Zero: with
# the nop tracer and sched events only, a 6.1 trace holds nothing but events, comment
# lines and LOST markers, so a line lab cannot read is damage (a cut or garbled file, a
# comm holding a newline), and a sched_* line whose body has not the format lab decodes
# is an event the analyses would not see.  Either could hide the very event a check is
# about.
TOLERATED_UNPARSED_LINES = 0  # lines that are neither events, comments nor LOST markers
TOLERATED_MALFORMED_EVENTS = 0  # known events whose body does not match their format

RESULTS_TAR = rundir.RESULTS_TAR  # the lab.out stream, as QEMU wrote it
AGENT_LOG = rundir.AGENT_LOG  # what the agent said on lab.log
PHASES = "lab.phases"  # written in the guest by lib.sh: the phases started, one a line
STEPS = "lab.steps"  # ... and the workload steps started

_COUNT = re.compile(r"-?[0-9]{1,18}")
_SHOW = 3  # problems shown in the one-line message (all of them are in results.json)


def count(text: str | None) -> int | None:
    """A number the guest wrote ("0\\n"), or None for anything else (strict: ASCII digits)."""
    t = (text or "").strip()
    return int(t) if _COUNT.fullmatch(t) else None


_SECONDS = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")


def seconds(text: str | None) -> float | None:
    """A time the guest wrote (/proc/uptime's "1234.56"), or None for anything else
    (strict: float() would also take 'nan', 'inf', '1_0' and Unicode digits)."""
    t = (text or "").strip()
    return float(t) if _SECONDS.fullmatch(t) else None


def quote(text: str, width: int = 80) -> str:
    """Guest text in a message: repr'd, one line, cut to *width*."""
    r = repr(text)
    return r if len(r) <= width else r[: width - 3] + "..."


def said(lines: list[str], word: str) -> dict[str, str] | None:
    """The key=value fields of the agent's last ``lab: WORD ...`` line, None if never said."""
    for line in reversed(lines):
        parts = line.split()
        if parts[:2] == ["lab:", word]:
            return dict(p.split("=", 1) for p in parts[2:] if "=" in p)
    return None


def agent_lines(run_dir: Path) -> list[str] | None:
    """What the agent said (agent.log), None when the run directory has no such file."""
    try:
        return RunDir(run_dir).agent_log.read_text(errors="replace").splitlines()
    except OSError:
        return None


# ---- the results stream -----------------------------------------------------------------


@dataclass
class Stream:
    figures: dict[str, Any]
    problem: str | None = None


def check_stream(tar: Path, lines: list[str], *, need_count: bool = True) -> Stream:
    """Did the whole results stream reach the host?  *lines*: what the agent said.
    Without *need_count* (a run recorded by an agent that did not count its bytes)
    the archive's own structure is all there is to go by."""
    try:
        data = tar.read_bytes()
    except OSError:
        data = b""
    sent = said(lines, "sent")
    want = count(sent.get("bytes")) if sent else None
    tar_rc = count(sent.get("tar")) if sent else None
    st = Stream({"bytes_received": len(data), "bytes_sent": want, "tar_rc": tar_rc})
    if not data:
        st.problem = f"no results stream from the guest ({tar.name} is {'empty' if tar.exists() else 'missing'})"
        return st
    if sent is None and need_count:
        st.problem = (
            f"the results stream was cut short: the guest never said it had sent them all "
            f"({len(data)} bytes arrived)"
        )
        return st
    if sent is not None and want != len(data):
        st.problem = f"the results stream was cut short: {len(data)} of the {want} bytes the guest sent arrived"
        return st
    st.figures.update(_archive(data, st))
    if st.problem is None and sent is not None and tar_rc != 0:
        st.problem = f"the guest's tar exited {_status(tar_rc, sent.get('tar', ''))}: some results could not be archived"
    return st


def _archive(data: bytes, st: Stream) -> dict[str, Any]:
    """Every member whole and tar's end-of-archive blocks after the last one (Python's
    tarfile stops quietly at a cut between members, so this is checked here)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
            members = tf.getmembers()
    except Exception as e:  # noqa: BLE001 - guest data: whatever tarfile makes of it is "unreadable"
        st.problem = f"the results stream is not a tar archive lab can read ({type(e).__name__}: {e})"
        return {"members": 0, "end_of_archive": False}
    end = 0
    for m in members:
        stop = m.offset_data + (-(-m.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE if m.isreg() else 0)
        if stop > len(data):
            st.problem = f"the results stream was cut short inside {quote(m.name)} (after {len(data)} bytes)"
            return {"members": len(members), "end_of_archive": False}
        end = max(end, stop)
    eoa = data[end : end + 2 * tarfile.BLOCKSIZE] == bytes(2 * tarfile.BLOCKSIZE)
    if not eoa:
        st.problem = f"the results stream ends without tar's end-of-archive blocks (cut short after {len(data)} bytes)"
    return {"members": len(members), "end_of_archive": eoa}


# ---- one phase's trace --------------------------------------------------------------------


def trace_figures(out: Path, phase: str) -> dict[str, Any]:
    """What a phase's trace holds besides events: what was lost, what the parser skipped.
    *phase* must name a file in *out* (trace.PHASE.txt); the caller checks that."""
    lost_file = count(_read_small(out / f"trace.{phase}.lost"))
    f: dict[str, Any] = {"lost_overrun": lost_file}
    p = out / f"trace.{phase}.txt"
    if _regular(p):
        r = parse_file(p, follow_symlinks=False)  # every event decoded: a body not in its format is counted only then
        for _ in r:
            pass
        s = r.stats
        f.update(
            lines=s.lines, events=s.total_events, lost_markers=s.lost_markers, lost_events=s.lost_events,
            lost_unknown=s.lost_unknown, entries_in_buffer=s.entries_in_buffer, entries_written=s.entries_written,
            overwritten=_overwritten(s.entries_in_buffer, s.entries_written), buffer_started=sorted(s.buffer_started), unparsed_lines=s.unparsed_lines,
            unparsed_samples=[quote(x) for x in s.unparsed_samples[:_SHOW]], mismatched=dict(sorted(s.mismatched.items())),
        )  # fmt: skip
    # The overrun count and the markers may report the same events: the larger stands.
    f["lost"] = max(lost_file or 0, f.get("lost_events", 0) + f.get("overwritten", 0))
    return f


def _overwritten(in_buffer: int | None, written: int | None) -> int:
    """Events the ring buffer overwrote: written, no longer in the buffer (the header's
    entries-in-buffer/entries-written)."""
    return max(0, written - in_buffer) if in_buffer is not None and written is not None else 0


def _phase_problems(phase: str, f: dict[str, Any], buffer_kb: int | None) -> list[str]:
    out = []
    unknown = f.get("lost_unknown") or f.get("buffer_started")
    if f["lost"] or unknown:
        how = []
        if f["lost_overrun"]:
            how.append(f"the guest's per-CPU overrun/dropped count {f['lost_overrun']}")
        if f.get("lost_markers"):
            how.append(f"{f['lost_markers']} [LOST ...] markers")
        if f.get("overwritten"):
            how.append(f"entries-written {f['entries_written']} > entries-in-buffer {f['entries_in_buffer']}")
        if f.get("buffer_started"):
            how.append(f"the buffer of CPU {','.join(map(str, f['buffer_started']))} restarted")
        n = f"{f['lost']}" + (" or more" if unknown else "") if f["lost"] else "an unknown number of"
        kb = f" ({buffer_kb} KiB per CPU)" if buffer_kb else ""
        out.append(
            f"trace phase '{phase}' lost {n} events (ring buffer overrun: {'; '.join(how)}): "
            f"raise buffer_kb{kb} or trace fewer events"
        )
    if f.get("unparsed_lines", 0) > TOLERATED_UNPARSED_LINES:
        eg = f", e.g. {f['unparsed_samples'][0]}" if f["unparsed_samples"] else ""
        out.append(
            f"trace phase '{phase}': {f['unparsed_lines']} lines lab could not read "
            f"(tolerated: {TOLERATED_UNPARSED_LINES}){eg}"
        )
    bad = sum(f.get("mismatched", {}).values())
    if bad > TOLERATED_MALFORMED_EVENTS:
        which = ", ".join(f"{k} {v}" for k, v in f["mismatched"].items())
        out.append(
            f"trace phase '{phase}': {bad} event lines not in the format lab decodes ({which}; "
            f"tolerated: {TOLERATED_MALFORMED_EVENTS})"
        )
    return out


# ---- the judgment -------------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """What must be there.  A run recorded by this lab: everything.  By an older lab (no
    "integrity" record): its PASS/FAIL says the agent said done; an older ERROR proves
    nothing, so the job's end must be there, but not the byte count older agents lacked."""

    finish: bool = True  # the agent's "done", the job's exit status, the results stream
    count: bool = True  # the agent's "sent bytes=N"


NEW = Need()


def need_for(record: Mapping[str, Any]) -> Need:
    if "integrity" in record:
        return NEW
    if record.get("status") in ("PASS", "FAIL"):
        return Need(finish=False, count=False)
    return Need(finish=True, count=False)


@dataclass
class Completeness:
    """Whether what the guest sent back is complete (integrity.judge): problems, none when
    the run may be judged.  (Not the run's verdict: runner.MajorityVerdict, expect.ViewVerdict.)"""

    problems: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def message(self) -> str:
        more = len(self.problems) - _SHOW
        return "; ".join(self.problems[:_SHOW]) + (f"; and {more} more (results.json)" if more > 0 else "")


def judge(run_dir: Path, need: Need = NEW, *, buffer_kb: int | None = None, stream: Stream | None = None) -> Completeness:
    """Is what the guest sent back to *run_dir* complete?  Never raises on what is there.
    *stream*: the results stream as the boot already checked it (else it is checked here)."""
    v = Completeness(figures={"tolerated": {"unparsed_lines": TOLERATED_UNPARSED_LINES, "malformed_events": TOLERATED_MALFORMED_EVENTS}})
    out = run_dir / rundir.OUT
    try:  # what lab unpacked: regular files (a link or a FIFO here is nothing the guest sent)
        with os.scandir(out) as it:
            present = {e.name for e in it if e.is_file(follow_symlinks=False)}
    except OSError:
        present = set()
    lines = agent_lines(run_dir)
    if (need.finish or lines is not None) and said(lines or [], "done") is None:
        v.problems.append(f"the run did not finish: the guest agent never said done ({AGENT_LOG})")
    tar = RunDir(run_dir).results_tar
    if stream is not None or need.finish or tar.exists():
        st = stream or check_stream(tar, lines or [], need_count=need.count)
        v.figures["stream"] = st.figures
        if st.problem:
            v.problems.append(st.problem)
    v.problems += _job(out, present, need, v.figures)
    missing: list[str] = []
    steps = _listed(out, present, STEPS) | {n[:-3] for n in present if n.endswith(".rc") and n != "rc"}
    for name in sorted(steps):
        if f"{name}.rc" not in present:
            missing.append(f"{name}.rc")
            continue
        rc = count(_text(out, present, f"{name}.rc"))
        if rc != 0:
            tail = proc.tail(_text(out, present, f"{name}.err", 4096)) or proc.tail(_text(out, present, f"{name}.out", 4096))
            v.problems.append(f"workload step {quote(name, 40)} exited {_status(rc, _text(out, present, f'{name}.rc'))}{_colon(tail)}")
    listed = _listed(out, present, PHASES)
    phases = listed | {n[len("trace.") : -len(".txt")] for n in present if n.startswith("trace.") and n.endswith(".txt")}
    v.figures["phases"] = {}
    for ph in sorted(phases):
        want = [f"trace.{ph}.txt", f"trace.{ph}.lost"] + ([f"phase.{ph}.end"] if ph in listed else [])
        missing += [w for w in want if w not in present]
        if f"trace.{ph}.txt" not in present:
            continue
        f = trace_figures(out, ph)
        v.figures["phases"][ph] = f
        if f"trace.{ph}.lost" in present and f["lost_overrun"] is None:
            v.problems.append(f"trace.{ph}.lost holds no count: {quote(_text(out, present, f'trace.{ph}.lost'))}")
        v.problems += _phase_problems(ph, f, buffer_kb)
    if missing:
        v.figures["missing"] = missing[:20]
        shown = ", ".join(quote(m, 40) for m in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        v.problems.append(f"result files missing from the guest's output: {shown}")
    return v


def _job(out: Path, present: set[str], need: Need, figures: dict[str, Any]) -> list[str]:
    if "rc" not in present:
        if need.finish:
            return ["the run did not finish: the guest's job left no exit status (out/rc)"]
        return []
    text = _text(out, present, "rc")
    rc = count(text)
    figures["job_rc"] = rc
    err = proc.tail(_text(out, present, "stderr", 4096))
    if rc == 90:
        return [f"trace setup failed in the guest{_colon(err)}"]
    if rc != 0:
        return [f"the job exited {_status(rc, text)}{_colon(err)}"]
    return []


def _status(n: int | None, text: str) -> str:
    """An exit status the guest wrote: the number, or what it wrote instead, quoted."""
    return str(n) if n is not None else f"with no status ({quote(text.strip(), 40)})"


def _colon(tail: str) -> str:
    return f": {tail}" if tail else ""


_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")


def _listed(out: Path, present: set[str], manifest: str) -> set[str]:
    """The names (phases, steps) the guest listed in *manifest*, if they are plain names;
    they are only looked up among the files in out/."""
    return {n for n in _text(out, present, manifest, 1 << 16).split() if _NAME.fullmatch(n)}


def _text(out: Path, present: set[str], name: str, limit: int = 256) -> str:
    """The start of a file in out/: *name* must be one of the files listed there."""
    return _read_small(out / name, limit) if name in present else ""


def _read_small(p: Path, limit: int = 256) -> str:
    """The start of a regular file, "" for anything else (missing, a link, a FIFO)."""
    try:
        return read_head(p, limit, follow_symlinks=False).decode(errors="replace")
    except UserError:
        return ""


def _regular(p: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(p).st_mode)
    except OSError:
        return False


# ---- what results.json says about how the run ended ----------------------------------------

STAGES = {
    "prepare": "while preparing the guest",
    "boot": "during boot",
    "job": "while the guest ran the job",
    "check": "during the checks",
}


def read_record(run_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """results.json, or why there is none to go by."""

    p = run_dir / rundir.RESULTS
    try:
        text = p.read_text()
    except FileNotFoundError:
        return None, "the run did not finish: no results.json (lab stopped before recording the run, or this is not a run directory)"
    except OSError as e:
        return None, f"results.json cannot be read: {e}"
    try:
        rec = json.loads(text)
    except ValueError:
        return None, f"the run did not finish: results.json is not JSON ({len(text)} bytes; lab was killed while writing it?)"
    if not isinstance(rec, dict):
        return None, "results.json is not a run's record (not a JSON object)"
    bad = record_problem(rec)
    if bad:
        return None, f"results.json is not a run's record lab can read: {bad}"
    return rec, None


STATUSES = ("PASS", "FAIL", "INCONCLUSIVE", "ERROR", "SKIP", "RUNNING")


def _finite(v: Any) -> bool:
    """A figure a reader can do arithmetic on safely (JSON's 1e400 is inf; 10**400 is an int)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return True
    if isinstance(v, int):
        return abs(v) < 10**MAX_FIGURE_DIGITS
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, dict):
        return all(_finite(x) for x in v.values())
    if isinstance(v, list):
        return all(_finite(x) for x in v)
    return False


def record_problem(rec: Mapping[str, Any]) -> str:
    """What is wrong with a results.json's fields, as lab's readers use them ('' if nothing)."""
    st = rec.get("status")
    if not isinstance(st, str) or st not in STATUSES:
        return f"field 'status' must be one of {', '.join(STATUSES)}, not {str(st)[:40]!r}"
    for k in ("scenario", "topology", "kernel", "message"):
        if k in rec and rec[k] is not None and not isinstance(rec[k], str):
            return f"field {k!r} must be a string"
    for k in ("timing", "integrity", "kernel_info", "figures"):
        if k in rec and rec[k] is not None and not isinstance(rec[k], dict):
            return f"field {k!r} must be an object"
    if "notes" in rec and not (isinstance(rec["notes"], list) and all(isinstance(x, str) for x in rec["notes"])):
        return "field 'notes' must be a list of strings"
    exps = rec.get("expectations", [])
    if not isinstance(exps, list):
        return "field 'expectations' must be a list"
    for i, e in enumerate(exps):
        where = f"expectations[{i}]"
        if not isinstance(e, dict):
            return f"{where} must be an object"
        if not isinstance(e.get("name"), str) or not isinstance(e.get("status"), str):
            return f"{where} needs a 'name' and a 'status' (strings)"
        if not isinstance(e.get("figures", {}), dict):
            return f"{where}.figures must be an object"
        if not isinstance(e.get("evidence", []), list):
            return f"{where}.evidence must be a list"
        if not _finite(e.get("figures", {})):
            return f"{where}.figures holds a number lab cannot use (infinite, or more than 30 digits)"
    if not _finite(rec.get("timing") or {}):
        return "field 'timing' holds a number lab cannot use (infinite, or more than 30 digits)"
    return ""


def unfinished(record: Mapping[str, Any]) -> str | None:
    """Why the recorded run has no data to judge, or None: it still says RUNNING (lab was
    killed: SIGKILL, a crash, the machine went down), or it ended before the guest's job
    did (interrupted, guest lost, QEMU failed: the recorded cause)."""
    integ = record.get("integrity")
    integ = integ if isinstance(integ, dict) else {}
    stage = STAGES.get(str(integ.get("stage")), f"at stage {integ.get('stage')!r}")
    if record.get("status") == "RUNNING":
        pid = integ.get("pid")
        real = isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 1 << 22  # pid_max's limit
        if real and isinstance(pid, int) and integ.get("host") == socket.gethostname() and _alive(pid, integ.get("pid_start")):
            return f"the run has not finished: lab (pid {pid}) is still running it ({stage})"
        gone = f"; lab's pid {pid} is gone" if real else ""
        return f"the run did not finish (lab was killed {stage}: results.json still says RUNNING{gone})"
    if integ.get("finished") is False:
        return str(record.get("message") or f"the run did not finish ({stage})")
    return None


def process_start(pid: int) -> int | None:
    """When process *pid* started (clock ticks after boot, /proc/PID/stat field 22): with
    the pid, names one process even after the pid is reused."""
    try:
        return int(proc.pid_stat(pid)[19])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int, started: Any) -> bool:
    if not pid_alive(pid):
        return False
    now = process_start(pid)
    return now is None or started is None or now == started
