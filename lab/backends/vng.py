"""Boot a plan through virtme-ng (vng), run a job, collect.

vng boots the kernel with the host's root file system shared read-only (9p) and runs a
command in it.  lab's command unpacks lab's initramfs layers into a tmpfs and runs
lab's agent there as init (render.vng.agent_script): the job, the workloads and the
agent are the ones the QEMU backend boots, and the results come back on lab's own
virtio-serial ports (added with --qemu-opts), so everything after the VM ends is the
QEMU backend's (qemu.collect).  vng's own output (its console included) goes to
console.log.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from .. import proc
from ..errors import InfraError, LostGuest, UserError
from ..kernel.artifact import KernelArtifact
from ..plan import VmPlan
from ..render import vng as render
from . import qemu

# vng's guest init (systemd-tmpfiles, udev, mounts over 9p) before lab's agent, under TCG.
VNG_BOOT_EXTRA_S = 120


def vng_bin() -> Path:
    """vng from lab's own environment (pip's virtme-ng), else from PATH."""
    here = Path(sys.executable).parent / "vng"
    if here.exists():
        return here
    found = shutil.which("vng")
    if found is None:
        raise UserError("--backend vng needs virtme-ng (pip install virtme-ng; sh scripts/setup.sh installs it)")
    return Path(found)


def _env(vng: Path) -> dict[str, str]:
    # vng runs virtme-run by name: it must be on PATH beside vng.
    return {"PATH": f"{vng.parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def dry_run_argv(plan: VmPlan, kernel: KernelArtifact) -> list[str]:
    files = qemu.render.boot_files(plan, Path(kernel.image))
    return render.argv(plan, files, vng=str(vng_bin()), agent="sh $RUN_DIR/vng-agent.sh")


def boot(
    plan: VmPlan,
    kernel: KernelArtifact,
    run_dir: Path,
    job: qemu.GuestJob | None = None,
    *,
    timeout: float = 600,
    on_event: Callable[[float, str], None] | None = None,
) -> qemu.BootResult:
    """Run *plan* through vng, run *job* in it, wait, collect.  Always stops vng and its QEMU."""
    vng = vng_bin()
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    # vng boots the bzImage itself (its initramfs loads the kernel's modules): no PVH vmlinux.
    files = replace(qemu.render.boot_files(plan, Path(kernel.image)), monitor=None, dtb=None)
    assert files.console and files.agent_log and files.results
    for f in (files.console, files.agent_log, files.results):
        (run_dir / f).unlink(missing_ok=True)
    layers = qemu.initrd_layers(run_dir / files.initrd, plan, kernel, job or qemu.GuestJob())
    (run_dir / "vng-agent.sh").write_text(render.agent_script(layers))
    argv = render.argv(plan, files, vng=str(vng), run_dir=run_dir, agent=f"sh {shlex.quote(str(run_dir / 'vng-agent.sh'))}")
    (run_dir / "vng.argv").write_text(shlex.join(argv) + "\n")
    console = run_dir / files.console
    said = qemu.AgentLog(run_dir / files.agent_log, plan, console, on_event)

    def lost(what: str) -> LostGuest:
        return LostGuest(f"{what}{said.last_word()} (vng's output: {console})", qemu.console_tail(console))

    t0 = time.monotonic()
    with open(console, "wb") as out:
        p = None
        try:
            with proc.signals_held():
                p = proc.popen(
                    argv, cwd=run_dir, env=_env(vng), stdin=qemu.subprocess_devnull(), stdout=out, stderr=out,
                    start_new_session=True, preexec_fn=qemu._die_with_parent,
                )  # fmt: skip
            qemu.watch(
                p.poll, p.pid, said, lost, ready_within=qemu.boot_timeout(plan) + VNG_BOOT_EXTRA_S, finish_within=timeout
            )
        finally:
            if p is not None:
                proc.stop_group(p)
    wall = time.monotonic() - t0
    if said.ready_s is None:
        tail = qemu.console_tail(console, 5).splitlines()
        raise InfraError(f"vng ended before lab's agent started: {tail[-1] if tail else 'no output'} (vng's output: {console})")
    return qemu.collect(plan, run_dir, files, said, argv, wall)
