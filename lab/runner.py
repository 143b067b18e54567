"""`lab run`: boot, run a scenario's steps with tracing on, check, report.

The run directory keeps everything: the command that reproduces it, QEMU argv,
console, the raw traces, the guest's topology snapshot, results.json and
junit.xml.  results.json is written (atomically) as soon as the directory exists,
saying RUNNING and where lab is (prepare, boot, job, check), and again at the end:
a run that fails, is interrupted (SIGINT, SIGTERM, SIGHUP: "interrupted by SIGINT
during boot") or whose data is incomplete (lab.integrity) says so, and one whose
lab was killed still says RUNNING, which `lab recheck` reports as not finished.
the VM is always stopped (backends.base: every backend).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import backends, integrity, junit, rundir, session, sysfs
from . import host as host_mod
from . import progress as progress_mod
from . import scenario as sc
from . import scheduler as scheduler_mod
from .analysis import checks as ck
from .backends.guest import GuestJob
from .errors import InfraError, LostGuest, UserError
from .expect import translate
from .host import _host_ticks
from .image import initramfs, workloads
from .image import tools as tools_mod
from .plan import VmPlan
from .progress import Progress
from .rundir import RunDir
from .stats import summary  # one definition of the spread, lab compare's (sample stddev)
from .topology import Topology
from .trace import tracedat

# INCONCLUSIVE: the data is complete but what decided the outcome is the emulation (exit
# 4: a CI job or a bisect script must not read it as a pass or a failure).
EXIT = {"PASS": 0, "FAIL": 1, "SKIP": 0, "ERROR": 3, "INCONCLUSIVE": 4}
JUDGED = ("PASS", "FAIL", "INCONCLUSIVE")  # a verdict on complete data
# Which of several runs' statuses stands for them all (the worst): not the exit codes' order.
SEVERITY = {"PASS": 0, "SKIP": 0, "INCONCLUSIVE": 1, "FAIL": 2, "ERROR": 3}


def worst(statuses) -> str:
    """The status that stands for several runs: an ERROR, else a FAIL, else INCONCLUSIVE."""
    return max(statuses, key=lambda s: SEVERITY.get(s, 3), default="ERROR")


@dataclass
class RunOutcome:
    scenario: str
    topology: str
    kernel: str
    status: str  # PASS | FAIL | INCONCLUSIVE | ERROR | SKIP (RUNNING only in results.json while lab runs it)
    run_dir: Path | None
    expectations: list[sc.Expectation] = field(default_factory=list)
    message: str = ""
    timing: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    kernel_info: dict[str, Any] = field(default_factory=dict)  # e.g. the tree's git describe
    scenario_version: int | None = None  # the scenario's design version the run was judged by
    integrity: dict[str, Any] = field(default_factory=dict)  # lab.integrity's figures; how far the run got
    # lab.analysis.checks' figures per phase (starvation, work conservation, ...): figures on
    # every run whose data is complete, never part of the verdict.
    checks: dict[str, Any] = field(default_factory=dict)
    check_expressions: list[str] = field(default_factory=list)  # `lab run --check`: judged as expectations

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "topology": self.topology,
            "kernel": self.kernel,
            "status": self.status,
            "message": self.message,
            "notes": self.notes,
            "expectations": [e.to_dict() for e in self.expectations],
            "timing": self.timing,
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "kernel_info": self.kernel_info,
            "integrity": self.integrity,
            **({"scenario_version": self.scenario_version} if self.scenario_version is not None else {}),
            **({"checks": self.checks} if self.checks else {}),
            **({"check_expressions": self.check_expressions} if self.check_expressions else {}),
        }


def workloads_layer(arch: str, progress: Progress | None = None) -> Path:
    """lab's static workloads for *arch* as an initramfs layer (built once per inputs;
    a second lab waits for the first and reuses it)."""

    return initramfs.cached_tree_layer(
        "workloads", workloads.inputs_hash(arch), lambda root: workloads.build(arch, root / "usr" / "local" / "bin"),
        progress,
    )  # fmt: skip


def tools_layer(arch: str, tools: list[str], progress: Progress | None = None) -> Path | None:
    """The host tools a scenario needs, with their libraries, as an initramfs layer."""
    if not tools:
        return None

    why = tools_mod.unpackable(arch, tools)
    if why:
        raise UserError(why)

    def fill(root: Path) -> None:
        tools_mod.stage_tools(root, arch, tools)

    return initramfs.cached_tree_layer("tools", tools_mod.tools_hash(arch, tools), fill, progress)


def scheduler_parts(sess: session.Session, progress: Progress | None = None) -> tuple[list[Path], dict[str, str], dict[str, bytes]]:
    """What the guest needs to load *sess*'s sched_ext scheduler: its binary's layer, the
    agent's settings and the job layer's files (its arguments, as data)."""
    if sess.scheduler is None or sess.plan.scheduler is None:
        return [], {}, {}
    args = sess.plan.scheduler.args
    return (
        [scheduler_mod.binary_layer(sess.scheduler, progress)],
        scheduler_mod.guest_config(sess.scheduler),
        scheduler_mod.guest_files(sess.scheduler, args),
    )


def job_script(s: sc.Scenario, topo: Topology) -> str:
    lines = [
        "#!/bin/sh",
        f"# lab scenario {s.name} on {topo.name}",
        ". /lab/lib.sh",
        "cd \"$LAB_OUT\"",
        f"export LAB_TRACE_BUFFER_KB={int(s.buffer_kb)}",
    ]
    for ev, flt in s.filters.items():
        lines.append(f"export LAB_FILTER_{ev}={_sh_quote(flt)}")
    lines.append(f"lab_trace_setup {_sh_quote(' '.join(s.events))} || exit 90")
    lines.append(s.steps(topo).strip())
    return "\n".join(lines) + "\n"


def _sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def run_once(
    s: sc.Scenario,
    sess: session.Session,
    *,
    on_event=None,
    kernel_info: dict[str, Any] | None = None,
    progress: Progress | None = None,
    caught: list[int] | None = None,
    turn: tuple[threading.Event | None, threading.Event] | None = None,
) -> RunOutcome:
    """Boot *sess*, run *s* in the guest and judge it.  A run that cannot start for the
    user's reason (e.g. a tool that cannot be packed) still leaves its run directory, then
    raises the UserError (exit 2); an interrupted one records where it was, then lets the
    KeyboardInterrupt go on.  The boot's stages are steps of *progress*.  *caught*: where
    the main thread notes the signal, for a run in a thread of its own (which cannot set
    signal handlers), so its run directory still names the signal (_batch).  *turn*: (the
    event of the run started before this one, this run's), so runs side by side take their
    run directories in start order: the second run is "<name>-2", never the first."""
    t0 = time.monotonic()
    topo = sess.topo
    host_before = host_mod.load_sample()
    why = sess.skip or s.skip_reason(topo, sess.kernel)  # what is known before booting is a SKIP, not a boot
    if why:
        return RunOutcome(s.name, topo.name, sess.kernel.name, "SKIP", None, message=why)
    if turn is not None and turn[0] is not None:
        while not turn[0].wait(0.05):  # in steps: an interrupt (_interrupt) gets through
            pass
    try:
        run_dir = session.open_run(s.name, sess, s.record())
    finally:
        if turn is not None:
            turn[1].set()
    out = RunOutcome(s.name, topo.name, sess.kernel.name, "RUNNING", run_dir, notes=list(sess.plan.notes), scenario_version=s.version)
    out.kernel_info = {"id": sess.kernel.id, "release": sess.kernel.release, **(kernel_info or {})}
    out.integrity = {
        "finished": False, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        # Whether lab is still at it, for a recheck that finds it RUNNING.
        "pid": os.getpid(), "pid_start": integrity.process_start(os.getpid()), "host": socket.gethostname(),
    }  # fmt: skip

    def stage(name: str) -> None:  # results.json says where lab is, in case it is killed there
        out.integrity["stage"] = name
        write_results(out, run_dir, final=False)

    def said(t: float, line: str) -> None:
        if line.startswith("lab: ready") and out.integrity.get("stage") == "boot":
            stage("job")
        if on_event:
            on_event(t, line)

    caught = [] if caught is None else caught
    try:
        with _signals_named(caught):
            stage("prepare")
            layers = []
            if s.workloads:
                layers.append(workloads_layer(topo.arch, progress))
            tl = tools_layer(topo.arch, list(s.tools), progress)
            if tl is not None:
                layers.append(tl)
            sl, sconfig, sfiles = scheduler_parts(sess, progress)
            layers += sl
            job = job_script(s, topo)
            (run_dir / rundir.JOB).write_text(job)
            t_boot = time.monotonic()

            stage("boot")
            gj = GuestJob(job, sconfig, layers=tuple(layers), files={**sfiles, **s.guest_files(topo)})
            res = backends.boot(sess.plan, sess.kernel, run_dir, gj, timeout=s.timeout, on_event=said, progress=progress)
            out.timing["boot_to_agent_s"] = round(res.ready_s or 0, 2)
            out.timing["vm_s"] = round(res.wall_s, 2)
            out.timing["prepare_s"] = round(t_boot - t0, 2)
            if (res.out_dir / rundir.GUEST).exists():
                shutil.copytree(res.out_dir / rundir.GUEST, run_dir / rundir.GUEST, dirs_exist_ok=True)
            out.integrity["finished"] = True
            _trace_dat(out, run_dir)
            stage("check")
            judge(out, s, sess.plan, run_dir, integrity.NEW, stream=res.stream)
    except KeyboardInterrupt as e:
        sig = signal.Signals(caught[-1]).name if caught else "KeyboardInterrupt"
        out.integrity["interrupted"] = sig
        _error(out, f"the run did not finish: interrupted by {sig} {integrity.STAGES.get(out.integrity.get('stage', ''), '')}".rstrip())
        e.add_note(f"{out.message}; what was gathered is in {run_dir}")
        raise
    except LostGuest as e:
        _error(out, str(e))
        _stream_figures(out, run_dir)
        (run_dir / rundir.CONSOLE_TAIL).write_text(e.detail)
    except UserError as e:  # bad input or a scenario's bug (ScenarioError): exits 2, the run directory keeps the message
        _error(out, str(e))
        raise
    except InfraError as e:
        _error(out, str(e))
        _stream_figures(out, run_dir)
    except BaseException as e:  # lab's own bug: the traceback goes on, the run directory says where it was
        _error(out, f"lab failed {integrity.STAGES.get(out.integrity.get('stage', ''), '')}: {type(e).__name__}: {e}")
        raise
    finally:
        out.timing["wall_s"] = round(time.monotonic() - t0, 2)
        out.timing.update(host_mod.run_conditions(host_before, host_mod.load_sample(), os.cpu_count() or 1))
        write_results(out, run_dir)
    return out


def judge(
    out: RunOutcome, s: sc.Scenario, plan: VmPlan, run_dir: Path, need: integrity.Need, *, stream: integrity.Stream | None = None
) -> None:
    """The verdict on a run's data, live or rechecked alike: ERROR naming the cause unless
    the data is complete (lab.integrity), else the scenario's checks, PASS or FAIL.  A live
    run passes the results stream the boot already checked (*stream*)."""
    sched_status, sched_why = "", ""
    if plan.scheduler is not None:  # a scheduler that never loaded: no workload ran
        sched_status, sched_why = scheduler_mod.outcome(run_dir / rundir.OUT, plan.scheduler.name, plan.scheduler.ops)
        out.integrity["scheduler"] = sched_status or "kept"
        if sched_status == "ERROR":
            _error(out, sched_why)
            return
        note = (
            f"run under the sched_ext scheduler {plan.scheduler.name}"
            + (f" ({' '.join(plan.scheduler.args)})" if plan.scheduler.args else "")
            + ("; it stayed enabled throughout" if not sched_status else "")
            + f"; {s.name}'s expectations are its own, written for the kernel's scheduler"
        )
        if note not in out.notes:
            out.notes.append(note)
    v = integrity.judge(run_dir, need, buffer_kb=s.buffer_kb, stream=stream)
    out.integrity.update(v.figures, problems=v.problems)
    if not v.ok:
        _error(out, v.message)
        return
    out.checks = run_checks(s, plan, run_dir)
    r = _result(s, plan, run_dir / rundir.OUT, run_dir / rundir.GUEST)
    try:
        out.expectations = sc.call_check(s, r)
    except sc.ScenarioError as e:  # check() raised, exited, hung or returned nothing judgeable
        out.expectations = []
        _error(out, str(e))
        return
    if plan.scheduler is not None:  # the kernel scheduler's claims are not the BPF scheduler's
        sc.under_scheduler(out.expectations, s, plan.scheduler.name)
    exprs = user_checks(s)
    out.check_expressions = [e.text for e in exprs]
    out.expectations += [check_expectation(e, out.checks, claim=s.checks_carry_claim) for e in exprs]
    if r.missing:  # judged on data the run does not have: no verdict
        out.integrity["missing_read"] = list(r.missing)
        shown = ", ".join(r.missing[:5]) + (f" and {len(r.missing) - 5} more" if len(r.missing) > 5 else "")
        _error(out, f"the checks read files the run does not have: {shown}")
        return
    out.status, why = sc.verdict_of(out.expectations)
    if why:
        out.message = why
    if sched_status == "FAIL":  # ejected during the run: the run fails, with the kernel's reason
        out.status, out.message = "FAIL", sched_why


def run_checks(s: sc.Scenario, plan: VmPlan, run_dir: Path) -> dict[str, Any]:
    """The checks every run gets (lab.analysis.checks), per phase's trace: figures only.
    Nothing here can change the verdict: what cannot be measured (an event the scenario
    did not trace, a trace lab cannot read, the checks' own failure) says so as the
    phase's or the figure's ``not_measured``.  Allowed CPUs come from the scenario's
    ``allowed_cpus(r, phase)`` when it records them; a file that hook reads and the run
    lacks leaves them unrecorded (a Result of its own: the verdict's is not touched)."""

    traced = ck.Traced.of(s.events, s.filters)
    r = sc.Result(s, plan.topo, plan, plan.kernel, run_dir / rundir.OUT)
    out: dict[str, Any] = {}
    for phase in r.phases:
        hook = ""
        try:
            allowed = s.allowed_cpus(r, phase)
            source = f"{s.name}'s allowed_cpus()" if allowed is not None else ""
        except Exception as e:  # noqa: BLE001 - the scenario's bug costs the affinity figure, nothing else
            allowed, source, hook = None, "", f"not measured: {s.name}'s allowed_cpus() raised {type(e).__name__}: {e}"
        if r.missing:
            allowed, source = None, ""
        try:
            figs: dict[str, Any] = ck.trace_checks(r.trace_path(phase), plan.topo, r.cpu_map, traced, allowed, source)
            if hook:
                figs["affinity"] = {"not_measured": hook}
        except UserError as e:  # a trace file lab will not read (a link, a FIFO)
            figs = {"not_measured": f"not measured: {e}"}
        except Exception as e:  # noqa: BLE001 - a figure, never the verdict: say what failed
            figs = {"not_measured": f"not measured: lab's checks failed: {type(e).__name__}: {e}"}
        out[phase] = sc.normalise(figs)
    return out


def user_checks(s: sc.Scenario) -> list[Any]:
    """The check expressions (lab.analysis.checks.CheckExpr) judged on *s*'s runs: a data
    scenario's own, then the --check ones the user gave (each once)."""

    own = [ck.parse_check(t) for t in (s.own_checks() if hasattr(s, "own_checks") else [])]
    texts = {e.text for e in own}
    return own + [e for e in getattr(s, "_user_checks", ()) if e.text not in texts]


def set_user_checks(s: sc.Scenario, texts: list[str] | tuple[str, ...], where: str = "") -> None:
    """Parse --check expressions onto *s* (a bad one: a one-line UserError, exit 2), and
    refuse, before booting, one whose events the scenario does not trace as it needs."""

    exprs = []
    for t in texts:
        try:
            e = ck.parse_check(t)
        except ck.CheckSyntaxError as err:
            raise UserError(f"{where}{err}") from None
        why = ck.untraced(e, ck.Traced.of(s.events, s.filters))
        if why and not where:
            raise UserError(f"--check {t!r} {why}; scenario {s.name} traces {', '.join(s.events) or 'nothing'}")
        exprs.append(e)
    s._user_checks = exprs  # type: ignore[attr-defined]


def check_expectation(e: Any, checks: dict[str, Any], claim: bool = False) -> sc.Expectation:
    """A --check expression judged on every phase whose figure was measured: PASS when it
    holds in each; INCONCLUSIVE when no phase measured it (missing data is no verdict)."""
    vals: dict[str, float] = {}
    why: list[str] = []
    for phase, figs in checks.items():
        v, reason = e.figure(figs)
        if v is None:
            why.append(f"{phase}: {reason}")
        else:
            vals[phase] = v
    name = f"--check {e.text}"
    if not vals:
        return sc.Expectation(name, False, evidence=why, inconclusive=f"--check {e.text!r}: {'; '.join(why) or 'no trace to measure'}")
    failed = [p for p, v in vals.items() if not e.holds(v)]
    return sc.Expectation(
        name, not failed, figures={f"{e.name} {e.stat} ({p})": v for p, v in vals.items()},
        evidence=[f"{p}: {e.name} {e.stat} = {vals[p]:.6g}, not {e.op} {e.value:g}" for p in failed] + why, claim=claim,
    )  # fmt: skip


def _trace_dat(out: RunOutcome, run_dir: Path) -> None:
    """trace.dat beside the text trace, for trace-cmd, KernelShark, LISA and Perfetto.  An
    export, not evidence: one that cannot be made is a note, never the run's verdict."""

    try:
        tracedat.assemble_run(run_dir)
    except (UserError, OSError) as e:
        out.notes.append(f"no trace.dat: {e}")


def _error(out: RunOutcome, message: str) -> None:
    out.status, out.message = "ERROR", message


def _stream_figures(out: RunOutcome, run_dir: Path) -> None:
    """What of the results reached lab, when the boot failed after the guest started."""
    stream = RunDir(run_dir).results_tar
    if stream.exists():
        out.integrity["stream"] = integrity.check_stream(stream, integrity.agent_lines(run_dir) or []).figures


@contextmanager
def _signals_named(caught: list[int]) -> Iterator[None]:
    """Note in *caught* which signal interrupts the block, whatever the handlers do with
    it (lab.cli turns SIGTERM/SIGHUP into KeyboardInterrupt, SIGINT is Python's), so the
    run directory can say "interrupted by SIGTERM".  Handlers that are not Python
    functions (default, ignored) are left alone, as outside the main thread."""
    old: dict[signal.Signals, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        prev = signal.getsignal(sig)
        if not callable(prev):
            continue

        def note(signum, frame, prev=prev):
            caught.append(signum)
            prev(signum, frame)

        try:
            signal.signal(sig, note)
        except ValueError:  # not the main thread
            break
        old[sig] = prev
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _result(s: sc.Scenario, plan: VmPlan, out_dir: Path, guest_dir: Path) -> sc.Result:
    """What check() gets, live or rechecked alike: the plan, the kernel it names, the
    files, and the guest's topology snapshot in the spec's numbering."""
    view = None
    if guest_dir.exists():
        view = translate(sysfs.read_snapshot(guest_dir), plan)
    return sc.Result(s, plan.topo, plan, plan.kernel, out_dir, view, snapshot="" if view is not None else "guest/ (the topology snapshot)")


def write_results(out: RunOutcome, run_dir: Path, *, final: bool = True) -> None:
    """results.json (and, when *final*, junit.xml), each replaced whole: a crash or a kill
    never leaves a half-written file."""
    if final:
        out.integrity = _finished_record(out.integrity)
    rd = RunDir(run_dir)
    rd.write_results(out.to_dict())
    if final:
        rd.write_junit(junit.render([junit.run_suite([out])]))


def _finished_record(integ: dict[str, Any]) -> dict[str, Any]:
    """The integrity record without what only a RUNNING one needs (is lab still at it?)."""
    return {k: v for k, v in integ.items() if k not in ("pid", "pid_start", "host")}


@dataclass(frozen=True)
class MajorityVerdict:
    """One verdict from up to *of* runs: the majority of their PASS/FAIL, decided as soon
    as one side has more than half of *of*; any ERROR run makes it an ERROR (nothing is
    judged on partial data), a SKIP a SKIP, an INCONCLUSIVE run an INCONCLUSIVE verdict
    (its cause is the emulation's and another run has the same, or the run could not show
    the claim, e.g. preferred-node-migrations' no_occasion(): lab does not run on to find
    a run that could, so an INCONCLUSIVE never becomes a PASS by retrying)."""

    status: str
    passed: int
    failed: int
    runs: int
    of: int

    @property
    def decided(self) -> bool:
        need = self.of // 2 + 1
        unjudged = self.runs - self.passed - self.failed  # an ERROR, a SKIP or an INCONCLUSIVE ends it
        return unjudged > 0 or self.passed >= need or self.failed >= need or self.runs >= self.of

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "passed": self.passed, "failed": self.failed, "runs": self.runs, "of": self.of}


def majority(outcomes: list[RunOutcome], of: int) -> MajorityVerdict:
    """The verdict *outcomes* give so far, as one of up to *of* runs (see MajorityVerdict)."""
    statuses = [o.status for o in outcomes]
    p, f = statuses.count("PASS"), statuses.count("FAIL")
    if "ERROR" in statuses:
        status = "ERROR"
    elif "SKIP" in statuses:
        status = "SKIP"
    elif "INCONCLUSIVE" in statuses:
        status = "INCONCLUSIVE"
    elif p > f:
        status = "PASS"
    elif f > p:
        status = "FAIL"
    else:  # no runs yet, or a tie: only while undecided, since *of* is odd
        status = "ERROR"
    return MajorityVerdict(status, p, f, len(outcomes), of)


def aggregate(outcomes: list[RunOutcome]) -> dict[str, Any]:
    """--repeat: pass rate, and each numeric figure as min / max / avg / stddev."""
    ran = [o for o in outcomes if o.status in JUDGED]
    figs: dict[str, list[float]] = {}
    for o in ran:
        for e in o.expectations:
            for k, v in e.figures.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    figs.setdefault(f"{e.name}: {k}", []).append(float(v))
    stats = {}
    for k, v in figs.items():
        s = summary(v)
        stats[k] = {"min": s["min"], "max": s["max"], "avg": s["mean"], "stddev": s["stddev"], "n": s["n"]}
    per_exp: dict[str, list[bool]] = {}
    for o in ran:
        for e in o.expectations:
            per_exp.setdefault(e.name, []).append(e.ok)
    return {
        "runs": len(outcomes),
        "passed": sum(o.status == "PASS" for o in outcomes),
        "failed": sum(o.status == "FAIL" for o in outcomes),
        "errors": sum(o.status == "ERROR" for o in outcomes),
        "inconclusive": sum(o.status == "INCONCLUSIVE" for o in outcomes),
        # As lab compare counts: of the runs judged PASS or FAIL; ERROR, SKIP and
        # INCONCLUSIVE runs are counted apart, never as failures.
        "pass_rate": (sum(o.status == "PASS" for o in outcomes) / judged) if (judged := sum(o.status in ("PASS", "FAIL") for o in outcomes)) else 0.0,
        "not_judged": sum(o.status not in ("PASS", "FAIL") for o in outcomes),
        "expectations": {k: {"passed": sum(v), "runs": len(v)} for k, v in per_exp.items()},
        "figures": stats,
    }


def recheck(run_dir: Path, scenario_file: str | None = None, topo: Topology | None = None) -> RunOutcome:
    """Run a scenario's check() again on a run directory (no VM), if its data is complete:
    the same judgment as the live run (judge()), ERROR naming the cause otherwise.  *topo*:
    the run's topology when the caller has it (a bundle's spec), else plan.json's."""
    plan = VmPlan.read(run_dir) if topo is None else VmPlan.read_with(run_dir, topo)
    kernel = plan.kernel.name if plan.kernel else "?"
    record, why = integrity.read_record(run_dir)
    recorded = (record or {}).get("scenario")
    name = scenario_file or (recorded if isinstance(recorded, str) else "")
    o = RunOutcome(name or "?", plan.topo.name, kernel, "ERROR", run_dir, notes=list(plan.notes))
    if record is None or not name:
        o.message = why or "results.json names no scenario (give --scenario)"
        return o
    if record.get("topology") not in (None, plan.topo.name):
        raise UserError(
            f"{run_dir}: results.json's topology {str(record.get('topology'))[:60]!r} is not plan.json's "
            f"{plan.topo.name!r}: the records disagree about which machine the run was"
        )
    why = integrity.unfinished(record)
    if why:
        rec = record.get("integrity")
        o.integrity = _finished_record(rec) if isinstance(rec, dict) else {}
        o.message = why
        return o
    # A scenario file the user gives is code they chose to run; the one results.json
    # names is data: a name in lab's catalog, never a path to import.
    where = f"{run_dir / rundir.RESULTS}: scenario"
    s = sc.load(scenario_file) if scenario_file else sc.from_run(name, where, sc.recorded_in(run_dir))
    rec = sc.recorded_in(run_dir)
    if scenario_file and isinstance(rec, dict) and rec.get("name") == s.name and isinstance(rec.get("params"), dict) and s.params:
        s.set_params(rec["params"], where=f"{run_dir / rundir.PLAN}: params")
    exprs = record.get("check_expressions") or []
    if not isinstance(exprs, list) or not all(isinstance(x, str) for x in exprs):
        raise UserError(f"{run_dir / rundir.RESULTS}: check_expressions must be a list of strings")
    set_user_checks(s, exprs, where=f"{run_dir / rundir.RESULTS}: ")
    o.scenario = s.name
    o.scenario_version = s.version
    was = record.get("scenario_version")
    if was != s.version:
        o.notes.append(
            f"recorded with {s.name} version {was if isinstance(was, int) else '1 or older (not recorded)'}; "
            f"judged by version {s.version}: the run's steps may not be the scenario's steps now"
        )
    judge(o, s, plan, run_dir, integrity.need_for(record))
    return o


# ---- a verdict's runs side by side ------------------------------------------------------


def host_idle_cpus(
    sample_s: float = 0.3, *, read_stat=None, sleep=time.sleep, cpus: int | None = None
) -> float:
    """How many of the host's CPUs sat idle over *sample_s* seconds (/proc/stat; time
    the hypervisor stole counts as busy, as for the host clock)."""

    read = read_stat or (lambda: Path("/proc/stat").read_text())
    n = cpus or os.cpu_count() or 1
    try:
        b0, t0 = _host_ticks(read())
        sleep(sample_s)
        b1, t1 = _host_ticks(read())
    except (OSError, ValueError, IndexError):
        return 0.0  # unknown: nothing is assumed free
    if t1 <= t0:
        return 0.0
    return n * (1.0 - (b1 - b0) / (t1 - t0))


def guest_cores(plan: VmPlan, host_cpus: int | None = None) -> int:
    """Host CPUs one busy guest of *plan* keeps busy: one for single-threaded TCG (all
    vCPUs round-robin on one host thread), else a host thread per busy vCPU, up to the
    host's CPUs."""
    n = host_cpus or os.cpu_count() or 1
    if plan.accel == "tcg" and plan.tcg_threads == "single":
        return 1
    return max(1, min(plan.topo.n_cpus, n))


def side_by_side(
    plan: VmPlan, jobs: int | None, *, idle: float | None = None, host_cpus: int | None = None
) -> int:
    """How many of a verdict's runs go at once: *jobs* when the user gave it, else as
    many guests as the host's idle CPUs hold now, each taking guest_cores(plan), at least
    one.  Two single-threaded TCG guests on two idle cores cost about one's wall time;
    on a host another guest keeps busy the runs go one after the other, as before."""
    if jobs is not None:
        return max(1, jobs)
    free = host_idle_cpus(cpus=host_cpus) if idle is None else idle
    return max(1, int(free / guest_cores(plan, host_cpus) + 0.25))


def still_needed(outcomes: list[RunOutcome], of: int) -> int:
    """The fewest further runs that could decide a majority of up to *of*: never more
    than the runs one after the other would still take, so running them side by side
    never runs what the sequential rule would not (0: decided)."""
    v = majority(outcomes, of)
    if outcomes and v.decided:
        return 0
    return min(of - len(outcomes), of // 2 + 1 - max(v.passed, v.failed))


def run_verdict(
    s: sc.Scenario,
    sess: session.Session,
    of: int,
    *,
    jobs: int = 1,
    kernel_info: dict[str, Any] | None = None,
    progress: Progress | None = None,
    on_outcome=None,
) -> list[RunOutcome]:
    """The runs of one majority verdict of up to *of* (see Verdict), *jobs* at a time:
    each round starts as many runs as could still decide it (still_needed), at most
    *jobs*, and waits for all of them.  Same rule, same verdict as one run after another;
    only the wall time differs.  Outcomes are in the order the runs started; *on_outcome*
    sees each as its round ends.  With one at a time the run is in this thread, its boot's
    stages steps of *progress*.  Side by side each run is in a thread of its own, quiet
    (the progress step says which runs), and an interrupt (Ctrl-C, SIGTERM) is passed to
    each of them, so each run directory says it was interrupted and QEMU is stopped, as for
    one run; a run's error (bad input, lab's own bug) is raised once all have ended."""

    p = progress_mod.of(progress)
    outcomes: list[RunOutcome] = []
    while True:
        k = min(jobs, still_needed(outcomes, of))
        if k <= 0:
            return outcomes
        first = len(outcomes) + 1
        label = (
            (f"[{first}/{of}] " if k == 1 else f"[{first}-{first + k - 1}/{of}, side by side] ")
            if of > 1
            else ""
        )
        what = f"{label}{s.name} on {sess.topo.name} ({sess.kernel.name}, {sess.plan.accel})"
        if k == 1:
            with p.step("run", what):
                o = run_once(s, sess, kernel_info=kernel_info, progress=p)
            outcomes.append(o)
            if on_outcome:
                on_outcome(o)
            continue
        with p.step("run", what):
            results = _batch(s, sess, k, first, kernel_info)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        for r in results:
            assert isinstance(r, RunOutcome)
            outcomes.append(r)
            if on_outcome:
                on_outcome(r)


def _batch(
    s: sc.Scenario, sess: session.Session, k: int, first: int, kernel_info: dict[str, Any] | None
) -> list[Any]:
    """*k* runs of *s* at once, each in a thread of its own: their outcomes, or the
    exception a run raised, in start order (see run_verdict)."""

    results: list[RunOutcome | BaseException | None] = [None] * k
    done = [threading.Event() for _ in range(k)]
    caught: list[int] = []  # noted here, in the main thread; read by each run as it stops
    opened = [threading.Event() for _ in range(k)]  # run i has its run directory (or never will)

    def one(i: int) -> None:
        try:
            turn = (opened[i - 1] if i else None, opened[i])
            results[i] = run_once(s, sess, kernel_info=kernel_info, progress=None, caught=caught, turn=turn)
        except BaseException as e:  # handed to the main thread
            results[i] = e
        finally:
            opened[i].set()  # a run that skipped or failed before its directory lets the next go on
            done[i].set()

    threads = [
        threading.Thread(target=one, args=(i,), name=f"lab-run-{first + i}", daemon=True)
        for i in range(k)
    ]
    for t in threads:
        t.start()
    try:
        # Not Thread.join: a join a signal interrupts can leave the thread looking ended
        # (is_alive() False) while it runs on, and then it would miss the stop.
        with _signals_named(caught):
            for d in done:
                while not d.wait(0.2):
                    pass
    except KeyboardInterrupt as e:
        for t, d in zip(threads, done, strict=True):
            if not d.is_set():
                _interrupt(t)
        for d in done:
            d.wait(60)
        for r in results:
            for note in getattr(r, "__notes__", []) if isinstance(r, BaseException) else []:
                e.add_note(note)
        raise
    return results


def _interrupt(t: Any) -> None:
    """Raise KeyboardInterrupt in thread *t* at its next Python instruction (its boot
    polls QEMU every 50 ms), as a signal does in the main thread."""

    if t.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(t.ident), ctypes.py_object(KeyboardInterrupt)
        )
