"""`lab boot` and `lab verify`."""

from __future__ import annotations

import functools
import json
import os
import shlex
import sys
import time

import click

from ..render.qemu import HOTPLUG_BRINGUP_ABOVE
from .common import CPU_MODEL, SECONDS, TOPOLOGY, console

KERNEL_HELP = "debian (Debian's prebuilt, the default), a recipe, a store id, or a path to a bzImage/Image."


def vm_options(f):
    """The VM options every VM command takes, passed to the command as one ``vm: VmOptions``."""

    @functools.wraps(f)
    def command(*args, kernel_spec, accel, cpu_model, tcg_threads, bringup, append, **kw):
        from ..plan import VmOptions

        vm = VmOptions(kernel=kernel_spec, accel=accel, cpu_model=cpu_model, tcg_threads=tcg_threads, bringup=bringup, append=append)
        return f(*args, vm=vm, **kw)

    for opt in reversed(VM_OPTIONS):
        command = opt(command)
    return command


VM_OPTIONS = (
    click.option("--kernel", "kernel_spec", default="debian", show_default=True, help=KERNEL_HELP),
    click.option(
        "--accel", type=click.Choice(["auto", "kvm", "tcg"]), default="auto", show_default=True,
        help="auto picks KVM only where a guest can really run under it.",
    ),
    click.option("--cpu-model", type=CPU_MODEL, default="auto", show_default=True, help="auto, intel, amd, or a QEMU -cpu model."),
    click.option(
        "--tcg-threads", type=click.Choice(["auto", "single", "multi"]), default="auto", show_default=True,
        help="TCG threading; auto: one thread per vCPU while vCPUs <= 2 x host cores or with hotplug bring-up.",
    ),
    click.option(
        "--bringup", type=click.Choice(["auto", "boot", "hotplug"]), default="auto", show_default=True,
        help="Secondary CPUs: at boot, or onlined by lab's agent after a maxcpus=1 boot; "
        f"auto: hotplug for x86 under TCG above {HOTPLUG_BRINGUP_ABOVE} vCPUs.",
    ),
    click.option(
        "--append", default="", metavar="ARGS",
        help="More kernel command line, after lab's (so it overrides lab's choices, e.g. 'mitigations=auto').",
    ),
)  # fmt: skip


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("topology", type=TOPOLOGY)
@vm_options
@click.option("--dry-run", is_flag=True, help="Print the exact QEMU command and exit.")
@click.option("--timeout", type=SECONDS, default=600, show_default=True, help="Seconds before the VM is killed.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def boot(topology, vm, dry_run: bool, timeout: float, cmd) -> None:
    """Boot TOPOLOGY; run CMD in the guest (after --) or open a console.

    With CMD, prints its output and exits with its status.
    """
    from .. import session
    from ..backends import qemu as backend

    s = session.prepare(topology, vm, build=not dry_run)
    for n in s.plan.notes:
        click.echo(f"lab: {n}", err=True)
    if dry_run:
        click.echo(shlex.join(session.dry_run_argv(s)))
        click.echo(f"lab: planned for kernel {s.kernel.name} ({s.kernel.release}, {s.kernel.id})", err=True)
        click.echo("lab: run in the run directory: the initramfs, logs and sockets are named relative to it", err=True)
        return
    run_dir = session.open_run("boot", s)
    click.echo(f"lab: {topology.name} on {s.kernel.name} ({s.kernel.release}), accel {s.plan.accel} ({s.plan.accel_reason}); run dir {run_dir}", err=True)
    if not cmd:
        rc = backend.interactive(s.plan, s.kernel, run_dir)
        sys.exit(rc)
    # No topology snapshot: the user asked for their command, and every second counts here.
    job = backend.GuestJob(guest_script(cmd), {"LAB_SNAPSHOT": "0"})
    res = backend.boot(s.plan, s.kernel, run_dir, job, timeout=timeout)
    # The command's output byte for byte: CRs and bytes that are not UTF-8 included.
    for text, data in ((sys.stdout, res.stdout), (sys.stderr, res.stderr)):
        text.flush()
        text.buffer.write(data)
        text.buffer.flush()
    click.echo(f"lab: ready in {res.ready_s:.1f}s, finished in {res.wall_s:.1f}s", err=True)
    sys.exit(res.rc if res.rc is not None else 3)


def guest_script(cmd: tuple[str, ...] | list[str]) -> str:
    """The shell script that runs *cmd* in the guest, each argument byte for byte.

    An argument that is not UTF-8 (Python holds its bytes as surrogates) cannot be
    written into the script as it is: it is rebuilt in the guest with printf's octal
    escapes (the "x" keeps $(...) from eating trailing newlines)."""
    lines, argv = ["#!/bin/sh"], []
    for i, arg in enumerate(cmd):
        raw = os.fsencode(arg)
        try:
            raw.decode()
        except UnicodeDecodeError:
            octal = "".join(f"\\{b:03o}" for b in raw)
            lines.append(f"a{i}=$(printf '{octal}x'); a{i}=${{a{i}%x}}")
            argv.append(f'"$a{i}"')
        else:
            argv.append(shlex.quote(arg))
    return "\n".join([*lines, " ".join(argv)]) + "\n"


@click.command()
@click.argument("topology", type=TOPOLOGY)
@vm_options
@click.option("--json", "as_json", is_flag=True, help="Print the checks and the guest's view as JSON.")
@click.option("--strict", is_flag=True, help="Known deviations (the vendor effect) fail too.")
@click.option("--timeout", type=SECONDS, default=600, show_default=True, help="Seconds before the VM is killed.")
def verify(topology, vm, as_json: bool, strict: bool, timeout: float) -> None:
    """Boot TOPOLOGY and check that the guest kernel sees it: nodes, distances,
    siblings, caches and every CPU's sched-domain tree.  Exit 1 on a mismatch."""
    from .. import atomic, expect, session, sysfs
    from ..backends import qemu as backend

    t0 = time.monotonic()
    s = session.prepare(topology, vm)
    run_dir = session.open_run("verify", s)
    res = backend.boot(s.plan, s.kernel, run_dir, timeout=timeout)
    view = sysfs.read_snapshot(res.out_dir / "guest")
    vd = expect.verify(topology, s.plan, view, cluster_level=s.cluster_level)
    wall = time.monotonic() - t0
    ok = vd.ok(strict)
    doc = {
        "topology": topology.name,
        "accel": s.plan.accel,
        "accel_reason": s.plan.accel_reason,
        "kernel": {"name": s.kernel.name, "id": s.kernel.id, "release": view.release or s.kernel.release},
        "numbering": vd.numbering,
        "notes": list(s.plan.notes),
        "checks": [c.to_dict() for c in vd.checks],
        "guest": view.to_dict(),
        "bringup": s.plan.bringup,
        "timing": {
            "wall_s": round(wall, 2), "boot_to_agent_s": round(res.ready_s or 0, 2), "vm_s": round(res.wall_s, 2),
            "online_s": res.online_s,
        },
        "run_dir": str(run_dir),
        "ok": ok,
    }
    atomic.write_text(run_dir / "verify.json", json.dumps(doc, indent=1), "the verify report")
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    else:
        _table(topology, s, vd, res, wall, run_dir, ok)
    sys.exit(0 if ok else 1)


def _table(topology, s, vd, res, wall, run_dir, ok) -> None:
    from rich.table import Table

    c = console()
    t = Table(title=f"lab verify {topology.name}", title_justify="left")
    t.add_column("check")
    t.add_column("expected")
    t.add_column("actual")
    t.add_column("ok")
    for ck in vd.checks:
        mark = {"ok": "[green]ok[/]", "FAIL": "[red]FAIL[/]", "known": "[yellow]known[/]"}[ck.status]
        t.add_row(ck.name, ck.expected, ck.actual, mark)
    c.print(t)
    for ck in vd.checks:
        if ck.status == "known":
            c.print(f"[yellow]known deviation[/] {ck.name}: {ck.known}")
    numbering = (
        "the guest numbers CPUs as the spec does"
        if vd.numbering == "native"
        else f"guest CPU ids translated to the spec's {topology.numbering} numbering (QEMU numbers SMT siblings adjacently)"
    )
    c.print(f"numbering: {numbering}")
    online = (
        f" (CPUs {s.plan.boot_cpus}-{topology.n_cpus - 1} onlined after boot, {res.online_s:.1f}s of it)"
        if s.plan.bringup == "hotplug" and res.online_s is not None
        else ""
    )
    c.print(
        f"kernel {s.kernel.name} ({s.kernel.release}), accel {s.plan.accel} ({s.plan.accel_reason}), "
        f"CPU model {s.plan.cpu_model.split(',')[0]}; boot to agent {res.ready_s:.1f}s{online}, total {wall:.1f}s; "
        f"run dir {run_dir}"
    )
    c.print("[green]PASS[/]" if ok else "[red]FAIL[/]")


COMMANDS = [boot, verify]
