"""`lab minimize` and `lab attribute`: the smallest machine that still fails, and which
part of a machine a verdict hangs on (lab.minimize does the search and the statistics;
this module gives it a runner that boots VMs)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from .. import session, topology
from ..errors import UserError
from ..plan import VmOptions, VmPlan
from .common import TOPOLOGY, progress_for_cli
from .vm import vm_options


def _vm_runner(s, vm, base_name: str, workdir: Path, runs, p):
    """lab.minimize's Runner: each distinct spec written once to *workdir*/specs/ as
    BASE-mN.toml (its run directories point at it, so a bundle carries it), then one run
    of *s* on it as `lab run` makes it."""

    # deferred: CLI start (lab.minimize, lab.runner)
    from .. import minimize, runner

    names: dict[str, str] = {}

    def run(spec: dict[str, Any], label: str) -> dict[str, Any]:
        key = minimize.canonical(spec)
        if key not in names:
            names[key] = f"{base_name}-m{len(names)}"
            data = dict(spec)
            data["name"] = names[key]
            data["description"] = f"lab minimize / attribute of {base_name}: {label}"
            prov = dict(spec.get("provenance") or {})
            was = f"; {base_name}'s notes: {prov['notes']}" if prov.get("notes") else ""
            data["provenance"] = {**prov, "derived_from": base_name, "notes": f"{base_name} changed by lab ({label}){was}"}
            (workdir / "specs").mkdir(exist_ok=True)
            (workdir / "specs" / f"{names[key]}.toml").write_text(minimize.to_toml(data))
        topo = topology.load(workdir / "specs" / f"{names[key]}.toml")
        sess = session.prepare(topo, vm, runs=runs, progress=p)  # QEMU's refusal: a UserError, the change skipped
        argv = session.run_argv(s.name, topo, dataclasses.replace(sess.options, kernel=sess.kernel.id))
        with p.step("run", f"{label}: {s.name} on {topo.name} ({topo.n_cpus} CPUs, {sess.kernel.name})"), session.command(argv):
            o = runner.run_once(s, sess, on_event=lambda t, line: p.update(f"{line.removeprefix('lab: ')} (+{t:.1f}s)"))
        p.note(f"{label}: {o.status}{f' ({o.message})' if o.message else ''}; {o.run_dir}")
        return o.to_dict()

    return run


def _check(s):
    def check(topo) -> str | None:
        return s.skip_reason(topo)

    return check


def _input(source: Path):
    """RUN_DIR or BUNDLE -> (its record, re-judged; the spec file; the scenario; VmOptions)."""
    # deferred: CLI start (lab.compare, lab.minimize, lab.scenario)
    from .. import compare, minimize
    from .. import scenario as sc

    if source.is_file():
        # deferred: CLI start (lab.report.replay)
        from ..report import replay

        b = replay.open_bundle(source, None)
        rec = compare.load_run(b.run_dir)
        minimize.refuse_input(rec, str(source))  # before the bundle's kernel is got or rebuilt
        topo_file = b.file("topology")
        if topo_file is None:
            raise UserError(f"{source}: the bundle carries no topology spec")
        s, _ = replay.scenario_of(b)
        plan = json.loads((b.run_dir / "plan.json").read_text())
        spec, _notes = replay.kernel_spec(b, None)
        opts = dataclasses_replace(VmOptions.from_dict(plan.get("options") or {}), kernel=spec)
        return rec, str(topo_file), s, opts
    if not source.exists():
        raise UserError(f"{source}: no such run directory or bundle")
    rec = compare.load_run(source)
    minimize.refuse_input(rec, str(source))
    plan = VmPlan.read(source)
    if not plan.topo.path or not Path(plan.topo.path).is_file():
        raise UserError(f"{source}: the run's topology spec file is gone ({plan.topo.path})")
    name = rec.get("scenario")
    if not isinstance(name, str) or name not in sc.names():
        raise UserError(f"{source}: lab has no scenario {str(name)[:60]!r} to run")
    return rec, plan.topo.path, sc.load(name), plan.options  # its --kernel as given: the same kernel from the store


def dataclasses_replace(obj, **kw):
    return dataclasses.replace(obj, **kw)


@click.command("minimize")
@click.argument("source", metavar="RUN_DIR|BUNDLE", type=click.Path(path_type=Path))
@click.option("--runs", "n_runs", type=click.IntRange(1, 99), default=None,
              help="Runs per candidate machine (default: the scenario's verdict_runs).")
@click.option("--budget", default=None, metavar="T", help="Time to spend, e.g. 20m, 1.5h or 1200 (seconds); default: no limit.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Bundle of the smallest failing machine's run (default: in the minimize's directory).")
def minimize_cmd(source: Path, n_runs: int | None, budget: str | None, output: Path | None) -> None:
    """From a FAILing run, search the smallest machine that still fails: fewer sockets,
    nodes, LLCs, clusters, cores; SMT off; numbering linear; distances flattened; vendor
    switched; biggest removal first, each candidate judged over N runs with lab compare's
    statistics (see lab/minimize.py).  Prints the smallest machine and the chain of
    reductions with their rates, and bundles a failing run of the smallest machine.
    The search (minimize.json, minimize.txt, the candidate specs) is kept in a
    directory of its own; run directories go where `lab run` puts them ($LAB_RUNS: --runs
    here is the number of runs)."""
    # deferred: CLI start (lab.minimize, lab.report.bundle)
    from .. import minimize
    from ..report import bundle

    budget_s = minimize.parse_duration(budget) if budget is not None else None
    if output is not None and (output.is_dir() or not output.parent.is_dir()):
        raise UserError(f"-o {output}: " + ("a directory; give a file name" if output.is_dir() else "its folder does not exist"))
    rec, spec_file, s, opts = _input(source)
    n = n_runs or s.verdict_runs
    minimize.check_budget(budget_s, minimize.wall_s(rec, minimize.DEFAULT_RUN_COST_S), n)
    spec = minimize.load_spec(spec_file)
    topo = topology.load(spec_file)  # its name: the file's when the spec names none
    runs = None
    session.runs_folder(runs)
    p = progress_for_cli()
    session.prepare(topo, opts, progress=p)  # the kernel got (built, fetched) once, a bad one refused before anything
    d = session.new_run_dir("minimize", topo, Path(str(rec.get("kernel") or "kernel")).name, runs)
    res = minimize.minimize(spec, rec, _vm_runner(s, opts, topo.name, d, runs, p), runs=n, budget_s=budget_s, check=_check(s))
    doc = {"scenario": s.name, "source": str(source), "runs": n, **res.to_dict()}
    text = minimize.render_minimized(res)
    if res.smallest_run and res.smallest_run.get("run_dir"):
        out = output or d / "smallest.tar.gz"
        bundle.make(Path(res.smallest_run["run_dir"]), out)
        doc["bundle"] = str(out)
        text += f"bundle of the smallest: {out}\n"
    (d / "smallest.toml").write_text(minimize.to_toml(res.smallest))
    (d / "minimize.json").write_text(json.dumps(doc, indent=1) + "\n")
    (d / "minimize.txt").write_text(text)
    click.echo(text + f"saved in {d}", nl=True)


@click.command("attribute")
@click.argument("scenario_name", metavar="SCENARIO")
@click.option("-t", "--topology", "topo", type=TOPOLOGY, default=None, help="Topology (default: the scenario's first).")
@vm_options
@click.option("--runs", "n_runs", type=click.IntRange(1, 99), default=None,
              help="Runs per machine (default: the scenario's verdict_runs; a significant rate needs ~4 per side, more after the correction).")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
def attribute_cmd(scenario_name: str, topo, vm, n_runs: int | None, as_json: bool) -> None:
    """Run SCENARIO on the topology and on it with one property changed at a time (each
    level removed or merged, SMT off, distances flattened, numbering linear, vendor
    switched), and report which changes flip the verdict or move a figure significantly
    (Fisher for pass rates, Welch for figures, Holm's correction over the table).
    Run directories go where `lab run` puts them ($LAB_RUNS)."""
    # deferred: CLI start (lab.minimize, lab.scenario)
    from .. import minimize
    from .. import scenario as sc

    s = sc.load(scenario_name)
    topo = topo or topology.load(s.topologies[0])
    if not topo.path or not Path(topo.path).is_file():
        raise UserError(f"{topo.name}: lab attribute changes a topology spec file, and this one has none")
    spec = minimize.load_spec(topo.path)
    n = n_runs or s.verdict_runs
    runs = None
    session.runs_folder(runs)
    p = progress_for_cli()
    session.prepare(topo, vm, progress=p)  # the kernel got (built, fetched) once, a bad one refused before anything
    d = session.new_run_dir("attribute", topo, Path(vm.kernel).name, runs)
    doc = minimize.attribute(spec, _vm_runner(s, vm, topo.name, d, runs, p), runs=n, check=_check(s))
    doc = {"scenario": s.name, **doc}
    text = minimize.render_attribution(doc)
    (d / "attribute.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    (d / "attribute.txt").write_text(text)
    click.echo(json.dumps(doc, indent=1, default=str) if as_json else text + f"saved in {d}")
