"""`lab scheduler ...`: build, list and show sched_ext BPF schedulers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from .. import scheduler as sm
from ..errors import UserError, unknown
from ..kernel import resolve, spec_arch
from . import common

DEFAULT_KERNEL = "lab-6.12-scx"


@click.group()
def scheduler() -> None:
    """sched_ext BPF schedulers: build them against a kernel, list and show them."""


@scheduler.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the built schedulers' metadata as JSON.")
def list_cmd(as_json: bool) -> None:
    """The schedulers lab can build (the kernel tree's tools/sched_ext) and those built."""

    built = sm.entries()
    if as_json:
        click.echo(json.dumps([s.metadata for s in built], indent=2))
        return
    c = common.console()
    c.print("buildable (the kernel tree's tools/sched_ext; --scheduler NAME[:ARGS]):", highlight=False)
    for name, ops in sm.TREE.items():
        n = sum(1 for s in built if s.name == name)
        c.print(f"  {name:<12} ops {ops:<8} {n} built" if n else f"  {name:<12} ops {ops:<8} not built", highlight=False)
    c.print(f"  {'eevdf, cfs':<12} the kernel's own scheduler (no BPF scheduler loaded)", highlight=False)
    c.print("  PATH         your own: a directory with NAME.bpf.c and NAME.c, or a static binary", highlight=False)
    c.print(f"buildable from {sm.CRATE_ORIGIN} (the scx project's Rust schedulers, cargo; --scheduler NAME[@VERSION][:ARGS]):", highlight=False, markup=False)
    for name, crate in sm.CRATES.items():
        got = sorted({str(s.metadata.get("crate", {}).get("version", "?")) for s in built if s.name == name and s.metadata.get("origin") == sm.CRATE_ORIGIN})
        c.print(f"  {name:<12} ops {crate.ops:<8} pinned {crate.version}, BPF by {crate.clang}; "
                + (f"built: {', '.join(got)}" if got else "not built"), highlight=False, markup=False)  # fmt: skip
    if built:
        c.print("built:", highlight=False)
        for s in built:
            k = s.metadata.get("kernel", {})
            user = s.metadata.get("user", {})
            crate = s.metadata.get("crate", {}) if s.metadata.get("origin") == sm.CRATE_ORIGIN else {}
            c.print(
                f"  {s.label:<22} "
                + (f"{user.get('kind', '?')} {user.get('path', '?')}, " if user else "")
                + (f"{sm.CRATE_ORIGIN} {crate.get('version', '?')} (built in {s.metadata.get('timings', {}).get('build_s', '?')} s), " if crate else "")
                + (f"for {k.get('label', '?')} ({k.get('release', '?')}), " if k else "any kernel, ")
                + f"{s.metadata.get('binary_size', 0) / 1e6:.1f} MB, built {str(s.metadata.get('built_at', ''))[:16]}",
                highlight=False, soft_wrap=True,
            )  # fmt: skip


@scheduler.command("build")
@click.argument("name", metavar="NAME[@VERSION]|PATH")
@click.option("--kernel", "kernel_spec", default=DEFAULT_KERNEL, show_default=True,
              help="The kernel whose BTF it is built against (a recipe with sched_ext, a store id); "
                   "not used for a crate (one binary for any sched_ext kernel).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=2, show_default=True, help="make -j (cargo -j for a crate).")
@click.option("--force", is_flag=True, help="Rebuild even if the store has it.")
def build_cmd(name: str, kernel_spec: str, jobs: int, force: bool) -> None:
    """Build scheduler NAME (tools/sched_ext) for a kernel, unless built, and print its id.

    PATH: your own scheduler, a directory with NAME.bpf.c and NAME.c (tools/sched_ext's
    layout: copy scx_simple's two files and rename them), built the same way; or a
    prebuilt static binary, checked and stored.

    NAME[@VERSION]: one of the scx project's Rust schedulers from crates.io (lab scheduler
    list names them; VERSION defaults to the one lab pins), built with cargo install."""
    spec = None
    crate, at, version = name.partition("@")
    if crate in sm.CRATES and not sm._is_path(name):
        if at:
            sm.check_version(crate, version, f"lab scheduler build {name}")
        sm.crate_toolchain(sm.CRATES[crate])  # cargo, rustc, clang: one line before anything starts
        p = common.progress_for_cli()
        t0 = time.monotonic()
        with p.step("build", f"scheduler {name} from {sm.CRATE_ORIGIN}") as st:
            s = sm.build_crate(crate, version, jobs=jobs, force=force, progress=st.callback())
        took = time.monotonic() - t0
        click.echo(f"lab: {s.label} ({s.binary}, {s.metadata.get('version', '?')}) in {took:.0f}s", err=True)
        click.echo(s.id)
        return
    # The kernel's arch: its recipe's (lab-6.12-scx-arm64), its store entry's, else x86_64.
    arch = spec_arch(kernel_spec, "x86_64") if kernel_spec.strip() else "x86_64"
    if sm._is_path(name):
        spec = sm.user_spec(name)
        if spec.kind == "binary":
            got = sm.elf_arch(Path(spec.path).read_bytes())
            if got != arch:  # before the kernel is resolved (maybe built)
                raise UserError(f"lab scheduler build {name}: a binary for {got}; --kernel {kernel_spec} is {arch}")
    elif name not in sm.TREE:
        raise unknown("scheduler", name, [*sm.TREE, *sm.CRATES])
    if not kernel_spec.strip():
        raise UserError(f"--kernel: give a kernel with sched_ext (e.g. {DEFAULT_KERNEL})")
    p = common.progress_for_cli()
    k = resolve(kernel_spec, arch, build=True, progress=p)
    t0 = time.monotonic()
    label = spec.name if spec else name
    with p.step("build", f"scheduler {label} for {k.label}") as st:
        s = sm.build(label, k, jobs=jobs, force=force, progress=st.callback(), spec=spec)
    took = time.monotonic() - t0
    click.echo(f"lab: {s.label} ({s.binary}, {'static' if s.metadata.get('static') else 'dynamic'}) in {took:.0f}s", err=True)
    click.echo(s.id)


@scheduler.command("show")
@click.argument("spec", metavar="ID")
def show_cmd(spec: str) -> None:
    """A built scheduler's metadata (ID: its id or a unique prefix, or NAME@ID)."""

    s = sm.get(spec)
    if s is None:
        names = ", ".join(x.label for x in sm.entries()[:10]) or "none built yet"
        raise UserError(f"no built scheduler {spec!r} (built: {names}; lab scheduler list)")
    click.echo(json.dumps({"label": s.label, "binary": str(s.binary), "metadata": s.metadata}, indent=2))
