"""`lab compare`: A/B evidence, from new interleaved runs or from finished run directories."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from .. import atomic, session, topology
from ..errors import UserError
from ..scheduler import parse_spec
from .common import TOPOLOGY, console, progress_for_cli, text_format_option
from .vm import KERNEL_HELP, VM_OPTIONS, make_vm_options


class _SplitAtDashes(click.Command):
    """Keeps what follows the first ``--`` (B's run directories) apart: click would
    otherwise drop the ``--`` and run both sides together."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            i = args.index("--")
            ctx.meta["lab.compare.b"] = args[i + 1 :]
            args = args[:i]
        return super().parse_args(ctx, args)


def _vm_options(f):
    for opt in reversed(VM_OPTIONS[1:]):  # all but --kernel, which compare takes twice
        f = opt(f)
    return f


@click.command("compare", cls=_SplitAtDashes)
@click.argument("what", nargs=-1, metavar="SCENARIO | RUN_DIR... -- RUN_DIR...")
@click.option("-t", "--topology", "topo", type=TOPOLOGY, default=None, help="Topology (default: the scenario's first).")
@click.option("--kernel", "kernels", multiple=True, metavar="KERNEL", help=f"Give it twice: A, then B. {KERNEL_HELP}")
@click.option("--scheduler", "schedulers", multiple=True, metavar="NAME[:ARGS]",
              help="Give it twice instead of --kernel: A, then B, on one kernel (eevdf or cfs: the kernel's own; lab scheduler list).")
@_vm_options
@click.option("--repeat", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Runs per kernel, interleaved A B A B ... so host noise hits both.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (schema lab.compare, see lab/compare.py).")
@click.option("--stored", is_flag=True, help="RUN_DIRs: take each results.json's stored verdict as it is, instead of re-judging the run's data with the current scenario (labelled so).")
@text_format_option
def compare_cmd(what, topo, kernels, schedulers, repeat: int, as_json: bool, stored: bool, **vm_kw) -> None:
    """Compare two kernels on one scenario: per kernel each figure's min / max / mean /
    stddev and the change in %, pass rates, and whether the difference is significant
    (Welch's t-test for figures, Fisher's exact test for pass rates).

    \b
    lab compare SCENARIO --topology T --kernel A --kernel B [--repeat N]
    lab compare SCENARIO --topology T [--kernel K] --scheduler A --scheduler B
    lab compare RUN_DIR... -- RUN_DIR...     (finished runs: A's, then B's)

    The tables are plain ASCII within 80 columns, to paste into a mail.  Exit 0 when
    both sides have runs with complete data (PASS, FAIL or INCONCLUSIVE: an INCONCLUSIVE
    run's figures are compared, its verdict is not), 3 when a side has none (every run an
    ERROR)."""
    # deferred: CLI start (lab.compare)
    from .. import compare

    ctx = click.get_current_context()
    b_dirs = ctx.meta.get("lab.compare.b")
    if b_dirs is not None:
        if kernels or schedulers or topo is not None:
            raise UserError("lab compare RUN_DIR... -- RUN_DIR... compares finished runs: --kernel, --scheduler and --topology go with SCENARIO")
        if not what or not b_dirs:
            raise UserError("lab compare RUN_DIR... -- RUN_DIR... needs run directories on both sides of --")
        runs_a = [compare.load_run(Path(d), stored=stored) for d in what]
        runs_b = [compare.load_run(Path(d), stored=stored) for d in b_dirs]
        doc = compare.compare(runs_a, runs_b)
    else:
        if len(what) != 1:
            raise UserError(
                "give one SCENARIO with --kernel A --kernel B, or finished runs as RUN_DIR... -- RUN_DIR..."
                if len(what) > 1 else "give a SCENARIO (with --kernel A --kernel B) or RUN_DIR... -- RUN_DIR..."
            )  # fmt: skip
        vms, labels = sides(what[0], kernels, schedulers, vm_kw)
        doc = _run_interleaved(what[0], topo, vms, repeat, labels)
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    else:
        # deferred: CLI start (lab.report.compare)
        from ..report import compare as render

        click.echo(render.text(doc), nl=False)
    if not all(side["passed"] + side["failed"] + side.get("inconclusive", 0) for side in doc["sides"].values()):
        sys.exit(3)


def sides(scenario: str, kernels: tuple[str, ...], schedulers: tuple[str, ...], vm_kw: dict) -> tuple[list, list[str] | None]:
    """A's and B's VM options: two kernels (each under the one --scheduler, if given), or
    two schedulers on one kernel; with the schedulers' labels when they are the axis."""

    specs = [parse_spec(s) for s in schedulers]  # an unknown name is one line, before anything
    texts = [sp.text if sp else "" for sp in specs]
    if len(schedulers) == 2:
        if len(kernels) > 1:
            raise UserError(f"lab compare {scenario}: compare two kernels or two schedulers, not both "
                            f"(got {len(kernels)} --kernel and 2 --scheduler)")  # fmt: skip
        vm = make_vm_options(kernel_spec=kernels[0] if kernels else None, **vm_kw)
        labels = [sp.name if sp else (s.partition(":")[0].strip() or "eevdf") for sp, s in zip(specs, schedulers, strict=True)]
        if texts[0] == texts[1]:
            raise UserError(f"lab compare {scenario}: --scheduler A and B are the same ({labels[0]})")
        return [dataclasses.replace(vm, scheduler=t) for t in texts], labels
    if len(schedulers) > 2:
        raise UserError(f"lab compare {scenario}: --scheduler is given once (both kernels) or twice (A, then B); got {len(schedulers)}")
    if len(kernels) != 2:
        raise UserError(f"lab compare {scenario} needs two --kernel options (A, then B) or two --scheduler options; got {len(kernels)} --kernel")
    vms = [make_vm_options(kernel_spec=k, **vm_kw) for k in kernels]
    if texts:
        vms = [dataclasses.replace(vm, scheduler=texts[0]) for vm in vms]
    return vms, None


def _run_interleaved(scenario_name: str, topo, vms, repeat: int, labels: list[str] | None = None) -> dict:
    """Run the scenario on both kernels, A B A B ..., and compare.  The document is also
    written to a run directory of its own (compare.json, compare.txt, command).  An
    interrupted comparison lists the runs it made, so they can be compared as they are."""

    # deferred: CLI start (lab.compare, lab.runner, lab.scenario, lab.report.compare)
    from .. import compare, runner
    from .. import scenario as sc
    from ..report import compare as render

    s = sc.load(scenario_name)
    topo = topo or topology.load(s.topologies[0])
    unmet = s.unmet(topo)
    if unmet:
        raise UserError(f"{s.name} cannot run on {topo.name}: the topology lacks {'; '.join(unmet)}")
    p = progress_for_cli()
    # As `lab run`: a bad kernel is one line and nothing else (no progress line before it).
    sessions = [session.prepare(topo, vm, progress=p) for vm in vms]
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    try:
        for i in range(repeat):
            for label, sess in zip("AB", sessions, strict=True):
                argv = session.run_argv(s.name, topo, dataclasses.replace(sess.options, kernel=sess.kernel.id))
                who = f"{sess.kernel.name}" + (f" under {labels['AB'.index(label)]}" if labels else "")
                with p.step(f"[{i + 1}/{repeat}] {label} {who}", f"{s.name} on {topo.name}"), session.command(argv):
                    o = runner.run_once(s, sess, on_event=lambda t, line: p.update(f"{line.removeprefix('lab: ')} (+{t:.1f}s)"))
                rec = o.to_dict()
                if labels:
                    rec["scheduler"] = labels["AB".index(label)]
                runs[label].append(rec)
                p.note(f"[{i + 1}/{repeat}] {label} {who}: {o.status}"
                       + (f" ({o.message})" if o.message else "") + f"; {o.run_dir}")  # fmt: skip
    except KeyboardInterrupt as e:
        made = " ".join(str(r["run_dir"]) for r in runs["A"]) + " -- " + " ".join(str(r["run_dir"]) for r in runs["B"])
        if runs["A"] and runs["B"]:
            e.add_note(f"the runs made so far can be compared: lab compare {made}")
        for note in getattr(e, "__notes__", []):
            console(stderr=True).print(note, markup=False, highlight=False, soft_wrap=True)
        raise
    doc = compare.compare(runs["A"], runs["B"], interleaved=True)
    names = labels or [sess.kernel.name for sess in sessions]
    d = session.new_run_dir("compare", topo, f"{names[0]}-vs-{names[1]}")

    atomic.write_text(d / "compare.json", json.dumps(doc, indent=1), "the comparison")
    atomic.write_text(d / "compare.txt", render.text(doc), "the comparison")
    p.note(f"comparison saved in {d}")
    return doc

