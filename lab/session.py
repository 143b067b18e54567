"""What every VM command does first: topology + kernel + host -> a plan and a run directory."""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import host as host_mod
from .errors import UserError
from .paths import runs_dir
from .render import qemu as render
from .topology import Topology

ARGV: list[str] | None = None  # set by the CLI: the arguments of this `lab` invocation


@dataclass
class Session:
    topo: Topology
    kernel: object  # lab.kernel.KernelArtifact
    plan: render.VmPlan

    @property
    def kernel_label(self) -> str:
        return getattr(self.kernel, "name", "kernel")

    @property
    def cluster_level(self) -> bool:
        """Whether the guest kernel builds a CLS level (CONFIG_SCHED_CLUSTER)."""
        val = self.kernel.config_value("SCHED_CLUSTER") if hasattr(self.kernel, "config_value") else None
        if val is None:
            return self.topo.arch == "x86_64"
        return val == "y"


def prepare(
    topo: Topology, kernel_spec: str, *, accel: str = "auto", cpu_model: str = "auto", build: bool = True, tcg: str = "auto",
    bringup: str = "auto", append: str = "",
) -> Session:
    from .kernel import resolve

    h = host_mod.probe()
    kernel = resolve(kernel_spec, topo.arch, build=build)
    if kernel.arch != topo.arch:
        raise UserError(f"kernel {kernel.name} is {kernel.arch}, topology {topo.name} is {topo.arch}")
    plan = render.plan(topo, h, accel=accel, cpu_model=cpu_model, kernel_features=features(kernel), tcg=tcg, bringup=bringup, append=append)
    return Session(topo, kernel, plan)


def features(kernel) -> frozenset[str]:
    """What the kernel can do that the plan depends on: the recipe's declared features,
    plus CPU hotplug when its config says so (Debian's and lab's kernels have it)."""
    out = set(kernel.features)
    if hasattr(kernel, "config_value") and kernel.config_value("HOTPLUG_CPU") == "y":
        out.add("cpu_hotplug")
    return frozenset(out)


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s)[:40]


def new_run_dir(kind: str, topo: Topology, kernel_label: str, base: Path | None = None) -> Path:
    base = base or runs_dir()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    d = base / f"{stamp}-{_slug(kind)}-{_slug(topo.name)}-{_slug(kernel_label)}"
    n = 1
    while d.exists():
        n += 1
        d = base / f"{stamp}-{_slug(kind)}-{_slug(topo.name)}-{_slug(kernel_label)}-{n}"
    d.mkdir(parents=True)
    # Every run directory starts with the lab command that reproduces it.
    args = ARGV if ARGV is not None else sys.argv[1:]
    (d / "command").write_text(shlex.join(["lab", *args]) + "\n")
    return d


def write_plan(run_dir: Path, s: Session) -> None:
    p = s.plan
    (run_dir / "plan.json").write_text(
        json.dumps(
            {
                "topology": s.topo.name,
                "topology_file": s.topo.path,
                "kernel": {"name": s.kernel.name, "id": s.kernel.id, "release": s.kernel.release, "image": str(s.kernel.image)},
                "accel": p.accel,
                "accel_reason": p.accel_reason,
                "machine": p.machine,
                "cpu_model": p.cpu_model,
                "cpu_vendor": p.cpu_vendor,
                "qemu_version": list(p.qemu_version),
                "smp": p.smp,
                "tcg_threads": p.tcg_threads,
                "bringup": p.bringup,
                "boot_cpus": p.boot_cpus,
                "numbering": p.numbering_mode,
                "guest_to_spec": list(p.guest_to_spec),
                "guest_node_to_spec": list(p.guest_node_to_spec),
                "guest_node_reclaim_distance": p.guest_reclaim_distance,
                "notes": list(p.notes),
            },
            indent=1,
        )
    )
