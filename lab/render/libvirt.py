"""Plan -> libvirt domain XML.  Pure functions: no files, no connection, no host probing.

The domain is the QEMU backend's boot, said in libvirt's words: the same ``VmPlan``
(made by ``render.qemu.plan()``), the same ``BootFiles`` and the same kernel command
line (``render.qemu.cmdline()``), so a topology is decided once whatever runs it.
``adapt()`` says what a libvirt version cannot express (refused, naming the version
that can) or runs differently (a note in the plan); ``domain_xml()`` renders.

Traps this avoids:

* ``<features><acpi/></features>`` is not optional on x86: without it libvirt starts
  QEMU with ``-no-acpi`` and the guest has no SRAT/SLIT, so it sees one node, or
  every distance as 20 (``lab verify`` catches that, "node N distances").  On arm64 it
  must be absent: libvirt refuses ACPI there without UEFI firmware, and the guest reads
  its distances from lab's device tree instead.
* ``<memballoon model='none'/>``, ``<controller type='usb' model='none'/>``: libvirt
  adds both otherwise; the QEMU backend runs with ``-nodefaults`` and no such devices.
* ``<seclabel type='static' model='dac' relabel='no'>`` with lab's own uid:gid: QEMU
  runs as the user lab runs as, so it reads lab's cache and writes the run directory
  (libvirt's default qemu user cannot enter /root or a home directory, and relabelling
  would chown lab's cached kernel).
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree as ET

from .. import cpulist
from ..errors import UserError
from ..plan import VmPlan
from . import qemu as rq
from .qemu import BootFiles, cmdline

# libvirt versions that first express something (for the refusal messages).
LIBVIRT_CLUSTERS = (10, 1, 0)  # <topology clusters=...>
LIBVIRT_DIES = (6, 1, 0)  # <topology dies=...>
LIBVIRT_MIN = (6, 1, 0)  # what lab's domain XML needs at all (dies; distances since 3.10)

ARCH = {"x86_64": "x86_64", "arm64": "aarch64"}
RUN_DIR_PLACEHOLDER = "$RUN_DIR"  # where a rendered domain names the run directory (lab topo render)

RESULTS_PORT = "lab.out"  # the channel lab reads the guest's results from


def _v(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


def adapt(p: VmPlan, version: tuple[int, int, int], *, tcg_wrapper: bool = False) -> VmPlan:
    """*p* as libvirt *version* runs it, or a UserError naming what it cannot express
    and the version that can.  *tcg_wrapper*: the domain will name lab's emulator
    wrapper (tcg_wrapper_script()), so a TCG threading other than QEMU's default runs."""
    s = p.topo.shape
    if s is None:  # render.qemu.plan() took it only as an arm64 machine of uneven clusters
        raise UserError(
            f"{p.topo.name}: clusters of different sizes reach the guest through the cpu-map of lab's device tree, "
            "and libvirt's <topology> builds equal clusters only; use --backend qemu"
        )
    if version < LIBVIRT_MIN:
        raise UserError(f"{p.topo.name}: lab's domain XML needs libvirt {_v(LIBVIRT_MIN)}+ (<topology dies=...>); this is libvirt {_v(version)}")
    if p.arch == "x86_64" and p.topo.has_clusters:
        # QEMU makes x86 clusters as modules (-smp modules=) with the L2 per module
        # (-machine smp-cache); libvirt's <topology> has no modules and no cache topology.
        raise UserError(
            f"{p.topo.name}: x86 clusters need QEMU's -smp modules= and -machine smp-cache, which libvirt's "
            f"domain XML cannot express (libvirt {_v(version)}); use --backend qemu"
        )
    sockets, dies, clusters, cores, threads = topology(p)
    if clusters > 1 and version < LIBVIRT_CLUSTERS:
        what = "LLCs" if p.arch == "arm64" and not p.topo.has_clusters else "clusters"
        raise UserError(
            f"{p.topo.name}: {clusters} {what} per socket need <topology clusters=...>, libvirt "
            f"{_v(LIBVIRT_CLUSTERS)}+; this is libvirt {_v(version)} (use --backend qemu, or Debian's libvirt 11.3: "
            "apt-get install -t bookworm-backports libvirt-daemon-system)"
        )
    notes = list(p.notes)
    threads_run = p.tcg_threads
    if p.accel == "tcg" and p.tcg_threads != "multi" and not tcg_wrapper:
        # libvirt (up to 11.x) has no setting for -accel tcg,thread=: QEMU's default runs,
        # one thread per vCPU for x86_64 and arm64 guests on an x86_64 host.
        threads_run = "multi"
        notes.append(
            f"libvirt cannot set TCG threading (-accel tcg,thread=): QEMU's default, one thread per vCPU, "
            f"runs instead of thread={p.tcg_threads} (same topology; {p.topo.n_cpus} vCPU threads on this "
            "host's cores progress unevenly, and on a loaded host such a boot has hung; compare "
            "timing-sensitive verdicts with --backend qemu --tcg-threads multi)"
        )
    return replace(p, tcg_threads=threads_run, notes=tuple(notes))


def topology(p: VmPlan) -> tuple[int, int, int, int, int]:
    """(sockets, dies, clusters per die, cores per cluster, threads) as QEMU's -smp of *p* has them."""
    s = p.topo.shape
    assert s is not None
    if p.arch == "x86_64":
        return s.sockets, s.llcs_per_socket, 1, s.cores_per_llc, s.threads_per_core
    return s.sockets, 1, s.llcs_per_socket * s.clusters_per_llc, s.cores_per_cluster, s.threads_per_core


def domain_name(run_dir: Path | str, tag: str = "") -> str:
    """A name no other lab's domain has: the run directory's name (unique on this host)
    and *tag* (host and pid, for libvirtd hosts several labs share)."""
    base = Path(run_dir).name
    return f"lab-{tag}-{base}" if tag else f"lab-{base}"


def domain_xml(
    p: VmPlan, files: BootFiles, *, name: str, run_dir: Path | str = RUN_DIR_PLACEHOLDER, owner: tuple[int, int] = (0, 0),
    emulator: str | None = None,
) -> str:
    """The transient domain booting *p* with *files*; the run directory's files are
    named under *run_dir* (libvirt wants absolute paths), QEMU runs as *owner* (uid, gid),
    started through *emulator* when given (else libvirt's default for the arch)."""
    sockets, dies, clusters, cores, threads = topology(p)

    def path(f: Path) -> str:
        return str(f) if f.is_absolute() else f"{run_dir}/{f}"

    dom = ET.Element("domain", type="kvm" if p.accel == "kvm" else "qemu")
    ET.SubElement(dom, "name").text = name
    desc = f"lab: {p.topo.name}; transient, destroyed when lab ends"
    if emulator is not None:
        desc += f"; QEMU started through {emulator} (-accel tcg,thread={p.tcg_threads})"
    ET.SubElement(dom, "description").text = desc
    ET.SubElement(dom, "memory", unit="MiB").text = str(p.memory_mb)
    ET.SubElement(dom, "vcpu", placement="static").text = str(p.topo.n_cpus)
    ET.SubElement(dom, "memoryBacking").append(ET.Element("source", type="anonymous"))  # memory-backend-ram, as -object
    os_ = ET.SubElement(dom, "os")
    ET.SubElement(os_, "type", arch=ARCH[p.arch], machine=p.machine.split(",")[0]).text = "hvm"
    ET.SubElement(os_, "kernel").text = path(files.kernel)
    ET.SubElement(os_, "initrd").text = path(files.initrd)
    if files.dtb is not None:
        ET.SubElement(os_, "dtb").text = path(files.dtb)
    ET.SubElement(os_, "cmdline").text = cmdline(p)
    feats = ET.SubElement(dom, "features")
    if p.arch == "arm64":
        # No <acpi/>: libvirt refuses it on aarch64 without UEFI, and starts QEMU with
        # acpi=off, as the QEMU backend's direct kernel boot has no ACPI tables; the guest
        # reads its topology, capacities and distances from lab's device tree (<dtb>).
        # The GIC explicit: libvirt's default depends on the host, QEMU's is v2.
        ET.SubElement(feats, "gic", version=p.machine.split("gic-version=")[1].split(",")[0] if "gic-version=" in p.machine else "2")
    else:  # without it: -no-acpi, and the guest loses its NUMA distances
        ET.SubElement(feats, "acpi")
    dom.append(_cpu(p, sockets, dies, clusters, cores, threads))
    ET.SubElement(dom, "clock", offset="utc")
    for ev in ("on_poweroff", "on_reboot", "on_crash"):  # the agent's reboot ends the VM (QEMU's -no-reboot)
        ET.SubElement(dom, ev).text = "destroy"
    dev = ET.SubElement(dom, "devices")
    if emulator is not None:
        ET.SubElement(dev, "emulator").text = emulator
    ET.SubElement(dev, "controller", type="usb", model="none")
    ET.SubElement(dev, "controller", type="virtio-serial", index="0")
    if files.console is not None:
        serial = ET.SubElement(dev, "serial", type="file")
        ET.SubElement(serial, "source", path=path(files.console))
        ET.SubElement(serial, "target", port="0")
    else:
        serial = ET.SubElement(dev, "serial", type="pty")
        ET.SubElement(serial, "target", port="0")
    if files.agent_log is not None:
        ch = ET.SubElement(dev, "channel", type="file")
        ET.SubElement(ch, "source", path=path(files.agent_log))
        ET.SubElement(ch, "target", type="virtio", name="lab.log")
    if files.results is not None:
        # Not a file: libvirt hands file chardevs to virtlogd, which rolls a file over at
        # 2 MiB (virtlogd.conf max_size), so a bigger results stream was split into
        # results.tar.0 and results.tar.  A unix channel, read by lab through libvirt's
        # stream API (virDomainOpenChannel), passes any size, and works over remote URIs
        # with nothing shared.  The guest's writes wait until lab is connected.
        ch = ET.SubElement(dev, "channel", type="unix")
        ET.SubElement(ch, "source", mode="bind")  # libvirt names the socket
        ET.SubElement(ch, "target", type="virtio", name=RESULTS_PORT)
    ET.SubElement(dev, "memballoon", model="none")
    sec = ET.SubElement(dom, "seclabel", type="static", model="dac", relabel="no")
    ET.SubElement(sec, "label").text = f"+{owner[0]}:+{owner[1]}"
    _cpu_override(dom, p)
    ET.indent(dom)
    return ET.tostring(dom, encoding="unicode") + "\n"


QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", QEMU_NS)


def _needs_override(p: VmPlan) -> bool:
    opts = p.cpu_model.split(",")[1:]
    if p.arch == "arm64":  # libvirt's arm CPU map knows the SVE features only (not pauth, sme)
        return any(not o.lstrip("+-").startswith("sve") for o in opts)
    return any(o.startswith(("x-", "level=")) for o in opts)


def _cpu_override(dom: ET.Element, p: VmPlan) -> None:
    """A CPU whose -cpu needs a QEMU property libvirt has no element for (x-force-features,
    which keeps TOPOEXT for AMD models under TCG: render.qemu; arm64's pauth=off and
    sme=off) gets QEMU's -cpu verbatim
    through <qemu:commandline>: QEMU takes the last -cpu, so the guest sees exactly the CPU
    the QEMU backend gives it (libvirt marks such a domain as tainted, nothing more)."""

    args = ["-cpu", p.cpu_model] if _needs_override(p) else []
    if rq.x2apic_iommu(p):  # the QEMU backend's interrupt-remapping IOMMU, the same device
        args += ["-device", rq.X2APIC_IOMMU]
    if not args:
        return
    cl = ET.SubElement(dom, f"{{{QEMU_NS}}}commandline")
    for arg in args:
        ET.SubElement(cl, f"{{{QEMU_NS}}}arg", value=arg)


def _cpu(p: VmPlan, sockets: int, dies: int, clusters: int, cores: int, threads: int) -> ET.Element:
    model, *opts = p.cpu_model.split(",")
    if model == "host":
        cpu = ET.Element("cpu", mode="host-passthrough", check="none", migratable="off")
    elif model == "max":  # QEMU's -cpu max; libvirt's CPU map has no model by that name
        cpu = ET.Element("cpu", mode="maximum", check="none", migratable="off")
    else:
        cpu = ET.Element("cpu", mode="custom", match="exact", check="none")
        ET.SubElement(cpu, "model", fallback="forbid").text = model
    # A CPU that needs a QEMU property (x-force-features) gets QEMU's -cpu verbatim
    # (_cpu_override()): its features are QEMU's names, some unknown to libvirt's CPU map
    # (fxsr-opt), so they are not repeated here.
    for o in [] if _needs_override(p) else opts:  # "-feat"/"feat=off" off, "feat=on"/"+feat" on, as QEMU's -cpu
        name, _, val = o.lstrip("+-").partition("=")
        off = o.startswith("-") or val == "off"
        ET.SubElement(cpu, "feature", policy="disable" if off else "require", name=name)
    topo = {"sockets": sockets, "dies": dies, "cores": cores, "threads": threads}
    if clusters > 1:
        topo = {"sockets": sockets, "dies": dies, "clusters": clusters, "cores": cores, "threads": threads}
    ET.SubElement(cpu, "topology", {k: str(v) for k, v in topo.items()})
    numa = ET.SubElement(cpu, "numa")
    t = p.topo
    for i, node in enumerate(t.node_ids):
        # Guest CPU i is topo.cpus[i] (QEMU numbers vCPUs socket/die/core/thread, and so
        # does the spec's model): a cell's cpus are the guest indices of its node's CPUs.
        guest = [g for g, c in enumerate(t.cpus) if c.node == node]
        cell = ET.SubElement(numa, "cell", id=str(i), cpus=cpulist.format(guest), memory=str(t.memory_mb[i]), unit="MiB")
        dist = ET.SubElement(cell, "distances")
        for j in range(t.n_nodes):
            ET.SubElement(dist, "sibling", id=str(j), value=str(t.distances[i][j]))
    return cpu


def tcg_wrapper_script(qemu_binary: str, threads: str) -> str:
    """A shell script that runs *qemu_binary* with TCG on *threads* ("single"/"multi").

    libvirt (up to 11.x) has no element for ``-accel tcg,thread=``: it passes
    ``-accel tcg`` and QEMU takes the first -accel that works, so one added through
    <qemu:commandline> is ignored.  Named as the domain's <emulator>, this script adds
    ``thread=`` to libvirt's own -accel tcg and execs QEMU (same pid, same arguments
    otherwise; libvirt's capability probe, which passes no -accel, runs QEMU unchanged).
    Without it a 32-vCPU guest on a 2-core host ran MTTCG, and under a loaded host it hung
    at boot (RCU stalls, a CPU's timer never firing), where the QEMU backend's
    thread=single booted.  Speed is not the reason: at load 1-3 a verify took the same
    time either way (bench/results/bench_backends-20261126-105834.json)."""

    return (
        "#!/bin/sh\n"
        f"# Written by lab: {qemu_binary} with -accel tcg,thread={threads}, which libvirt's\n"
        "# domain XML cannot ask for (lab/render/libvirt.py, tcg_wrapper_script).\n"
        "prev=\n"
        "for a do\n"
        "  shift\n"
        '  if [ "$prev" = -accel ]; then\n'
        '    case "$a" in\n'
        "      tcg,*thread=*) ;;\n"
        f'      tcg|tcg,*) a="$a,thread={threads}" ;;\n'
        "    esac\n"
        "  fi\n"
        '  set -- "$@" "$a"\n'
        '  prev="$a"\n'
        "done\n"
        f'exec {shlex.quote(qemu_binary)} "$@"\n'
    )
