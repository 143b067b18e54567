"""`lab report bundle | replay | render`: bug reports that replay, and a run as a mail
or a web page."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import click

from .. import atomic, topology
from ..errors import UserError
from .common import OUTPUT, progress_for_cli


@click.group("report")
def report() -> None:
    """Bundle a run to reproduce it elsewhere, replay a bundle, render a run."""


@report.command("bundle")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", type=OUTPUT, required=True, help="The bundle to write (FILE.tar.gz).")
def bundle_cmd(run_dir: Path, output: Path) -> None:
    """Everything needed to reproduce RUN_DIR in one tarball: the run's files and traces,
    the topology spec, the scenario's source, the kernel's identity (and its recipe,
    fragments and patches), lab and QEMU versions, with a manifest of sha256s."""
    # deferred: CLI start (lab.report.bundle)
    from ..report import bundle

    if not output.name.endswith((".tar.gz", ".tgz")):
        raise UserError(f"{output}: a bundle is a gzipped tarball: name it .tar.gz")
    m = bundle.make(run_dir, output)
    size = output.stat().st_size
    click.echo(f"{output}: {len(m['members'])} files, {size / 1024:.0f} KiB; {m['scenario_name']} on {m['topology_name']}, "
               f"kernel {m['kernel'].get('name')} ({m['kernel'].get('kind')}), verdict {m['status']}")  # fmt: skip
    click.echo(f"replay it with: lab report replay {output}")


@report.command("replay")
@click.argument("bundle_file", metavar="BUNDLE", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--kernel", default=None, help="Boot this kernel instead of the bundle's (needed for a --kernel-tree run).")
@click.option("--dir", "target", type=click.Path(path_type=Path), default=None,
              help="Open the bundle here (a new directory; default: one in the runs folder).")
@click.option("--trust", is_flag=True, help="Run the bundle's own scenario (Python) on this host; without it lab replays its own scenario of that name.")
def replay_cmd(bundle_file: Path, kernel: str | None, target: Path | None, trust: bool) -> None:
    """Open BUNDLE, get or rebuild its kernel, rerun its scenario on its topology, and
    print the bundle's verdict and figures next to the new ones.

    A bundle's scenario is code: without --trust lab replays its own scenario of the
    same name (and says whether the source is the bundle's), and refuses when it has
    none, naming the file and its sha256 to read first.

    Exit 0 pass, 1 fail, 3 error, 4 inconclusive: the new run's verdict, as `lab run`."""
    # deferred: CLI start (lab.runner, lab.report.render, lab.report.replay)
    from .. import runner
    from ..report import render, replay

    b = replay.open_bundle(bundle_file, target)  # bad input is refused before any progress
    r = replay.replay(b, kernel, progress=progress_for_cli(), trust=trust)
    click.echo(render.replay_table(r.before, r.after.to_dict(), r.notes, str(b.root)), nl=False)
    sys.exit(runner.EXIT.get(r.after.status, 3))


@report.command("render")
@click.argument("source", metavar="RUN_DIR|BUNDLE|COMPARE_JSON", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "html"]), default="text", show_default=True)
@click.option("-o", "--output", type=OUTPUT, default=None, help="Write here instead of stdout.")
@click.option("--stored", is_flag=True, help="Show results.json's stored verdict instead of re-judging the run's data with lab's current scenario (labelled so).")
def render_cmd(source: Path, fmt: str, output: Path | None, stored: bool) -> None:
    """A run (or a bundle of one, or `lab compare --json`'s document) as text for a mail
    (80 columns), markdown, or one self-contained HTML page (the topology drawn as
    lstopo does, the placement timeline, the migrations; a comparison side by side)."""
    # deferred: CLI start (lab.report.render)
    from ..report import render

    doc = _document(source, stored)
    page = render.render(doc, fmt)
    if output is None:
        click.echo(page, nl=False)
        return

    atomic.write_text(output, page, "the report")
    click.echo(f"{output}: {fmt}, {len(page.encode()) / 1024:.0f} KiB", err=True)


def _document(source: Path, stored: bool = False):
    # deferred: CLI start (lab.report.bundle, lab.report.document)
    from ..report import bundle, document

    if source.is_dir():
        return document.load_run(source, stored=stored)
    if source.name.endswith(".json"):
        return document.load_compare(source)
    if not source.name.endswith((".tar.gz", ".tgz")):
        raise UserError(f"{source}: give a run directory, a bundle (.tar.gz) or a comparison (lab compare --json > FILE.json)")
    tmp = Path(tempfile.mkdtemp(prefix="lab-render-"))
    try:
        b = bundle.extract(source, tmp / "bundle")
        tf = b.file("topology")
        topo = topology.load(tf) if tf is not None else None
        return document.load_run(b.run_dir, topo, source=str(source), stored=stored)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


COMMANDS = [report]
