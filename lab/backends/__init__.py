"""What runs a VM: QEMU directly (qemu), a libvirt transient domain (libvirt) or
virtme-ng (vng).  Each boots the same plan (render.qemu.plan(), adapted to the backend
by session.prepare()) with the same guest agent (backends.guest) and returns the same
BootResult; ``boot()`` picks the one the plan's options name from the registry
(backends.base.REGISTRY)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .base import get, names

if TYPE_CHECKING:
    from ..kernel.artifact import KernelArtifact
    from ..plan import VmPlan
    from ..progress import Progress
    from .guest import BootResult, GuestJob

__all__ = ["boot", "dry_run", "get", "names"]


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
    """Boot *plan* with the backend its options name, run *job*, collect (see backends.base.Backend.boot)."""
    return get(plan.options.backend).boot(plan, kernel, run_dir, job, timeout=timeout, on_event=on_event, progress=progress)


def dry_run(plan: VmPlan, kernel: KernelArtifact) -> str:
    """What a boot of *plan* starts, as text: the QEMU or vng command line, or the domain XML."""
    return get(plan.options.backend).dry_run(plan, kernel)
