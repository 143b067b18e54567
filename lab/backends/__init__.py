"""What runs a VM: QEMU directly (qemu), a libvirt transient domain (libvirt) or
virtme-ng (vng).  Each boots the same plan (render.qemu.plan(), adapted to the backend
by session.prepare()) with the same guest agent and returns the same BootResult;
``boot()`` picks the one the plan's options name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..kernel.artifact import KernelArtifact
    from ..plan import VmPlan
    from ..progress import Progress
    from .qemu import BootResult, GuestJob

NAMES = ("qemu", "libvirt", "vng")


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
    """Boot *plan* with the backend its options name, run *job*, collect (see backends.qemu.boot)."""
    from ..progress import of
    from . import qemu

    b = plan.options.backend
    job = job or qemu.GuestJob()
    if b == "libvirt":
        from . import libvirt

        with of(progress).step("boot", f"{plan.topo.name} as a libvirt domain ({plan.options.connect or 'qemu:///system'})"):
            return libvirt.boot(plan, kernel, run_dir, job, timeout=timeout, on_event=on_event)
    if b == "vng":
        from . import vng

        with of(progress).step("boot", f"{plan.topo.name} through virtme-ng"):
            return vng.boot(plan, kernel, run_dir, job, timeout=timeout, on_event=on_event)
    return qemu.boot(plan, kernel, run_dir, job, timeout=timeout, on_event=on_event, progress=progress)


def dry_run(plan: VmPlan, kernel: KernelArtifact) -> str:
    """What a boot of *plan* starts, as text: the QEMU or vng command line, or the domain XML."""
    import shlex

    b = plan.options.backend
    if b == "libvirt":
        from . import libvirt

        return libvirt.dry_run_xml(plan, kernel).rstrip("\n")
    if b == "vng":
        from . import vng

        return shlex.join(vng.dry_run_argv(plan, kernel))
    from . import qemu

    return shlex.join(qemu.dry_run_argv(plan, kernel))
