"""`lab qemu`: the QEMUs lab can boot with, fetching Debian bookworm-backports' QEMU 10 and
building Debian trixie's (the fallback)."""

from __future__ import annotations

import json
import re
import time

import click

from .. import emulators
from ..errors import UserError
from .common import console, progress_for_cli

ARCHES = click.Choice(["x86_64", "arm64"])


@click.group("qemu")
def qemu() -> None:
    """The QEMUs lab boots with: the system's, and lab's own (fetched or built)."""


@qemu.command("fetch")
@click.option("--mirror", default=None, metavar="URL", help="The Debian mirror to fetch from (default: http://deb.debian.org/debian).")
@click.option("--libvirt-schemas", is_flag=True,
              help="Also fetch the same archive's libvirt domain schemas (libvirt-common 11.3), to check lab's domain XML against the libvirt that has clusters.")
def fetch_cmd(mirror: str | None, libvirt_schemas: bool) -> None:
    """Fetch Debian 12's QEMU 10 (bookworm-backports: qemu-system-x86, qemu-system-arm and
    their firmware) into lab's cache.

    apt-get download with a private sources list, lists and cache under lab's cache (the
    system's apt configuration and packages are not changed), unpacked with dpkg -x and
    published whole; the same packages fetched before are reused."""

    if mirror is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", mirror):
        raise UserError(f"--mirror {mirror!r}: expected an http:// or https:// URL of a Debian mirror (e.g. {emulators.MIRROR})")
    t0 = time.monotonic()
    ems, fetched = emulators.fetch(progress=progress_for_cli(), mirror=mirror or emulators.MIRROR)
    c = console(stderr=True)
    took = f"fetched in {time.monotonic() - t0:.1f}s" if fetched else "already in lab's cache"
    for e in ems:
        c.print(f"{e.arch}: QEMU {e.version_str} ({e.debian_version}, {e.origin}) {e.path} ({took})", markup=False, highlight=False)
    for e in ems:
        click.echo(e.path)
    if libvirt_schemas:
        version, where = emulators.fetch_libvirt_schemas(progress=progress_for_cli(), mirror=mirror or emulators.MIRROR)
        c.print(f"libvirt {version} domain schemas: {where}", markup=False, highlight=False)


@qemu.command("build")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="ninja -j (default: host cores).")
@click.option("--arch", "archs", type=ARCHES, multiple=True, help="Build only this emulator (repeatable; default both).")
def build_cmd(jobs: int | None, archs: tuple[str, ...]) -> None:
    """Build Debian trixie's QEMU (x86_64 and aarch64 system emulators) into lab's cache.

    The source comes through apt with a private sources list (the system's apt
    configuration is not changed); a build with the same source and options is reused."""

    t0 = time.monotonic()
    p = progress_for_cli()
    ems = emulators.build(jobs=jobs, progress=p, archs=tuple(dict.fromkeys(archs)) or ("x86_64", "arm64"))
    c = console(stderr=True)
    for e in ems:
        c.print(f"{e.arch}: QEMU {e.version_str} {e.path} ({time.monotonic() - t0:.0f}s)", markup=False, highlight=False)
    for e in ems:
        click.echo(e.path)


@qemu.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_cmd(as_json: bool) -> None:
    """The system's QEMU and lab's own (fetched or built), with their versions and origins."""

    rows = [e for a in ("x86_64", "arm64") for e in emulators.available(a)]
    if as_json:
        click.echo(json.dumps([e.describe() for e in rows], indent=1))
        return
    # deferred: CLI start (rich)
    from rich.table import Table

    t = Table(box=None)
    for col in ("arch", "version", "origin", "package"):
        t.add_column(col, no_wrap=True)
    t.add_column("binary", overflow="fold")  # whole, folded: it is copied from here
    for e in rows:
        t.add_row(e.arch, e.version_str, e.origin, e.debian_version or ("" if e.entry else "-"), e.path)
    console().print(t)
    if not any(e.in_store for e in rows):
        console().print(
            "no QEMU of lab's own: `lab qemu fetch` gets Debian's QEMU 10 from bookworm-backports (`lab qemu build` builds it)",
            highlight=False,
        )
