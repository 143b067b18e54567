"""`lab bisect`: git bisect run with lab's verdict, in a clone lab owns."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .common import TOPOLOGY
from .vm import VM_OPTIONS


def _vm_options(f):
    for opt in reversed(VM_OPTIONS[1:]):  # all but --kernel: the commits are the kernels
        f = opt(f)
    return f


def _vm(**vm_kw):
    """The VM options as given (--kernel is each commit's), through the one place that makes them."""
    from .vm import make_vm_options

    return make_vm_options(kernel_spec="debian", **vm_kw)


def _abs(arg: str) -> str:
    """A name as it is; a file (a scenario or recipe path) as its absolute path."""
    p = Path(arg)
    return str(p.resolve()) if ("/" in arg or p.suffix) and p.exists() else arg


@click.command("bisect")
@click.argument("scenario_name", metavar="SCENARIO")
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
@_vm_options
def bisect_cmd(scenario_name, topo, tree, good, bad, repeat, confidence, max_runs, recipe, **vm_kw) -> None:
    """Find the first commit between --good and --bad where SCENARIO fails.

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

    Prints the first bad commit with both sides' evidence.  Exit 0 found, 2 bad input
    (including ends that do not bisect), 3 error (an end that cannot be judged, or
    skipped commits that hide the answer)."""
    import time

    from .. import bisect, bisect_seq, iterate, lock, progress, session, topology
    from .. import scenario as sc
    from ..errors import InfraError, UserError

    t0 = time.monotonic()
    if confidence is not None:
        bisect_seq.check_confidence(confidence)
        if repeat is not None:
            raise UserError("--repeat and --confidence: give one (a fixed majority of N runs, or a sequential test)")
        max_runs = max_runs if max_runs is not None else bisect_seq.DEFAULT_MAX_RUNS
    elif max_runs is not None:
        raise UserError("--max-runs goes with --confidence (the fixed majority's runs are --repeat)")
    s = sc.load(scenario_name)
    topo = topo or topology.load(s.topologies[0])
    unmet = s.unmet(topo)
    if unmet:
        raise UserError(f"{s.name} cannot run on {topo.name}: the topology lacks {'; '.join(unmet)}")
    runs = repeat if repeat is not None else s.verdict_runs
    if runs % 2 == 0:
        raise UserError(f"--repeat {runs}: give an odd number of runs per commit (a majority must exist)")
    tree = bisect.check_tree(tree)
    iterate.tree_recipe(tree, topo.arch, recipe)  # a bad --recipe is refused before any work
    good_sha = bisect.commit(tree, good, "--good")
    bad_sha = bisect.commit(tree, bad, "--bad")
    bisect.check_range(tree, good_sha, bad_sha)
    bisect.check_kernel(tree, good_sha, "--good")
    bisect.check_kernel(tree, bad_sha, "--bad")
    vm = _vm(**vm_kw)

    p = progress.for_cli()
    with lock.cache_lock(f"bisect-{bisect.workspace_name(tree)}", f"bisecting {tree}", timeout=24 * 3600.0):
        with p.step("clone", f"lab's clone of {tree}"):
            clone = bisect.workspace(tree)
        d = session.new_run_dir("bisect", topo, tree.name)
        steps_log = d / bisect.STEPS
        state = {
            # The step runs in the clone (git bisect run's working directory): files by absolute path.
            "scenario": _abs(scenario_name), "topology": session.topology_arg(topo), "runs": runs,
            "recipe": _abs(recipe) if recipe else None,
            "clone": str(clone), "steps": str(steps_log),
            "vm": vm.to_dict(),  # the step runs lab again: the options as given (VmOptions.from_dict)
        }  # fmt: skip
        if confidence is not None:
            with p.step("ends", f"good {good_sha[:12]} and bad {bad_sha[:12]}, interleaved, until their pass rates are told apart"):
                seq_ends, g_st, b_st = bisect.measure_ends(s, topo, vm, clone, good_sha, bad_sha, confidence, max_runs, recipe, progress=p)
            for st in (g_st, b_st):
                if st is not None:
                    bisect.record(steps_log, st)
            if seq_ends.state != "ready":
                err = InfraError if seq_ends.unjudged else UserError
                raise err(f"{s.name} on {topo.name}: {seq_ends.why} (steps: {steps_log})")
            state["sequential"] = {"p_good": seq_ends.p_good, "p_bad": seq_ends.p_bad, "confidence": confidence, "max_runs": max_runs}
            p.note(f"ends told apart ({seq_ends.rates()}); bisecting in {clone}")
        (d / bisect.STATE).write_text(json.dumps(state, indent=1))
        ends = {}
        for role, sha in (("good end", good_sha), ("bad end", bad_sha)) if confidence is None else ():
            with p.step(role, f"{sha[:12]} {bisect.subject(tree, sha)}"):
                st = bisect.judge(s, topo, vm, clone, sha, runs, recipe, progress=p, role=role)
            bisect.record(steps_log, st)
            ends[role] = st
            what = f"the {role.split()[0]} commit {sha[:12]} ({st.subject})"
            want = "PASS" if role == "good end" else "FAIL"
            if st.status in ("PASS", "FAIL") and st.status != want:
                run = next((r for r in st.runs if r.get("status") == st.status), {})
                raise UserError(f"{what} {'fails' if want == 'PASS' else 'passes'} {s.name} on {topo.name} "
                                f"({st.describe()}; run dir {run.get('run_dir')}): nothing to bisect")  # fmt: skip
            if st.status != want:
                raise InfraError(f"{what} cannot be judged, so lab cannot bisect: {st.describe()} (steps: {steps_log})")
        if confidence is None:
            p.note(f"both ends hold (good {good_sha[:12]} PASS, bad {bad_sha[:12]} FAIL); bisecting in {clone}")
        step_argv = [sys.executable, "-m", "lab", "bisect-step", str(d / bisect.STATE)]
        result = bisect.run_bisect(clone, good_sha, bad_sha, step_argv, steps_log)
    (d / "bisect.log").write_text(result.log + "\n")
    wall = time.monotonic() - t0
    text = bisect.report(result, scenario=s.name, topology=topo.name, wall_s=wall, run_dir=str(d))
    (d / "report.txt").write_text(text)
    doc: dict[str, Any] = {"first_bad": result.first_bad, "candidates": result.candidates, "wall_s": round(wall, 1)}
    conf = bisect.confidence_of(result.steps)
    if conf is not None:
        doc["confidence"] = round(conf[0], 6) if result.first_bad else None
        doc["sequential"] = state["sequential"]
    (d / "result.json").write_text(json.dumps(doc, indent=1))
    click.echo(text, nl=False)
    if result.first_bad is None:
        sys.exit(3)


@click.command("bisect-step", hidden=True)
@click.argument("state_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def bisect_step_cmd(state_file: Path) -> None:
    """lab bisect's step under git bisect run: judge the clone's HEAD; exit 0 good, 1 bad,
    125 skip, 255 (git aborts the bisection) when lab itself cannot go on."""
    from .. import bisect, proc, progress, topology
    from .. import scenario as sc
    from ..plan import VmOptions

    try:
        state = json.loads(state_file.read_text())
        clone = Path(state["clone"])
        s = sc.load(state["scenario"])
        topo = topology.load(state["topology"])
        sha = proc.run(["git", "-C", clone, "rev-parse", "HEAD"]).stdout.decode().strip()
        done = len(bisect.read_steps(Path(state["steps"]))) - 2
        left = bisect.steps_left(clone)
        p = progress.for_cli()
        with p.step(f"bisect step {done + 1}" + (f" (~{left} more)" if left is not None else ""), f"{sha[:12]} {bisect.subject(clone, sha)}"):
            if state.get("sequential"):
                st = bisect.judge_seq(s, topo, VmOptions.from_dict(state["vm"]), clone, sha, state["sequential"], state["recipe"], progress=p)
            else:
                st = bisect.judge(s, topo, VmOptions.from_dict(state["vm"]), clone, sha, state["runs"], state["recipe"], progress=p)
        bisect.record(Path(state["steps"]), st)
        p.note(f"{sha[:12]}: {st.describe()} -> git bisect {({0: 'good', 1: 'bad'}).get(st.exit_code, 'skip')}")
    except KeyboardInterrupt:
        sys.exit(255)
    except Exception as e:  # noqa: BLE001 - anything else must stop git, not read as "bad"
        click.echo(f"lab: error: bisect step: {type(e).__name__}: {' '.join(str(e).split())}", err=True)
        sys.exit(255)
    sys.exit(st.exit_code)
