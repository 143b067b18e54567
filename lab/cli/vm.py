"""`lab boot` and `lab verify`."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shlex
import sys
import time
from typing import cast

import click

from .. import backends, config, rundir, session
from .. import scheduler as scheduler_mod
from ..backends import base
from ..backends.base import names as backend_names
from ..errors import UserError
from ..image import tools as tools_mod
from ..image.tools import DEFAULT_TOOLS
from ..plan import VmOptions
from ..render.qemu import HOTPLUG_BRINGUP_ABOVE
from ..rundir import RunDir
from ..scheduler import parse_spec
from .common import (
    CPU_MODEL,
    QEMU_CHOICE,
    RUNS,
    SECONDS,
    TOOLS,
    TOPOLOGY,
    console,
    progress_for_cli,
)


class BackendChoice(click.Choice):
    """A backend's name (backends.base.REGISTRY, read when the option is parsed or its help
    shown), and *extra* choices after them (lab topo render's json)."""

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        super().__init__(())
        self.extra = extra

    @property
    def choices(self) -> tuple[str, ...]:
        return (*backend_names(), *self.extra)

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ sets it: the registry is the list
        pass


KERNEL_HELP = "debian (Debian's prebuilt, the default), a recipe, a store id, or a path to a bzImage/Image."


def vm_options(f):
    """The VM options every VM command takes, passed to the command as one ``vm: VmOptions``."""

    @functools.wraps(f)
    def command(*args, kernel_spec, accel, cpu_model, tcg_threads, bringup, append, qemu, backend, connect, **kw):
        vm = make_vm_options(kernel_spec=kernel_spec, accel=accel, cpu_model=cpu_model, tcg_threads=tcg_threads,
                             bringup=bringup, append=append, qemu=qemu, backend=backend, connect=connect)  # fmt: skip
        return f(*args, vm=vm, **kw)

    for opt in reversed(VM_OPTIONS):
        command = opt(command)
    return command


def make_vm_options(*, kernel_spec: str | None, accel: str | None, connect: str = "", backend: str = "qemu", **rest):
    """The VmOptions of the VM_OPTIONS as given (every command that takes them, lab
    compare's two kernels too): what was not given comes from the settings file
    (~/.config/lab/config.toml), else lab's default."""

    if connect and not base.get(backend).CAPABILITIES.remote:
        raise UserError(f"--connect {connect}: a libvirt URI, for --backend {'|'.join(base.with_capability('remote'))} (not {backend})")
    if kernel_spec is None or accel is None:
        cfg = config.load()
        kernel_spec = kernel_spec or cfg.kernel or VmOptions.kernel
        accel = accel or cfg.accel or VmOptions.accel
    return VmOptions(kernel=kernel_spec, accel=accel, backend=backend, connect=connect, **rest)


SCHEDULER_OPTION = click.option(
    "--scheduler", "scheduler", default="", metavar="NAME[:ARGS]",
    help="A sched_ext BPF scheduler the guest loads before the workload (lab scheduler list), ARGS its "
    "arguments, split into words like a shell's and passed as data; eevdf or cfs: the kernel's own (the default). "
    "NAME may be a PATH (with a / or starting with .): your own scheduler's source directory (NAME.bpf.c, NAME.c) or static binary; "
    "or one of the scx project's Rust schedulers from crates.io, NAME[@VERSION] (scx_bpfland, scx_rusty), built with cargo when missing.",
)  # fmt: skip


def scheduler_option(f):
    """--scheduler NAME[:ARGS] for a command that takes ``vm``, set into ``vm.scheduler``
    (checked here: bad input is one line before anything is built or booted)."""

    @functools.wraps(f)
    def command(*args, vm, scheduler: str, **kw):
        if scheduler:
            spec = parse_spec(scheduler)
            vm = dataclasses.replace(vm, scheduler=spec.text if spec else "")
        return f(*args, vm=vm, **kw)

    return SCHEDULER_OPTION(command)


KERNEL_OPTION = click.option("--kernel", "kernel_spec", default=None, show_default="the settings file's kernel, else debian", help=KERNEL_HELP)

# The VM options but --kernel and the backend (lab matrix has its own --kernels and --backend/--connect).
RUN_OPTIONS = (
    click.option(
        "--accel", type=click.Choice(["auto", "kvm", "tcg"]), default=None, show_default="the settings file's accel, else auto",
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
    click.option(
        "--qemu", type=QEMU_CHOICE, default="auto", show_default=True,
        help="auto: the system's QEMU where it can express the machine, else lab's own (lab qemu fetch, "
        "lab qemu build); system, lab, or a QEMU binary.",
    ),
)  # fmt: skip

BACKEND_OPTIONS = (
    click.option(
        "--backend", type=BackendChoice(), default="qemu", show_default=True,
        help="What runs the VM: QEMU directly, a libvirt transient domain, or virtme-ng (README: Backends).",
    ),
    click.option(
        "--connect", default="", metavar="URI",
        help="--backend libvirt: the libvirt URI (default qemu:///system; qemu+ssh://host/system).",
    ),
)  # fmt: skip

VM_OPTIONS = (KERNEL_OPTION, *RUN_OPTIONS, *BACKEND_OPTIONS)


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("topology", type=TOPOLOGY)
@vm_options
@scheduler_option
@click.option("--dry-run", is_flag=True, help="Print the exact QEMU command and exit.")
@click.option("--timeout", type=SECONDS, default=600, show_default=True, help="Seconds before the VM is killed.")
@click.option(
    "--tools", "tool_list", type=TOOLS, default="", metavar="T1,T2",
    help="Host tools to put in the guest with their libraries (e.g. numactl,perf); "
    "CMD's own program is added when it is one of " + ",".join(DEFAULT_TOOLS) + ".",
)  # fmt: skip
@RUNS
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def boot(topology, vm, dry_run: bool, timeout: float, tool_list: tuple[str, ...], runs, cmd) -> None:
    """Boot TOPOLOGY; run CMD in the guest (after --) or open a console.

    With CMD, prints its output and exits with its status.  In the guest, `labcpu`
    translates CPU ids between the spec's numbering and the guest's.
    """
    # deferred: CLI start (lab.runner, lab.backends.guest)
    from .. import runner
    from ..backends import guest

    tools = boot_tools(topology.arch, tool_list, cmd)
    why = tools_mod.unpackable(topology.arch, tools)  # before anything is built or booted
    if why:
        raise UserError(f"--tools: {why}")
    if vm.scheduler and not cmd and not dry_run:
        raise UserError("--scheduler: give the command to run under it after -- (an interactive console loads none)")
    p = progress_for_cli()  # stderr only: stdout is the command's bytes
    s = session.prepare(topology, vm, build=not dry_run, progress=p, runs=runs)
    if s.skip:  # a kernel without sched_ext: nothing is booted
        click.echo(f"lab: SKIP: {s.skip}", err=True)
        sys.exit(runner.EXIT["SKIP"])
    for n in s.plan.notes:
        click.echo(f"lab: {n}", err=True)
    backend = base.get(vm.backend)
    if dry_run:
        click.echo(f"lab: planned for kernel {s.kernel.name} ({s.kernel.release}, {s.kernel.id})", err=True)
        click.echo(session.dry_run(s))
        if backend.CAPABILITIES.run_dir_named:
            click.echo("lab: $RUN_DIR is the run directory", err=True)
        else:
            click.echo("lab: run in the run directory: the initramfs, logs and sockets are named relative to it", err=True)
        return
    if not cmd and not backend.CAPABILITIES.interactive:
        only = "|".join(base.with_capability("interactive"))
        raise UserError(f"an interactive console is --backend {only} only; give a command after -- with --backend {vm.backend}")
    run_dir = session.open_run("boot", s)
    click.echo(f"lab: {topology.name} on {s.kernel.name} ({s.kernel.release}), accel {s.plan.accel} ({s.plan.accel_reason}); run dir {run_dir}", err=True)
    note = s.plan.numbering_note()
    if note:
        click.echo(f"lab: {note}", err=True)
    layers = (runner.tools_layer(topology.arch, list(tools), p),) if tools else ()
    if not cmd:
        rc = cast("base.Interactive", backend).interactive(s.plan, s.kernel, run_dir, layers=layers)
        click.echo(f"lab: run dir {run_dir}", err=True)
        sys.exit(rc)
    # No topology snapshot: the user asked for their command, and every second counts here.
    sl, sconfig, sfiles = runner.scheduler_parts(s, p)
    job = guest.GuestJob(
        guest_script(cmd), {"LAB_SNAPSHOT": "0", **sconfig}, layers=tuple(x for x in (*layers, *sl) if x is not None),
        label="command", files=sfiles,
    )  # fmt: skip
    res = backends.boot(s.plan, s.kernel, run_dir, job, timeout=timeout, progress=p)
    # The command's output byte for byte: CRs and bytes that are not UTF-8 included.
    for text, data in ((sys.stdout, res.stdout), (sys.stderr, res.stderr)):
        text.flush()
        text.buffer.write(data)
        text.buffer.flush()
    rc = res.rc if res.rc is not None else 3
    if s.plan.scheduler is not None:
        status, why = scheduler_mod.outcome(res.out_dir, s.plan.scheduler.name, s.plan.scheduler.ops)
        if status:
            click.echo(f"lab: {status}: {why}", err=True)
            rc = runner.EXIT[status] if status == "ERROR" or rc == 0 else rc
        else:
            click.echo(f"lab: scheduler {s.plan.scheduler.name} stayed enabled throughout", err=True)
    click.echo(f"lab: ready in {res.ready_s:.1f}s, finished in {res.wall_s:.1f}s; run dir {run_dir}", err=True)
    sys.exit(rc)


def boot_tools(arch: str, asked: tuple[str, ...], cmd: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The host tools a boot stages: those asked for, plus CMD's program when it is one of
    the tools lab knows to stage (``lab boot T -- numactl -H`` finds numactl) and it can be
    staged for *arch* (otherwise the guest says it is not found, as for any program)."""

    out = list(asked)
    prog = os.path.basename(cmd[0]) if cmd else ""
    if prog in tools_mod.DEFAULT_TOOLS and prog not in out and tools_mod.unpackable(arch, [prog]) is None:
        out.append(prog)
    return tuple(out)


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
@RUNS
def verify(topology, vm, as_json: bool, strict: bool, timeout: float, runs) -> None:
    """Boot TOPOLOGY and check that the guest kernel sees it: nodes, distances,
    siblings, caches and every CPU's sched-domain tree.  Exit 1 on a mismatch."""
    # deferred: CLI start (lab.expect, lab.sysfs)
    from .. import expect, sysfs

    t0 = time.monotonic()
    p = progress_for_cli()  # stderr only: stdout is the table or the JSON
    s = session.prepare(topology, vm, progress=p, runs=runs)  # a fetch or build on demand is its own step
    run_dir = session.open_run("verify", s)
    with p.step("verify", topology.name):
        res = backends.boot(s.plan, s.kernel, run_dir, timeout=timeout, progress=p)
    view = sysfs.read_snapshot(res.out_dir / rundir.GUEST)
    vd = expect.verify(topology, s.plan, view, cluster_level=s.cluster_level)
    wall = time.monotonic() - t0
    ok = vd.ok(strict)
    doc = {
        "topology": topology.name,
        "accel": s.plan.accel,
        "accel_reason": s.plan.accel_reason,
        "backend": vm.backend,
        "qemu": {"binary": s.plan.qemu, "version": ".".join(map(str, s.plan.qemu_version))},
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
    RunDir(run_dir).write_verify(doc)
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    else:
        _table(topology, s, vd, res, wall, run_dir, ok)
    sys.exit(0 if ok else 1)


def _table(topology, s, vd, res, wall, run_dir, ok) -> None:
    # deferred: CLI start (rich)
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
