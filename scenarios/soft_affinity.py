"""Seed 004: two hackbench instances, each given one node by affinity, vs none.

Subhra Mazumdar, "[RFC PATCH 0/3] Scheduler Soft Affinity" (2019): consolidated
workloads are partitioned one NUMA node per instance; hard affinity
(sched_setaffinity / cpuset) keeps them there but cannot burst, no affinity lets
them run anywhere "but suffers from cache coherence overhead across sockets".  The
RFC measures 2 hackbench instances on a 2-socket, 22-core-per-socket Xeon with hard
affinity, soft affinity and none ("2*4" .. "2*32" groups).

Here, on a 2-node topology: phase ``hard`` runs two hackbench instances at once,
each under ``taskset -c <the CPUs of one node>``; phase ``none`` runs the same two
without affinity.  sched_migrate_task of the hackbench tasks is classified by
topology level; what hard affinity guarantees is that no hackbench task crossed a
node, and that is the verdict.  Without affinity the cross-node migrations and both
phases' run times (hackbench's "Time:") are reported as figures: a short run under
TCG cannot rank the two the way the RFC's 1% does.

Soft affinity never merged; the kernel ``lab-6.1-soft-affinity`` has lab's minimal form
of it (kernels/patches/sched-soft-affinity.patch: a preferred CPU mask per task, set
through /proc/<pid>/preferred_cpus and inherited at fork, searched first at wakeup and
fork unless the preferred CPUs are busier than the RFC's kernel.sched_allowed:
sched_preferred ratio allows).  On a kernel that has it, two more phases run:

- ``soft``: the two instances at once, each with its node's CPUs as its preferred CPUs
  and every CPU allowed.  The claim: each instance runs mostly on its own node while the
  other node is busy (run time from sched_switch, per instance, per node);
- ``soft1``: instance a alone, the other node idle.  The claim: it bursts out, i.e. a
  real share of its run time is on the other node, which hard affinity forbids.

Both soft phases set the RFC's "softer" ratio, sched_allowed:sched_preferred = 5:4 (its
second table), unless the kernel command line sets them (``--append
'sysctl.kernel.sched_allowed=100 sysctl.kernel.sched_preferred=1'``); the ratio used is a
figure.  At its default 100:1 the wakeup path never spills when the preferred CPUs
are half the allowed ones (their mean utilization can be at most twice the allowed mean),
so a task leaves only when the load balancer pulls it and comes back at its next wakeup.

Which expectations carry seed 004's claim (``claim=True``): "soft affinity, both nodes
busy: each instance runs mostly on its own node" and "soft affinity, other node idle:
the instance bursts out".  The hard-affinity and no-affinity expectations are
preconditions (hard affinity is the cpumask's: it holds on any kernel) and the run times
are figures.  So a kernel without soft affinity cannot PASS: where lab knows the kernel
(Debian's, or one lab built from a recipe: its features and patches are recorded) and it
lacks soft affinity, the run is a SKIP before booting (``soft_affinity_in_kernel``); a
bare image, which lab cannot tell, boots, the guest finds no /proc/<pid>/preferred_cpus,
the soft phases are not run, and the verdict is INCONCLUSIVE naming what is missing (a
claim expectation marked vacuous).
"""

from __future__ import annotations

import re
from collections import Counter

from lab import integrity
from lab.scenario import Expectation, Param, Requirement, Scenario, at_least

PHASES = ("hard", "none")
SOFT_PHASES = ("soft", "soft1")  # on a kernel with soft affinity
# The RFC's "softer" tunables (sched_allowed:sched_preferred), set for the soft phases.
SOFT_RATIO = (5, 4)
# The claims' thresholds: share of an instance's run time on its own node while the
# other is busy, and on the other node when that one is idle.  Measured here (TCG,
# xeon-2s22c-mini, LOOPS 300, lab-6.1-soft-affinity, six runs at 5:4: 6 of 6 PASS in
# bench/results/bench_verdicts-20261125-205546.json, their figures in
# bench/results/figures-soft-affinity-phases-20261126-015004.json): own-node shares
# 0.89-0.99 with soft affinity against 0.36-0.70 without affinity in the same runs; lone
# instance off its node 0.27-0.37.  With the preference switched off (1:1000) the same
# file has 5 of 6 runs FAIL (one PASSed: the threshold does not separate every run); the
# recorded tests/fixtures/runs/soft-affinity-xeon-2s22c-mini-lab-6.1-soft-affinity-preference-off
# has own-node shares 0.65.  The load balancer, which soft affinity leaves alone, moves
# tasks off and the next wakeup brings them back; with 100 loops the runs were too short
# to average that out (design runs, not kept: no threshold told 5:4 from switched off).
# At the RFC's default 100:1 the lone instance stayed on its node far more (design runs,
# not kept): its large 1-instance regression, which its 5:4 table reduces.
SOFT_STAY_MIN = 0.75
SPILL_MIN = 0.2
INSTANCES = ("a", "b")
GROUPS = 2  # the RFC's "2*4" is 2 instances x 4 groups; 2 keeps TCG runs short
FDS = 10  # 20 tasks per group
# hackbench's Time: was 1.7-3.8 s per instance in the two-instance phases under TCG
# (bench/results/figures-soft-affinity-phases-20261126-015004.json): long enough for the
# node shares to settle (see above).
LOOPS = 300
COMM = "hackbench"
TIME = re.compile(r"^Time:\s*([0-9.]+)", re.M)


PATCH = "sched-soft-affinity.patch"  # kernels/patches/: lab's soft affinity
FEATURE = "soft_affinity"  # what kernels/lab-6.1-soft-affinity/recipe.toml declares


def has_soft_affinity(kernel) -> bool | None:
    """Whether *kernel* (a KernelArtifact) has lab's soft affinity, when lab can tell before
    booting: yes if its recipe declares the feature or its build applied the patch
    (unreverted); no for Debian's kernels (the RFC never merged) and for any other kernel
    lab built from a recipe (its features and patches are recorded); None for an image
    file lab did not build (the guest's probe for /proc/<pid>/preferred_cpus decides)."""
    if FEATURE in kernel.features:
        return True
    meta = kernel.metadata if isinstance(kernel.metadata, dict) else {}
    inputs = meta.get("inputs") if isinstance(meta.get("inputs"), dict) else None
    patches = (inputs or {}).get("patches") or []
    if any(isinstance(x, dict) and x.get("name") == PATCH and not x.get("revert") for x in patches):
        return True
    if kernel.id.startswith("debian-") or inputs is not None:
        return False
    return None


soft_affinity_in_kernel = Requirement(
    "soft affinity (/proc/<pid>/preferred_cpus, what seed 004 claims; --kernel lab-6.1-soft-affinity has it)",
    kernel_test=has_soft_affinity,
)


def hb_time(out: str) -> float | None:
    m = TIME.search(out)
    return float(m.group(1)) if m else None


def instance_roots(events) -> dict[int, int]:
    """pid -> the pid of the hackbench instance (the root of its fork tree)."""
    parent: dict[int, int] = {}
    for e in events:
        if e.name == "sched_process_fork" and e.parent_comm == COMM:
            parent[e.child_pid] = e.parent_pid
    roots: dict[int, int] = {}
    for pid in parent:
        r = pid
        while r in parent:
            r = parent[r]
        roots[pid] = r
        roots[r] = r
    return roots


def levels(m) -> dict[str, int]:
    return {f"level_{lv}": n for lv, n in sorted(m.by_level.items())}


def hard_affinity(r, m, times) -> Expectation:
    cross = [x for x in m.items if x.cross_node]
    ran = all(times[f"hard_{i}"] is not None for i in INSTANCES)
    lines = [
        f"{x.ts:.6f}: sched_migrate_task: comm={x.comm} pid={x.pid} orig_cpu={x.src} (node {x.src_node}) "
        f"dest_cpu={x.dst} (node {x.dst_node})"
        for x in cross
    ]
    err = r.step("hard_a").err.strip() or r.step("hard_b").err.strip()
    return Expectation(
        "hard affinity: no cross-node migration of a hackbench task",
        ran and not cross,
        evidence=lines or ([] if ran else [f"hackbench did not report a time: {err}"]),
        figures={"migrations": m.total, "cross_node": len(cross), **levels(m)},
        note=""
        if not cross
        else "a task left its instance's node although its affinity is that node's CPUs",
    )


def no_affinity(r, m, times) -> Expectation:
    cross = [x for x in m.items if x.cross_node]
    roots = instance_roots(r.events("none", only=["sched_process_fork"]))
    by_instance = Counter(roots.get(x.pid, x.pid) for x in cross)
    ran = all(times[f"none_{i}"] is not None for i in INSTANCES)
    return Expectation(
        "no affinity: cross-node migrations counted",
        ran and m.total > 0,
        evidence=[
            f"instance rooted at pid {p}: {n} cross-node migrations"
            for p, n in sorted(by_instance.items())
        ],
        figures={
            "migrations": m.total,
            "cross_node": len(cross),
            "cross_node_share": round(len(cross) / m.total, 3) if m.total else 0.0,
            **levels(m),
        },
        note="" if ran else "an unaffined hackbench instance did not report its time",
    )


def node_shares(r, phase: str, pids: dict[str, int | None]) -> dict[str, dict[int, float]]:
    """instance -> {node: seconds} of all its hackbench tasks in *phase* (from sched_switch),
    an instance's tasks being its hackbench process (pid recorded by the guest) and every
    process forked under it.  With two instances, only while both ran (from the later
    one's first task running to the earlier one's last task stopping): before one starts
    and after it ends its node is idle, and the other may rightly burst out onto it."""
    roots = instance_roots(r.events(phase, only=["sched_process_fork"]))
    res = r.residency(phase, comms=COMM)
    by_root = {pid: i for i, pid in pids.items() if pid is not None}
    node_of = {c.id: c.node for c in r.topo.cpus}
    mine: dict[str, list] = {i: [] for i in pids}
    for t in res.tasks.values():
        inst = by_root.get(roots.get(t.pid, t.pid))
        if inst is not None:
            mine[inst].extend(t.intervals)
    starts = [min(iv.start for iv in ivs) for ivs in mine.values() if ivs]
    ends = [max(iv.end for iv in ivs) for ivs in mine.values() if ivs]
    since, until = (max(starts), min(ends)) if len(ends) > 1 else (float("-inf"), float("inf"))
    out: dict[str, dict[int, float]] = {i: {} for i in pids}
    for inst, ivs in mine.items():
        for iv in ivs:
            secs = min(iv.end, until) - max(iv.start, since)
            if secs > 0:
                node = node_of.get(iv.cpu, -1)
                out[inst][node] = out[inst].get(node, 0.0) + secs
    return out


def share(per_node: dict[int, float], node: int) -> float | None:
    total = sum(per_node.values())
    return round(per_node.get(node, 0.0) / total, 3) if total else None


def soft_stays(shares, nodes, times, none_shares, m) -> Expectation:
    """Phase soft: each instance prefers its node's CPUs and may use all; the other node is
    as busy as its own, so it should run mostly at home.  *m*: the phase's migrations (the
    RFC's third column beside hard and none: cross-node moves happen, as they may)."""
    cross = sum(1 for x in m.items if x.cross_node)
    own = {i: share(shares[i], nodes[i]) for i in INSTANCES}
    none_own = {i: share(none_shares[i], nodes[i]) for i in INSTANCES}
    ran = all(times[f"soft_{i}"] is not None for i in INSTANCES)
    ok = ran and all(v is not None and v >= SOFT_STAY_MIN for v in own.values())
    return Expectation(
        f"soft affinity, both nodes busy: each instance runs mostly on its own node (>= {SOFT_STAY_MIN:.0%} of its run time)",
        ok,
        evidence=[
            f"instance {i} (node {nodes[i]}): {own[i]:.1%} of its run time on its node with soft affinity, "
            f"{none_own[i]:.1%} without affinity"
            if own[i] is not None and none_own[i] is not None
            else f"instance {i}: no run time traced"
            for i in INSTANCES
        ],
        figures={
            **{f"own_node_share_{i}": own[i] for i in INSTANCES},
            **{f"own_node_share_none_{i}": none_own[i] for i in INSTANCES},
            "migrations": m.total,
            "cross_node": cross,
        },
        note="" if ok else (
            "a soft-affine hackbench instance did not report its time" if not ran
            else "an instance ran too much off its preferred node while the other node was busy"
        ),
        claim=True,
    )


def soft_spills(shares, nodes, times) -> Expectation:
    """Phase soft1: instance a alone, preferring its node; the other node is idle, so soft
    affinity should let it burst out (hard affinity cannot)."""
    other = [n for n in shares["a"] if n != nodes["a"]]
    away = sum(shares["a"].get(n, 0.0) for n in other)
    total = sum(shares["a"].values())
    frac = round(away / total, 3) if total else None
    ran = times["soft1_a"] is not None
    ok = ran and frac is not None and frac >= SPILL_MIN
    return Expectation(
        f"soft affinity, other node idle: the instance bursts out (>= {SPILL_MIN:.0%} of its run time off its node)",
        ok,
        evidence=[f"instance a alone (node {nodes['a']}): {frac:.1%} of its run time on other nodes"] if frac is not None
        else ["instance a alone: no run time traced"],
        figures={"other_node_share": frac, "task_run_s": round(total, 3)},
        note="" if ok else (
            "the lone soft-affine hackbench did not report its time" if not ran
            else "the instance stayed on its preferred node although the other node was idle"
        ),
        claim=True,
    )


def run_times(times, accel: str, soft: bool) -> Expectation:
    """The RFC's figures: each instance's run time and the %gain of hard (and soft)
    affinity against none.  Under TCG a guest's time is emulated: six identical runs here
    gave hard affinity's gain from -83 % to +40 %
    (bench/results/figures-soft-affinity-phases-20261126-015004.json), so the gain is
    reported as emulated, never as performance (lab compare over repeated runs says
    whether a difference is significant)."""

    def gain(phase: str) -> float | None:
        t = [times[f"{phase}_{i}"] for i in INSTANCES]
        none_t = [times[f"none_{i}"] for i in INSTANCES]
        if not (all(t) and all(none_t)):
            return None
        # The RFC's "%gain w.r.t. no affinity": positive when the affinity is faster.
        return round(100.0 * (sum(none_t) - sum(t)) / sum(none_t), 2)

    gains = {"gain_hard_vs_none_pct": gain("hard")}
    if soft:
        gains["gain_soft_vs_none_pct"] = gain("soft")
    missing = any(v is None for v in gains.values())
    emulated = accel != "kvm"
    return Expectation(
        "run time of each instance, hard vs none (figures; the RFC's %gain)"
        if not soft
        else "run time of each instance, hard and soft vs none (figures; the RFC's %gain)",
        not missing,
        evidence=[f"{k}: Time {v}" for k, v in times.items()]
        + ([] if soft else ["soft affinity: not in this kernel (lab-6.1-soft-affinity has it): soft phases not run"]),
        figures={
            **{f"time_{k}_s": v for k, v in times.items()},
            **gains,
            "soft_affinity": "ran" if soft else "not in this kernel",
            "time_is": "emulated (TCG): not performance" if emulated else "measured (KVM)",
        },
        note="some hackbench instance printed no 'Time:'"
        if missing
        else "TCG: the times and the gain are emulated, not performance; only repeated runs "
        "(lab compare) can say whether a difference is more than noise"
        if emulated
        else "",
    )


class SoftAffinity(Scenario):
    name = "soft-affinity"
    summary = "two hackbench instances, each affined to one node (hard, soft where the kernel has it) vs unaffined: cross-node migrations, run time per node (seed 004)"
    seed = "004"
    claim = (
        "'soft affinity, both nodes busy: each instance runs mostly on its own node' and 'soft affinity, other "
        "node idle: the instance bursts out': seed 004's soft affinity; a kernel lab knows lacks it is a SKIP "
        "before booting, a bare image without it INCONCLUSIVE, never PASS"
    )
    kernel_scheduler = (
        "soft affinity is select_task_rq_fair()'s reading of preferred_cpus; "
        "a BPF scheduler's ops.select_cpu does not read it"
    )
    topologies = ["xeon-2s22c-mini"]
    requires = [at_least("nodes", 2), soft_affinity_in_kernel]
    events = ["sched:sched_migrate_task", "sched:sched_process_fork", "sched:sched_switch"]
    filters = {
        "sched_migrate_task": f'comm == "{COMM}"',
        "sched_process_fork": f'parent_comm == "{COMM}"',
        "sched_switch": f'prev_comm == "{COMM}" || next_comm == "{COMM}"',
    }
    tools = ["hackbench"]
    workloads = False
    buffer_kb = 8192
    timeout = 600
    # -p groups=N -p loops=N: hackbench's size per instance and phase (the defaults are
    # the measured ones above; the verdict thresholds were measured at them).
    params = [
        Param("groups", GROUPS, "hackbench groups per instance (20 tasks each)", min=1, max=16),
        Param("loops", LOOPS, "hackbench loops per phase", min=10, max=100000),
    ]

    def steps(self, topo):
        hb = f"hackbench -g {self.p['groups']} -f {FDS} -l {self.p['loops']}"
        # soft CPUS PIDFILE: run hackbench with CPUS as its preferred CPUs (the shell sets
        # its own /proc/self/preferred_cpus, then becomes hackbench), recording its pid.
        soft = f"""sh -c 'echo $$ > "$1"; echo "$0" > /proc/self/preferred_cpus && exec {hb}'"""
        allowed, preferred = SOFT_RATIO
        return f"""
set -- $(labsel nodes | tr , ' ')
NODE_A=$1
NODE_B=$2
CPUS_A=$(labsel node "$NODE_A")
CPUS_B=$(labsel node "$NODE_B")
echo "$NODE_A $CPUS_A" > instance_a
echo "$NODE_B $CPUS_B" > instance_b
# Untraced warm-up: the first run in a fresh TCG guest also pays for translating
# hackbench's code, which would be charged to whichever phase comes first.
hackbench -g 1 -f 4 -l 20 > warmup.out 2>&1
# sched_switch (run time per node) only where the soft verdicts read it: the soft phases
# and none, which they are compared with.
echo 0 > $LAB_TRACEFS/events/sched/sched_switch/enable
lab_trace_on hard
lab_run hard_a taskset -c "$CPUS_A" {hb} &
lab_run hard_b taskset -c "$CPUS_B" {hb} &
wait
lab_trace_off hard
if [ -w /proc/self/preferred_cpus ]; then
    echo yes > soft_affinity
    echo 1 > $LAB_TRACEFS/events/sched/sched_switch/enable
    # The RFC's softer ratio, unless the kernel command line chose one
    # (lab run --append 'sysctl.kernel.sched_allowed=100 sysctl.kernel.sched_preferred=1').
    grep -q 'sysctl.kernel.sched_allowed=' /proc/cmdline || lab_sysctl /proc/sys/kernel/sched_allowed {allowed}
    grep -q 'sysctl.kernel.sched_preferred=' /proc/cmdline || lab_sysctl /proc/sys/kernel/sched_preferred {preferred}
    echo "$(cat /proc/sys/kernel/sched_allowed):$(cat /proc/sys/kernel/sched_preferred)" > soft_ratio
    lab_trace_on soft
    lab_run soft_a {soft} "$CPUS_A" soft_a.pid &
    lab_run soft_b {soft} "$CPUS_B" soft_b.pid &
    wait
    lab_trace_off soft
fi
lab_trace_on none
lab_run none_a sh -c 'echo $$ > none_a.pid; exec {hb}' &
lab_run none_b sh -c 'echo $$ > none_b.pid; exec {hb}' &
wait
lab_trace_off none
if [ -w /proc/self/preferred_cpus ]; then
    lab_trace_on soft1
    lab_run soft1_a {soft} "$CPUS_A" soft1_a.pid
    lab_trace_off soft1
fi
"""

    def check(self, r):
        # written only where the kernel has soft affinity (the job's probe)
        soft = r.text("soft_affinity", optional=True).strip() == "yes"
        phases = PHASES + (SOFT_PHASES if soft else ())
        times = {
            f"{ph}_{i}": hb_time(r.step(f"{ph}_{i}").out)
            for ph in phases
            for i in INSTANCES
            if not (ph == "soft1" and i == "b")
        }
        hard, none = (r.migrations(ph, comms=COMM, keep=True) for ph in PHASES)
        out = [hard_affinity(r, hard, times), no_affinity(r, none, times)]
        if soft:
            nodes = {i: r.node(int(r.text(f"instance_{i}").split()[0])) for i in INSTANCES}

            def pids(phase: str, insts=INSTANCES) -> dict[str, int | None]:
                return {i: integrity.count(r.text(f"{phase}_{i}.pid").strip()) for i in insts}

            none_shares = node_shares(r, "none", pids("none"))
            soft_m = r.migrations("soft", comms=COMM, keep=True)
            out.append(soft_stays(node_shares(r, "soft", pids("soft")), nodes, times, none_shares, soft_m))
            out.append(soft_spills(node_shares(r, "soft1", pids("soft1", ("a",))), nodes, times))
        else:
            # Seed 004's claim is soft affinity; without it nothing here can carry the claim:
            # hard affinity is the cpumask's, the unaffined migrations are counted, not judged.
            out.append(
                Expectation(
                    "soft affinity (the seed's claim)",
                    True,
                    claim=True,
                    vacuous="the kernel has no soft affinity (no /proc/<pid>/preferred_cpus; lab-6.1-soft-affinity has it)",
                )
            )
        rt = run_times(times, getattr(r.plan, "accel", ""), soft)
        if soft:
            ratio = r.text("soft_ratio").strip()
            for e in out[2:] + [rt]:
                e.figures["sched_allowed:sched_preferred"] = ratio
        out.append(rt)
        return out
