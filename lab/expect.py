"""What a guest kernel should see for a topology, and the check against what it saw.

The expected scheduler domains follow Linux 6.1's construction:
arch topology table (x86: SMT, CLS, MC, DIE; or SMT, CLS, MC when a package
holds several nodes; arm64: SMT, CLS, MC, DIE), then NODE and one NUMA level per
distinct distance (kernel/sched/topology.c: sched_init_numa()), then removal of
degenerate levels (a level whose span equals its child's).  Flags are checked
for the ones placement depends on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from . import cpulist
from . import levels as lv
from .render.qemu import AMD_MODEL, AMD_TCG_MODELS, INTEL_MODEL, VmPlan, amd_tcg_model
from .sysfs import Cache, CpuView, Domain, MachineView
from .topology import CACHE_LEAVES, Topology

# Flags verify compares; the rest are recorded in the JSON but not judged.
KEY_FLAGS = (
    "SD_SHARE_CPUCAPACITY",
    "SD_SHARE_PKG_RESOURCES",
    "SD_BALANCE_FORK",
    "SD_BALANCE_EXEC",
    "SD_WAKE_AFFINE",
    "SD_NUMA",
    "SD_SERIALIZE",
    "SD_ASYM_CPUCAPACITY",
    "SD_ASYM_CPUCAPACITY_FULL",
)
RECLAIM_SENSITIVE = ("SD_BALANCE_FORK", "SD_BALANCE_EXEC", "SD_WAKE_AFFINE")


@dataclass(frozen=True)
class ExpDomain:
    name: str
    span: frozenset[int]
    flags: frozenset[str]
    distance: int | None = None  # for NUMA levels: the distance that defines them


# Names that follow the kernel: the package level is DIE up to 6.6 and PKG from 6.7
# (f577cd57bfaa "sched/topology: Rename 'DIE' domain to 'PKG'"); SD_SHARE_PKG_RESOURCES
# is SD_SHARE_LLC from 6.9 (fa63c2c111e8 "sched/topology: Rename SD_SHARE_PKG_RESOURCES
# to SD_SHARE_LLC").  The expected views keep 6.1's words; a newer guest's flags are
# read back into them and its level names are expected in its own.
PKG_RENAMED = (6, 7)
FLAG_ALIASES = {"SD_SHARE_LLC": "SD_SHARE_PKG_RESOURCES"}
# The sched-domain each level's groups make (lab.levels); the kernel's NODE level (one
# node) and the package level's pre-6.7 name are the kernel's own.
SMT, CLS, MC, NUMA, PKG = (lv.get(n).domain for n in ("core", "cluster", "llc", "node", "socket"))


def kernel_version(release: str | None) -> tuple[int, int]:
    """(major, minor) of a `uname -r`, or (6, 1) when unknown."""
    m = re.match(r"(\d+)\.(\d+)", release or "")
    return (int(m[1]), int(m[2])) if m else (6, 1)


def pkg_level(release: str | None) -> str:
    return PKG if kernel_version(release) >= PKG_RENAMED else "DIE"


def expected_domains(
    topo: Topology,
    *,
    reclaim_distance: int,
    cluster_level: bool,
    llc: str = "spec",
    pkg_name: str = "DIE",
) -> dict[int, list[ExpDomain]]:
    """Per CPU (spec ids), the sched-domain levels a kernel builds on this machine.

    *llc* is what the kernel learns about the last-level cache: "spec" (the
    spec's LLC groups, as firmware tables describe them on the real machine),
    "private" (only private caches: an arm64 guest whose device tree has no
    cache nodes, where the CPU's own CLIDR shows L1), or "none".
    """
    arch = topo.arch
    llc_mode = llc
    nodes = topo.node_ids
    node_set = {n: frozenset(topo.node_cpus(n)) for n in nodes}
    numa_in_package = arch == "x86_64" and any(
        len(node_set[n]) < len(topo.group_of("socket", next(iter(node_set[n])))) for n in nodes
    )
    dists = sorted({d for row in topo.distances for d in row})
    out: dict[int, list[ExpDomain]] = {}
    for c in topo.cpus:
        core = frozenset(topo.group_of("core", c.id))
        llc_span = frozenset(topo.group_of("llc", c.id))
        node = node_set[c.node]
        sock = frozenset(topo.group_of("socket", c.id))
        if arch == "x86_64":
            # x86 cluster = CPUs sharing an L2 (cpu_l2c_shared_mask): a core's own L2
            # unless the machine has clusters (QEMU modules with the L2 per module).
            cls = frozenset(topo.group_of("cluster", c.id)) if topo.has_clusters else core
            mc = llc_span
        else:
            cls = frozenset(topo.group_of("cluster", c.id)) if topo.has_clusters else core
            # arch_topology.c cpu_coregroup_mask(): smaller of node and package, then LLC
            # siblings if the firmware describes caches, widened to the cluster.
            mc = sock if sock <= node else node
            if llc_mode == "spec" and llc_span <= mc:
                mc = llc_span
            elif llc_mode == "private":
                mc = frozenset({c.id})
            if cluster_level and mc <= cls:
                mc = cls
        base = frozenset({"SD_BALANCE_NEWIDLE", "SD_BALANCE_EXEC", "SD_BALANCE_FORK", "SD_WAKE_AFFINE"})
        levels: list[ExpDomain] = []
        if topo.smt:
            levels.append(ExpDomain(SMT, core, base | {"SD_SHARE_CPUCAPACITY", "SD_SHARE_PKG_RESOURCES"}))
        if cluster_level:
            levels.append(ExpDomain(CLS, cls, base | {"SD_SHARE_PKG_RESOURCES"}))
        levels.append(ExpDomain(MC, mc, base | {"SD_SHARE_PKG_RESOURCES"}))
        if not numa_in_package:
            levels.append(ExpDomain(pkg_name, node, base))  # cpu_cpu_mask() is the node
        levels.append(ExpDomain("NODE", node, base, 10))
        row = topo.distances[nodes.index(c.node)]
        for d in dists[1:]:
            span = frozenset().union(*(node_set[m] for j, m in enumerate(nodes) if row[j] <= d))
            flags = set(base) | {"SD_NUMA", "SD_SERIALIZE"}
            if d > reclaim_distance:
                flags -= set(RECLAIM_SENSITIVE)
            levels.append(ExpDomain(NUMA, span, frozenset(flags), d))
        out[c.id] = _degenerate([_asym(d, topo.capacities) for d in levels])
    return out


def _asym(d: ExpDomain, capacities: dict[int, int]) -> ExpDomain:
    """A level's asymmetric-capacity flags (kernel/sched/topology.c
    asym_cpu_capacity_classify()): SD_ASYM_CPUCAPACITY where its span holds CPUs of
    different capacities, _FULL too where it holds every capacity the machine has."""
    if not capacities:
        return d
    here = {capacities[c] for c in d.span}
    if len(here) < 2:
        return d
    flags = {"SD_ASYM_CPUCAPACITY"}
    if here == set(capacities.values()):
        flags.add("SD_ASYM_CPUCAPACITY_FULL")
    return replace(d, flags=d.flags | flags)


def _degenerate(levels: list[ExpDomain]) -> list[ExpDomain]:
    kept = [d for d in levels if len(d.span) > 1]
    out: list[ExpDomain] = []
    for d in kept:
        if out and out[-1].span == d.span:
            continue  # the parent adds nothing: sd_parent_degenerate()
        out.append(d)
    return out


# ---- the check ----------------------------------------------------------------------------


@dataclass
class Check:
    name: str
    expected: str
    actual: str
    ok: bool
    known: str = ""  # a known, named deviation (counts as ok unless --strict)

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        return "known" if self.known else "FAIL"

    def to_dict(self) -> dict:
        d = {"name": self.name, "expected": self.expected, "actual": self.actual, "ok": self.ok}
        if self.known:
            d["known_deviation"] = self.known
        return d


@dataclass
class ViewVerdict:
    """The guest's topology view against the spec's (lab vm verify): one Check per group,
    cache and domain level."""

    checks: list[Check] = field(default_factory=list)
    numbering: str = "native"

    def ok(self, strict: bool = False) -> bool:
        return all(c.ok or (c.known and not strict) for c in self.checks)


def translate(view: MachineView, plan: VmPlan) -> MachineView:
    """Rewrite a guest view into the spec's CPU and node numbering."""
    g2s = plan.guest_to_spec
    n2s = plan.guest_node_to_spec

    def m(cpus):
        return tuple(sorted(g2s[c] for c in cpus if c < len(g2s)))

    out = MachineView(
        online=m(view.online),
        vendor=view.vendor,
        model=view.model,
        family=view.family,
        release=view.release,
        cmdline=view.cmdline,
    )
    for g, cv in view.cpus.items():
        if g >= len(g2s):
            continue
        s = g2s[g]
        out.cpus[s] = CpuView(
            s,
            cv.package,
            cv.die_id,
            cv.cluster_id,
            cv.core_id,
            {k: m(v) for k, v in cv.lists.items()},
            [Cache(c.level, c.type, m(c.shared), c.size_kb) for c in cv.caches],
            [Domain(d.level, d.name, m(d.span), tuple(FLAG_ALIASES.get(f, f) for f in d.flags)) for d in cv.domains],
            cv.capacity,
        )
    for gn, cpus in view.nodes.items():
        sn = n2s[gn] if gn < len(n2s) else gn
        out.nodes[sn] = m(cpus)
    for gn, row in view.distances.items():
        sn = n2s[gn] if gn < len(n2s) else gn
        out.distances[sn] = row
    return out


def _fmt(cpus) -> str:
    return cpulist.format(cpus)


def _groups(topo: Topology, level: str) -> str:
    gs = topo.groups(level)
    if len(gs) <= 4:
        return " | ".join(_fmt(g) for g in gs)
    return f"{len(gs)} groups: {_fmt(gs[0])} | {_fmt(gs[1])} | ... | {_fmt(gs[-1])}"


def _compare_groups(name: str, topo: Topology, level: str, actual_of) -> Check:
    """Every CPU's sibling list must equal its group at *level*."""
    bad = []
    for c in topo.cpus:
        want = topo.group_of(level, c.id)
        got = actual_of(c.id)
        if got is None or tuple(got) != want:
            bad.append((c.id, want, got))
    if not bad:
        return Check(name, _groups(topo, level), "same", True)
    cpu, want, got = bad[0]
    return Check(
        name,
        _groups(topo, level),
        f"CPU {cpu}: {'missing' if got is None else _fmt(got)} (want {_fmt(want)}); {len(bad)} CPUs differ",
        False,
    )


def guest_limits(topo: Topology, plan: VmPlan, cluster_level: bool, dt_caches: bool = False) -> tuple[bool, str, list[str]]:
    """What this guest can show of the machine: (CLS level built, LLC mode, reasons it falls short)."""
    why = []
    llc = "spec"
    if topo.arch == "arm64" and not dt_caches:
        llc = "private"
        why.append(
            f"QEMU {'.'.join(map(str, plan.qemu_version))}'s arm64 device tree has no cache nodes, so the guest "
            "sees only private caches and MC cannot span the LLC"
        )
    if topo.has_clusters and not cluster_level:
        why.append("the guest kernel has no CONFIG_SCHED_CLUSTER, so there is no CLS level")
    return cluster_level, llc, why


# ---- what the VM does not reproduce -----------------------------------------------------------

CACHE_LEVEL = {"L1d": (1, ("Data",)), "L1i": (1, ("Instruction",)), "L2": (2, ("Unified", "Data"))}
# Caches QEMU 7.2's x86 models give each SMT thread to itself (seen in guests): the Intel
# model's CPUID 4 counts one thread per L1 and a core's threads per L2; the AMD model's
# 0x8000001D counts a core's threads for L1 and L2 alike.  From QEMU 9.1's machine types
# the Intel model's L1 is per core too (x-l1-cache-per-thread=false only in pc_compat_9_0).
QEMU_PER_THREAD = {"intel": frozenset({"L1d", "L1i"}), "amd": frozenset()}
L1_PER_CORE_FROM = (9, 1, 0)


def per_thread_reproduced(plan: VmPlan) -> frozenset[str]:
    if plan.cpu_vendor == "intel" and tuple(plan.qemu_version) >= L1_PER_CORE_FROM:
        return frozenset()
    return QEMU_PER_THREAD.get(plan.cpu_vendor, frozenset())


def sparse_nodes_why(topo: Topology) -> str:
    ids = ", ".join(map(str, topo.node_ids))
    return (
        f"node ids {ids}: QEMU numbers NUMA nodes 0-{topo.n_nodes - 1}, so the guest's node ids are dense "
        "(same order, same CPUs and distances); lab translates them back"
    )


def per_thread_why(name: str, plan: VmPlan) -> str:
    why = (
        f"the real machine gives each SMT thread its own {name}; the guest's {plan.cpu_vendor} CPU model "
        f"({plan.cpu_model.split(',')[0]}) shares a core's {name} between its threads"
    )
    if name == "L2":
        why += " (x86 builds the CLS level from L2 siblings: kernels that set cpu_l2c_id see a different cluster)"
    return why


def smt_split(topo: Topology, plan: VmPlan) -> list[str]:
    """Caches the real machine shares between a core's SMT threads that the guest's CPU
    model gives each thread to itself (the Intel model's L1d and L1i)."""
    if not topo.smt:
        return []
    return [n for n in CACHE_LEVEL if n in per_thread_reproduced(plan) and n not in topo.per_thread]


def smt_split_why(name: str, plan: VmPlan) -> str:
    return (
        f"the real machine shares each core's {name} between its SMT threads; the guest's {plan.cpu_vendor} "
        f"CPU model ({plan.cpu_model.split(',')[0]}) gives each thread its own (CPUID leaf 4, QEMU before 9.1: "
        "`lab qemu fetch` gets one that shares it); no sched-domain level is built from an L1, so the "
        "scheduler sees the same machine"
    )


def fake_dies(plan: VmPlan) -> bool:
    """Does the guest see the dies trick's dies?  lab gives x86 one die per LLC (-smp
    dies=) so the CPU model gives one L3 each.  The Intel model reports the dies in CPUID
    0x1F, and the AMD models put each die's id in 0x8000001E's node id, which Linux's AMD
    path takes as the die: the guest's die lists are the LLCs, where the real parts lab
    models have one die per package.  On QEMU 10 the Intel model keeps level 0xd
    (render.qemu): 0x1F stays out and the dies with it."""
    if plan.arch != "x86_64" or "dies=" not in plan.smp:
        return False
    if plan.cpu_vendor == "amd":  # seen on 7.2; QEMU 10.0's AMD model gives one node id per package
        return tuple(plan.qemu_version) < (10, 0, 0)
    return plan.cpu_vendor == "intel" and ",level=" not in plan.cpu_model


def fake_dies_why(plan: VmPlan) -> str:
    q = ".".join(map(str, plan.qemu_version))
    if plan.cpu_vendor == "amd":
        how = (f"QEMU {q}'s AMD model puts each die's id in CPUID 0x8000001E's node id, which Linux takes as the "
               "die (one per package on the real machine: its node id is the socket's in NPS1; QEMU 10's AMD model "
               "gives one per package: --qemu lab)")  # fmt: skip
    else:
        how = (f"QEMU {q}'s Intel model reports them in CPUID 0x1F (one die per package on the real machine; "
               "QEMU 10 keeps 0x1F out: --qemu lab)")  # fmt: skip
    return f"lab makes each LLC a QEMU die (-smp dies=) for its own L3 and the guest's die lists are the LLCs: {how}"


def deviations(topo: Topology, plan: VmPlan) -> list[tuple[str, str]]:
    """(name, why) of everything a boot of *topo* by *plan* will not reproduce: what
    `lab topo import` lists and `lab verify` reports as named known deviations."""
    out = []
    if list(topo.node_ids) != list(range(topo.n_nodes)):
        out.append(("node ids", sparse_nodes_why(topo)))
    for name in topo.per_thread:
        if name not in per_thread_reproduced(plan):
            out.append((f"{name} per thread", per_thread_why(name, plan)))
    for name in smt_split(topo, plan):
        out.append((f"{name} shared by SMT threads", smt_split_why(name, plan)))
    if plan.guest_reclaim_distance != topo.node_reclaim_distance:
        out.append((
            "vendor effect",
            f"the real {topo.vendor} machine uses node_reclaim_distance={topo.node_reclaim_distance}, the guest's "
            f"{plan.cpu_vendor} CPU model {plan.guest_reclaim_distance} (a lab-built kernel takes node_reclaim_distance=)",
        ))
    if topo.arch == "arm64" and not plan.dt_caches:
        out.append(("LLC groups", "no device-tree cache nodes (install device-tree-compiler)"))
    if fake_dies(plan):
        out.append(("dies", fake_dies_why(plan)))
    if topo.split_llc:
        out.append(("LLC crossing nodes", SPLIT_LLC_WHY))
    why = vendor_why(topo, plan)
    if why:
        out.append(("CPU vendor", why))
    return out


SPLIT_LLC_WHY = (
    "on the real machine an LLC's shared_cpu_list spans several nodes; the spec's LLCs, and the guest's, "
    "are its per-node parts (QEMU puts a die in one node; x86 Linux never lets the scheduler's LLC cross "
    "a node, so the sched domains are the same)"
)


def vendor_why(topo: Topology, plan: VmPlan) -> str:
    """Why the guest's CPU vendor is not the real machine's, or '' when it is."""
    if topo.arch != "x86_64" or topo.vendor not in ("intel", "amd") or plan.cpu_vendor == topo.vendor:
        return ""
    fam = f" family {topo.family:#x}" if topo.family is not None else ""
    if plan.cpu_model.split(",")[0] in (INTEL_MODEL, AMD_MODEL, *AMD_TCG_MODELS.values()) and plan.options.cpu_model == "auto":
        reason = (
            amd_tcg_model(topo)[1]
            or "lab's AMD CPU models under TCG are Zen (family 0x17+, with TOPOEXT); QEMU has none of this family it can give this topology"
        )
    elif plan.cpu_model.split(",")[0] == "host":
        reason = "KVM's -cpu host is this host's CPU"
    else:
        reason = "the CPU model was chosen with --cpu-model"
    return (
        f"the real CPU is {topo.vendor}{fam}, the guest's CPU model {plan.cpu_model.split(',')[0]} is "
        f"{plan.cpu_vendor}: {reason}; the guest kernel takes its {plan.cpu_vendor} paths (CPUID topology "
        "leaves, vendor quirks)"
    )


def verify(
    topo: Topology, plan: VmPlan, guest: MachineView, *, cluster_level: bool, dt_caches: bool | None = None
) -> ViewVerdict:
    """Compare the guest's view (guest numbering) with the spec.  Returns the checks."""
    if dt_caches is None:
        dt_caches = plan.dt_caches
    cluster_level, guest_llc, limits = guest_limits(topo, plan, cluster_level, dt_caches)
    v = translate(guest, plan)
    vd = ViewVerdict(numbering=plan.numbering_mode)
    vd.checks += _node_checks(topo, v)
    vd.checks += _capacity_checks(topo, v)
    vd.checks += _cache_size_checks(topo, v)
    vd.checks += _group_checks(topo, v, guest_llc, limits)
    vd.checks += _shape_deviation_checks(topo, plan, v)
    if not any(cv.domains for cv in v.cpus.values()):
        vd.checks.append(Check("sched domains", "readable", "no /proc/schedstat or debugfs domains in the guest", False))
        return vd
    vd.checks += _domain_checks(topo, plan, v, cluster_level, guest_llc, limits)
    return vd


def _node_checks(topo: Topology, v: MachineView) -> list[Check]:
    """CPUs online, the nodes' CPUs and distances."""
    fmt = _fmt
    checks = [Check("CPUs online", f"{topo.n_cpus} ({fmt(topo.cpu_ids)})", f"{len(v.online)} ({fmt(v.online)})", tuple(v.online) == topo.cpu_ids)]
    want_nodes = {n: topo.node_cpus(n) for n in topo.node_ids}
    checks.append(
        Check("NUMA nodes", str(len(want_nodes)), str(len([n for n, c in v.nodes.items() if c])), len(want_nodes) == len([1 for c in v.nodes.values() if c]))
    )
    for n in topo.node_ids:
        got = v.nodes.get(n)
        checks.append(Check(f"node {n} CPUs", fmt(want_nodes[n]), fmt(got) if got is not None else "missing", got == want_nodes[n]))
    for i, n in enumerate(topo.node_ids):
        want = topo.distances[i]
        dist = v.distances.get(n)
        checks.append(Check(f"node {n} distances", " ".join(map(str, want)), " ".join(map(str, dist)) if dist else "missing", tuple(dist or ()) == want))
    return checks


def _capacity_checks(topo: Topology, v: MachineView) -> list[Check]:
    """Each CPU's cpu_capacity, on a machine whose CPUs differ (big.LITTLE)."""
    if not topo.capacities:
        return []
    by_cap: dict[int, list[int]] = {}
    for c, cap in topo.capacities.items():
        by_cap.setdefault(cap, []).append(c)
    want = " | ".join(f"{_fmt(cs)}: {cap}" for cap, cs in sorted(by_cap.items(), key=lambda x: min(x[1])))
    bad = [(c, cap, v.cpus[c].capacity if c in v.cpus else None) for c, cap in sorted(topo.capacities.items())]
    bad = [b for b in bad if b[1] != b[2]]
    got = "same" if not bad else f"CPU {bad[0][0]}: {bad[0][2] if bad[0][2] is not None else 'no cpu_capacity'}; {len(bad)} CPUs differ"
    return [Check("CPU capacities", want, got, not bad)]


def _cache_size_checks(topo: Topology, v: MachineView) -> list[Check]:
    """Each cache level the spec gives sizes for ([caches] sizes, arm64's device tree):
    every CPU's cache/indexN/size in the guest."""
    checks = []
    for name, per_cpu in topo.cache_kb:
        level, kind = CACHE_LEAVES[name]
        by_kb: dict[int, list[int]] = {}
        for c, kb in per_cpu:
            by_kb.setdefault(kb, []).append(c)
        want = " | ".join(f"{_fmt(cs)}: {kb}K" for kb, cs in sorted(by_kb.items(), key=lambda x: min(x[1])))
        bad = []
        for c, kb in per_cpu:
            got = next(
                (x.size_kb for x in (v.cpus[c].caches if c in v.cpus else []) if (x.level, x.type) == (level, kind)),
                None,
            )
            if got != kb:
                bad.append((c, got))
        actual = "same" if not bad else (
            f"CPU {bad[0][0]}: {f'{bad[0][1]}K' if bad[0][1] is not None else f'no {name} size'}; {len(bad)} CPUs differ"
        )
        checks.append(Check(f"{name} sizes", want, actual, not bad))
    return checks


def _group_checks(topo: Topology, v: MachineView, guest_llc: str, limits: list[str]) -> list[Check]:
    """Per-CPU sibling groups: SMT, packages, clusters, the LLC."""
    def listed(level: str):
        return lambda c: v.cpus[c].siblings(level) if c in v.cpus else None

    # Each level sysfs lists siblings of (lab.levels), in the order the checks print.
    checks = [
        _compare_groups(name, topo, level, listed(level))
        for name, level in (("SMT siblings", "core"), ("packages", "socket"), ("clusters", "cluster"))
        if level in topo.levels
    ]
    llc_level = v.llc_level
    if guest_llc != "spec":
        checks.append(Check("LLC groups", _groups(topo, "llc"), "not visible in the guest", False, known="; ".join(limits)))
        return checks

    def llc_of(c):
        cv = v.cpus.get(c)
        if cv is None or llc_level is None:
            return None
        cache = cv.cache(llc_level)
        return cache.shared if cache else None

    if topo.snc:
        # Sub-NUMA clustering: the cache's own lists span the socket, on the real machine
        # and in the guest (one die per socket); the scheduler's LLC is each node's part
        # (x86 match_llc() never matches CPUs of different nodes), checked as MC spans.
        checks.append(_compare_groups(f"L{llc_level or '?'} shared_cpu_list (one per socket: SNC)", topo, "socket", llc_of))
        checks.append(Check(
            "LLC split at node boundaries (SNC)", _groups(topo, "llc"),
            "the guest kernel splits the socket's L3 at node boundaries as on the real machine (MC spans below)", True,
        ))
        return checks
    checks.append(_compare_groups(f"LLC (L{llc_level or '?'} shared_cpu_list)", topo, "llc", llc_of))
    return checks


def _cache_list(v: MachineView, cpu: int, name: str) -> tuple[int, ...] | None:
    """The CPUs sharing *cpu*'s cache *name* ("L1d", "L1i", "L2") in view *v*, or None."""
    level, types = CACHE_LEVEL[name]
    cv = v.cpus.get(cpu)
    cache = next((x for x in cv.caches if x.level == level and x.type in types), None) if cv else None
    return tuple(cache.shared) if cache else None


def _differ(v: MachineView, name: str, bad: list[int]) -> str:
    return f"CPU {bad[0]}: {_fmt(_cache_list(v, bad[0], name) or ()) or 'missing'}; {len(bad)} CPUs differ"


def _shape_deviation_checks(topo: Topology, plan: VmPlan, v: MachineView) -> list[Check]:
    """Named known deviations of the machine's shape (sparse node ids, caches private to
    an SMT thread), each checked against what the guest shows: a guest that differs in
    another way than the named one fails."""
    checks = []
    if list(topo.node_ids) != list(range(topo.n_nodes)):
        got = sorted(v.nodes)
        ok_translated = got == sorted(topo.node_ids)
        checks.append(Check(
            "node ids", " ".join(map(str, topo.node_ids)),
            f"guest 0-{topo.n_nodes - 1}, translated to {' '.join(map(str, got))}", False,
            known=sparse_nodes_why(topo) if ok_translated else "",
        ))
    for name in topo.per_thread:
        if name in per_thread_reproduced(plan):
            bad = [c.id for c in topo.cpus if _cache_list(v, c.id, name) != (c.id,)]
            checks.append(Check(f"{name} per thread", "one per CPU", _differ(v, name, bad) if bad else "same", not bad))
            continue
        bad = [c.id for c in topo.cpus if _cache_list(v, c.id, name) != topo.group_of("core", c.id)]
        actual = _differ(v, name, bad) if bad else "shared by each core's SMT threads"
        checks.append(Check(f"{name} per thread", "one per CPU", actual, False, known="" if bad else per_thread_why(name, plan)))
    if topo.arch == "x86_64" and "dies=" in plan.smp:  # the dies trick is in play: does the guest see dies?
        dies = {c.id: v.cpus[c.id].siblings("die") if c.id in v.cpus else None for c in topo.cpus}
        if any(d is not None for d in dies.values()):
            pkg_bad = [c.id for c in topo.cpus if dies[c.id] != topo.group_of("socket", c.id)]
            llc_like = all(dies[c.id] == topo.group_of("llc", c.id) for c in topo.cpus)
            actual = "one per package" if not pkg_bad else ("one per LLC" if llc_like else f"CPU {pkg_bad[0]}: {_fmt(dies[pkg_bad[0]] or ())}")
            checks.append(Check(
                "dies", "one per package", actual, not pkg_bad,
                known=fake_dies_why(plan) if pkg_bad and llc_like and fake_dies(plan) else "",
            ))
    if topo.split_llc:
        checks.append(Check("LLC crossing nodes", "spans nodes (the capture's cache lists)", "split at node boundaries", False, known=SPLIT_LLC_WHY))
    why = vendor_why(topo, plan)
    if why:
        guest_vendor = v.vendor or "not in the guest's cpuinfo"
        checks.append(Check("CPU vendor", topo.vendor, guest_vendor, False, known=why if guest_vendor == plan.cpu_vendor else ""))
    for name in smt_split(topo, plan):
        if all(_cache_list(v, c.id, name) == topo.group_of("core", c.id) for c in topo.cpus):
            checks.append(Check(f"{name} shared by SMT threads", "shared by each core's threads", "same", True))
            continue
        bad = [c.id for c in topo.cpus if _cache_list(v, c.id, name) != (c.id,)]
        checks.append(Check(
            f"{name} shared by SMT threads", "shared by each core's threads", _differ(v, name, bad) if bad else "one per CPU",
            False, known="" if bad else smt_split_why(name, plan),
        ))
    return checks


def _label(d) -> str:
    return f"{d.name}" + (f" (distance {d.distance})" if d.name == NUMA else "")


def _domain_checks(
    topo: Topology, plan: VmPlan, v: MachineView, cluster_level: bool, guest_llc: str, limits: list[str]
) -> list[Check]:
    """Scheduler domains: the real machine's tree, or, where this guest cannot build it
    (*limits*), the tree it can build, as a named known deviation."""
    fmt = _fmt
    real_cls = topo.has_clusters or topo.arch == "x86_64"
    pkg = pkg_level(v.release)
    ref_real = expected_domains(topo, reclaim_distance=plan.guest_reclaim_distance, cluster_level=real_cls, llc="spec", pkg_name=pkg)
    ref_guest = expected_domains(topo, reclaim_distance=plan.guest_reclaim_distance, cluster_level=cluster_level, llc=guest_llc, pkg_name=pkg)
    c0 = topo.cpus[0].id
    got0 = [d.name for d in v.cpus[c0].domains] if c0 in v.cpus else []
    use_guest = [d.name for d in ref_real[c0]] != got0 and [d.name for d in ref_guest[c0]] == got0
    if use_guest:
        exp = ref_guest
        real = expected_domains(topo, reclaim_distance=topo.node_reclaim_distance, cluster_level=cluster_level, llc=guest_llc, pkg_name=pkg)
    else:
        exp = ref_real
        real = expected_domains(topo, reclaim_distance=topo.node_reclaim_distance, cluster_level=real_cls, llc="spec", pkg_name=pkg)
    names_bad, span_bad, flag_bad, flag_known = _domain_differences(topo, v, exp, real)
    ex0 = exp[c0]
    real_names = " > ".join(d.name for d in ref_real[c0]) + f" (CPU {c0})"
    if names_bad:
        return [Check("sched-domain levels", real_names, f"CPU {names_bad[0][0]}: {' > '.join(names_bad[0][2]) or 'none'}; {len(names_bad)} CPUs differ", False)]
    if use_guest:
        checks = [Check("sched-domain levels", real_names, " > ".join(d.name for d in ex0) + " on every CPU", False, known="; ".join(limits))]
    else:
        checks = [Check("sched-domain levels", real_names, "same on every CPU", True)]
    for d in ex0:
        label = _label(d)
        bad = span_bad.get(label, [])
        checks.append(
            Check(
                f"{label} spans",
                f"CPU {c0}: {fmt(d.span)}",
                "same on every CPU" if not bad else f"CPU {bad[0][0]}: {fmt(bad[0][2])} (want {fmt(bad[0][1])}); {len(bad)} CPUs differ",
                not bad,
            )
        )
        rdom = next(r for r in real[c0] if r.name == d.name and r.distance == d.distance)
        want_flags = " ".join(sorted(f.removeprefix("SD_") for f in set(rdom.flags) & set(KEY_FLAGS)))
        bad = flag_bad.get(label, [])
        known = flag_known.get(label, [])
        if bad:
            actual = f"CPU {bad[0][0]}: {' '.join(sorted(f.removeprefix('SD_') for f in bad[0][2]))}; {len(bad)} CPUs differ"
            checks.append(Check(f"{label} flags", want_flags, actual, False))
        elif known:
            got_flags = " ".join(sorted(f.removeprefix("SD_") for f in known[0][2]))
            why = (
                f"vendor effect: the spec's {topo.vendor} CPU has node_reclaim_distance={topo.node_reclaim_distance}, "
                f"the guest's {plan.cpu_vendor} CPU model gives {plan.guest_reclaim_distance}"
            )
            checks.append(Check(f"{label} flags", want_flags, got_flags, False, known=why))
        else:
            checks.append(Check(f"{label} flags", want_flags, "same on every CPU", True))
    return checks


def _domain_differences(topo: Topology, v: MachineView, exp, real):
    """Every CPU's domains against *exp* (what this guest should build) and *real* (what
    the real machine builds): CPUs whose levels differ, and per level the CPUs whose
    span differs, whose key flags differ from both, and whose flags differ from the
    real machine's only as *exp* predicts (the vendor effect)."""
    names_bad = []
    span_bad: dict[str, list] = {}
    flag_bad: dict[str, list] = {}
    flag_known: dict[str, list] = {}
    for c in topo.cpus:
        want_doms = exp[c.id]
        got_doms = v.cpus[c.id].domains if c.id in v.cpus else []
        wn = [d.name for d in want_doms]
        gn = [d.name for d in got_doms]
        if wn != gn:
            names_bad.append((c.id, wn, gn))
            continue
        for w, g, r in zip(want_doms, got_doms, real[c.id], strict=True):
            label = _label(w)
            if frozenset(g.span) != w.span:
                span_bad.setdefault(label, []).append((c.id, w.span, g.span))
            gk = set(g.flags) & set(KEY_FLAGS)
            wk = set(w.flags) & set(KEY_FLAGS)
            rk = set(r.flags) & set(KEY_FLAGS)
            if gk != rk:
                if gk == wk:
                    flag_known.setdefault(label, []).append((c.id, rk, gk))
                else:
                    flag_bad.setdefault(label, []).append((c.id, wk, gk))
    return names_bad, span_bad, flag_bad, flag_known
