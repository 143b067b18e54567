"""`lab run`: boot, run a scenario's steps with tracing on, check, report.

The run directory keeps everything: the command that reproduces it, QEMU argv,
console, the raw traces, the guest's topology snapshot, results.json and
junit.xml.  A failure at any point still writes results.json with what was
gathered; QEMU is always stopped (backends.qemu).
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from . import proc, session, sysfs
from . import scenario as sc
from .errors import InfraError, LostGuest, UserError
from .image import initramfs
from .plan import VmPlan
from .topology import Topology

EXIT = {"PASS": 0, "FAIL": 1, "SKIP": 0, "ERROR": 3}


@dataclass
class RunOutcome:
    scenario: str
    topology: str
    kernel: str
    status: str  # PASS | FAIL | ERROR | SKIP
    run_dir: Path | None
    expectations: list[sc.Expectation] = field(default_factory=list)
    message: str = ""
    timing: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    kernel_info: dict[str, Any] = field(default_factory=dict)  # e.g. the tree's git describe

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
        }


def workloads_layer(arch: str) -> Path:
    from .image import workloads

    key = workloads.inputs_hash(arch)
    cached = initramfs.layer_path("workloads", key)
    if cached.exists():
        return cached
    with tempfile.TemporaryDirectory(prefix="lab-wl-") as tmp:
        root = Path(tmp) / "root"
        workloads.build(arch, root / "usr" / "local" / "bin")
        return initramfs.tree_layer("workloads", root, key)


def tools_layer(arch: str, tools: list[str]) -> Path | None:
    if not tools:
        return None
    from .image import tools as tools_mod

    key = tools_mod.tools_hash(arch, tools)
    cached = initramfs.layer_path("tools", key)
    if cached.exists():
        return cached
    with tempfile.TemporaryDirectory(prefix="lab-tools-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        staged = tools_mod.stage_tools(root, arch, tools)
        if not staged:
            raise UserError(f"cannot pack {', '.join(tools)} for {arch} guests yet (host tools are staged for the host's arch only)")
        return initramfs.tree_layer("tools", root, key)


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
) -> RunOutcome:
    """Boot *sess*, run *s* in the guest and judge it.  A run that cannot start for the
    user's reason (e.g. a tool that cannot be packed) still leaves its run directory, then
    raises the UserError (exit 2)."""
    t0 = time.monotonic()
    topo = sess.topo
    unmet = s.unmet(topo)
    if unmet:
        return RunOutcome(s.name, topo.name, sess.kernel.name, "SKIP", None, message=f"{topo.name} lacks: {'; '.join(unmet)}")
    run_dir = session.open_run(s.name, sess)
    out = RunOutcome(s.name, topo.name, sess.kernel.name, "ERROR", run_dir, notes=list(sess.plan.notes))
    out.kernel_info = {"id": sess.kernel.id, "release": sess.kernel.release, **(kernel_info or {})}
    try:
        layers = []
        if s.workloads:
            layers.append(workloads_layer(topo.arch))
        tl = tools_layer(topo.arch, list(s.tools))
        if tl is not None:
            layers.append(tl)
        job = job_script(s, topo)
        (run_dir / "job.sh").write_text(job)
        t_boot = time.monotonic()
        from .backends import qemu as backend

        res = backend.boot(sess.plan, sess.kernel, run_dir, backend.GuestJob(job, layers=tuple(layers)), timeout=s.timeout, on_event=on_event)
        out.timing["boot_to_agent_s"] = round(res.ready_s or 0, 2)
        out.timing["vm_s"] = round(res.wall_s, 2)
        out.timing["prepare_s"] = round(t_boot - t0, 2)
        if (res.out_dir / "guest").exists():
            shutil.copytree(res.out_dir / "guest", run_dir / "guest", dirs_exist_ok=True)
        r = _result(s, sess.plan, res.out_dir, run_dir / "guest")
        if res.rc == 90:
            out.message = "trace setup failed in the guest: " + proc.tail(res.stderr)
            return out
        if res.rc not in (0, None):
            out.message = f"the job exited {res.rc}: {proc.tail(res.stderr)}"
            return out
        failed = [st for st in (r.step(p.name[:-3]) for p in sorted(res.out_dir.glob("*.rc"))) if st.rc not in (0, None)]
        if failed:
            st = failed[0]
            out.message = f"workload step '{st.name}' exited {st.rc}: {proc.tail(st.err) or proc.tail(st.out)}"
            return out
        for ph in r.phases:
            lost = r.lost(ph)
            if lost:
                out.message = (
                    f"trace phase '{ph}' lost {lost} events (ring buffer overrun): raise buffer_kb "
                    f"({s.buffer_kb} KiB per CPU) or trace fewer events"
                )
                return out
        out.expectations = sc.call_check(s, r)
        out.status = "PASS" if all(e.ok for e in out.expectations) else "FAIL"
    except LostGuest as e:
        out.message = str(e)
        (run_dir / "console.tail").write_text(e.detail)
    except sc.ScenarioError:
        raise
    except UserError as e:
        out.message = str(e)
        raise  # bad input exits 2 (the run directory keeps the message)
    except InfraError as e:
        out.message = str(e)
    finally:
        out.timing["wall_s"] = round(time.monotonic() - t0, 2)
        write_results(out, run_dir)
    return out


def _result(s: sc.Scenario, plan: VmPlan, out_dir: Path, guest_dir: Path) -> sc.Result:
    """What check() gets, live or rechecked alike: the plan, the kernel it names, the
    files, and the guest's topology snapshot in the spec's numbering."""
    view = None
    if guest_dir.exists():
        from .expect import translate

        view = translate(sysfs.read_snapshot(guest_dir), plan)
    return sc.Result(s, plan.topo, plan, plan.kernel, out_dir, view)


def write_results(out: RunOutcome, run_dir: Path) -> None:
    (run_dir / "results.json").write_text(json.dumps(out.to_dict(), indent=1, default=str))
    (run_dir / "junit.xml").write_text(junit([out]))


def junit(outcomes: list[RunOutcome]) -> str:
    cases = []
    fails = errors = skipped = 0
    for o in outcomes:
        cls = escape(f"lab.{o.scenario}.{o.topology}.{o.kernel}", {'"': "&quot;"})
        if o.status == "SKIP":
            skipped += 1
            cases.append(f'  <testcase classname="{cls}" name="run"><skipped message="{escape(o.message, {chr(34): "&quot;"})}"/></testcase>')
            continue
        if o.status == "ERROR":
            errors += 1
            cases.append(
                f'  <testcase classname="{cls}" name="run" time="{o.timing.get("wall_s", 0)}"><error message="{escape(o.message, {chr(34): "&quot;"})}"/></testcase>'
            )
            continue
        for e in o.expectations:
            body = ""
            if not e.ok:
                fails += 1
                text = escape("\n".join([e.note, *e.evidence]).strip())
                body = f'<failure message="{escape(e.name, {chr(34): "&quot;"})}">{text}</failure>'
            cases.append(f'  <testcase classname="{cls}" name="{escape(e.name, {chr(34): "&quot;"})}">{body}</testcase>')
    total = len(cases)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="lab" tests="{total}" failures="{fails}" errors="{errors}" skipped="{skipped}">\n'
        + "\n".join(cases)
        + "\n</testsuite>\n"
    )


def aggregate(outcomes: list[RunOutcome]) -> dict[str, Any]:
    """--repeat: pass rate, and each numeric figure as min / max / avg / stddev."""
    ran = [o for o in outcomes if o.status in ("PASS", "FAIL")]
    figs: dict[str, list[float]] = {}
    for o in ran:
        for e in o.expectations:
            for k, v in e.figures.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    figs.setdefault(f"{e.name}: {k}", []).append(float(v))
    stats = {
        k: {
            "min": min(v),
            "max": max(v),
            "avg": statistics.fmean(v),
            "stddev": statistics.pstdev(v) if len(v) > 1 else 0.0,
            "n": len(v),
        }
        for k, v in figs.items()
    }
    per_exp: dict[str, list[bool]] = {}
    for o in ran:
        for e in o.expectations:
            per_exp.setdefault(e.name, []).append(e.ok)
    return {
        "runs": len(outcomes),
        "passed": sum(o.status == "PASS" for o in outcomes),
        "failed": sum(o.status == "FAIL" for o in outcomes),
        "errors": sum(o.status == "ERROR" for o in outcomes),
        "pass_rate": (sum(o.status == "PASS" for o in outcomes) / len(outcomes)) if outcomes else 0.0,
        "expectations": {k: {"passed": sum(v), "runs": len(v)} for k, v in per_exp.items()},
        "figures": stats,
    }


def recheck(run_dir: Path, scenario_file: str | None = None) -> RunOutcome:
    """Run a scenario's check() again on a finished run directory (no VM)."""
    plan = VmPlan.read(run_dir)
    res = json.loads((run_dir / "results.json").read_text()) if (run_dir / "results.json").exists() else {}
    s = sc.load(scenario_file or res.get("scenario") or "")
    r = _result(s, plan, run_dir / "out", run_dir / "guest")
    kernel = plan.kernel.name if plan.kernel else "?"
    o = RunOutcome(s.name, plan.topo.name, kernel, "ERROR", run_dir, notes=list(plan.notes))
    o.expectations = sc.call_check(s, r)
    o.status = "PASS" if all(e.ok for e in o.expectations) else "FAIL"
    return o
