"""Plan -> virtme-ng (vng) command line.  Pure functions: no files, no processes.

The same ``VmPlan`` as the QEMU backend, said in vng's options (checked against
virtme-ng 1.42's source, virtme_ng/run.py and virtme/commands/run.py):

* ``--cpus`` is passed to QEMU's ``-smp`` as it is, so sockets, dies (one per LLC) and
  SMT threads go through whole;
* ``--numa MEM,cpus=A-B[,cpus=C-D]`` makes one node per option from vCPU index ranges
  (QEMU's ``-numa node,cpus=``: the same CPU-to-node map as lab's ``-numa cpu``, which
  vng has no option for), ``--numa-distance SRC,DST=VAL`` every ordered pair;
* vng's own CPU model is ``-cpu max`` under TCG (``-cpu host`` under KVM), which has
  no per-die L3 under TCG: lab's model goes in ``--qemu-opts`` after it (QEMU takes the
  last ``-cpu``), with ``-accel tcg,thread=`` (vng sets no TCG accelerator options) and
  lab's virtio-serial ports (lab.log, lab.out) on their own controller.

What vng cannot express, and what differs (``adapt()`` refuses or notes it):

* arm64 guests: vng boots the host's root file system, x86_64 here (``vng --arch``
  needs ``--root`` with a foreign root, which lab does not make): refused;
* a device tree: arm64 only, refused with it;
* lab's minimal machine: vng adds its own devices (a 9p root, six virtio-serial
  controllers, an i6300esb watchdog) and numa memory is memory-backend-memfd, not -ram;
  none of it is topology, so a note;
* vng's guest init (virtme-ng-init: systemd-tmpfiles, mounts) runs before lab's agent,
  which vng starts with ``--exec``: lab's agent then runs in a chroot of lab's own
  initramfs tree (busybox, workloads, the job), so the steps are the same binaries.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from .. import cpulist
from ..errors import UserError
from ..plan import VmPlan
from .qemu import BootFiles, cmdline

# What vng sets on the kernel command line itself (console, init): lab's are left out.
VNG_OWNS = ("console=", "rdinit=")


# What a kernel needs for vng to boot it (y or m: vng's initramfs loads modules): the host's
# root over 9p, vng's overlays on it, and virtio-serial for vng's ports and lab's.
VNG_NEEDS = ("NET_9P", "NET_9P_VIRTIO", "9P_FS", "OVERLAY_FS", "VIRTIO_PCI", "VIRTIO_CONSOLE")


def adapt(p: VmPlan, kernel_config: Mapping[str, str | None] | None = None) -> VmPlan:
    """*p* as virtme-ng runs it, or a UserError naming what vng cannot express.
    *kernel_config*: the kernel's values of VNG_NEEDS (None: no config to read)."""
    if p.arch != "x86_64":
        raise UserError(
            f"{p.topo.name}: --backend vng boots the host's root file system (x86_64 here), so it cannot run "
            f"an {p.arch} guest (vng --arch needs a foreign --root, which lab does not make); use --backend qemu"
        )
    cfg = kernel_config or {}
    missing = [s for s in VNG_NEEDS if cfg.get(s) not in (None, "y", "m")]  # None: no config to tell
    if missing:
        name = p.kernel.name if p.kernel else "the kernel"
        raise UserError(
            f"--backend vng: kernel {name} has no {', '.join('CONFIG_' + s for s in missing)} (y or m), which vng "
            "needs to mount the host's root over 9p; use --kernel debian or a kernel configured with vng --kconfig"
        )
    notes = [
        *p.notes,
        "virtme-ng adds devices lab's machine does not have (a 9p root, its own virtio-serial ports, a "
        "watchdog) and backs nodes with memfd: no topology differs; its guest init runs before lab's agent",
    ]
    return replace(p, notes=tuple(notes))


def kernel_args(p: VmPlan) -> list[str]:
    """lab's kernel command line without what vng sets itself."""
    return [a for a in cmdline(p).split() if not a.startswith(VNG_OWNS)]


def qemu_opts(p: VmPlan, files: BootFiles, run_dir: Path | str) -> list[str]:
    """What goes to QEMU after vng's own options."""

    def path(f: Path) -> str:
        return str(f) if f.is_absolute() else f"{run_dir}/{f}"

    a = ["-cpu", p.cpu_model]
    for d in p.qemu_firmware:  # a fetched QEMU's own firmware before the system's (-L)
        a += ["-L", d]
    machine_props = p.machine.split(",", 1)[1:]  # smp-cache (x86 clusters): QEMU merges it into vng's -machine
    if machine_props:
        a += ["-machine", machine_props[0]]
    if p.accel == "tcg":
        a += ["-accel", f"tcg,thread={p.tcg_threads}"]
    a += ["-device", "virtio-serial-pci,id=labvs"]
    for f, cid, port in ((files.agent_log, "agentlog", "lab.log"), (files.results, "results", "lab.out")):
        if f is not None:
            a += ["-chardev", f"file,id={cid},path={path(f)}"]
            a += ["-device", f"virtserialport,bus=labvs.0,chardev={cid},name={port}"]
    return a


def argv(p: VmPlan, files: BootFiles, *, vng: str = "vng", run_dir: Path | str = "$RUN_DIR", agent: str = "") -> list[str]:
    """The vng command that boots *p* and runs *agent* (a guest command) in it."""
    t = p.topo
    a = [vng, "--verbose", "--force-9p", "--run", str(files.kernel)]
    if p.accel == "tcg":
        a.append("--disable-kvm")
    if "/" in p.qemu:  # lab's own QEMU (the system's is vng's own pick from PATH; vng's --qemu wants a path)
        a += ["--qemu", p.qemu]
    a += ["--cpus", p.smp, "--memory", f"{p.memory_mb}M"]
    for i, node in enumerate(t.node_ids):
        guest = [g for g, c in enumerate(t.cpus) if c.node == node]
        ranges = "".join(f",cpus={r}" for r in cpulist.format(guest).split(","))
        a += ["--numa", f"{t.memory_mb[i]}M{ranges}"]
    for i in range(t.n_nodes):
        for j in range(t.n_nodes):
            if i != j:
                a += ["--numa-distance", f"{i},{j}={t.distances[i][j]}"]
    a += ["--append", " ".join(kernel_args(p))]
    # "=": argparse takes a separate value that starts with "-" for an option
    a += [f"--qemu-opts={shlex.join(qemu_opts(p, files, run_dir))}"]
    if agent:
        a += ["--exec", agent]
    return a


def agent_script(layers: list[Path] | tuple[Path, ...], root: str = "/tmp/lab-root") -> str:
    """The guest command vng runs: lab's initramfs layers unpacked in order (as the
    kernel would) into a tmpfs, then lab's agent as init of that tree.  The layers are
    read through vng's share of the host's root."""
    lines = [
        "#!/bin/sh",
        "# lab's agent under virtme-ng: lab's guest tree from its initramfs layers, then its /init",
        "set -e",
        f"mkdir -p {root}",
        f"mount -t tmpfs lab-root {root}",
        f"cd {root}",
    ]
    lines += [f"cpio -idm --quiet < {shlex.quote(str(layer))}" for layer in layers]
    lines.append(f"exec chroot {root} /init")
    return "\n".join(lines) + "\n"


def build_argv(fragments: list[Path] | tuple[Path, ...], *, vng: str = "vng", jobs: int | None = None) -> list[str]:
    """`vng --build` in a kernel tree, with lab's config fragments added after vng's own
    minimal config (whose SCHED_MC is off: the fragments turn it and lab's other
    scheduler options on; the built config is then checked)."""
    a = [vng, "--build", "--skip-modules"]
    for f in fragments:
        a += ["--config", str(f)]
    if jobs:
        a += ["--jobs", str(jobs)]
    return a
