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

from . import scenario as sc
from . import session, sysfs
from .errors import InfraError, LostGuest, UserError
from .image import initramfs
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
    topo: Topology,
    kernel_spec: str,
    *,
    accel: str = "auto",
    cpu_model: str = "auto",
    on_event=None,
    sess: session.Session | None = None,
    run_base: Path | None = None,
    kernel_info: dict[str, Any] | None = None,
) -> RunOutcome:
    t0 = time.monotonic()
    unmet = s.unmet(topo)
    if unmet:
        return RunOutcome(s.name, topo.name, kernel_spec, "SKIP", None, message=f"{topo.name} lacks: {'; '.join(unmet)}")
    sess = sess or session.prepare(topo, kernel_spec, accel=accel, cpu_model=cpu_model)
    run_dir = session.new_run_dir(s.name, topo, sess.kernel_label, base=run_base)
    session.write_plan(run_dir, sess)
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
        res = _boot(sess, run_dir, job, layers, s.timeout, on_event)
        out.timing["boot_to_agent_s"] = round(res.ready_s or 0, 2)
        out.timing["vm_s"] = round(res.wall_s, 2)
        out.timing["prepare_s"] = round(t_boot - t0, 2)
        for name in ("guest",):
            if (res.out_dir / name).exists():
                shutil.copytree(res.out_dir / name, run_dir / name, dirs_exist_ok=True)
        view = None
        if (res.out_dir / "guest").exists():
            from .expect import translate

            view = translate(sysfs.read_snapshot(res.out_dir / "guest"), sess.plan)
        r = sc.Result(s, topo, sess.plan, sess.kernel, res.out_dir, view)
        if res.rc == 90:
            out.message = "trace setup failed in the guest: " + _last(res.stderr)
            return out
        if res.rc not in (0, None):
            out.message = f"the job exited {res.rc}: {_last(res.stderr)}"
            return out
        failed = [st for st in (r.step(p.name[:-3]) for p in sorted(res.out_dir.glob("*.rc"))) if st.rc not in (0, None)]
        if failed:
            st = failed[0]
            out.message = f"workload step '{st.name}' exited {st.rc}: {_last(st.err) or _last(st.out)}"
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
    except (InfraError, UserError) as e:
        out.message = str(e)
    finally:
        out.timing["wall_s"] = round(time.monotonic() - t0, 2)
        write_results(out, run_dir)
    return out


def _boot(sess, run_dir, job, layers, timeout, on_event):
    from .backends import qemu as backend

    return backend.boot(sess.plan, sess.kernel, run_dir, job=job, layers=layers, timeout=timeout, on_event=on_event)


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-3:])


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


@dataclass
class StoredPlan:
    """The parts of a VmPlan that checks read, as plan.json recorded them."""

    guest_to_spec: tuple[int, ...]
    guest_node_to_spec: tuple[int, ...]
    guest_reclaim_distance: int
    cpu_vendor: str
    cpu_model: str
    accel: str
    numbering_mode: str
    notes: tuple[str, ...] = ()
    qemu_version: tuple[int, ...] = (0, 0, 0)


def recheck(run_dir: Path, scenario_file: str | None = None) -> RunOutcome:
    """Run a scenario's check() again on a finished run directory (no VM)."""
    from .topology import load

    plan_file = run_dir / "plan.json"
    if not plan_file.exists():
        raise UserError(f"{run_dir}: not a lab run directory (no plan.json)")
    pj = json.loads(plan_file.read_text())
    res = json.loads((run_dir / "results.json").read_text()) if (run_dir / "results.json").exists() else {}
    s = sc.load(scenario_file or res.get("scenario") or "")
    topo_file = pj.get("topology_file")
    topo = load(topo_file if topo_file and Path(topo_file).exists() else pj["topology"])
    plan = StoredPlan(
        tuple(pj["guest_to_spec"]),
        tuple(pj["guest_node_to_spec"]),
        pj["guest_node_reclaim_distance"],
        pj.get("cpu_vendor", "intel"),
        pj.get("cpu_model", ""),
        pj.get("accel", ""),
        pj.get("numbering", "native"),
        tuple(pj.get("notes", [])),
        tuple(pj.get("qemu_version", (0, 0, 0))),
    )
    out_dir = run_dir / "out"
    view = None
    if (run_dir / "guest").exists():
        from .expect import translate

        view = translate(sysfs.read_snapshot(run_dir / "guest"), plan)
    r = sc.Result(s, topo, plan, pj.get("kernel", {}), out_dir, view)
    o = RunOutcome(s.name, topo.name, pj.get("kernel", {}).get("name", "?"), "ERROR", run_dir, notes=list(plan.notes))
    o.expectations = sc.call_check(s, r)
    o.status = "PASS" if all(e.ok for e in o.expectations) else "FAIL"
    return o
