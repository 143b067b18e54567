"""Topology -> QEMU command line.  Pure functions: no files, no processes, no host probing.

``plan()`` decides everything about the VM that depends on the topology, the options,
the host's facts (``Host``, probed once elsewhere) and the kernel's features (machine,
CPU model, -smp, NUMA, numbering, vendor behaviour, bring-up), and raises a UserError
for what this QEMU cannot express.  ``argv()`` turns a plan plus the boot's files into
the exact argv: `lab boot`, `lab boot --dry-run` and `lab topo render` all print or run
what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from .. import emulators, rundir
from .. import levels as lv
from ..errors import UserError
from ..host import Host
from ..plan import KernelRef, VmOptions, VmPlan
from ..topology import (
    AMD_ZEN_RECLAIM_DISTANCE,
    RECLAIM_DISTANCE,
    Topology,
    flatten_clusters,
    irregularities,
)

# Intel model for x86 guests under TCG when the real machine is not an AMD Zen: with
# -smp dies=D it gives one L3 per die and SMT siblings.
INTEL_MODEL = "Skylake-Server"
AMD_MODEL = "EPYC-Milan"
# Features QEMU 7.2's TCG cannot emulate; switching them off silences a warning per
# feature and keeps the guest from seeing a CPUID bit it cannot use.
TCG_UNSUPPORTED = (
    "3dnowprefetch", "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl",
    "hle", "invpcid", "pcid", "rdseed", "rtm", "tsc-deadline", "x2apic", "xsavec",
)  # fmt: skip
# AMD Zen guests under TCG.  The real vendor matters to the guest's own kernel: family
# 17h+ sets node_reclaim_distance = 32 (init_amd_zen_common(), arch/x86/kernel/cpu/
# amd.c), which keeps SD_BALANCE_FORK/EXEC/WAKE_AFFINE on NUMA domains at distance 32.
# The kernel reads the topology from CPUID only when TOPOEXT is set: SMT siblings from
# 0x8000001E EBX (amd_get_topology(), smp_num_siblings in early_init_amd()), the LLC id
# as APIC id >> order(0x8000001D's sharing count) (cacheinfo_amd_init_llc_id()), the L3
# shared_cpu_list from the same count (__cache_amd_cpumap_setup()).  Without TOPOEXT,
# amd_detect_cmp() makes every thread its own core and the package the LLC.  QEMU 7.2
# fills 0x8000001D/0x8000001E from -smp under TCG too (per die: L3 sharing
# cores x threads), but TCG_EXT3_FEATURES lacks TOPOEXT, so the bit is filtered out of
# CPUID 0x80000001 ECX: x-force-features=on keeps it.  TOPOEXT only says those leaves
# exist (no instruction behind it), so forcing it is safe; every other feature TCG lacks
# is switched off by name, so the force keeps nothing else.  Family 17h models up to
# 0x1f (Zen1) take the LLC as APIC id >> 3 whatever the cache leaves say, so family 17h
# specs get EPYC-Rome (17h model 0x31, Zen2), 19h+ EPYC-Milan (19h model 1, Zen3).
AMD_TCG_MODELS = {0x17: "EPYC-Rome", 0x19: "EPYC-Milan"}
AMD_TCG_UNSUPPORTED = (
    "3dnowprefetch", "amd-ssbd", "amd-stibp", "clzero", "fsrm", "fxsr-opt", "ibpb", "ibrs",
    "invpcid", "misalignsse", "nrip-save", "osvw", "pcid", "perfctr-core", "rdpid", "rdseed",
    "sha-ni", "wbnoinvd", "xsavec", "xsaveerptr", "xsaves",
)  # fmt: skip
# arm64 under TCG: QEMU's "max" CPU, without pointer authentication, SVE and SME (none on
# the machines lab models; pointer authentication in every kernel function's prologue and
# epilogue is slow to emulate), for FEAT_TLBIRANGE.  Under single-threaded TCG every
# broadcast TLB invalidation (TLBI ...IS) ends the issuing vCPU's turn until the round of
# the other vCPUs comes back to it, and the kernel's flush of a range below 512 pages is
# one TLBI per page, twice with KPTI, in a loop with no point where a voluntary-preemption
# kernel (Debian's) reschedules: on cortex-a72 (no TLBI range, KPTI forced on by KASLR) one
# munmap of 2.25 MiB in stress-ng held a vCPU of kunpeng920-2s-mini for 22 s, and tasks
# woken onto it waited that long (scheduler-survives FAILed "no runnable task waited
# longer than 10 s" in 5 of 6 runs two at a time; with max 6 of 6 PASS, longest waits
# under 0.5 s: bench/results/bench_arm_tlbi-20261127-063542.json).  With TLBI range the
# kernel flushes the range in a few instructions.  README: "arm64 CPU model".
# No SMT: an arm64 spec with threads > 1 is refused.
ARM_MODEL = "max,pauth=off,sve=off,sme=off"
MAX_ARM_CPUS = 512  # GICv3 on virt, QEMU 7.2
MAX_GICV2_CPUS = 8

# QEMU versions that first express something (for the refusal messages).
QEMU_X86_CLUSTERS = (9, 2, 0)  # -smp modules= on x86 from 9.1, -machine smp-cache (L2 per module) from 9.2
QEMU_X86_DIES = (4, 1, 0)
QEMU_ARM_CLUSTERS = (7, 0, 0)
QEMU_TCG_X2APIC = (9, 0, 0)
QEMU_1F_ABORTS = (10, 0, 0)  # the first version seen aborting on the Intel model's CPUID 0x1F
INTEL_MODEL_LEVEL = 13  # Skylake-Server's own CPUID level (0xd)


def _v(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


def plan(
    topo: Topology,
    host: Host,
    options: VmOptions | None = None,
    *,
    kernel_features: frozenset[str] = frozenset(),
    kernel: KernelRef | None = None,
) -> VmPlan:
    """Decide the VM for *topo* on *host*, or refuse with the QEMU version that can.
    ``options.append`` goes last on the kernel command line (so it overrides lab's choices)."""
    options = options or VmOptions()
    arch = topo.arch
    acc, why = host.accel(options.accel, arch)
    need, need_why = required_qemu(topo, acc)
    emu = emulators.choose(host.emulators(arch), arch, options.qemu, need, need_why)
    version = emu.version
    spec, topo = topo, _buildable(topo, host)
    model_notes: list[str] = []
    if arch == "x86_64":
        machine, model, vendor, smp, numa_cpu = _x86(topo, version, acc, options.cpu_model, host, model_notes)
        if acc == "tcg":
            _check_apic_ids(topo, version)
    else:
        machine, model, vendor, smp, numa_cpu = _arm64(topo, version, acc, options.cpu_model)
    guest, extra, notes = _reclaim_distance(topo, vendor, model, kernel_features)
    notes = model_notes + notes
    if emu.origin != "system":
        because = f": {need_why} needs {_v(need)}+" if need and options.qemu == "auto" else ""
        how = {"lab": ", lab-built", "debian-backports": f" from Debian bookworm-backports ({emu.debian_version})"}.get(emu.origin, "")
        notes.append(f"QEMU {emu.version_str}{how} ({emu.path}){because}")
    guest_to_spec = tuple(c.id for c in topo.cpus)
    dt_caches = arch == "arm64" and host.dtc
    if (topo.dmips_mhz or topo.cache_kb) and not dt_caches:
        field, what = ("cpu.capacity", "per-CPU capacities") if topo.dmips_mhz else ("caches.sizes", "cache sizes")
        raise UserError(
            f"{topo.path or topo.name}: {field}: {what} reach the guest through the device "
            "tree lab edits with dtc: install device-tree-compiler"
        )
    if arch == "arm64" and not dt_caches:
        notes.append("dtc not found (install device-tree-compiler): the guest gets no cache nodes and QEMU's CPU order")
    if dt_caches:
        # The device tree's cpu node order sets Linux's logical ids (the boot CPU, QEMU's
        # CPU 0, is always logical 0): lab writes the nodes in the spec's order.
        rest = sorted(i for i in topo.cpu_ids if i != topo.cpus[0].id)
        guest_to_spec = (topo.cpus[0].id, *rest)
    up, first = _bringup(topo, acc, options.bringup, "cpu_hotplug" in kernel_features, guest_to_spec, notes)
    threads = tcg_threading(topo.n_cpus, host.cpus, up) if options.tcg_threads == "auto" else options.tcg_threads
    lpj = preset_lpj(arch, acc, vendor, host.tsc_khz, kernel_features)
    if spec is not topo:
        notes.append(
            f"clusters of different sizes ({' + '.join(str(len(g)) for g in spec.groups('cluster'))} CPUs): QEMU's -smp "
            "builds one cluster per LLC and lab's device tree writes the real clusters in its cpu-map"
        )
    return VmPlan(
        topo=spec, arch=arch, qemu=emu.path, qemu_version=version, accel=acc, accel_reason=why,
        machine=machine, cpu_model=model, cpu_vendor=vendor, smp=smp, memory_mb=sum(topo.memory_mb),
        numa_cpu_args=tuple(numa_cpu), guest_to_spec=guest_to_spec, guest_node_to_spec=topo.node_ids,
        guest_reclaim_distance=guest, cmdline_extra=(*extra, *options.append.split()),
        numbering_mode="native" if list(guest_to_spec) == list(range(topo.n_cpus)) else "translated",
        notes=tuple(notes), dt_caches=dt_caches, tcg_threads=threads, bringup=up, boot_cpus=first,
        kernel=kernel, options=options, qemu_origin=emu.origin, qemu_debian_version=emu.debian_version,
        qemu_firmware=emu.firmware, lpj=lpj,
    )  # fmt: skip


def _buildable(topo: Topology, host: Host) -> Topology:
    """The machine QEMU's -smp builds for *topo*: *topo* itself when it is regular; for an
    arm64 machine whose only irregular level is its clusters, the same machine with one
    cluster per LLC (the device tree's cpu-map, which lab writes, carries the clusters:
    render.dtb); otherwise a one-line refusal offering the nearest machine."""
    if topo.shape is not None:
        return topo
    flat = flatten_clusters(topo) if topo.arch == "arm64" else None
    if flat is not None and host.dtc:
        return flat
    if flat is not None:
        raise UserError(
            f"{topo.path or topo.name}: groups.clusters: clusters of different sizes reach an arm64 guest through the "
            "device tree lab edits with dtc: install device-tree-compiler"
        )
    raise UserError(
        f"{topo.path or topo.name}: groups: the machine is irregular ({'; '.join(irregularities(topo))}); "
        "QEMU's -smp builds only regular machines (every socket, node, LLC, cluster and core alike; an arm64 "
        "guest's clusters excepted): `lab topo import --nearest` writes the nearest machine it can build"
    )


def _check_apic_ids(topo: Topology, version: tuple[int, int, int]) -> None:
    """TCG before QEMU_TCG_X2APIC has no x2APIC: at most 255 vCPUs, APIC IDs up to 254."""
    if version >= QEMU_TCG_X2APIC:
        return
    if topo.n_cpus > 255:
        raise UserError(
            f"{topo.name}: {topo.n_cpus} vCPUs need x2APIC, which TCG in QEMU {_v(version)} "
            f"cannot emulate (at most 255; QEMU {_v(QEMU_TCG_X2APIC)} can); use a -mini "
            "topology or a KVM host"
        )
    top = max_apic_id(topo)
    if top > 254:
        raise UserError(
            f"{topo.name}: its highest APIC ID would be {top} (QEMU packs socket/die/core/thread "
            f"ids in power-of-two fields); above 254 needs x2APIC, which TCG in QEMU {_v(version)} "
            f"cannot emulate (QEMU {_v(QEMU_TCG_X2APIC)} can)"
        )


def _reclaim_distance(
    topo: Topology, vendor: str, model: str, kernel_features: frozenset[str]
) -> tuple[int, list[str], list[str]]:
    """The guest kernel's node_reclaim_distance, the kernel command line that sets it to
    the real machine's, and notes saying which.

    Vendor behaviour: the NUMA domain keeps SD_BALANCE_FORK/EXEC/WAKE_AFFINE only at
    distances <= node_reclaim_distance, which AMD family 17h+ kernels lower to 32
    (arch/x86/kernel/cpu/amd.c: init_amd_zen_common())."""
    want = topo.node_reclaim_distance
    guest = AMD_ZEN_RECLAIM_DISTANCE if vendor == "amd" else RECLAIM_DISTANCE
    if want == guest:
        return guest, [], []
    if "node_reclaim_distance_param" in kernel_features:
        note = (
            f"node_reclaim_distance={want} passed to the kernel: the spec's {topo.vendor} "
            f"CPU uses {want}, the guest's {vendor} CPU model would give {guest}"
        )
        return want, [f"node_reclaim_distance={want}"], [note]
    affected = sorted({d for row in topo.distances for d in row if min(want, guest) < d <= max(want, guest)})
    if not affected:
        return guest, [], []
    note = (
        f"vendor effect: the real {topo.vendor} machine uses node_reclaim_distance={want}, "
        f"this guest ({vendor} CPU model {model.split(',')[0]}) uses {guest}, so NUMA domains at distance "
        f"{', '.join(map(str, affected))} {'lose' if guest < want else 'keep'} "
        "SD_BALANCE_FORK/EXEC/WAKE_AFFINE; a lab-built kernel (--kernel lab-6.1) "
        "takes node_reclaim_distance= and fixes this"
    )
    return guest, [], [note]


def _bringup(
    topo: Topology, accel: str, asked: str, hotplug_ok: bool, guest_to_spec: tuple[int, ...], notes: list[str]
) -> tuple[str, int]:
    """("boot" | "hotplug", how many CPUs come up at boot); a note says when the agent
    onlines the rest."""
    up = bringup_mode(topo.n_cpus, accel, hotplug_ok, topo.arch) if asked == "auto" else asked
    if up != "hotplug":
        return up, topo.n_cpus
    if not hotplug_ok:
        raise UserError(
            f"{topo.name}: --bringup hotplug needs a kernel with CONFIG_HOTPLUG_CPU=y (or a config lab can read)"
        )
    first = boot_cpus(topo, guest_to_spec)
    if first >= topo.n_cpus:
        return "boot", topo.n_cpus
    notes.append(
        f"CPUs {first}-{topo.n_cpus - 1} are brought online by lab's agent right after boot "
        f"(maxcpus={first}), before anything reads the topology: under TCG that is much faster "
        "than SMP bring-up at boot (--bringup boot to compare)"
    )
    return "hotplug", first


def max_apic_id(topo: Topology) -> int:
    """The highest x86 APIC ID QEMU assigns for the topology (hw/i386/topology.h)."""
    s = topo.shape
    assert s is not None

    def bits(n: int) -> int:
        return (n - 1).bit_length()

    dies, cores = x86_dies_cores(topo)
    modules = s.clusters_per_llc if topo.has_clusters else 1
    cores //= modules
    threads = s.threads_per_core
    t, c, m, d = bits(threads), bits(cores), bits(modules), bits(dies)
    return (
        ((s.sockets - 1) << (t + c + m + d)) | ((dies - 1) << (t + c + m)) | ((modules - 1) << (t + c))
        | ((cores - 1) << t) | (threads - 1)
    )


def x86_dies_cores(topo: Topology) -> tuple[int, int]:
    """(-smp dies, cores per die) for an x86 machine: one die per LLC, since QEMU's models
    give one L3 per die; on a sub-NUMA-clustered machine one die per socket, since its L3
    is the socket's (the guest kernel then splits it at node boundaries, as on the real
    machine)."""
    s = topo.shape
    assert s is not None
    if topo.snc:
        return 1, s.cores_per_socket
    return s.llcs_per_socket, s.cores_per_llc


HOTPLUG_BRINGUP_ABOVE = 64


def bringup_mode(vcpus: int, accel: str, kernel_hotplug: bool = True, arch: str = "x86_64") -> str:
    """Bring the secondary CPUs up at boot, or boot with few and online the rest after.

    Under TCG every CPU that is online during early boot takes a periodic tick (the
    clocksource is jiffies until fs_initcall, so NO_HZ cannot stop it), and each tick
    of each vCPU costs a pass of QEMU's round-robin loop over all vCPUs: above
    HOTPLUG_BRINGUP_ABOVE x86 vCPUs, booting with maxcpus and onlining the rest from
    the agent is many times faster; at and below it, bring-up at boot is as fast or
    faster.  The topology the kernel ends with is the same either way (`lab verify`
    checks it; tests/vm compares the two snapshots).

    x86 only: arm64 has its architected timer from the start, so there is no jiffies
    tick storm to avoid, and onlining one CPU at a time costs more than it saves.
    The measurements are in the README's "Boot speed" table (bench/bench_boot.py).
    """
    if arch != "x86_64" or accel != "tcg" or not kernel_hotplug:
        return "boot"
    return "hotplug" if vcpus > HOTPLUG_BRINGUP_ABOVE else "boot"


def boot_cpus(topo: Topology, guest_to_spec: tuple[int, ...]) -> int:
    """How many CPUs must be up at boot for the kernel to make its boot-time-only
    topology decisions as it would with all of them.

    x86 decides once, in native_smp_cpus_done(), whether a package holds more than one
    NUMA node (x86_has_numa_in_package: then there is no DIE level and NODE is built
    from the NUMA table); it sees only the CPUs up by then.  So the first CPU of the boot
    package that is in another node than CPU 0 comes up at boot too.  arm64 reads the
    whole cpu-map from the device tree at boot.  Not reproduced: x86's "Max logical
    packages" (perf uncore/RAPL sizing) counts the boot package's cores up at boot.
    """
    if topo.arch != "x86_64":
        return 1
    by_id = {c.id: c for c in topo.cpus}
    c0 = by_id[guest_to_spec[0]]
    for g, sid in enumerate(guest_to_spec):
        c = by_id[sid]
        if c.socket == c0.socket and c.node != c0.node:
            return g + 1
    return 1


def tcg_threading(vcpus: int, host_cpus: int, bringup: str = "boot") -> str:
    """One TCG thread per vCPU (MTTCG), or all vCPUs round-robin on one thread.

    While all CPUs come up at boot, early boot ticks every vCPU and MTTCG's host
    threads fight for the host's cores: one thread wins once vCPUs outnumber twice the
    cores.  Once the kernel runs tickless (the hotplug bring-up, see bringup_mode()),
    idle vCPU threads sleep and the round-robin loop's pass over every vCPU is what
    costs, so MTTCG wins; with few vCPUs per host core it wins either way.  The
    measurements are in the README's "Boot speed" table (bench/bench_boot.py).
    """
    if vcpus <= 2 * max(1, host_cpus) or bringup == "hotplug":
        return "multi"
    return "single"


def _x86(topo: Topology, version, acc: str, cpu_model: str, host: Host, notes: list[str]):
    s = topo.shape
    assert s is not None
    modules = s.clusters_per_llc if topo.has_clusters else 1
    if modules > 1 and version < QEMU_X86_CLUSTERS:
        # x86 builds the CLS level from the CPUs sharing an L2 (cpu_l2c_shared_mask, from
        # CPUID 4's L2 leaf).  QEMU calls an x86 cluster a module (-smp modules=, 9.1) and
        # gives each core its own L2 unless -machine smp-cache puts the L2 at the module
        # (9.2): without both the guest would see no cluster.
        raise UserError(
            f"{topo.name}: x86 clusters need QEMU {_v(QEMU_X86_CLUSTERS)} (-smp modules= and an L2 shared per "
            f"module through -machine smp-cache); QEMU here: {_v(version)}"
        )
    dies, _ = x86_dies_cores(topo)
    if dies > 1 and version < QEMU_X86_DIES:
        raise UserError(f"{topo.name}: several LLCs per socket need -smp dies=, QEMU {_v(QEMU_X86_DIES)}+")
    if cpu_model == "auto":
        if acc == "kvm":
            model = "host"
        else:
            model, why = amd_tcg_model(topo)
            if why:
                notes.append(why)
    elif cpu_model == "intel":
        model = INTEL_MODEL
    elif cpu_model == "amd":
        model = AMD_MODEL
    else:
        model = cpu_model
    if model == "host":
        vendor = host.cpu_vendor
    elif model.upper().startswith(("EPYC", "OPTERON", "PHENOM")):
        vendor = "amd"
    else:
        vendor = "intel"
    cpu = model
    if acc == "tcg" and model == INTEL_MODEL:
        # TCG emulates x2APIC from QEMU_TCG_X2APIC (9.0): a guest above 255 vCPUs needs it.
        off = [f for f in TCG_UNSUPPORTED if not (f == "x2apic" and version >= QEMU_TCG_X2APIC)]
        cpu += "".join(f",-{f}" for f in off)
        if version >= QEMU_1F_ABORTS and (x86_dies_cores(topo)[0] > 1 or modules > 1):
            # Several dies or modules raise the CPUID level to 0x1F, and QEMU 10.0.13 then
            # aborts at boot (encode_topo_cpuid1f: "Assertion `count <= CPU_TOPOLOGY_LEVEL_SOCKET'",
            # seen with Debian 6.1, lab-6.1 and lab-6.12 alike).  The model's own level
            # (0xd) keeps 0x1F out; the guest still reads packages from 0xB and each die's
            # L3 and each module's L2 from CPUID 4 (verify passes).
            cpu += f",level={INTEL_MODEL_LEVEL}"
    if acc == "tcg" and model in AMD_TCG_MODELS.values():
        cpu += ",x-force-features=on" + "".join(f",-{f}" for f in AMD_TCG_UNSUPPORTED)
        if topo.n_cpus > 255:
            cpu += ",x2apic=on"  # APIC ids above 254: QEMU refuses the EPYC models without it
    if acc == "kvm" and vendor == "amd":
        cpu += ",topoext=on"
    dies, cores = x86_dies_cores(topo)
    # -smp counts per level (LEVELS names the word): dies (one per LLC) and modules
    # (clusters) only when there are several.
    counts = {"socket": s.sockets, "llc": dies, "cluster": modules, "core": cores // modules}
    smp = lv.smp("x86_64", topo.n_cpus, {k: n for k, n in counts.items() if n > 1 or k in ("socket", "core")},
                 s.threads_per_core)  # fmt: skip
    # Nodes are whole sockets (or span several): one "-numa cpu" per socket.  Nodes
    # inside a socket are groups of dies (one die per LLC): one per (socket, die).  A die
    # that spans nodes (sub-NUMA clustering: one L3 per socket) is split per core: QEMU
    # refuses a second "-numa cpu" naming a die it already put in a node.
    guest_node = {n: i for i, n in enumerate(topo.node_ids)}
    numa_cpu: list[str] = []
    for c, q in zip(topo.cpus, logical_ids(topo), strict=True):
        if topo.snc:
            k = q.llc * s.cores_per_llc + q.cluster * s.cores_per_cluster + q.core
            arg = f"cpu,node-id={guest_node[c.node]},socket-id={q.socket},core-id={k}"
        elif s.nodes_per_socket > 1:
            arg = f"cpu,node-id={guest_node[c.node]},socket-id={q.socket},die-id={q.llc}"
        else:
            arg = f"cpu,node-id={guest_node[c.node]},socket-id={q.socket}"
        if arg not in numa_cpu:
            numa_cpu.append(arg)
    machine = "q35"
    # -machine smp-cache (9.2) only for clusters: QEMU 10.0's q35 refuses caches shared
    # at the thread ("thread level cache not supported by this machine"), so a cache the
    # real machine gives each SMT thread (caches.per_thread) stays a named deviation.
    if modules > 1:
        machine += ",smp-cache.0.cache=l2,smp-cache.0.topology=module"
    return machine, cpu, vendor, smp, numa_cpu


@dataclass(frozen=True)
class LogicalIds:
    """Where a CPU sits, counted as QEMU counts vCPUs: its socket's position in the
    machine, its LLC's within the socket, its cluster's within the LLC, its core's within
    the cluster, its thread's within the core."""

    socket: int
    llc: int
    cluster: int
    core: int
    thread: int


def logical_ids(topo: Topology) -> list[LogicalIds]:
    """Each CPU's LogicalIds, in the spec's canonical order (QEMU's vCPU order).

    The spec's group numbers (``Cpu.llc``, ``Cpu.core``, ...) are machine-wide ranks by
    lowest CPU id: on a machine numbered across sockets or nodes (even CPUs on socket 0,
    nodes interleaved) a socket's cores are not consecutive there.  QEMU's ids are
    positions inside the parent, so they are counted here from the canonical order, which
    enumerates every group's members together."""
    out: list[LogicalIds] = []
    sockets: dict[int, int] = {}
    llcs: dict[tuple[int, int], int] = {}
    clusters: dict[tuple[int, int], int] = {}
    cores: dict[tuple[int, int], int] = {}
    threads: dict[int, int] = {}
    count: dict[tuple[str, int], int] = {}

    def pos(seen: dict, key, kind: str, parent: int) -> int:
        if key not in seen:
            seen[key] = count.get((kind, parent), 0)
            count[(kind, parent)] = seen[key] + 1
        return seen[key]

    for c in topo.cpus:
        so = pos(sockets, c.socket, "socket", 0)
        ll = pos(llcs, (c.socket, c.llc), "llc", c.socket)
        cl = pos(clusters, (c.llc, c.cluster), "cluster", c.llc)
        co = pos(cores, (c.cluster, c.core), "core", c.cluster)
        th = pos(threads, c.id, "thread", c.core)
        out.append(LogicalIds(so, ll, cl, co, th))
    return out


def amd_tcg_model(topo: Topology) -> tuple[str, str]:
    """The x86 CPU model for *topo* under TCG, and why it is not the real vendor's when
    it is not.  An AMD family 17h+ spec gets an EPYC model with TOPOEXT (AMD_TCG_MODELS),
    so the guest's own kernel takes its AMD paths; everything else the Intel model."""
    fam = topo.family or 0
    if topo.vendor != "amd" or fam < 0x17:
        return INTEL_MODEL, ""
    s = topo.shape
    assert s is not None
    share = s.cores_per_llc * s.threads_per_core
    if share & (share - 1):
        # __cache_amd_cpumap_setup() takes an L3's CPUs as the APIC ids from
        # apicid - apicid % share; QEMU pads each die to a power of two of APIC ids, so
        # with another count the L3 lists (not the LLC id) would come out wrong.
        return INTEL_MODEL, (
            f"{share} CPUs per LLC is not a power of two: an AMD CPU model would give wrong L3 "
            "shared_cpu_lists under TCG (the kernel derives them from APIC id ranges), so the guest "
            f"gets the Intel model {INTEL_MODEL}"
        )
    return AMD_TCG_MODELS[0x17 if fam == 0x17 else 0x19], ""


def _arm64(topo: Topology, version, acc: str, cpu_model: str):
    s = topo.shape
    assert s is not None
    if topo.n_cpus > MAX_ARM_CPUS:
        raise UserError(f"{topo.name}: {topo.n_cpus} CPUs; QEMU's arm64 virt machine takes at most {MAX_ARM_CPUS}")
    model = ("host" if acc == "kvm" else ARM_MODEL) if cpu_model == "auto" else cpu_model
    if s.threads_per_core > 1 and model != "host":
        raise UserError(
            f"{topo.path or topo.name}: topology.threads_per_core: {s.threads_per_core} SMT threads, "
            f"but the CPU model {model} has no SMT; use threads_per_core = 1"
        )
    if topo.has_clusters and version < QEMU_ARM_CLUSTERS:
        raise UserError(f"{topo.name}: arm64 clusters need QEMU {_v(QEMU_ARM_CLUSTERS)}")
    # arm64's -smp has no dies: a socket's LLCs and their clusters are all clusters.
    counts = {"socket": s.sockets, "cluster": s.llcs_per_socket * s.clusters_per_llc, "core": s.cores_per_cluster}
    smp = lv.smp("arm64", topo.n_cpus, counts, s.threads_per_core)
    guest_node = {n: i for i, n in enumerate(topo.node_ids)}
    numa_cpu = []
    seen = set()
    for c, q in zip(topo.cpus, logical_ids(topo), strict=True):
        cl = q.llc * s.clusters_per_llc + q.cluster
        key = (q.socket, cl)
        if key in seen:
            continue
        seen.add(key)
        numa_cpu.append(f"cpu,node-id={guest_node[c.node]},socket-id={q.socket},cluster-id={cl}")
    if topo.gic == 2 and topo.n_cpus > MAX_GICV2_CPUS:
        raise UserError(
            f"{topo.path or topo.name}: cpu.gic: GICv2 addresses at most {MAX_GICV2_CPUS} CPUs, "
            f"this machine has {topo.n_cpus}; use gic = 3"
        )
    gic = topo.gic or (3 if topo.n_cpus > MAX_GICV2_CPUS else 2)
    machine = "virt,gic-version=3" if gic == 3 else "virt"
    return machine, model, "arm", smp, numa_cpu


@dataclass(frozen=True)
class BootFiles:
    """What a boot's QEMU reads and writes.  Paths other than the kernel's are relative
    to the run directory, where QEMU runs: the argv is the same whatever the run
    directory is called (so `--dry-run` prints what a boot runs), and the QMP socket's
    path stays under the 108 bytes a unix socket path may have."""

    kernel: Path  # what -kernel gets (see backends.qemu.boot_image())
    initrd: Path = Path(rundir.INITRD)
    dtb: Path | None = None  # arm64: the device tree with the spec's caches and CPU order
    console: Path | None = Path(rundir.CONSOLE)  # None: the console is this terminal
    agent_log: Path | None = Path(rundir.AGENT_LOG)  # virtio-serial port lab.log
    results: Path | None = Path(rundir.RESULTS_TAR)  # virtio-serial port lab.out
    monitor: Path | None = Path(rundir.QMP)  # QMP, asked where the vCPUs are if the guest is lost


def boot_files(p: VmPlan, kernel: Path, *, interactive: bool = False) -> BootFiles:
    """The files of a boot of *p* with the kernel image *kernel*: a batch boot reports
    over virtio-serial; an interactive one has the console on this terminal."""
    dtb = Path(rundir.DTB) if p.dt_caches else None
    if interactive:
        return BootFiles(kernel, dtb=dtb, console=None, agent_log=None, results=None, monitor=None)
    return BootFiles(kernel, dtb=dtb)


def dump_files(files: BootFiles) -> BootFiles:
    """The files of the QEMU run that dumps the machine's own device tree (no -dtb yet)."""
    return replace(files, dtb=None, monitor=None)


BASE_CMDLINE = ("panic=-1", "oops=panic", "rdinit=/init", "loglevel=4")


def preset_lpj(arch: str, accel: str, vendor: str, tsc_khz: int, kernel_features: frozenset[str]) -> int:
    """The loops_per_jiffy every CPU of an x86 TCG guest on an AMD CPU model takes from
    the command line (lpj=), or 0 for none.

    x86 secondaries reuse the boot CPU's delay-loop calibration only when the CPU has a
    constant TSC (calibrate_delay_is_known()); Linux sets that for Intel family 6 from its
    model, and for AMD only from CPUID 0x80000007's invariant-TSC bit, which QEMU's TCG
    does not offer.  So on the EPYC models each secondary ran calibrate_delay() under TCG:
    about 100 ms per CPU, and wrong ("calibrate_delay_direct() failed to get a good
    estimate"; seen on zen3-2s-mini: bogomips 0.02-155 on the secondaries against
    5192 on the boot CPU), which made udelay() on those CPUs far too short.  The boot CPU
    computes its own from the TSC rate, lpj = tsc_khz * 1000 / HZ, and a TCG guest's TSC
    runs at the host's: so that value, from the host's TSC rate and the kernel's HZ,
    given to every CPU.  The TSC clocksource (timestamps, the scheduler's clock) is
    calibrated apart and does not use it.  0 where either is unknown (the boot is then as
    before) or the guest is not an AMD model under TCG (KVM: the host's CPU; Intel: the
    boot CPU's value is reused already); --append lpj=N overrides (the last lpj= wins)."""
    hz = next((int(f[3:]) for f in kernel_features if f.startswith("hz=") and f[3:].isdigit()), 0)
    if arch != "x86_64" or accel != "tcg" or vendor != "amd" or not tsc_khz or not hz:
        return 0
    return tsc_khz * 1000 // hz


def cmdline(p: VmPlan) -> str:
    parts = [f"console={p.console}", *BASE_CMDLINE]
    if p.accel == "tcg":
        # Emulated CPUs run unevenly: skip the calibrations and watchdogs that
        # mistake that for broken hardware (soft-lockup splats, TSC marked unstable).
        if p.arch == "x86_64":
            parts += ["tsc=reliable", "no_timer_check"]
        if p.arch == "arm64":
            # mitigations=off leaves arm64's kernel page table isolation on where KASLR asks
            # for it (cortex-a72 and other CPUs not immune to Meltdown): every exception
            # switches tables and every TLB flush is issued twice (see ARM_MODEL).
            parts += ["kpti=0"]
        if p.lpj:
            parts += [f"lpj={p.lpj}"]  # every CPU takes the boot CPU's delay loop (preset_lpj)
        parts += ["nowatchdog"]
        # Boot speed, nothing the scheduler sees (measured: README, "Boot speed"):
        # write-protecting the kernel and its two W+X page-table walks, patching in
        # speculation mitigations, and the crypto API's self-tests of every registered
        # algorithm (a late initcall in kernels with CRYPTO_MANAGER tests built, as
        # Debian's are).  Timings inside a TCG guest say nothing about real hardware
        # either way; --append puts any of them back.
        parts += ["rodata=off", "mitigations=off", "cryptomgr.notests"]
    if p.bringup == "hotplug":
        parts += [f"maxcpus={p.boot_cpus}"]  # guest/init.sh onlines the others before anything else
    parts += list(p.cmdline_extra)
    return " ".join(parts)


# A guest above 255 x86 vCPUs under TCG: Linux switches to x2APIC mode (and brings up
# the CPUs whose APIC id is 255 or more) only with interrupt remapping, or when a
# hypervisor says it may do without (KVM's MSI_EXT_DEST_ID).  QEMU's intel-iommu with
# intremap and eim (extended interrupt mode) gives it the remapping; without it CPU 255
# was refused ("native_cpu_up: bad cpu 255").  Measured here: zen3-2s, 256 vCPUs, QEMU
# 10.0.13, Debian 6.1: "x2apic: enabled by BIOS", 256 CPUs online, verify passes.
X2APIC_IOMMU = "intel-iommu,intremap=on,eim=on"


def x2apic_iommu(p: VmPlan) -> bool:
    return p.topo.arch == "x86_64" and p.accel == "tcg" and p.topo.n_cpus > 255


def argv(p: VmPlan, files: BootFiles) -> list[str]:
    """The exact QEMU argv for *p* booting *files* (run it in the run directory)."""
    a = [p.qemu, "-nodefaults", "-no-user-config", "-nographic", "-no-reboot"]
    for d in p.qemu_firmware:  # a fetched QEMU's own firmware before the system's (-L)
        a += ["-L", d]
    a += ["-machine", p.machine]
    if p.accel == "tcg":
        a += ["-accel", f"tcg,thread={p.tcg_threads}"]
    else:
        a += ["-accel", "kvm"]
    a += ["-cpu", p.cpu_model, "-smp", p.smp, "-m", f"{p.memory_mb}M"]
    for i in range(len(p.topo.node_ids)):
        mb = p.topo.memory_mb[i]
        a += ["-object", f"memory-backend-ram,id=mem{i},size={mb}M"]
        a += ["-numa", f"node,nodeid={i},memdev=mem{i}"]
    for arg in p.numa_cpu_args:
        a += ["-numa", arg]
    n = p.topo.n_nodes
    for i in range(n):
        for j in range(n):
            if i != j:
                a += ["-numa", f"dist,src={i},dst={j},val={p.topo.distances[i][j]}"]
    a += ["-kernel", str(files.kernel), "-initrd", str(files.initrd)]
    if files.dtb is not None:
        a += ["-dtb", str(files.dtb)]
    a += ["-append", cmdline(p)]
    if files.console is None:
        a += ["-serial", "mon:stdio"]
    else:
        a += ["-chardev", f"file,id=con,path={files.console}", "-serial", "chardev:con"]
    if x2apic_iommu(p):
        a += ["-device", X2APIC_IOMMU]
    a += ["-device", "virtio-serial-pci,id=vs"]
    if files.agent_log is not None:
        a += ["-chardev", f"file,id=agentlog,path={files.agent_log}"]
        a += ["-device", "virtserialport,bus=vs.0,chardev=agentlog,name=lab.log"]
    if files.results is not None:
        a += ["-chardev", f"file,id=results,path={files.results}"]
        a += ["-device", "virtserialport,bus=vs.0,chardev=results,name=lab.out"]
    if files.monitor is not None:
        a += ["-qmp", f"unix:{files.monitor},server=on,wait=off"]
    return a


def required_qemu(topo, accel: str) -> tuple[tuple[int, int, int] | None, str]:
    """The oldest QEMU that can express *topo* under *accel*, and for what (None: any):
    the renderer's own version gates (QEMU_*), here beside them (emulators.choose() takes
    the answer; emulators importing the renderer made an import cycle)."""
    if topo.arch != "x86_64":
        if topo.has_clusters:
            return QEMU_ARM_CLUSTERS, f"{topo.name}: arm64 clusters need -smp clusters="
        return None, ""
    if topo.has_clusters:
        return QEMU_X86_CLUSTERS, f"{topo.name}: x86 clusters (-smp modules= with an L2 per module through -machine smp-cache)"
    if accel == "tcg" and topo.shape is not None:
        if topo.n_cpus > 255:
            return QEMU_TCG_X2APIC, f"{topo.name}: {topo.n_cpus} vCPUs need x2APIC, which TCG emulates from QEMU 9.0"
        top = max_apic_id(topo)
        if top > 254:
            return QEMU_TCG_X2APIC, (
                f"{topo.name}: its highest APIC ID would be {top} (QEMU packs socket/die/core/thread ids in "
                "power-of-two fields); above 254 needs x2APIC, which TCG emulates from QEMU 9.0"
            )
    if topo.shape is not None and topo.shape.llcs_per_socket > 1:
        return QEMU_X86_DIES, f"{topo.name}: several LLCs per socket need -smp dies="
    return None, ""
