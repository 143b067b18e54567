"""`lab bisect`: git bisect run with lab's verdict, in a clone lab owns."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import UserError
from ..scheduler import parse_spec
from .common import TOPOLOGY, one_of_scenario_or_workload, progress_for_cli
from .vm import SCHEDULER_OPTION, VM_OPTIONS, make_vm_options


def _vm_options(f):
    for opt in reversed(VM_OPTIONS[1:]):  # all but --kernel: the commits are the kernels
        f = opt(f)
    return f


def _vm(scheduler: str = "", recipe: str | None = None, **vm_kw):
    """The VM options as given (--kernel is each commit's), through the one place that
    makes them; --scheduler checked here (one line), then loaded by every step's run."""

    spec = parse_spec(scheduler) if scheduler else None
    if spec is not None and recipe is None:
        raise UserError(f"lab bisect --scheduler {spec.name}: the default recipe (lab-6.1) has no sched_ext; "
                        "give --recipe lab-6.12-scx (or your own with CONFIG_SCHED_CLASS_EXT=y)")  # fmt: skip
    return make_vm_options(kernel_spec="debian", scheduler=spec.text if spec else "", **vm_kw)


def _scenario_or_workload(name: str | None, workloads: tuple[str, ...], checks: tuple[str, ...]) -> str:
    """SCENARIO, or the TOML scenario file of --workload/--check (scenario.workload_file):
    every step's run reads the scenario by its path."""
    if checks and not workloads:
        raise UserError("lab bisect --check: goes with --workload (a scenario's own checks judge each commit)")
    one_of_scenario_or_workload(name, workloads, "lab bisect", both_prefix="lab bisect: ")
    if workloads:
        # deferred: CLI start (lab.scenario)
        from .. import scenario

        return str(scenario.workload_file(workloads, checks))
    assert name is not None
    return name


@click.command("bisect")
@click.argument("scenario_name", metavar="[SCENARIO]", required=False, default=None)
@click.option("-t", "--topology", "topo", type=TOPOLOGY, default=None, help="Topology (default: the scenario's first).")
@click.option("--kernel-tree", "tree", type=click.Path(path_type=Path), required=True, help="Your kernel tree (a git repository; never written).")
@click.option("--good", required=True, metavar="REV", help="A commit where the scenario passes.")
@click.option("--bad", required=True, metavar="REV", help="A later commit where it fails.")
@click.option("--repeat", type=click.IntRange(1, 99), default=None, metavar="N",
              help="Runs per commit, the verdict by majority (odd; default: the scenario's verdict_runs).")
@click.option("--confidence", type=float, default=None, metavar="C",
              help="Judge each commit by a sequential test (SPRT) at this confidence, e.g. 0.95, against both ends' measured pass rates, instead of a fixed majority.")
@click.option("--max-runs", type=click.IntRange(1, 999), default=None, metavar="N",
              help="With --confidence: runs per end and per commit before a commit is skipped as undecided (default 30).")
@click.option("--recipe", default=None, help="Config, fragments and patches for each commit (default lab-6.1 / lab-6.1-arm64).")
@click.option("--workload", "workloads", multiple=True, metavar="CMD",
              help="Instead of SCENARIO: these commands (repeatable, run together, traced), as `lab run --workload`.")
@click.option("--check", "check_exprs", multiple=True, metavar="EXPR", help="With --workload: what each commit is judged by (repeatable).")
@SCHEDULER_OPTION
@_vm_options
def bisect_cmd(scenario_name, topo, tree, good, bad, repeat, confidence, max_runs, recipe, scheduler, workloads=(), check_exprs=(),
               **vm_kw) -> None:
    """Find the first commit between --good and --bad where SCENARIO fails (or, instead
    of a SCENARIO, --workload CMD judged by --check EXPR, as `lab run` takes them).

    git bisect run drives the search in a clone of your tree in lab's cache; each
    commit is built like --kernel-tree (incrementally, with ccache) and judged by the
    majority of N runs.  A commit that does not build, or whose runs are an ERROR, is
    skipped (git's 125), with the reason.  Both ends are judged first: a good commit
    that fails (or a bad one that passes) is refused before bisecting.

    With --confidence C each commit is judged by Wald's sequential test instead: both
    ends are run first, interleaved, until their pass rates are told apart (refused with
    both rates when the good end fails more often), then each commit runs until the test
    decides at C, or is skipped as undecided after --max-runs runs; the first bad
    commit comes with its confidence (lab/bisect_seq.py says how it is derived).

    With --scheduler NAME[:ARGS] every step's runs load that sched_ext scheduler, built
    against each commit's kernel (--recipe must give the kernel sched_ext).

    Prints the first bad commit with both sides' evidence.  Exit 0 found, 2 bad input
    (including ends that do not bisect), 3 error (an end that cannot be judged, or
    skipped commits that hide the answer)."""
    # deferred: CLI start (lab.bisect)
    from .. import bisect

    scenario_name = _scenario_or_workload(scenario_name, workloads, check_exprs)
    vm = _vm(scheduler, recipe, **vm_kw)
    if vm.scheduler:
        _claims_hold_for_any_scheduler(scenario_name, vm.scheduler)
    done = bisect.drive(scenario_name, topo, tree, good, bad, vm, repeat=repeat, confidence=confidence, max_runs=max_runs,
                        recipe=recipe, progress=progress_for_cli())  # fmt: skip
    click.echo(done.text, nl=False)
    if done.result.first_bad is None:
        sys.exit(3)


def _claims_hold_for_any_scheduler(scenario_name: str, scheduler: str) -> None:
    """Refuse, in one line before any build, a bisection under a BPF scheduler of a scenario
    whose claims are the kernel's own scheduler's: every commit would be INCONCLUSIVE
    (git bisect skip), so it could never find a commit."""
    # deferred: CLI start (lab.scenario)
    from .. import scenario as sc

    s = sc.load(scenario_name)
    if s.kernel_scheduler:
        name = scheduler.partition(":")[0]
        raise UserError(
            f"lab bisect {s.name} --scheduler {name}: {s.name}'s claims are about the kernel's own scheduler "
            f"({s.kernel_scheduler}), INCONCLUSIVE under {name} at every commit (git bisect skip); "
            "bisect it without --scheduler, or a scenario whose claim holds for any scheduler (scheduler-survives)"
        )


@click.command("bisect-step", hidden=True)
@click.argument("state_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def bisect_step_cmd(state_file: Path) -> None:
    """lab bisect's step under git bisect run: judge the clone's HEAD; exit 0 good, 1 bad,
    125 skip, 255 (git aborts the bisection) when lab itself cannot go on."""
    # deferred: CLI start (lab.bisect)
    from .. import bisect

    try:
        st = bisect.step(state_file, progress_for_cli())
    except KeyboardInterrupt:
        sys.exit(255)
    except Exception as e:  # noqa: BLE001 - anything else must stop git, not read as "bad"
        click.echo(f"lab: error: bisect step: {type(e).__name__}: {' '.join(str(e).split())}", err=True)
        sys.exit(255)
    sys.exit(st.exit_code)
