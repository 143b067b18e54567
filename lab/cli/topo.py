"""`lab topo ...`: list, show, render, capture, import."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import sys
from pathlib import Path

import click

from .. import atomic, backends, cpulist, rundir, session, topology
from .. import host as host_mod
from ..backends import base
from ..errors import UserError
from .common import OUTPUT, RUNS, SECONDS, TOPOLOGY, console, progress_for_cli, text_format_option
from .vm import BackendChoice, vm_options


@click.group()
def topo() -> None:
    """Topologies: list, show, render, capture, import, synth, diff."""


@topo.command("list")
@text_format_option
def list_() -> None:
    """The catalog: lab's topologies/*.toml and your own folders ($LAB_TOPOLOGIES, or
    `topologies` in ~/.config/lab/config.toml)."""
    # deferred: CLI start (rich)
    from rich import box
    from rich.table import Table

    c = console()
    narrow = c.width < 120  # a mail or a narrow terminal: vendor and numbering under the name
    t = Table(title="lab topologies", title_justify="left", box=None if narrow else box.HEAVY_HEAD)
    cols: tuple[str, ...] = ("name", "arch", "vCPUs", "sockets", "nodes", "LLCs", "clusters", "cores", "SMT", "numbering", "vendor")
    if narrow:
        cols = ("name / vendor, numbering", "arch", "CPUs", "skt", "nodes", "LLCs", "clus", "cores", "SMT")
    for col in cols:
        t.add_column(col, justify="left" if col in ("arch", "numbering", "vendor") or col.startswith("name") else "right",
                     no_wrap=True)  # fmt: skip
    for name in topology.catalog_names():
        tp = topology.load(name)
        counts = (
            str(tp.n_cpus),
            str(len(tp.groups("socket"))),
            str(tp.n_nodes),
            str(len(tp.groups("llc"))),
            str(len(tp.groups("cluster"))) if tp.has_clusters else "-",
            str(len(tp.groups("core"))),
            str(tp.threads_per_core),
        )
        if narrow:
            t.add_row(f"{tp.name}\n  {tp.vendor}, {tp.numbering}", tp.arch, *counts)
        else:
            t.add_row(tp.name, tp.arch, *counts, tp.numbering, tp.vendor)
    c.print(t)


@topo.command()
@click.argument("spec", type=TOPOLOGY)
@text_format_option
def show(spec) -> None:
    """A tree socket > node > LLC > cluster > core > CPUs, and the distance matrix."""
    # deferred: CLI start (rich)
    from rich.table import Table
    from rich.tree import Tree

    tp = spec
    root = Tree(f"[bold]{tp.name}[/]  {tp.arch}, {tp.vendor} {tp.model}\n{tp.summary()}")
    sockets = tp.groups("socket")
    for si, sock in enumerate(sockets):
        st = root.add(f"socket {si}: CPUs {cpulist.format(sock)}")
        nodes = [n for n in tp.node_ids if set(tp.node_cpus(n)) & set(sock)]
        for n in nodes:
            ncpus = [c for c in tp.node_cpus(n) if c in sock]
            nt = st.add(f"node {n}: CPUs {cpulist.format(ncpus)}")
            for llc in tp.groups("llc"):
                if llc[0] not in ncpus:
                    continue
                lt = nt.add(f"LLC: {cpulist.format(llc)}")
                parents: list[tuple[Tree, tuple[int, ...]]]  # (branch, the CPUs under it)
                if tp.has_clusters:
                    parents = []
                    for cl in tp.groups("cluster"):
                        if cl[0] in llc:
                            parents.append((lt.add(f"cluster: {cpulist.format(cl)}"), cl))
                else:
                    parents = [(lt, llc)]
                for pt, members in parents:
                    cores = [c for c in tp.groups("core") if c[0] in members]
                    if len(cores) > 16:
                        pt.add(f"{len(cores)} cores: " + ", ".join(cpulist.format(c) for c in cores[:4]) + ", ...")
                    else:
                        for c in cores:
                            pt.add(f"core: CPU{'s' if len(c) > 1 else ''} {cpulist.format(c)}")
    c = console()
    c.print(root)
    dt = Table(title="NUMA distances", title_justify="left")
    dt.add_column("node")
    for n in tp.node_ids:
        dt.add_column(str(n), justify="right")
    for i, n in enumerate(tp.node_ids):
        dt.add_row(str(n), *[str(d) for d in tp.distances[i]])
    c.print(dt)
    p = tp.provenance
    if p.machine or p.sources:
        c.print(f"[bold]provenance[/]: {p.machine}")
        for s in p.sources:
            c.print(f"  - {s}")
        if p.notes:
            c.print(f"  notes: {p.notes}")


@topo.command()
@click.argument("spec", type=TOPOLOGY)
@click.option("--format", "fmt", type=BackendChoice(extra=("json",)), default="qemu", show_default=True)
@vm_options
def render(spec, fmt: str, vm) -> None:
    """The exact QEMU argv a boot of SPEC runs (as `lab boot --dry-run` prints it), the
    libvirt domain XML or the vng command of --backend libvirt|vng, or the model as JSON."""

    if fmt == "json":
        click.echo(json.dumps(spec.to_dict(), indent=1))
        return

    if fmt != base.DEFAULT:
        vm = dataclasses.replace(vm, backend=fmt)
    s = session.prepare(spec, vm, build=False)
    if fmt == base.DEFAULT:  # the QEMU argv, of the plan --backend adapted
        click.echo(shlex.join(session.dry_run_argv(s)))
    else:
        click.echo(session.dry_run(s))
        if base.get(fmt).CAPABILITIES.run_dir_named:
            click.echo("# $RUN_DIR is the run directory", err=True)
    # The plan depends on the kernel (bring-up, TCG threading, boot parameters): say which.
    click.echo(f"# planned for kernel {s.kernel.name} ({s.kernel.release}, {s.kernel.id}): give --kernel for another", err=True)
    for n in s.plan.notes:
        click.echo(f"# {n}", err=True)
    if s.plan.numbering_mode == "translated":
        click.echo(
            f"# numbering: QEMU numbers vCPUs with SMT siblings adjacent; lab translates guest CPU ids "
            f"to the spec's {spec.numbering} numbering",
            err=True,
        )


@topo.command()
@click.option("-o", "--output", type=OUTPUT, required=True, help="FILE.tar.gz")
def capture(output: Path) -> None:
    """Capture this machine's topology (sysfs and /proc files) into a tarball."""
    # deferred: CLI start (lab.sysfs)
    from .. import sysfs

    n = sysfs.capture(output)
    click.echo(f"wrote {output} ({n} files)")


@topo.command("import")
@click.argument("capture", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=OUTPUT, required=True, help="NAME.toml")
@click.option("--mini", is_flag=True, help="Also write NAME-mini.toml, shrunk to <= 32 CPUs keeping the shape.")
@click.option(
    "--nearest", is_flag=True,
    help="A machine QEMU cannot build (groups of different sizes): write the nearest one it can, naming what differs.",
)  # fmt: skip
def import_(capture: Path, output: Path, mini: bool, nearest: bool) -> None:
    """Turn a capture (directory or tarball: `lab topo capture`, hwloc-gather-topology, a sysfs
    copy), `lstopo --of xml` output or an `lscpu -e` table into a spec that keeps the real
    numbering."""
    # deferred: CLI start (lab.importer, lab.sysfs)
    from .. import importer, sysfs

    if output.suffix != ".toml":
        raise UserError(f"{output}: the spec must be a .toml file")
    view = sysfs.read_capture(capture)
    name = output.stem
    text, notes = importer.view_to_spec(view, name, str(capture))
    tp = topology.loads(text, where=str(output), default_name=name)
    # An arm64 machine whose only uneven level is its clusters boots as it is (lab's device
    # tree writes the clusters: render.qemu._buildable()); --nearest still flattens it.
    buildable = tp.arch == "arm64" and topology.flatten_clusters(tp) is not None
    if tp.shape is None and (nearest or not buildable):
        # QEMU's -smp builds equal groups only: refused with the exact reason and the
        # nearest machine it can build, which --nearest writes instead.
        near_text, changes = importer.nearest(tp, name)
        if not nearest:
            near = topology.loads(near_text, default_name=name)
            raise UserError(
                f"{capture}: QEMU cannot build this machine: {'; '.join(topology.irregularities(tp))} (its -smp gives "
                f"every socket, node, LLC, cluster and core the same count); the nearest machine lab can build is "
                f"{near.summary()}: --nearest writes it, naming what differs"
            )
        text, notes = near_text, [*notes, *(f"nearest: {c}" for c in changes)]
        tp = topology.loads(text, where=str(output), default_name=name)
    mini_text = importer.mini(tp, f"{name}-mini") if mini else None
    host = host_mod.probe()
    # What a boot on this host will not reproduce, or why it cannot boot at all: a
    # capture neither the spec nor its mini can boot on this QEMU is refused here.
    lost, why_not = importer.not_reproduced(tp, host)
    mini_lost: list[str] = []
    if mini_text is not None:
        mini_lost, mini_why = importer.not_reproduced(topology.loads(mini_text, default_name=f"{name}-mini"), host)
        if why_not and mini_why:
            raise UserError(f"{capture}: {why_not}")
    elif why_not:
        raise UserError(f"{capture}: {why_not}")
    importer.write(output, text)
    click.echo(f"wrote {output}")
    for n in notes:
        click.echo(f"  note: {n}")
    mp = output.with_name(f"{name}-mini.toml")
    if mini_text is not None:
        importer.write(mp, mini_text)
        click.echo(f"wrote {mp}")
    if why_not:
        click.echo(f"{output.name} cannot boot on this QEMU: {why_not}")
    else:
        click.echo(f"the VM of {output.name} will not reproduce: " + ("; ".join(lost) if lost else "nothing lab knows of"))
    if mini_text is not None:
        click.echo(f"the VM of {mp.name} will not reproduce: " + ("; ".join(mini_lost) if mini_lost else "nothing lab knows of"))


@topo.command()
@click.argument("description")
@click.option("-o", "--output", type=OUTPUT, required=True, help="NAME.toml")
@click.option("--arch", type=click.Choice(["x86_64", "arm64"]), default="x86_64", show_default=True)
def synth(description: str, output: Path, arch: str) -> None:
    """A spec from an hwloc synthetic topology, e.g. "pack:2 numa:2 l3:4 core:8 pu:2"
    (levels from the top; what `lstopo -i` takes)."""
    # deferred: CLI start (lab.hwloc, lab.importer)
    from .. import hwloc, importer

    if output.suffix != ".toml":
        raise UserError(f"{output}: the spec must be a .toml file")
    text, notes = hwloc.synth_spec(description, output.stem, arch)
    importer.write(output, text)
    click.echo(f"wrote {output}")
    for n in notes:
        click.echo(f"  note: {n}")


def capture_name(path: Path) -> str:
    """A spec name for a capture: its file name without the archive suffixes."""

    name = path.name
    for suffix in (".tar.gz", ".tgz", ".tar.xz", ".tar.bz2", ".tar", ".xml", ".txt"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:60].strip("._") or "capture"


@topo.command()
@click.argument("capture", type=click.Path(path_type=Path))
@vm_options
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--timeout", type=SECONDS, default=600, show_default=True, help="Seconds before the VM is killed.")
@RUNS
def diff(capture: Path, vm, as_json: bool, timeout: float, runs) -> None:
    """Import CAPTURE (any form `lab topo import` takes), boot it, and print what the
    guest sees against the capture, side by side, in the capture's CPU numbering: nodes,
    distances, SMT / package / cluster / LLC groups, capacities and the sched-domain tree
    where the capture has one.  Exit 0 when identical, 1 when anything differs; the
    deviations the importer already names (what QEMU cannot build) are listed apart."""
    # deferred: CLI start (lab.importer, lab.sysfs, lab.topodiff)
    from .. import importer, sysfs, topodiff

    view = sysfs.read_capture(capture)
    name = capture_name(capture)
    text, notes = importer.view_to_spec(view, name, str(capture))
    tp = topology.loads(text, where=str(capture), default_name=name)
    p = progress_for_cli()  # stderr only: stdout is the comparison
    s = session.prepare(tp, vm, progress=p, runs=runs)
    run_dir = session.open_run("diff", s)
    atomic.write_text(run_dir / f"{name}.toml", text, "the imported spec")
    with p.step("diff", name):
        res = backends.boot(s.plan, s.kernel, run_dir, timeout=timeout, progress=p)
    guest = sysfs.read_snapshot(res.out_dir / rundir.GUEST)
    d = topodiff.compare(view, tp, s.plan, guest, cluster_level=s.cluster_level)
    doc = {
        "capture": str(capture),
        "spec": str(run_dir / f"{name}.toml"),
        "import_notes": notes,
        "kernel": {"name": s.kernel.name, "id": s.kernel.id, "release": guest.release or s.kernel.release},
        "qemu": {"binary": s.plan.qemu, "version": ".".join(map(str, s.plan.qemu_version))},
        "cpu_model": s.plan.cpu_model.split(",")[0],
        "numbering": "the capture's" + (" (guest CPU ids translated)" if s.plan.numbering_mode == "translated" else ""),
        **d.to_dict(),
        "run_dir": str(run_dir),
    }
    atomic.write_text(run_dir / "diff.json", json.dumps(doc, indent=1), "the diff report")
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    else:
        title = (
            f"lab topo diff {capture}: the capture against the guest ({s.kernel.name} {guest.release or s.kernel.release}, "
            f"QEMU {doc['qemu']['version']}, CPU model {doc['cpu_model']}), in the capture's CPU numbering"
        )
        for line in topodiff.render_text(d, title):
            click.echo(line)
        click.echo(f"run dir {run_dir}")
    sys.exit(0 if d.ok else 1)
