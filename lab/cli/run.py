"""`lab run` and `lab scenarios`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from .. import paths, scaffold, session, topology
from ..errors import UserError
from ..report import verdicts
from .common import RUNS, console, one_of_scenario_or_workload, progress_for_cli, text_format_option
from .vm import scheduler_option, vm_options


@click.command("scenarios")
@text_format_option
def scenarios_cmd() -> None:
    """The scenarios (lab's scenarios/ and your own folders: $LAB_SCENARIOS, or
    `scenarios` in ~/.config/lab/config.toml; Python or TOML files) and what they reproduce."""
    # deferred: CLI start (rich, lab.scenario)
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
@click.option("--jobs", "jobs", type=click.IntRange(1, 64), default=None, metavar="N",
              help="Without --repeat: run up to N of a verdict's runs side by side (default: as many guests as the "
                   "host's idle CPUs hold now; the verdict rule is the same).")
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
    params: tuple[str, ...] = (), jobs: int | None = None,
) -> None:
    """Boot, run SCENARIO's workload with tracing on, and give a verdict with evidence.

    Exit 0 pass, 1 fail, 3 error (guest lost, workload failed, incomplete data: lost
    events, a results stream cut short, missing files, trace lines lab cannot read), 4
    inconclusive (complete data, but the emulation decided the outcome, or under --scheduler
    the claims are about the kernel's own scheduler: the message names the cause)."""

    # deferred: CLI start (lab.runner, lab.scenario)
    from .. import runner
    from .. import scenario as sc

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
        sys.exit(_tree_loop(s, topo, vm, kernel_tree, recipe, watch=watch, repeat=repeat, per_verdict=per_verdict, as_json=as_json,
                            runs=runs, jobs=jobs))  # fmt: skip
    session.runs_folder(runs)  # a bad runs folder is refused before any progress or build
    p = progress_for_cli()
    sess = session.prepare(topo, vm, runs=runs, progress=p)
    outcomes = _run_repeated(s, sess, repeat, as_json, per_verdict=per_verdict, progress=p, jobs=jobs)
    if repeat > 1:
        sys.exit(runner.EXIT[runner.worst(o.status for o in outcomes)])
    sys.exit(runner.EXIT[runner.majority(outcomes, per_verdict).status])


def _scenario(name: str | None, workloads: tuple[str, ...], checks: tuple[str, ...]):
    """The scenario `lab run` runs: SCENARIO (a name, a .py or .toml file), or the data
    scenario of --workload commands judged by the --check expressions."""
    # deferred: CLI start (lab.scenario)
    from .. import scenario as sc

    one_of_scenario_or_workload(name, workloads, "lab run")
    if workloads:
        return sc.from_workloads(workloads, checks)
    assert name is not None
    return sc.load(name)


def _run_repeated(
    s, sess, repeat: int, as_json: bool, kernel_info=None, json_lines: bool = False, per_verdict: int = 1, progress=None,
    jobs: int | None = None,
):
    """Run *s* *repeat* times on one prepared session; show each verdict (or the JSON)
    and, for more than one run, the spread.  With *per_verdict* > 1 (and one repeat)
    the verdict is the majority of up to that many runs, stopping once it is decided,
    up to *jobs* of them side by side (runner.run_verdict; None: as the host's idle CPUs
    allow).  Each run and its boot's stages are steps of *progress* (on stderr).
    Returns the outcomes."""
    # deferred: CLI start (lab.runner)
    from .. import runner

    p = progress or progress_for_cli()
    c = console(stderr=as_json)
    topo = sess.topo
    outcomes: list = []
    try:
        if repeat == 1:
            width = runner.side_by_side(sess.plan, jobs) if per_verdict > 1 else 1
            outcomes = runner.run_verdict(s, sess, per_verdict, jobs=width, kernel_info=kernel_info, progress=p,
                                          on_outcome=None if as_json else _show)  # fmt: skip
        for i in range(repeat if repeat > 1 else 0):
            with p.step("run", f"[{i + 1}/{repeat}] {s.name} on {topo.name} ({sess.kernel.name}, {sess.plan.accel})"):
                o = runner.run_once(s, sess, kernel_info=kernel_info, progress=p)
            outcomes.append(o)
            if not as_json:
                _show(o)
    except KeyboardInterrupt as e:  # say where the interrupted run is, and that it says so
        for note in getattr(e, "__notes__", []):
            console(stderr=True).print(note, markup=False, highlight=False, soft_wrap=True)
        raise
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


class _LoopView:
    """`lab run --kernel-tree`'s view of the loop (tree_loop.LoopView): on the console, or
    with --json the verdicts on stdout (one line each under --watch) and the rest on stderr."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.c = console(stderr=as_json)

    def judged(self, info, build_s: float, edit_to_verdict_s: float, changes: list[str]) -> None:
        self.c.print(f"judged {info['tree']} at {info['git_describe']} (uncommitted diff {info['diff_sha256']}); "
                     f"build {build_s:.1f}s, edit to verdict {edit_to_verdict_s:.1f}s", soft_wrap=True)  # fmt: skip
        for line in changes:
            self.c.print(f"  changed: {line}", markup=False, highlight=False)

    def error(self, e, info, previous) -> None:
        # deferred: CLI start (rich, lab.iterate)
        from rich.markup import escape

        from .. import iterate

        if self.as_json:  # the verdict stream gets the error too, as one line
            click.echo(json.dumps({"status": "ERROR", "message": " ".join(str(e).split()), "kernel_info": info,
                                   "previous_verdict": previous}))  # fmt: skip
        self.c.print("[red]error[/]: " + escape(" ".join(str(e).split())), highlight=False, soft_wrap=True)
        if e.detail:
            self.c.print(e.detail.rstrip(), markup=False, highlight=False, soft_wrap=True)
        if previous is not None:
            self.c.print(f"previous verdict kept: {iterate.describe_verdict(previous)}", markup=False, highlight=False, soft_wrap=True)

    def watching(self, tree, mode: str, why: str) -> None:
        how = "" if mode == "inotify" else f" (polling every 5 s: {why})"
        self.c.print(f"watching {tree} for changes{how}; Ctrl-C to stop", markup=False, highlight=False, soft_wrap=True)

    def rebuilding(self, changed: list[str]) -> None:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        what = ", ".join(changed[:3]) + more if changed else "the tree changed while lab was busy"
        self.c.print(f"rebuilding: {what}", markup=False, highlight=False, soft_wrap=True)


def _tree_loop(
    s, topo, vm, tree, recipe, *, watch: bool, repeat: int = 1, per_verdict: int = 1, as_json: bool = False, runs=None,
    jobs: int | None = None,
) -> int:
    """lab.tree_loop with this command's runs (a verdict's up to *jobs* side by side) and view."""
    # deferred: CLI start (lab.tree_loop)
    from .. import tree_loop

    view = _LoopView(as_json)
    p = progress_for_cli()

    def run(sess, info):
        return _run_repeated(s, sess, repeat, as_json, kernel_info=info, json_lines=watch, per_verdict=per_verdict, progress=p,
                             jobs=jobs)  # fmt: skip

    return tree_loop.tree_loop(s, topo, vm, tree, recipe, watch=watch, run=run, view=view, progress=p, repeat=repeat,
                               per_verdict=per_verdict, runs=runs)  # fmt: skip


def _show(o) -> None:
    # deferred: CLI start (rich)
    from rich.markup import escape

    c = console()
    for n in o.notes:
        c.print(f"[yellow]note[/]: {escape(n)}")
    if o.status in ("ERROR", "SKIP"):
        # The message may quote the guest (a step's stderr, a trace line): text, not markup.
        c.print(f"[red]{o.status}[/] {escape(f'{o.scenario} on {o.topology} ({o.kernel}): {o.message}')}", soft_wrap=True)
        if o.run_dir:
            c.print(f"run dir: {o.run_dir}", markup=False, highlight=False)
        return
    verdicts.show(c, o.expectations, f"lab run {o.scenario} --topology {o.topology} --kernel {o.kernel}")
    if o.checks:
        # deferred: CLI start (lab.analysis.checks)
        from ..analysis.checks import format_checks

        for line in format_checks(o.checks):
            c.print(line, markup=False, highlight=False)
    tm = o.timing
    if o.status == "INCONCLUSIVE":
        if any(e.bpf_scheduler for e in o.expectations):  # the claims are the kernel scheduler's, not the BPF one's
            c.print(f"{verdicts.mark(o.status)}: not the kernel's scheduler's run to judge: {escape(o.message)}")
        else:
            c.print(f"{verdicts.mark(o.status)}: the emulation, not the scheduler, decided this outcome: {escape(o.message)}")
    if not tm:
        c.print(f"{verdicts.mark(o.status)}  (rechecked) run dir {o.run_dir}")
        return
    c.print(
        f"{verdicts.mark(o.status)}  boot to agent {tm.get('boot_to_agent_s', 0):.1f}s, "
        f"VM {tm.get('vm_s', 0):.1f}s, total {tm.get('wall_s', 0):.1f}s; run dir {o.run_dir}"
    )


def _show_agg(agg) -> None:
    # deferred: CLI start (rich)
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
    # deferred: CLI start (lab.runner)
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

    if not directory:
        raise UserError("lab scenario new: -o '' names no folder (the default is the current one)")
    dest = scaffold.write(name, Path(directory), toml=as_toml)
    click.echo(f"wrote {dest}; run it with: lab run {dest}")


COMMANDS = [run_cmd, scenarios_cmd, recheck_cmd, scenario_group]
