"""`lab run` and `lab scenarios`."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from .common import RUNS, console, text_format_option
from .vm import scheduler_option, vm_options


@click.command("scenarios")
@text_format_option
def scenarios_cmd() -> None:
    """The scenarios (lab's scenarios/ and your own folders: $LAB_SCENARIOS, or
    `scenarios` in ~/.config/lab/config.toml; Python or TOML files) and what they reproduce."""
    from rich.table import Table

    from .. import scenario as sc

    c = console()
    t = Table(title="lab scenarios", title_justify="left")
    narrow = c.width < 120  # a mail or a narrow terminal: two columns, the prose wraps
    cols = ("scenario", "what it reproduces") if narrow else ("name", "seed", "default topology", "needs", "summary")
    for col in cols:
        t.add_column(col, no_wrap=col in ("scenario", "name", "seed", "default topology"))
    for name in sc.names():
        s = sc.load(name)
        needs = "; ".join([r.description for r in s.requires] + ([f"tools: {', '.join(s.tools)}"] if s.tools else [])
                          + ([f"-p {' '.join(f'{q.name}={sc.fmt_param(q.default)}' for q in s.params)}"] if s.params else []))
        label = f"{s.name} (TOML)" if str(s.path).endswith(".toml") else s.name
        if narrow:
            t.add_row(f"{label}\nseed {s.seed or '-'}\non {s.topologies[0]}", f"{s.summary}\nneeds: {needs}")
        else:
            t.add_row(label, s.seed or "-", s.topologies[0], needs, s.summary)
    c.print(t)


@click.command("run")
@click.argument("scenario_name", metavar="[SCENARIO]", required=False)
@click.option("--workload", "workloads", multiple=True, metavar="CMD",
              help="Run this command in the guest instead of a scenario (repeatable: all at once, traced together), "
                   "e.g. 'hackbench -g 4 -l 2000'; split like a shell's words on the host, never run through one; "
                   "judged by the --check expressions.")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A scenario parameter (repeatable), e.g. -p threads=16; `lab scenarios` lists each scenario's.")
@click.option("-t", "--topology", "topo_name", default=None, help="Topology (default: the scenario's first).")
@vm_options
@scheduler_option
@click.option("--repeat", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Run N times, each run its own verdict; report the pass rate and spread.")
@click.option("--runs-per-verdict", type=click.IntRange(1, 99), default=None, metavar="K",
              help="Without --repeat: the verdict is the majority of up to K runs (odd; default: the scenario's verdict_runs).")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@text_format_option
@click.option("--kernel-tree", type=click.Path(path_type=__import__("pathlib").Path), default=None,
              help="Build this kernel tree (out of tree, in lab's cache) and judge it.")
@click.option("--recipe", default=None, help="Config, fragments and patches for --kernel-tree: a recipe name or a recipe.toml path (default: the recipe of the tree's kernel line, lab-6.12 for a 6.12 tree; else lab-6.1 / lab-6.1-arm64).")
@click.option("--watch", is_flag=True, help="With --kernel-tree: rebuild and rerun whenever the tree changes.")
@click.option("--check", "check_exprs", multiple=True, metavar="EXPR",
              help="Judge a check every run gets as an expectation, e.g. 'starvation < 100ms', 'wakeup-latency p99 < 5ms', "
                   "'work-conservation < 2%', 'migrations node < 10/s', 'affinity == 0', 'fairness cv < 0.3' (repeatable).")
@RUNS
def run_cmd(
    scenario_name: str | None, topo_name: str | None, vm, repeat: int, runs_per_verdict: int | None, as_json: bool, kernel_tree,
    recipe: str | None, watch: bool, runs, check_exprs: tuple[str, ...] = (), workloads: tuple[str, ...] = (),
    params: tuple[str, ...] = (),
) -> None:
    """Boot, run SCENARIO's workload with tracing on, and give a verdict with evidence.

    Exit 0 pass, 1 fail, 3 error (guest lost, workload failed, incomplete data: lost
    events, a results stream cut short, missing files, trace lines lab cannot read), 4
    inconclusive (complete data, but the emulation decided the outcome: the scenario names
    the cause)."""
    from click.core import ParameterSource

    from .. import paths, progress, runner, session, topology
    from .. import scenario as sc
    from ..errors import UserError

    s = _scenario(scenario_name, workloads, check_exprs)
    runner.set_user_checks(s, check_exprs)  # a bad expression: one line, exit 2, before anything
    s.set_params(sc.parse_assignments(params))  # a bad value: one line, before anything boots
    topo = topology.load(topo_name or s.topologies[0])
    why = s.skip_reason(topo)  # before a kernel is built or fetched; its own needs: runner.run_once
    if why:
        msg = f"SKIP {s.name} on {topo.name}: {why}"
        click.echo(json.dumps({"scenario": s.name, "topology": topo.name, "status": "SKIP", "message": msg}) if as_json else msg)
        sys.exit(0)
    if kernel_tree is None and (watch or recipe):
        raise UserError("--watch and --recipe go with --kernel-tree")
    if runs_per_verdict is not None and (runs_per_verdict % 2 == 0 or repeat > 1):
        raise UserError("--runs-per-verdict takes an odd number (a majority must exist) and does not go with --repeat")
    per_verdict = 1 if repeat > 1 else (runs_per_verdict or s.verdict_runs)
    if kernel_tree is not None:
        if click.get_current_context().get_parameter_source("kernel_spec") is ParameterSource.COMMANDLINE:
            raise UserError("give --kernel or --kernel-tree, not both")
        # Checked before anything is built: a run directory never lands in the tree.
        paths.check_runs_outside(paths.runs_dir(runs), kernel_tree)
        sys.exit(_tree_loop(s, topo, vm, kernel_tree, recipe, watch=watch, repeat=repeat, per_verdict=per_verdict, as_json=as_json, runs=runs))
    session.runs_folder(runs)  # a bad runs folder is refused before any progress or build
    p = progress.for_cli()
    sess = session.prepare(topo, vm, runs=runs, progress=p)
    outcomes = _run_repeated(s, sess, repeat, as_json, per_verdict=per_verdict, progress=p)
    if repeat > 1:
        sys.exit(runner.EXIT[runner.worst(o.status for o in outcomes)])
    sys.exit(runner.EXIT[runner.majority(outcomes, per_verdict).status])


def _scenario(name: str | None, workloads: tuple[str, ...], checks: tuple[str, ...]):
    """The scenario `lab run` runs: SCENARIO (a name, a .py or .toml file), or the data
    scenario of --workload commands judged by the --check expressions."""
    from .. import scenario as sc
    from ..errors import UserError

    if workloads:
        if name is not None:
            raise UserError(f"give a SCENARIO or --workload CMD, not both ({name!r} and --workload)")
        return sc.from_workloads(workloads, checks)
    if name is None:
        raise UserError("lab run: give a SCENARIO (`lab scenarios` lists them) or --workload CMD with --check EXPR")
    return sc.load(name)


def _run_repeated(
    s, sess, repeat: int, as_json: bool, kernel_info=None, json_lines: bool = False, per_verdict: int = 1, progress=None
):
    """Run *s* *repeat* times on one prepared session; show each verdict (or the JSON)
    and, for more than one run, the spread.  With *per_verdict* > 1 (and one repeat)
    the verdict is the majority of up to that many runs, stopping once it is decided.
    Each run and its boot's stages are steps of *progress* (on stderr).  Returns the
    outcomes."""
    from .. import progress as progress_mod
    from .. import runner

    p = progress or progress_mod.for_cli()
    c = console(stderr=as_json)
    topo = sess.topo
    outcomes: list = []
    total = repeat if repeat > 1 else per_verdict
    for i in range(total):
        if repeat == 1 and i and runner.majority(outcomes, per_verdict).decided:
            break
        label = f"[{i + 1}/{total}] " if total > 1 else ""
        try:
            with p.step("run", f"{label}{s.name} on {topo.name} ({sess.kernel.name}, {sess.plan.accel})"):
                o = runner.run_once(s, sess, kernel_info=kernel_info, progress=p)
        except KeyboardInterrupt as e:  # say where the interrupted run is, and that it says so
            for note in getattr(e, "__notes__", []):
                console(stderr=True).print(note, markup=False, highlight=False, soft_wrap=True)
            raise
        outcomes.append(o)
        if not as_json:
            _show(o)
    agg = runner.aggregate(outcomes) if repeat > 1 else None
    verdict = runner.majority(outcomes, per_verdict) if repeat == 1 and per_verdict > 1 else None
    if as_json:
        doc: dict[str, Any] = {"runs": [o.to_dict() for o in outcomes]}
        if agg:
            doc["summary"] = agg
        if verdict:
            doc["verdict"] = verdict.to_dict()
        click.echo(json.dumps(doc, indent=None if json_lines else 1, default=str))
    elif agg:
        _show_agg(agg)
    elif verdict:
        colour = {"PASS": "green", "FAIL": "red", "INCONCLUSIVE": "yellow"}.get(verdict.status, "red")
        c.print(f"verdict [{colour}]{verdict.status}[/]: {verdict.passed} PASS, {verdict.failed} FAIL in {verdict.runs} run(s); "
                f"{s.name} takes the majority of up to {per_verdict} runs (single runs under TCG are not stable enough: "
                "see the scenario)", soft_wrap=True, highlight=False)
    return outcomes


def _tree_loop(s, topo, vm, tree, recipe, *, watch: bool, repeat: int = 1, per_verdict: int = 1, as_json: bool = False, runs=None) -> int:
    """Build the developer's tree, run, show the verdict; with watch, again on every change.

    A build that fails shows the compiler's errors and the log, and says which verdict
    still stands (the last one for this tree, from this run or an earlier one).  With
    --json the verdicts go to stdout as JSON (one line each under --watch) and the rest
    to stderr."""
    import dataclasses
    import time

    from rich.markup import escape

    from .. import iterate, progress, runner, session
    from .. import watch as watch_mod
    from ..errors import LabError

    c = console(stderr=as_json)
    p = progress.for_cli()
    tree = iterate.check_tree(tree, topo.arch)
    iterate.tree_recipe(tree, topo.arch, recipe)  # a bad --recipe is refused before any work
    if vm.backend == "vng" and recipe:
        from ..errors import UserError

        raise UserError("--recipe builds with lab's build; with --backend vng the tree is built by vng --build (vng's config + lab's fragments)")
    last = None
    fp = iterate.fingerprint(tree)
    while True:
        info = iterate.describe(tree)
        t0 = time.monotonic()
        try:
            with p.step("build", f"{tree} ({info.get('git_describe')}, diff {info.get('diff_sha256')})"):
                if vm.backend == "vng":  # vng's own build: its config + lab's fragments, checked (backends.vng)
                    from ..backends import vng as vng_backend

                    art = vng_backend.build_tree(tree, topo.arch)
                else:
                    art = iterate.tree_kernel(tree, topo.arch, recipe, progress=p.callback())
            build_s = time.monotonic() - t0
            sess = session.prepare(topo, dataclasses.replace(vm, kernel=art.id), runs=runs, progress=p,
                                   artifact=art if vm.backend == "vng" else None)  # fmt: skip
            outs = _run_repeated(s, sess, repeat, as_json, kernel_info=info, json_lines=watch, per_verdict=per_verdict, progress=p)
            edit_to_verdict = time.monotonic() - t0
            for o in outs:  # the loop's own figures go into each run's results.json too
                o.timing.update(build_s=round(build_s, 2), edit_to_verdict_s=round(edit_to_verdict, 2))
                if o.run_dir:
                    runner.write_results(o, o.run_dir)
            o = _standing(outs, repeat, per_verdict)
            c.print(f"judged {info['tree']} at {info['git_describe']} (uncommitted diff {info['diff_sha256']}); "
                    f"build {build_s:.1f}s, edit to verdict {edit_to_verdict:.1f}s", soft_wrap=True)
            for line in iterate.verdict_changes(last, o):
                c.print(f"  changed: {line}", markup=False, highlight=False)
            if o.status in runner.JUDGED:
                iterate.save_verdict(tree, topo.arch, recipe, o, info)
                last = o
            rc = runner.EXIT[o.status]
        except LabError as e:
            prev = iterate.last_verdict(tree, topo.arch, recipe)
            if not watch:
                if prev is not None:  # printed after the error and its evidence
                    e.detail = (e.detail.rstrip() + "\n" if e.detail else "") + (
                        f"previous verdict for this tree kept: {iterate.describe_verdict(prev)}"
                    )
                raise
            if as_json:  # the verdict stream gets the error too, as one line
                click.echo(json.dumps({"status": "ERROR", "message": " ".join(str(e).split()), "kernel_info": info,
                                       "previous_verdict": prev}))  # fmt: skip
            c.print("[red]error[/]: " + escape(" ".join(str(e).split())), highlight=False, soft_wrap=True)
            if e.detail:
                c.print(e.detail.rstrip(), markup=False, highlight=False, soft_wrap=True)
            if prev is not None:
                c.print(f"previous verdict kept: {iterate.describe_verdict(prev)}", markup=False, highlight=False, soft_wrap=True)
            rc = e.exit_code
        if not watch:
            return rc

        def said(mode: str, why: str) -> None:
            how = "" if mode == "inotify" else f" (polling every 5 s: {why})"
            c.print(f"watching {tree} for changes{how}; Ctrl-C to stop", markup=False, highlight=False, soft_wrap=True)

        try:
            fp, changed = watch_mod.wait_for_change(tree, lambda: iterate.fingerprint(tree), fp, on_mode=said)
        except KeyboardInterrupt:
            return rc
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        what = ", ".join(changed[:3]) + more if changed else "the tree changed while lab was busy"
        c.print(f"rebuilding: {what}", markup=False, highlight=False, soft_wrap=True)


def _standing(outs, repeat: int, per_verdict: int):
    """The run that stands for the tree: the worst of --repeat runs, or of the majority
    verdict's runs one that agrees with the majority (an ERROR stands when one ran)."""
    from .. import runner

    if repeat > 1 or per_verdict == 1:
        return max(outs, key=lambda x: runner.SEVERITY.get(x.status, 3))
    v = runner.majority(outs, per_verdict)
    return next((o for o in reversed(outs) if o.status == v.status), outs[-1])


def _mark(status: str) -> str:
    return f"[{ {'PASS': 'green', 'INCONCLUSIVE': 'yellow'}.get(status, 'red') }]{status}[/]"


def _fig(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return str(v)


def _show(o) -> None:
    from rich.markup import escape
    from rich.table import Table

    c = console()
    for n in o.notes:
        c.print(f"[yellow]note[/]: {escape(n)}")
    if o.status in ("ERROR", "SKIP"):
        # The message may quote the guest (a step's stderr, a trace line): text, not markup.
        c.print(f"[red]{o.status}[/] {escape(f'{o.scenario} on {o.topology} ({o.kernel}): {o.message}')}", soft_wrap=True)
        if o.run_dir:
            c.print(f"run dir: {o.run_dir}", markup=False, highlight=False)
        return
    t = Table(title=f"lab run {o.scenario} --topology {o.topology} --kernel {o.kernel}", title_justify="left")
    t.add_column("expectation")
    t.add_column("result")
    t.add_column("figures")
    for e in o.expectations:
        t.add_row(escape(e.name), _mark(e.status), escape("  ".join(f"{k}={_fig(v)}" for k, v in e.figures.items())))
    c.print(t)
    for e in o.expectations:
        if e.status != "PASS":
            c.print(f"{_mark(e.status)} {escape(e.name)}")
            if e.inconclusive:
                c.print(f"  cause: {escape(e.inconclusive)}")
            elif e.note:
                c.print(f"  why: {escape(e.note)}")
            for line in e.evidence[:12]:
                c.print(f"  {line}", markup=False, highlight=False)
            if len(e.evidence) > 12:
                c.print(f"  ... {len(e.evidence) - 12} more in results.json")
    if o.checks:
        from ..analysis.checks import format_checks

        for line in format_checks(o.checks):
            c.print(line, markup=False, highlight=False)
    tm = o.timing
    if o.status == "INCONCLUSIVE":
        c.print(f"{_mark(o.status)}: the emulation, not the scheduler, decided this outcome: {escape(o.message)}")
    if not tm:
        c.print(f"{_mark(o.status)}  (rechecked) run dir {o.run_dir}")
        return
    c.print(
        f"{_mark(o.status)}  boot to agent {tm.get('boot_to_agent_s', 0):.1f}s, "
        f"VM {tm.get('vm_s', 0):.1f}s, total {tm.get('wall_s', 0):.1f}s; run dir {o.run_dir}"
    )


def _show_agg(agg) -> None:
    from rich.table import Table

    c = console()
    judged = agg["passed"] + agg["failed"]
    c.print(f"runs {agg['runs']}: {agg['passed']} passed, {agg['failed']} failed, {agg['errors']} errors, "
            f"{agg['inconclusive']} inconclusive; pass rate {agg['pass_rate']:.0%} of the {judged} judged")  # fmt: skip
    t = Table(title="figures over runs", title_justify="left")
    for col in ("figure", "min", "max", "avg", "stddev"):
        t.add_column(col)
    for k, v in agg["figures"].items():
        t.add_row(k, *(f"{v[x]:.4g}" for x in ("min", "max", "avg", "stddev")))
    c.print(t)


@click.command("recheck")
@text_format_option
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=__import__("pathlib").Path))
@click.option("--scenario", "scenario_file", default=None, help="Check with this scenario (name or file) instead of the recorded one.")
def recheck_cmd(run_dir, scenario_file) -> None:
    """Run a scenario's checks again on a finished run directory, without booting.

    Exit 0 pass, 1 fail, 4 inconclusive, 3 error: a run that did not finish (interrupted, lab killed,
    guest lost) or whose data is incomplete is not judged; the message names the cause."""
    from .. import runner

    o = runner.recheck(run_dir, scenario_file)
    _show(o)
    sys.exit(runner.EXIT[o.status])


@click.group("scenario")
def scenario_group() -> None:
    """Write scenarios: `lab scenario new NAME`."""


@scenario_group.command("new")
@click.argument("name")
@click.option("--toml", "as_toml", is_flag=True, help="A TOML scenario (commands and checks, no Python).")
@click.option("-o", "--dir", "directory", default=".",
              show_default=True, help="Where the file goes (a folder in $LAB_SCENARIOS makes it a catalog name).")
def scenario_new_cmd(name: str, as_toml: bool, directory) -> None:
    """Write a commented skeleton for scenario NAME (NAME.py, or NAME.toml with --toml) that
    runs and passes as written: edit it into your own question, then `lab run ./FILE`."""
    from pathlib import Path

    from .. import scaffold
    from ..errors import UserError

    if not directory:
        raise UserError("lab scenario new: -o '' names no folder (the default is the current one)")
    dest = scaffold.write(name, Path(directory), toml=as_toml)
    click.echo(f"wrote {dest}; run it with: lab run {dest}")


COMMANDS = [run_cmd, scenarios_cmd, recheck_cmd, scenario_group]
