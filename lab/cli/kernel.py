"""`lab kernel ...`: build, check, fetch, list, show and remove kernels."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from .. import arch as archs
from .. import kernel as kernel_pkg
from ..errors import LabError, UserError
from ..kernel import resolve
from . import common

ARCH = click.Choice(archs.NAMES)


class RecipeName(click.ParamType):
    """A recipe in kernels/ (completion + nearest-name errors come from the loader)."""

    name = "recipe"

    def shell_complete(self, ctx, param, incomplete):
        # deferred: CLI start (click.shell_completion, lab.kernel.recipe)
        from click.shell_completion import CompletionItem

        from ..kernel import recipe

        return [CompletionItem(n) for n in recipe.names() if n.startswith(incomplete)]


class KernelSpec(click.ParamType):
    """A store id (or prefix), a recipe, 'debian', or a path to an image."""

    name = "kernel"

    def shell_complete(self, ctx, param, incomplete):
        # deferred: CLI start (click.shell_completion, lab.kernel.recipe, lab.kernel.store)
        from click.shell_completion import CompletionItem

        from ..kernel import recipe, store

        cands = ["debian", *recipe.names(), *(a.label for a in store.entries())]
        return [CompletionItem(c) for c in cands if c.startswith(incomplete)]


RECIPE = RecipeName()
KERNEL = KernelSpec()


@click.group()
def kernel() -> None:
    """Build, fetch and list kernels."""


def _load(name: str, patches: tuple[str, ...]):
    # deferred: CLI start (lab.kernel.recipe)
    from ..kernel import recipe

    r = recipe.load(name)
    return r.with_patches([Path(p) for p in patches])


@kernel.command("recipes")
@common.text_format_option
def recipes_cmd() -> None:
    """List the recipes in kernels/."""
    # deferred: CLI start (rich, lab.kernel.recipe)
    from rich.table import Table

    from ..kernel import recipe

    t = Table(box=None)
    for col in ("recipe", "arch", "patches", "description"):
        t.add_column(
            col, no_wrap=col in ("recipe", "arch"), overflow="fold"
        )  # names whole: they are typed
    for n in recipe.names():
        r = recipe.load(n)
        pats = "\n".join(("-R " if p.revert else "") + p.name for p in r.patches) or "-"
        t.add_row(n, r.arch, pats, r.description)
    common.console().print(t)


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
    # deferred: CLI start (rich, lab.kernel.build)
    from rich.console import Console
    from rich.table import Table

    from ..kernel import build

    r = _load(recipe_name, patches)
    console = Console(stderr=True)
    with console.status(f"preparing {r.name}") as st:
        p = build.configure(r, progress=lambda stage, d: st.update(f"{stage}: {d}"))
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
    out = common.console()
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
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), default=None, help="make -j (default: host cores)."
)
@click.option("--force", is_flag=True, help="Rebuild even if the store has this kernel.")
def build_cmd(recipe_name: str, patches: tuple[str, ...], jobs: int | None, force: bool) -> None:
    """Build RECIPE (unless the store already has it) and print its store id."""

    # deferred: CLI start (lab.kernel.build)
    from ..kernel import build

    r = _load(recipe_name, patches)
    t0 = time.monotonic()
    # lab's one progress API: a live line on a terminal, timestamped lines in a log (this
    # command's own rich spinner printed nothing at all when piped, for a 20-minute build).
    with common.progress_for_cli().step("build", f"kernel {r.name} ({r.arch})") as p:
        a = build.build(r, jobs=jobs, progress=p.callback(), force=force)
    took = time.monotonic() - t0
    m = a.metadata
    common.console(stderr=True).print(
        f"{a.label}: {a.release} {a.arch} {m.get('image_size', 0) / 1e6:.1f} MB "
        f"({took:.0f}s; log {a.image.parent / 'build.log'})",
        markup=False,
        highlight=False,
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
    # deferred: CLI start (rich)
    from rich.console import Console

    with common.progress_for_cli().step("fetch", f"Debian's {arch} kernel ({what})") as p:
        a = kernel_pkg.fetch_debian(arch, refresh=refresh, name=what, progress=p)
    mods = ", ".join(a.metadata.get("guest_modules", [])) or "none"
    Console(stderr=True).print(f"{a.id}: {a.image} (virtio modules to load: {mods})")
    click.echo(a.id)


@kernel.command("list")
@common.text_format_option
@click.option("--json", "as_json", is_flag=True, help="Print the metadata as JSON.")
def list_cmd(as_json: bool) -> None:
    """List the kernels in the store."""
    # deferred: CLI start (lab.kernel.store)
    from ..kernel import store

    items = store.entries()
    for kid, why in store.damaged():  # named, not listed: lab never boots one
        click.echo(f"lab: damaged store entry {kid}: {why} (lab kernel rm {kid}, or fetch/build it again: the good entry replaces it)", err=True)
    if as_json:
        click.echo(json.dumps([a.metadata for a in items], indent=2))
        return
    # deferred: CLI start (rich)
    from rich.table import Table

    c = common.console()
    picked = _picked_by(items)
    if not items:
        c.print("no kernels yet: lab kernel build lab-6.1, or lab kernel fetch debian")
        return
    rows = []
    for a in items:
        size = f"{a.metadata.get('image_size', 0) / 1e6:.1f} MB"
        feats = ", ".join(sorted(a.features)) or "-"
        built = a.metadata.get("built_at", "")[:16].replace("T", " ")
        rows.append((a, size, feats, built))
    if c.width < 120:
        # A mail or a narrow terminal: a line per kernel, its name whole (it is copied
        # from here), then when it was built, what picks it and its features, indented; a
        # table cell folded them into pieces.
        w = [
            max(len(x) for x in col)
            for col in zip(
                *((a.label, a.arch, a.release, size) for a, size, _, _ in rows), strict=True
            )
        ]
        lines = []
        for a, size, feats, built in rows:
            lines.append(
                f"{a.label:<{w[0]}}  {a.arch:<{w[1]}}  {a.release:<{w[2]}}  {size:>{w[3]}}"
            )
            more = [f"built {built[:10]}"] + ([picked[a.id]] if a.id in picked else [])
            one = "    " + "; ".join(more + ([f"features: {feats}"] if a.features else []))
            if len(one) <= 80:
                lines.append(one)
            else:  # within a mail's 80 columns
                lines += ["    " + "; ".join(more), f"    features: {feats}"]
        click.echo("\n".join(lines))
        return
    t = Table(box=None)
    for col in ("kernel", "arch", "release", "size", "features", "built", "picked by"):
        t.add_column(col, no_wrap=col != "features", overflow="fold")
    for a, size, feats, built in rows:
        t.add_row(a.label, a.arch, a.release, size, feats, built, picked.get(a.id, "-"))
    c.print(t)


def _picked_by(items) -> dict[str, str]:
    """Store id -> the ``--kernel`` name that picks that entry now: ``debian`` (the newest
    of its arch) or the recipe whose current files it was built from.  The other rows
    are older builds, named only by their label."""
    # deferred: CLI start (lab.kernel.build, lab.kernel.recipe)
    from ..kernel import build, recipe

    out: dict[str, str] = {}
    for arch in {a.arch for a in items if a.name == "debian"}:
        out[resolve("debian", arch, build=False).id] = (
            f"--kernel debian{'' if arch == 'x86_64' else ' (' + arch + ')'}"
        )
    for name in {a.name for a in items} & set(recipe.names()):
        try:
            found = build.lookup_built(recipe.load(name))
        except LabError:
            continue  # a recipe that does not load now picks nothing
        if found is not None:
            out[found.id] = f"--kernel {name}"
    return out


@kernel.command("show")
@click.argument("spec", type=KERNEL)
@click.option("--arch", type=ARCH, default=None, help="Arch (default: the entry's, else x86_64).")
def show_cmd(spec: str, arch: str | None) -> None:
    """Show a kernel's metadata: 'debian' or a recipe (what --kernel picks), a store id or
    label (or a unique prefix of one), or an image path."""

    # deferred: CLI start (lab.kernel.recipe, lab.kernel.store)
    from ..kernel import recipe, store

    # 'debian' and recipe names pick what --kernel would; anything else is a store
    # id or label (or a unique prefix of one), then a path.
    a = None
    if spec != "debian" and spec not in recipe.names() and "/" not in spec:
        a = store.get(spec, arch)
    if a is None:
        if arch is None and spec in recipe.names():
            arch = recipe.load(spec).arch  # a recipe names its arch: lab-6.1-arm64 is arm64
        a = resolve(spec, arch or "x86_64", build=False)
    info = {
        "id": a.id,
        "label": a.label,
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
@click.option("--arch", type=ARCH, default=None, help="Only this arch's entries match.")
def rm_cmd(specs: tuple[str, ...], arch: str | None) -> None:
    """Remove kernels from the store (by id or label, or a unique prefix of one)."""
    # deferred: CLI start (lab.kernel.store)
    from ..kernel import store

    for s in specs:
        a = store.remove(s, arch)
        click.echo(f"removed {a.label} ({a.arch}, {a.release})" if a is not None else f"removed the damaged entry {s}")
