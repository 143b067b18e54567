"""What a backend is (the ``Backend`` protocol) and the one registry of them.

A backend runs a VM for a plan: it adapts the plan to what it can express, says what a
boot would start (dry run), and boots it with the guest agent every backend shares
(backends.guest).  Each is a module of lab/backends that has the protocol's names at
module level; ``REGISTRY`` names them, and everything that offers or dispatches on a
backend reads it: the session (adapt), backends.boot and .dry_run, the CLI's --backend
and `lab topo render --format` choices, the matrix's --backend and the tree loop.

A new backend is its module (and, if it renders a configuration of its own, its
renderer in lab/render) plus one line in REGISTRY.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from ..errors import UserError
from ..plan import VmOptions

if TYPE_CHECKING:
    from ..kernel.artifact import KernelArtifact
    from ..plan import VmPlan
    from ..progress import Progress
    from .guest import BootResult, GuestJob

# name -> the module that is the backend, in the order the CLI offers them.
REGISTRY: dict[str, str] = {
    "qemu": "lab.backends.qemu",
    "libvirt": "lab.backends.libvirt",
    "vng": "lab.backends.vng",
}

DEFAULT = VmOptions.backend  # what runs a VM when no --backend is given


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond booting a plan with a job."""

    interactive: bool = False  # `lab boot` without a command: a console on this terminal (interactive())
    builds_tree: bool = False  # builds --kernel-tree itself (build_tree()), with its own config
    remote: bool = False  # runs the VM where --connect URI says, maybe another host
    run_dir_named: bool = False  # its dry run names the run directory $RUN_DIR (else: run it in the run directory)


class Backend(Protocol):
    """A backend module's names (lab.backends.qemu is one)."""

    NAME: str
    CAPABILITIES: Capabilities

    def adapt(self, plan: VmPlan, kernel: KernelArtifact | None) -> VmPlan:
        """*plan* as this backend runs it: refused naming what it cannot express, notes
        for what it runs differently."""
        ...

    def dry_run(self, plan: VmPlan, kernel: KernelArtifact) -> str:
        """What a boot of *plan* starts, as text (a command line or a configuration)."""
        ...

    def boot(
        self, plan: VmPlan, kernel: KernelArtifact, run_dir: Path, job: GuestJob | None = None, *,
        timeout: float = 600, on_event: Callable[[float, str], None] | None = None, progress: Progress | None = None,
    ) -> BootResult:  # fmt: skip
        """Boot *plan*, run *job* in the guest, wait, collect (backends.guest.collect);
        always stops the VM."""
        ...


class Interactive(Protocol):
    """A backend with Capabilities.interactive."""

    def interactive(self, plan: VmPlan, kernel: KernelArtifact, run_dir: Path, layers: tuple[Path | None, ...] = ()) -> int: ...


class TreeBuilder(Protocol):
    """A backend with Capabilities.builds_tree."""

    TREE_BUILD: str  # how it builds a tree, for messages: "vng --build (vng's config + lab's fragments)"

    def build_tree(self, tree: Path, arch: str) -> KernelArtifact: ...


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def get(name: str) -> Backend:
    """The backend called *name*, or one line naming the ones there are."""
    if name not in REGISTRY:
        raise UserError(f"backend {name!r}: not one of {', '.join(REGISTRY)}")
    return cast("Backend", importlib.import_module(REGISTRY[name]))


def with_capability(what: str) -> tuple[str, ...]:
    """The backends that have Capabilities.*what* (e.g. "remote")."""
    return tuple(n for n in REGISTRY if getattr(get(n).CAPABILITIES, what))
