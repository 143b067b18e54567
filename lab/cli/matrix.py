"""`lab matrix`, `lab matrix plan`, `lab matrix merge`."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from .. import paths
from ..backends import base
from ..errors import UserError, storage_error
from ..plan import VmOptions
from .common import console, progress_for_cli
from .run import run_cmd
from .vm import RUN_OPTIONS

# The VM options of `lab run` but --kernel (the matrix's --kernels axis replaces it) and
# the backend (the matrix's --backend, and --connect repeated to spread cells over hosts).
_VM_FLAGS = RUN_OPTIONS


def axis_options(f):
    """The axes and run options `lab matrix` and `lab matrix plan` share; the command
    gets them as one ``axes: dict``."""

    @functools.wraps(f)
    def command(*args, topologies, kernels, scenarios, repeat, backend, accel, cpu_model, tcg_threads, bringup, append, qemu, params=(),
                schedulers="", workloads=(), check_exprs=(), **kw):
        if check_exprs and not workloads:
            raise UserError("lab matrix --check: goes with --workload (a scenario's own checks judge its cells)")
        if workloads and scenarios != "all":
            raise UserError(f"lab matrix: give --scenarios or --workload, not both (--scenarios {scenarios})")
        axes = {
            "topologies": topologies, "kernels": kernels, "scenarios": scenarios, "repeat": repeat, "backend": backend,
            "workloads": tuple(workloads), "checks": tuple(check_exprs),
            "params": tuple(params), "schedulers": schedulers or "", "options": VmOptions(accel=accel or VmOptions.accel, cpu_model=cpu_model, tcg_threads=tcg_threads, bringup=bringup,
                                 append=append, qemu=qemu),
        }  # fmt: skip
        return f(*args, axes=axes, **kw)

    for opt in reversed(_VM_FLAGS):
        command = opt(command)
    opts = (
        click.option("--topologies", default=None, metavar="A,B|all-minis|all", help="Topologies: catalog names or spec files, or all-minis."),
        click.option("--kernels", default="debian", show_default=True, metavar="K1,K2", help="Kernels (the table's columns): debian, recipes, store ids, image paths."),
        click.option("--schedulers", default="", metavar="S1,S2",
                     help="sched_ext schedulers, an axis inside the kernels (eevdf or cfs: the kernel's own; lab scheduler list); each cell's lab run gets --scheduler."),
        click.option("--scenarios", default="all", show_default=True, metavar="S1,S2|all", help="Scenarios."),
        click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
                     help="Runs per cell, each its own verdict; the cell passes when all pass."),
        click.option("--backend", default="qemu", show_default=True, metavar="|".join(base.names()), help="How each cell's VM is run."),
        click.option("-p", "--param", "params", multiple=True, metavar="NAME=A,B",
                     help="Sweep a scenario parameter: each scenario declaring NAME is a row per value (repeatable: every combination)."),
        click.option("--workload", "workloads", multiple=True, metavar="CMD",
                     help="Instead of --scenarios: one row of these commands (repeatable, run together, traced), as `lab run --workload`."),
        click.option("--check", "check_exprs", multiple=True, metavar="EXPR",
                     help="With --workload: what its cells are judged by (repeatable), as `lab run --check`."),
    )  # fmt: skip
    for opt in reversed(opts):
        command = opt(command)
    return command


def _expand(axes):
    # deferred: CLI start (lab.matrix)
    from .. import matrix

    if axes["topologies"] is None:
        raise UserError("lab matrix: give --topologies (names, or all-minis)")
    scenarios = axes["scenarios"]
    if axes.get("workloads"):  # a TOML scenario file, named by its content (scenario.workload_file)
        # deferred: CLI start (lab.scenario)
        from .. import scenario

        scenarios = str(scenario.workload_file(axes["workloads"], axes.get("checks", ())))
    return matrix.expand(
        scenarios, axes["topologies"], axes["kernels"], repeat=axes["repeat"], options=axes["options"],
        backend=axes["backend"], params=axes.get("params", ()), schedulers=axes.get("schedulers", ""),
    )  # fmt: skip


def _args(axes) -> list[str]:
    """The `lab matrix` arguments that make the same matrix (for the CI's jobs)."""

    out = ["--topologies", axes["topologies"], "--kernels", axes["kernels"]]
    if axes.get("workloads"):  # the commands themselves: the CI's job makes its own file of them
        for w in axes["workloads"]:
            out += ["--workload", w]
        for c in axes.get("checks", ()):
            out += ["--check", c]
    else:
        out += ["--scenarios", axes["scenarios"]]
    if axes["repeat"] > 1:
        out += ["--repeat", str(axes["repeat"])]
    for p in axes.get("params", ()):
        out += ["-p", p]
    if axes.get("schedulers"):
        out += ["--schedulers", axes["schedulers"]]
    if axes["backend"] != VmOptions.backend:
        out += ["--backend", axes["backend"]]
    opts: VmOptions = axes["options"]
    return [*out, *opts.to_args(skip=("kernel", "backend", "connect"))]


@click.group("matrix", invoke_without_command=True)
@axis_options
@click.option("-j", "--jobs", type=click.IntRange(1, 256), default=None,
              help="VMs at once (default: as many as the host's cores carry at one busy TCG thread each and its free memory holds).")
@click.option("--shard", default=None, metavar="I/N", help="Run only shard I of N (a deterministic slice of the cells).")
@click.option("--rerun", is_flag=True, help="Run every cell again, even one already judged with the same inputs.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Output directory (default: runs/matrix); cells judged there before with the same inputs are reused.")
@click.option("--connect", multiple=True, metavar="URI", help="With --backend libvirt: a libvirt URI; repeat to spread the cells over hosts.")
@click.option("--budget", default=None, metavar="T",
              help="Run only the cells that fit in T (e.g. 30m; per shard with --shard), chosen from their measured cost "
                   "(this host's last run, else lab's baseline from its last full mini matrix) or an estimate: every scenario, topology and kernel once, then what changed since its last run; "
                   "the rest are SKIPs saying why.")
@click.pass_context
def matrix(ctx, axes, jobs, shard, rerun, output, connect, budget) -> None:
    """Run scenarios x topologies x kernels, each cell a `lab run`: a summary table, and
    junit.xml, matrix.json and summary.md in the output directory.

    Exit 0 when every cell passed or was skipped, 1 when one failed, 3 when one could not
    be judged (ERROR), else 4 when the emulation decided one (INCONCLUSIVE)."""
    # deferred: CLI start (lab.matrix)
    from .. import matrix as mx

    if ctx.invoked_subcommand is not None:
        given = [p.opts[-1] for p in ctx.command.params if ctx.get_parameter_source(p.name) != click.core.ParameterSource.DEFAULT]
        if given:
            raise UserError(f"lab matrix {ctx.invoked_subcommand}: give {', '.join(given)} after `{ctx.invoked_subcommand}`")
        return
    sh = mx.parse_shard(shard) if shard is not None else None
    # deferred: CLI start (lab.minimize)
    from ..minimize import parse_duration

    budget_s = parse_duration(budget) if budget is not None else None
    _check_backend(axes["backend"], connect)
    m = _expand(axes)
    out = _outdir(output or paths.runs_dir() / "matrix")
    p = progress_for_cli()
    runner = mx.Runner(m, out, jobs=jobs, shard=sh, rerun=rerun, connect=tuple(connect), progress=p,
                       budget_s=budget_s, budget_text=budget or "")  # fmt: skip
    try:
        results = runner.run()
    except KeyboardInterrupt as e:
        e.add_note(f"the cells that finished are in {out}")
        console(stderr=True).print(f"lab: the cells that finished are in {out}", markup=False, highlight=False)
        raise
    doc = runner.document()
    _show(doc["identity"], results, out, doc)
    b = doc.get("budget")
    if b:
        left = f"{len(b['left_out'])} left out (SKIP above, and in {out / mx.MATRIX_FILE})"
        unc = f"; no cell fits for {', '.join(b['uncovered'])}" if b["uncovered"] else ""
        console().print(f"--budget {budget}: {len(b['chosen'])} cells chosen, estimated {mx._dur_text(b['estimated_s'])}; {left}{unc}",
                        markup=False, highlight=False, soft_wrap=True)  # fmt: skip
    sys.exit(mx.exit_code(results))


def _outdir(out: Path, make: bool = True) -> Path:
    """The output directory, made if *make*; a path that cannot be one is bad input."""

    for p in (out, *out.parents):
        if p.exists() and not p.is_dir():
            raise UserError(f"-o {out}: {p} is not a directory")
    if make:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise storage_error(e, "the matrix's output directory", out) or UserError(f"-o {out}: cannot be made: {e.strerror}") from None
    return out


def _check_backend(backend: str, connect) -> None:
    """The backends plug into each cell's `lab run`: refuse what this lab's cannot do."""

    if backend != base.DEFAULT and "backend" not in {p.name for p in run_cmd.params}:
        raise UserError(f"--backend {backend}: this lab's `lab run` has only the {base.DEFAULT} backend")
    if connect and backend not in base.with_capability("remote"):
        raise UserError(f"--connect URI goes with --backend {'|'.join(base.with_capability('remote'))}")


def _show(ident, results, out: Path, doc) -> None:
    # deferred: CLI start (rich, lab.matrix)
    from rich.markup import escape
    from rich.table import Table

    from .. import matrix as mx

    c = console()
    colour = {"PASS": "green", "FAIL": "red", "ERROR": "red", "SKIP": "yellow", "INCONCLUSIVE": "yellow"}
    t = Table(title="lab matrix" + (f" (shard {doc['shard']})" if doc.get("shard") else ""), title_justify="left")
    t.add_column("scenario")
    t.add_column("topology")
    for k in mx.columns(ident):
        t.add_column(escape(k))
    for s, tp, labels in mx.table_rows(ident, results):
        t.add_row(escape(s), escape(tp), *(f"[{colour.get(x.split()[0], 'white')}]{escape(x)}[/]" for x in labels))
    c.print(t)
    for r in results:
        if r.status not in ("PASS", "SKIP"):
            c.print(f"[{colour.get(r.status, 'red')}]{r.status}[/] {escape(r.cell.id)}: {escape(r.message)}", soft_wrap=True)
    # SKIPs once per cause, with the cells each covers (junit.xml keeps one case per cell)
    for kind, reasons in mx.skip_groups(results):
        for why, cells in reasons:
            n = f"{len(cells)} cell{'s' if len(cells) != 1 else ''}"
            c.print(
                f"[yellow]SKIP[/] {escape(kind)} ({n}): {escape(why)}: {escape(mx.cells_text(cells, mx.columns(ident)))}",
                soft_wrap=True,
            )
    reused = sum(r.reused for r in results)
    host = doc.get("host") or {}
    jobs = f", up to {host['jobs']} at once on {host['cpus']} cores" if host else ""
    c.print(
        f"{mx.counts_line(results)}{f' ({reused} reused)' if reused else ''}; {doc.get('wall_s', 0):.0f}s{jobs}; "
        f"{out / mx.JUNIT_FILE}, {out / mx.MATRIX_FILE}, {out / mx.SUMMARY_FILE}",
        markup=False, highlight=False, soft_wrap=True,
    )  # fmt: skip


@matrix.command("plan")
@axis_options
@click.option("--format", "fmt", type=click.Choice(["github", "gitlab", "json"]), default="json", show_default=True,
              help="github: a strategy.matrix include list (JSON); gitlab: a child pipeline with parallel:matrix; json: every cell.")
@click.option("--shards", type=click.IntRange(1, 10_000), default=None,
              help="Jobs to split the cells into (default: one per cell that runs, at most what the CI allows).")
def plan_cmd(axes, fmt: str, shards: int | None) -> None:
    """The matrix's cells as a CI system's job matrix: each job runs
    `lab matrix ... --shard I/N`, and `lab matrix merge` puts them together."""
    # deferred: CLI start (lab.matrix)
    from .. import matrix as mx

    m = _expand(axes)
    click.echo(mx.ci_plan(m, fmt, shards=shards, args=_args(axes)))


@matrix.command("merge")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("matrix-merged"), show_default=True,
              help="Where the merged junit.xml, matrix.json and summary.md go.")
def merge_cmd(dirs, output: Path) -> None:
    """Combine shard outputs of one matrix into one table and one JUnit file; results of
    different matrices are refused, naming the difference.  A cell no shard reported is
    an ERROR naming the missing shard."""
    # deferred: CLI start (lab.matrix)
    from .. import matrix as mx

    _outdir(output, make=False)
    doc = mx.merge(list(dirs))
    _outdir(output)
    mx.write_outputs(output, doc)
    results = [mx.CellResult.from_dict(d) for d in doc["cells"]]
    _show(doc["identity"], results, output, doc)
    sys.exit(mx.exit_code(results))


COMMANDS = [matrix]
