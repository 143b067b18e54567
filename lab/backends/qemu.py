"""Boot a plan under QEMU directly, run a job in the guest, bring the results back.

QEMU runs with -no-reboot, so the agent's reboot ends it; the guest agent's protocol
(the job, its log, the deadlines, the results) is every backend's: backends.guest.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from .. import proc, rundir
from .. import progress as progress_mod
from ..errors import InfraError, LostGuest, UserError
from ..kernel.artifact import KernelArtifact
from ..plan import VmPlan
from ..progress import Progress
from ..render import qemu as render
from ..rundir import RunDir
from . import monitor
from .base import Capabilities
from .guest import (  # the protocol every backend shares
    AgentLog,
    BootResult,
    GuestJob,
    Stages,
    boot_image,
    boot_timeout,
    collect,
    console_tail,
    die_with_parent,
    make_boot_files,
    subprocess_devnull,
    watch,
)

NAME = "qemu"
CAPABILITIES = Capabilities(interactive=True)


def adapt(plan: VmPlan, kernel: KernelArtifact | None = None) -> VmPlan:
    """The plan is QEMU's own: nothing to adapt."""
    return plan


def dry_run(plan: VmPlan, kernel: KernelArtifact) -> str:
    return shlex.join(dry_run_argv(plan, kernel))


def dry_run_argv(plan: VmPlan, kernel: KernelArtifact) -> list[str]:
    """What boot() would run for *plan* (in its run directory), without making anything."""
    return render.argv(plan, render.boot_files(plan, boot_image(kernel, plan.topo.n_cpus)))


def boot(
    plan: VmPlan,
    kernel: KernelArtifact,
    run_dir: Path,
    job: GuestJob | None = None,
    *,
    timeout: float = 600,
    on_event: Callable[[float, str], None] | None = None,
    progress: Progress | None = None,
) -> BootResult:
    """Boot, run *job* in the guest, wait, collect.  Always stops QEMU.  The boot, the
    snapshot, the job and the results are steps of *progress*, moved on by what the
    agent says (its other lines are the current step's detail)."""
    job = job or GuestJob()
    files = make_boot_files(plan, kernel, run_dir, job)
    assert files.console and files.agent_log and files.results and files.monitor
    argv = render.argv(plan, files)
    RunDir(run_dir).write_argv(argv)
    console = run_dir / files.console
    with Stages(progress_mod.of(progress), plan, kernel, job) as stages:

        def heard(t: float, line: str) -> None:
            stages.said(line)
            if on_event:
                on_event(t, line)

        said = AgentLog(run_dir / files.agent_log, plan, console, heard)
        said.on_note = stages.progress.update
        return _boot(plan, kernel, run_dir, files, argv, console, said, timeout)


def _boot(
    plan: VmPlan, kernel: KernelArtifact, run_dir: Path, files: render.BootFiles, argv: list[str], console: Path,
    said: AgentLog, timeout: float,
) -> BootResult:  # fmt: skip
    assert files.monitor and files.results and files.agent_log
    lost_boots: list[str] = []
    for attempt in range(1, BOOT_ATTEMPTS + 1):
        mon = monitor.Monitor(run_dir / files.monitor)  # asked where the vCPUs are if the guest is lost

        def lost(what: str, mon: monitor.Monitor = mon) -> LostGuest:
            where = monitor.diagnose(mon, run_dir, _system_map(kernel))
            return LostGuest(f"{what}{said.last_word()}; {where} (console: {console})", console_tail(console))

        t0 = time.monotonic()
        try:
            returncode = _run_qemu(argv, run_dir, said, lost, mon, ready_within=boot_timeout(plan), finish_within=timeout)
        except LostGuest as e:
            if attempt == BOOT_ATTEMPTS or said.events or plan.accel != "tcg":
                raise
            # Lost before lab's agent said a word: the guest kernel never reached /init,
            # so nothing of the run was lost with it.  Kept: that boot's console, registers
            # and QEMU messages (*.boot1), named in boot.json and on the progress line.
            lost_boots.append(_keep_lost_boot(run_dir, files, attempt, str(e)))
            said.progress_note(f"lost before /init ({lost_boots[-1]}); booting again")
            continue
        break
    wall = time.monotonic() - t0
    if returncode not in (0, None):
        msg = (run_dir / rundir.QEMU_STDERR).read_text(errors="replace").strip().splitlines()
        msg = [m for m in msg if "TCG doesn't support" not in m]
        raise InfraError(
            f"QEMU exited with status {returncode}: {msg[-1] if msg else 'no message'} (argv: {run_dir / rundir.QEMU_ARGV})"
        )
    return collect(plan, run_dir, files, said, argv, wall, lost_boots=lost_boots)


# A TCG guest whose kernel never reaches lab's agent is booted once more.  Measured: on a
# host running another 32-vCPU guest, epyc7551-8n-mini with maxcpus=9 under MTTCG
# (QEMU 7.2, Debian's 6.1) spun 126 s of host time with all 9 vCPUs in the idle path
# (sched_clock_idle_wakeup_event) and the agent silent, where the same boot reached the
# agent in 4-6 s before and after (CI run of 2026-11-25).  A boot lost after the agent
# spoke is never retried: from then on the run's own data is at stake.
BOOT_ATTEMPTS = 2


def _keep_lost_boot(run_dir: Path, files: render.BootFiles, attempt: int, why: str) -> str:
    """Move a lost boot's console, registers and QEMU messages aside (NAME.bootN) and
    clear what the next boot writes afresh; returns the first line of *why*."""
    for name in (files.console, rundir.LOST_REGISTERS, rundir.QEMU_STDERR):
        if name and (run_dir / name).exists():
            (run_dir / name).replace(run_dir / f"{name}.boot{attempt}")
    for name in (files.agent_log, files.results, files.monitor):
        if name:
            (run_dir / name).unlink(missing_ok=True)
    first = why.splitlines()[0] if why else "lost"
    (run_dir / f"lost.boot{attempt}").write_text(why + "\n")
    return first[:300]


def _run_qemu(
    argv: list[str], run_dir: Path, said: AgentLog, lost: Callable[[str], LostGuest], mon: monitor.Monitor, *,
    ready_within: float, finish_within: float,
) -> int | None:
    """Run QEMU in *run_dir* until it exits (see watch()).  Always stops QEMU."""
    with open(run_dir / rundir.QEMU_STDERR, "wb") as err:
        p = None
        try:
            with proc.signals_held():  # p is set before an interrupt can unwind (proc.signals_held)
                p = proc.popen(
                    argv, cwd=run_dir, stdin=subprocess_devnull(), stdout=err, stderr=err, start_new_session=True,
                    preexec_fn=die_with_parent,
                )  # fmt: skip
            return watch(p.poll, p.pid, said, lost, ready_within=ready_within, finish_within=finish_within)
        finally:
            if p is not None:
                proc.stop_group(p)
            mon.close()


def _system_map(kernel) -> Path | None:
    try:
        return kernel.system_map()
    except (AttributeError, OSError):
        return None


def interactive(plan: VmPlan, kernel: KernelArtifact, run_dir: Path, layers: tuple[Path | None, ...] = ()) -> int:
    """Boot with the console on this terminal and a shell in the guest (with *layers*,
    e.g. host tools, in its initramfs)."""
    if not os.isatty(0):
        raise UserError("an interactive console needs a terminal; give a command after --")
    job = GuestJob(layers=tuple(x for x in layers if x is not None))
    files = make_boot_files(plan, kernel, run_dir, job, interactive=True)
    argv = render.argv(plan, files)
    RunDir(run_dir).write_argv(argv)
    return proc.run(argv, cwd=run_dir, capture=False, check=False).returncode
