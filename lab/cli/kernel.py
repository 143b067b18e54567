"""`lab kernel ...`: build, check, fetch, list, show and remove kernels."""

from __future__ import annotations

import click

from .. import arch as archs

ARCH = click.Choice(archs.NAMES)


class RecipeName(click.ParamType):
    """A recipe in kernels/ (completion + nearest-name errors come from the loader)."""

    name = "recipe"

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        from ..kernel import recipe

        return [CompletionItem(n) for n in recipe.names() if n.startswith(incomplete)]


class KernelSpec(click.ParamType):
    """A store id (or prefix), a recipe, 'debian', or a path to an image."""

    name = "kernel"

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        from ..kernel import recipe, store

        cands = ["debian", *recipe.names(), *(a.id[:12] for a in store.entries())]
        return [CompletionItem(c) for c in cands if c.startswith(incomplete)]


RECIPE = RecipeName()
KERNEL = KernelSpec()


@click.group()
def kernel() -> None:
    """Build, fetch and list kernels."""


def _load(name: str, patches: tuple[str, ...]):
    from pathlib import Path

    from ..kernel import recipe

    r = recipe.load(name)
    return r.with_patches([Path(p) for p in patches])


@kernel.command("recipes")
def recipes_cmd() -> None:
    """List the recipes in kernels/."""
    from rich.console import Console
    from rich.table import Table

    from ..kernel import recipe

    t = Table(box=None)
    t.add_column("recipe", no_wrap=True)
    t.add_column("arch", no_wrap=True)
    t.add_column("patches")
    t.add_column("description")
    for n in recipe.names():
        r = recipe.load(n)
        pats = "\n".join(("-R " if p.revert else "") + p.name for p in r.patches) or "-"
        t.add_row(n, r.arch, pats, r.description)
    Console().print(t)


@kernel.command("config")
@click.argument("recipe_name", metavar="RECIPE", type=RECIPE)
@click.option(
    "--patch",
    "patches",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Apply this patch on top of the recipe's series (repeatable).",
)
@click.option(
    "--all", "show_all", is_flag=True, help="Show every checked symbol, not just problems."
)
def config_cmd(recipe_name: str, patches: tuple[str, ...], show_all: bool) -> None:
    """Make RECIPE's .config and check it with kconfiglib, without building."""
    from rich.console import Console
    from rich.table import Table

    from ..errors import UserError
    from ..kernel import build

    r = _load(recipe_name, patches)
    console = Console(stderr=True)
    with console.status(f"preparing {r.name}") as st:
        p = build.prepare(r, progress=lambda stage, d: st.update(f"{stage}: {d}"))
    bad = {x.request.name: x for x in p.problems}
    t = Table("symbol", "requested", "got", "from", "why", box=None)
    for req in p.requests.values():
        prob = bad.get(req.name)
        if prob is None and not show_all:
            continue
        t.add_row(
            f"CONFIG_{req.name}",
            req.value,
            prob.actual if prob else f"[green]{req.value}[/]",
            req.where.replace(str(__import__("lab").paths.ROOT) + "/", ""),
            f"[red]{prob.reason}[/]" if prob else "",
        )
    out = Console()
    if t.rows:
        out.print(t)
    out.print(f"config: {p.obj / '.config'} (sha256 {p.config_sha256[:16]})")
    out.print(f"store id: {p.id}")
    if p.problems:
        raise UserError(f"{len(p.problems)} of {len(p.requests)} requested symbols did not stick")
    out.print(f"[green]all {len(p.requests)} requested symbols have their requested values[/]")


@kernel.command("build")
@click.argument("recipe_name", metavar="RECIPE", type=RECIPE)
@click.option(
    "--patch",
    "patches",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Apply this patch on top of the recipe's series (repeatable).",
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="make -j (default: host cores).")
@click.option("--force", is_flag=True, help="Rebuild even if the store has this kernel.")
def build_cmd(recipe_name: str, patches: tuple[str, ...], jobs: int | None, force: bool) -> None:
    """Build RECIPE (unless the store already has it) and print its store id."""
    import time

    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from ..kernel import build

    r = _load(recipe_name, patches)
    console = Console(stderr=True)
    counts = {"n": 0}
    t0 = time.monotonic()
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.fields[stage]:<8}"),
        TextColumn("{task.fields[detail]}", style="dim"),
        TextColumn("{task.completed} steps"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as prog:
        task = prog.add_task(r.name, stage="start", detail="", total=None)

        def on(stage: str, detail: str) -> None:
            counts["n"] += 1
            prog.update(task, stage=stage, detail=detail[-60:], completed=counts["n"])

        a = build.build(r, jobs=jobs, progress=on, force=force)
    took = time.monotonic() - t0
    m = a.metadata
    console.print(
        f"{a.name}: {a.release} {a.arch} {m.get('image_size', 0) / 1e6:.1f} MB "
        f"({took:.0f}s; log {a.image.parent / 'build.log'})"
    )
    click.echo(a.id)


@kernel.command("fetch")
@click.argument("what", metavar="WHAT", type=click.Choice(["debian", "debian-6.12"]))
@click.option("--arch", type=ARCH, default="x86_64", show_default=True)
@click.option(
    "--refresh", is_flag=True, help="Fail rather than keep an older kernel if apt is unreachable."
)
def fetch_cmd(what: str, arch: str, refresh: bool) -> None:
    """Download Debian's newest 6.1 (debian) or 6.12 (debian-6.12) kernel (image, config,
    modules) into the store."""
    from rich.console import Console

    from ..kernel import fetch_debian

    with Console(stderr=True).status(f"fetching Debian's {arch} kernel ({what})"):
        a = fetch_debian(arch, refresh=refresh, name=what)
    mods = ", ".join(a.metadata.get("guest_modules", [])) or "none"
    Console(stderr=True).print(f"{a.id}: {a.image} (virtio modules to load: {mods})")
    click.echo(a.id)


@kernel.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the metadata as JSON.")
def list_cmd(as_json: bool) -> None:
    """List the kernels in the store."""
    from ..kernel import store

    items = store.entries()
    if as_json:
        import json

        click.echo(json.dumps([a.metadata for a in items], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(box=None)
    for col in ("id", "name", "arch", "release", "size"):
        t.add_column(col, no_wrap=True)
    t.add_column("features")
    t.add_column("built", no_wrap=True)
    for a in items:
        t.add_row(
            a.id[:12] if not a.id.startswith("debian-") else a.id,
            a.name,
            a.arch,
            a.release,
            f"{a.metadata.get('image_size', 0) / 1e6:.1f} MB",
            ", ".join(sorted(a.features)) or "-",
            a.metadata.get("built_at", "")[:16].replace("T", " "),
        )
    import sys

    # Piped output keeps whole lines (ids are copied from it).
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(
        t if items else "no kernels yet: lab kernel build lab-6.1, or lab kernel fetch debian"
    )


@kernel.command("show")
@click.argument("spec", type=KERNEL)
@click.option("--arch", type=ARCH, default=None, help="Arch (default: the entry's, else x86_64).")
def show_cmd(spec: str, arch: str | None) -> None:
    """Show a kernel's metadata (store id, recipe, 'debian' or image path)."""
    import json

    from ..kernel import resolve, store

    a = store.get(spec) if len(spec) >= 4 and "/" not in spec else None
    if a is None:
        a = resolve(spec, arch or "x86_64", build=False)
    info = {
        "id": a.id,
        "name": a.name,
        "arch": a.arch,
        "release": a.release,
        "image": str(a.image),
        "config": str(a.config) if a.config else None,
        "modules": str(a.modules) if a.modules else None,
        "features": sorted(a.features),
        "metadata": a.metadata,
    }
    click.echo(json.dumps(info, indent=2))


@kernel.command("rm")
@click.argument("specs", nargs=-1, required=True, type=KERNEL)
def rm_cmd(specs: tuple[str, ...]) -> None:
    """Remove kernels from the store (by id or unique prefix)."""
    from ..kernel import store

    for s in specs:
        a = store.remove(s)
        click.echo(f"removed {a.id} ({a.name} {a.release})")
