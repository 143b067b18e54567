"""`lab domains`: the guest's sched-domain tree from a run's snapshot, or from a guest
booted for it, and two of them diffed."""

from __future__ import annotations

from pathlib import Path

import click

from .. import backends, session
from ..errors import UserError
from .common import RUNS, SECONDS, TOPOLOGY, progress_for_cli
from .vm import KERNEL_HELP, VM_OPTIONS, make_vm_options


def _vm_options(f):
    for opt in reversed(VM_OPTIONS[1:]):  # all but --kernel, which domains takes twice
        f = opt(f)
    return f


@click.command("domains")
@click.argument("run_dirs", metavar="[RUN_DIR [RUN_DIR_B]]", nargs=-1, type=click.Path(path_type=Path))
@click.option("-t", "--topology", "topos", type=TOPOLOGY, multiple=True, metavar="T",
              help="Boot T and take its snapshot (twice, T then U: diff two machines).")
@click.option("--kernel", "kernels", multiple=True, metavar="KERNEL", help=f"With --topology; twice, A then B: diff two kernels. {KERNEL_HELP}")
@click.option("--timeout", type=SECONDS, default=600, show_default=True, help="Seconds before a VM is killed.")
@RUNS
@_vm_options
def domains_cmd(run_dirs: tuple[Path, ...], topos, kernels, timeout: float, runs, **vm_kw) -> None:
    """Print the sched-domain tree the guest kernel built (levels, each level's spans,
    flags and the per-domain parameters the snapshot holds), or what differs between two.

    \b
    lab domains RUN_DIR [RUN_DIR_B]          finished runs' snapshots, no boot
    lab domains --topology T [--kernel K]    boot T and print its tree
    lab domains --topology T --kernel A --kernel B    two kernels on one machine
    lab domains --topology T --topology U [--kernel K]    two machines, one kernel

    The tree is the topology snapshot lab's agent takes before any workload (a run
    directory's guest/); CPU ids in the topology's numbering, as every CPU id lab prints.
    Exit 0; 2 for bad input, such as a directory without a snapshot (one line naming it)."""
    # deferred: CLI start (lab.domains)
    from .. import domains

    if run_dirs:
        if topos or kernels:
            raise UserError("lab domains RUN_DIR reads finished runs: --topology and --kernel go without RUN_DIR")
        if len(run_dirs) > 2:
            raise UserError(f"lab domains takes one run directory, or two to diff; got {len(run_dirs)}")
        trees = [domains.read(d) for d in run_dirs]
    else:
        if not topos:
            raise UserError("give a RUN_DIR (or two to diff), or --topology T to boot one")
        if len(topos) > 2 or len(kernels) > 2 or (len(topos) == 2 and len(kernels) == 2):
            raise UserError("lab domains diffs two trees: two --kernel on one --topology, or two --topology on one kernel")
        guests = [(t, k) for t in topos for k in (kernels or (None,))]
        trees = [domains.read(_boot(t, make_vm_options(kernel_spec=k, **vm_kw), timeout, runs)) for t, k in guests]
    if len(trees) == 1:
        click.echo(domains.render(trees[0]), nl=False)
    else:
        click.echo(domains.diff(trees[0], trees[1])[0], nl=False)


def _boot(topo, vm, timeout: float, runs) -> Path:
    """Boot *topo* with *vm* until lab's agent has taken the topology snapshot (no
    workload): the run directory holding it."""

    p = progress_for_cli()
    s = session.prepare(topo, vm, progress=p, runs=runs)
    run_dir = session.open_run("domains", s)
    with p.step("domains", f"{topo.name}, kernel {s.kernel_label}"):
        backends.boot(s.plan, s.kernel, run_dir, timeout=timeout, progress=p)
    return run_dir
