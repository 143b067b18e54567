"""`lab domains`: the guest's sched-domain tree from a run's snapshot, and two diffed."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("domains")
@click.argument("run_a", metavar="RUN_DIR", type=click.Path(path_type=Path))
@click.argument("run_b", metavar="[RUN_DIR_B]", required=False, type=click.Path(path_type=Path))
def domains_cmd(run_a: Path, run_b: Path | None) -> None:
    """Print the sched-domain tree the guest kernel built in RUN_DIR (levels, each
    level's spans, flags and the per-domain parameters the snapshot holds), or, given
    two run directories, what differs between their trees: two kernels on one machine,
    or one kernel on two machines.

    Read from the topology snapshot lab's agent takes before the workload (RUN_DIR/guest/);
    CPU ids in the topology's numbering, as every CPU id lab prints.  Exit 0, or 2 for a
    directory without a snapshot (one line naming it)."""
    from .. import domains

    a = domains.read(run_a)
    if run_b is None:
        click.echo(domains.render(a), nl=False)
        return
    text, _ = domains.diff(a, domains.read(run_b))
    click.echo(text, nl=False)
