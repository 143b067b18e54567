"""Seed 000: threads pinned to one CPU in every other LLC must spread across sockets at fork.

K Prateek Nayak, "sched/fair: Consider CPU affinity when allowing NUMA imbalance in
find_idlest_group()" (merged for 5.19): with 8 stream threads pinned one per LLC on a
2-socket Zen3 (numactl -C 0,16,...,112), threads 5-8 piled onto socket 0's CPUs because
the NUMA imbalance allowance (imb_numa_nr = LLCs per socket) ignored that only 4 CPUs
of the socket were allowed.  Here: on a topology with L LLCs per socket, pin one CPU in
every other LLC, start as many threads as pinned CPUs, and look at sched_wakeup_new.

What is judged is the seed's claim, and nothing stricter: fork placement puts one thread
on each allowed CPU, split between the sockets as the allowed CPUs are, so the balancer
has nothing to correct.  "No worker migrates" is judged while every worker still runs,
up to the first worker's exit: each thread runs a fixed time from its own start, and
once one finishes its CPU idles and pulling a waiting task there (a kworker shared a
worker's CPU) is the balancer doing its job, not a sign of a bad placement.  Later
migrations are reported as a figure.  So are migrations that only shuffle an even
placement (one worker per allowed CPU after the last fork and again at the first exit):
on a busy host a stalled vCPU and a kworker make idle balancing rotate workers between
their CPUs, which corrects nothing the fork did (churn_only()).

The threads are the seed's: its OpenMP master is one of its N threads and forks the
other N-1, so ``stream --main-works`` runs thread 0 on the main thread after it creates
threads 1..N-1, and N threads occupy the N pinned CPUs.  Until issue 31 lab's stream forked
N workers from a main thread that only forked and joined, pinned to the same N CPUs: the
N-th fork had no free CPU, a tie the fix has no part in, and an exception
(forced_last_fork) excused it, widening the split to one thread either way.  The harness
is fixed instead and the exception is gone.  It could not be fixed by keeping the main
thread off the pinned CPUs: a thread's affinity at clone() is its creator's, and fork
placement (select_task_rq() in wake_up_new_task()) chooses within it, so a creator
outside the set would place the workers outside it, and narrowing their mask afterwards
is a migration, not the fork placement the seed is about.  Here the main thread's own
place is where exec put it (taskset's mask); it counts among the threads for pile-ups,
the split and migrations.  Runs recorded before --main-works (no "main_works" in
stream.out: N forks, the main thread not a worker) are judged by the same rules.

Which expectations carry seed 000's claim (``claim=True``): "targets distinct (no
pile-up)" and "even split between sockets" (on the Ice Lake shape the split alone).
"No balancing needed after the fork" is judged as well (a FAIL there fails the run) but
is the post's observation on the Zen3, not what a PASS stands on; the wakeup count and
the targets inside the allowed CPUs are preconditions.  When the guest's CPU model keeps
fork balancing on one socket (the vendor effect) the claim cannot be judged: the
verdict is INCONCLUSIVE, but only when the run proves that cause (cause()).

One verdict is the majority of up to 3 runs (verdict_runs): measured with
bench/bench_verdicts.py before issue 31 (old harness, with the exception; the result
files were not committed, so no count of theirs is quoted), single runs on lab-6.1
mostly passed and the outliers were fork placements that tie-break on a guest kernel
thread counted busy at the instant of a fork (find_idlest_group() compares the sockets'
idle CPUs), which a second run does not repeat; the reverted kernel failed every run.
With --main-works and no exception (SINGLE_RUN_RATES below, each with its committed
result file), 20 single runs each on zen3-2s-mini: lab-6.1 19 PASS, the reverted fix 20
FAIL (the recorded tests/fixtures/runs/llc-spread-pinned-zen3-2s-mini-lab-6.1-no-affinity-imbalance-main-works:
all 4 threads on the parent's socket), Debian's 6.1 17 PASS; each FAIL on a kernel with
the fix failed the same three expectations (the files' outliers), and the recorded one
(tests/fixtures/runs/llc-spread-pinned-zen3-2s-mini-debian-main-works-outlier) is a fork
onto the forking thread's own CPU while the other socket had one free (what such a tie
would give; the kernel thread was not traced, so that cause is not proven).  On
icelake-2s-mini, 27 runs each: lab-6.1 17 PASS, the revert 21 PASS, each FAIL the split
alone: not stable enough to rest a verdict on (see SINGLE_RUN_RATES), until version 3's
gate (below).

The seed's second machine, a 2-socket Ice Lake with one LLC per socket and even CPUs on
node 0, odd on node 1, ran 16 threads pinned with `numactl -C 0-15`: a set that spans
both sockets, 8 CPUs each.  On a machine with one LLC per socket and socket-interleaved
numbering (icelake-2s-mini) the scenario pins that set, spec CPUs 0-15, and judges the
same claims.  There the fix's mechanism does not apply: with one LLC per socket
build_sched_domains() sets the NUMA domain's imb_numa_nr to an eighth of the socket's
CPUs (64 >> 3 = 8 on the real machine, 16 >> 3 = 2 on the mini), not above the 8 CPUs
each socket allows, so the fix's min(allowed CPUs in the local socket, imb_numa_nr)
changes nothing and 6.1 with and without it place the threads alike.  The post claims no
sched_migrate_task only for the Zen3 (its trace); on the Ice Lake it reports throughput
alone, so there the workers' migrations while all run, and pile-ups, are figures, and
the split (8 per socket, exactly, now that 16 threads occupy the 16 CPUs) is the claim.

The gate (version 3).  The full mini matrix of
bench/results/bench_matrix-20261126-205643.json FAILed the Ice Lake shape on Debian's 6.1,
2 runs of 2, "even split between sockets" 9/7, with forks piled 2 and 3 deep on single
CPUs (run directories not kept: in one, 3 of the 15 forks onto one CPU).  A fork lands on
a CPU that already has a worker only when that CPU looks idle, so the worker placed
there earlier was not running.  Until version 3 each worker malloc()ed and first-touched
its 3 x 8 MiB as soon as it started, while the main thread went on creating the others;
page faults and mmap() wait on the process's mm lock, which every pthread_create() takes
to map the next thread's stack, so a new worker can sleep and leave its CPU idle for the
next fork to choose (read from the code: sched_switch is not traced, so the sleeps
themselves were not seen).  Under TCG the 15 forks take about a second, so the window is
wide; on the real machine forks take microseconds, and the seed's OpenMP threads, whose
arrays exist before the team does, spin at the team's first barrier.  ``stream --gate``
does that: each worker spins (pause on x86, yield on arm64: runnable all the while, and
under TCG's round-robin each pause hands the host thread on to the next vCPU) until the
last pthread_create(), and only then allocates.  Nothing in check() changed.  Measured
(GATE_RATES below, single runs, nothing else running, 5 at a time with and without the
gate alternating): icelake-2s-mini on Debian's 6.1, 6 of 10 PASS with ``-p gate=false``
(each FAIL the split alone), 10 of 10 with the gate; zen3-2s-mini on Debian's 6.1, 10 of
10 with the gate (17 of 20 in version 2).  With lab's kernels, 10 runs each: zen3-2s-mini
lab-6.1 10 PASS (19 of 20 in version 2) and the reverted fix 10 FAIL, the known-bad side
as before; icelake-2s-mini lab-6.1 10 PASS and the revert 10 PASS (17 and 21 of 27 in
version 2, at a higher load).  So the Ice Lake shape's split, "not stable under TCG" in
version 2 (SINGLE_RUN_RATES), was lab's harness, not the emulation: its verdict stands.
"""

import re
from collections import Counter

from lab.analysis import count_by_group
from lab.scenario import Expectation, Param, Requirement, Scenario, at_least
from lab.topology import AMD_ZEN_RECLAIM_DISTANCE, RECLAIM_DISTANCE

COMM = "stream"
ICELAKE_PIN = "0-15"  # seed 000: `numactl -C 0-15 ./stream16` on the Ice Lake
# Each stream thread runs this long from its own start.  Placement is judged while every
# worker runs, so the last must be forked before the first ends: 4 threads fork quickly
# under TCG, but 16 took longer than 2 s (Debian 6.1 in a matrix; run not kept), which
# left the first workers gone before the last fork; the Ice Lake's 16 run 8 s.
SECONDS = 2
ICELAKE_SECONDS = 8
# Single-run rates with stream --main-works and no exception (issue 31), as measured with
# bench/bench_verdicts.py on the 2-core host, other engineers' guests and builds running
# (1-minute load 2.6-81 at the start of a series): (topology, kernel) -> one (runs as
# expected, runs, expected verdict, committed result file) per measurement.  A test checks each against its file.
RESULTS = "bench/results/bench_verdicts-20261125-"
SINGLE_RUN_RATES: dict[tuple[str, str], tuple[tuple[int, int, str, str], ...]] = {
    # 20 runs each: lab-6.1 19 PASS, the revert 20 FAIL, Debian's 6.1 17 PASS.  Every FAIL on
    # a kernel with the fix failed the same three expectations (the files' outliers); the
    # recorded one: of the 3 forks, one onto the forking thread's own CPU while the other
    # socket had an allowed CPU free (tests: the recorded outlier).
    ("zen3-2s-mini", "lab-6.1"): (
        (5, 5, "PASS", RESULTS + "195259.json"), (5, 5, "PASS", RESULTS + "200803.json"), (9, 10, "PASS", RESULTS + "201316.json"),
    ),
    ("zen3-2s-mini", "lab-6.1-no-affinity-imbalance"): (
        (5, 5, "FAIL", RESULTS + "195808.json"), (5, 5, "FAIL", RESULTS + "200803.json"), (10, 10, "FAIL", RESULTS + "201316.json"),
    ),
    ("zen3-2s-mini", "debian"): (
        (4, 5, "PASS", RESULTS + "194215.json"), (5, 5, "PASS", RESULTS + "200803.json"), (8, 10, "PASS", RESULTS + "201316.json"),
    ),
    # 7 runs each: lab-6.1 4 PASS, the revert 5 PASS; each FAIL failed "even split between
    # sockets" alone (the files' outliers).  In the FAILs looked at (run directories not
    # kept) the split was one thread off at the last fork, with pile-ups and migrations
    # while 16 forks take seconds under TCG.  The ±1 that once excused that was the
    # 17-tasks-on-16-CPUs artefact's, so it stays gone: the Ice Lake shape's verdict was not
    # stable in version 2 (issue 31; version 3's gate made it so: GATE_RATES).  In those runs the balancer had corrected the
    # split by the first worker's exit (the post claims no migration-free run there):
    # judging the Ice Lake split then, not at the last fork, is a candidate, not adopted
    # without its own measurement.  20 more each (issue 31 item 2, 1-minute load 4.5-7.8):
    # lab-6.1 13 PASS, the revert 16 PASS, every FAIL again the split alone.  Together:
    # lab-6.1 17 of 27, the revert 21 of 27.  A by-hand series with sched_switch and
    # sched_wakeup traced (not kept) caught no FAIL to look at, so what occupies the free
    # CPU of the other socket at the last fork is not yet seen (version 3's reading: a fork
    # onto a CPU whose worker slept on the mm lock, the module docstring's "The gate").
    ("icelake-2s-mini", "lab-6.1"): (
        (2, 3, "PASS", RESULTS + "200053.json"), (2, 4, "PASS", RESULTS + "201950.json"),
        (13, 20, "PASS", RESULTS + "224929.json"),
    ),
    ("icelake-2s-mini", "lab-6.1-no-affinity-imbalance"): (
        (2, 3, "PASS", RESULTS + "200053.json"), (3, 4, "PASS", RESULTS + "201950.json"),
        (16, 20, "PASS", RESULTS + "225915.json"),
    ),
}


# Version 3's single-run rates (stream --gate; the module docstring, "The gate"), measured
# the same way with nothing else running (1-minute load 1.0-2.2 at the start of a series), 5 runs
# at a time with and without the gate alternating where both are given: (topology,
# kernel, gate) -> one (runs as expected, runs, expected verdict, committed result file)
# per measurement.  A test checks each against its file (gate=False: the row run with
# `-p gate=false`).
GATED = "bench/results/bench_verdicts-20261126-"
GATE_RATES: dict[tuple[str, str, bool], tuple[tuple[int, int, str, str], ...]] = {
    ("icelake-2s-mini", "debian", False): ((3, 5, "PASS", GATED + "205646.json"), (3, 5, "PASS", GATED + "210013.json")),
    ("icelake-2s-mini", "debian", True): ((5, 5, "PASS", GATED + "205842.json"), (5, 5, "PASS", GATED + "210155.json")),
    ("zen3-2s-mini", "debian", True): ((10, 10, "PASS", GATED + "210323.json"),),
    ("zen3-2s-mini", "lab-6.1", True): ((10, 10, "PASS", GATED + "211635.json"),),
    ("zen3-2s-mini", "lab-6.1-no-affinity-imbalance", True): ((10, 10, "FAIL", GATED + "211635.json"),),
    ("icelake-2s-mini", "lab-6.1", True): ((10, 10, "PASS", GATED + "211635.json"),),
    ("icelake-2s-mini", "lab-6.1-no-affinity-imbalance", True): ((10, 10, "PASS", GATED + "211635.json"),),
}


def icelake_shape(t) -> bool:
    """One LLC per socket, sockets interleaved in the numbering: the seed's Ice Lake."""
    return t.shape is not None and t.shape.llcs_per_socket == 1 and t.numbering == "socket-interleaved" and t.n_cpus >= 16


pinnable = Requirement(
    "at least 2 LLCs per socket, or one per socket with the sockets interleaved (the seed's Ice Lake)",
    lambda t: (t.shape is not None and t.shape.llcs_per_socket >= 2) or icelake_shape(t),
)


def early_migrations(r, workers, migs):
    """The workers' migrations before the first worker exits (the judged ones), and the
    number after it."""
    exits = [p.exit_ts for p in r.task_paths(pids=workers).values() if p.exit_ts is not None]
    first_exit = min(exits, default=float("inf"))
    early = [m for m in migs if m.ts < first_exit]
    return early, len(migs) - len(early)


def even_placement(paths, allowed, t) -> bool:
    """One worker on each allowed CPU at time *t*."""
    return Counter(c for c in (where(p, t) for p in paths.values()) if c is not None) == Counter(allowed)


def churn_only(paths, allowed, news, early) -> bool:
    """Whether the workers' early migrations only moved an even placement around: the
    fork left one worker on each allowed CPU and so it was again when the first worker
    finished.  The balancer then corrected nothing the fork did; it swapped workers
    between CPUs that each kept one (seen under TCG on a busy host: a worker's vCPU
    stalls, a kworker runs beside another worker, and idle balancing rotates three of
    them within 60 ms)."""
    if not early or not news:
        return False
    last_fork = max(x.ts for x in news)
    return even_placement(paths, allowed, last_fork) and even_placement(paths, allowed, end_of_judged(paths))


def where(path, t):
    """The CPU a worker is on at time *t* (its fork target, then each migration), None
    before its fork or after its exit."""
    cpu = None
    for ts, c in path.path:
        if ts > t:
            break
        cpu = c
    return None if path.exit_ts is not None and path.exit_ts <= t else cpu


def pileups_on_busy_cpus(news, paths):
    """The forks whose target CPU another worker was on at that instant (seed 000's
    pile-up).  A target repeated after its first worker moved away is no pile-up: under
    TCG the forks are tens of milliseconds apart, long enough for the balancer to move a
    worker between two of them, where on the real machine they are microseconds apart."""
    return [
        x for x in news
        if any(p != x.pid and where(path, x.ts) == x.target_cpu for p, path in paths.items())
    ]  # fmt: skip


def main_worker(r, news):
    """The main thread's pid when it is one of the threads (stream --main-works, as the
    seed's OpenMP master): the one task that forked the workers; None for a run recorded
    before --main-works, whose main thread only forked and joined."""
    if r.step("stream").json.get("main_works") is not True:
        return None
    forkers = {x.waker_pid for x in news}
    return next(iter(forkers)) if len(forkers) == 1 else None


def end_of_judged(paths):
    """Just before the first worker's exit (the end of what the no-migration claim judges)."""
    exits = [p.exit_ts for p in paths.values() if p.exit_ts is not None]
    return min(exits) - 1e-9 if exits else max(p.path[-1][0] for p in paths.values() if p.path)


def socket_split(r, threads, allowed, migs, cause, paths, news):
    """Where the *threads* (forked workers and, with --main-works, the main thread) are per
    socket once the last one is forked, against the allowed CPUs per socket, exactly; and
    how long after the first fork the workers stopped moving."""
    last_fork = max((x.ts for x in news), default=0.0)
    placed = [c for c in (where(p, last_fork) for p in paths.values()) if c is not None]
    per_socket = count_by_group(r.topo, placed, "socket")
    allowed_per_socket = {s: n for s, n in count_by_group(r.topo, allowed, "socket").items() if n}
    split = {f"socket{s}": per_socket.get(s, 0) for s in allowed_per_socket}
    even = threads == len(allowed) == len(placed) and all(per_socket.get(s, 0) == n for s, n in allowed_per_socket.items())
    first_ts = news[0].ts if news else 0.0
    last_mig = max((m.ts for m in migs), default=first_ts)
    return Expectation(
        "even split between sockets",
        even,
        evidence=[] if even else [f"workers per socket after the last fork {split}, allowed per socket {allowed_per_socket}"],
        figures={**split, "migrations": len(migs), "stable_after_s": round(last_mig - first_ts, 3)},
        note="" if even else (
            f"after the last fork the threads were split {'/'.join(str(v) for v in split.values())} between the "
            f"sockets, where {'/'.join(str(n) for n in allowed_per_socket.values())} CPUs were allowed"
            if threads == len(allowed) == len(placed) else
            f"{len(placed)} threads placed for {len(allowed)} allowed CPUs ({threads} threads)"
        ),
        inconclusive="" if even else cause,
        claim=True,
    )


# What sd_init() drops from a NUMA domain farther than node_reclaim_distance, together.
RECLAIM_SENSITIVE = ("SD_BALANCE_FORK", "SD_BALANCE_EXEC", "SD_WAKE_AFFINE")
# QEMU's AMD models whose family is 17h or later (EPYC: 17h Naples, -Rome 17h, -Milan and
# -Genoa 19h); Opteron_G1-G5 and phenom are earlier families, which keep 30.
AMD_ZEN_MODELS = re.compile(r"EPYC", re.I)


def vendor_reclaim_distance(plan, view):
    """The node_reclaim_distance the guest kernel sets itself for the CPU it reports, and
    that CPU in words; (None, why) when the run cannot tell.  AMD family 17h+ kernels set
    32 (init_amd_zen_common(), arch/x86/kernel/cpu/amd.c), every other x86 keeps the
    default RECLAIM_DISTANCE, 30.  The guest's /proc/cpuinfo decides when the snapshot has
    it; else the plan's CPU model (what QEMU was told to emulate)."""
    if plan.arch != "x86_64":
        return None, f"a {plan.arch} guest (the reclaim distance is x86's vendor effect)"
    model = plan.cpu_model.split(",")[0]
    vendor = view.vendor if view is not None and view.vendor else plan.cpu_vendor
    if vendor != plan.cpu_vendor:
        return None, f"the guest reports a {vendor} CPU, the plan a {plan.cpu_vendor} model ({model})"
    if vendor != "amd":
        return RECLAIM_DISTANCE, f"the {vendor} CPU model ({model})"
    family = view.family if view is not None and view.family is not None else None
    if family is None:
        if model == "host":
            return None, "the host's AMD CPU, of a family the guest snapshot does not record"
        family = 0x17 if AMD_ZEN_MODELS.search(model) else 0x10
    zen = family >= 0x17
    return (AMD_ZEN_RECLAIM_DISTANCE if zen else RECLAIM_DISTANCE), f"the AMD family {family:#x} CPU model ({model})"


def domain_distance(topo, cpu, span):
    """The NUMA distance a sched domain of *cpu* covers: the farthest node it spans, by the
    spec's distances (10 for a domain inside the CPU's node)."""
    row = topo.distances[topo.node_ids.index(topo.cpu(cpu).node)]
    spanned = {topo.cpu(c).node for c in span}
    return max(row[topo.node_ids.index(n)] for n in spanned)


def proven_vendor_effect(r):
    """The sentence naming the vendor effect, if every link of it holds in this run, else "".

    sd_init() drops SD_BALANCE_FORK, SD_BALANCE_EXEC and SD_WAKE_AFFINE from a NUMA
    domain whose distance is above node_reclaim_distance: on a 10/32 AMD Zen the real
    kernel (32) fork-balances across sockets, a guest under an Intel CPU model (30) cannot,
    whatever its scheduler.  That excuses a pile-up only when (1) the guest's reclaim
    distance is below the first cross-socket domain's distance while the real machine's
    is not; (2) it is the one the CPU model the guest reports sets by itself (no
    node_reclaim_distance= on the guest's command line, the plan and the guest's CPU
    agree); (3) the guest's domains, on every CPU the snapshot shows, lack those three
    flags exactly where that distance predicts (NUMA domains beyond it) and have them
    everywhere else; (4) the guest's node distances are the spec's.  A kernel that drops
    SD_BALANCE_FORK on its own fails (1), (2) or (3): its pile-up is a FAIL."""
    view, plan, topo = r.guest_view, r.plan, r.topo
    if view is None or not view.cpus:
        return ""
    guest = plan.guest_reclaim_distance
    cmdline = view.cmdline if view.cmdline is not None else " ".join(plan.cmdline_extra)
    if "node_reclaim_distance=" in cmdline:
        return ""  # set on the command line: not the vendor's default
    own, cpu_words = vendor_reclaim_distance(plan, view)
    if own is None or own != guest:
        return ""
    n2s = plan.guest_node_to_spec
    for gn, row in view.distances.items():
        sn = n2s[gn] if gn < len(n2s) else gn
        if sn not in topo.node_ids or len(row) != topo.n_nodes:
            return ""
        spec_row = topo.distances[topo.node_ids.index(sn)]
        if any(row[j] != spec_row[topo.node_ids.index(n2s[j] if j < len(n2s) else j)] for j in range(len(row))):
            return ""
    cpu0 = topo.cpu_ids[0]
    if cpu0 not in view.cpus:
        return ""
    socket0 = set(topo.group_of("socket", cpu0))
    first = next((d for d in view.cpus[cpu0].domains if not set(d.span) <= socket0), None)
    if first is None:
        return ""
    dist = domain_distance(topo, cpu0, first.span)
    if not guest < dist <= topo.node_reclaim_distance:
        return ""
    for c, cv in view.cpus.items():
        for d in cv.domains:
            if not d.span or any(x not in topo.cpu_ids for x in d.span):
                return ""
            beyond = domain_distance(topo, c, d.span) > guest
            have = [f for f in RECLAIM_SENSITIVE if f in d.flags]
            if (beyond and have) or (not beyond and len(have) != len(RECLAIM_SENSITIVE)):
                return ""
    return (
        f"the guest's first domain spanning sockets ({first.name}, {len(first.span)} CPUs, distance {dist}) has no "
        f"SD_BALANCE_FORK: the guest kernel's node_reclaim_distance is {guest} (what {cpu_words} sets) "
        f"and the distance is {dist}, so fork placement never leaves the parent's socket whatever the kernel; "
        f"the real {topo.vendor} machine uses {topo.node_reclaim_distance}, and the guest's domains lack "
        f"{'/'.join(RECLAIM_SENSITIVE)} exactly beyond distance {guest}. Boot a lab-built kernel "
        f"(--kernel lab-6.1) to pass node_reclaim_distance={topo.node_reclaim_distance}"
    )


# Why the claims are the kernel's own scheduler's, not any scheduler's (under --scheduler a
# BPF scheduler places the threads: these are then INCONCLUSIVE, their figures shown).
FORK_PLACEMENT = "fork placement is select_task_rq_fair()'s (SD_BALANCE_FORK); a BPF scheduler's ops.select_cpu decides instead"
LOAD_BALANCE = "a correcting migration is the fair class's load balance (load_balance()); a BPF scheduler moves tasks by its own dispatch"


class LlcSpreadPinned(Scenario):
    name = "llc-spread-pinned"
    summary = "stream threads pinned one per every-other LLC: fork placement must use both sockets (seed 000)"
    seed = "000"
    # 2: stream --main-works (no thread of lab's own on the workers' CPUs), no forced-last-fork excuse
    # 3: stream --gate (workers stay runnable until the last fork; module docstring, "The gate")
    version = 3
    topologies = ["zen3-2s-mini", "epyc7551-8n-mini", "icelake-2s-mini"]
    requires = [at_least("sockets", 2), pinnable]
    events = ["sched:sched_wakeup_new", "sched:sched_migrate_task", "sched:sched_process_fork", "sched:sched_process_exit"]
    workloads = True
    verdict_runs = 3  # see the module docstring: why, and the measured single-run rates
    claim = (
        "'targets distinct (no pile-up)' and 'even split between sockets': seed 000's claim that fork "
        "placement spreads threads pinned across both sockets' LLCs (on the Ice Lake shape, the split alone)"
    )
    # Under --scheduler the claims are INCONCLUSIVE with their figures (lab.scenario.under_scheduler).
    kernel_scheduler = FORK_PLACEMENT
    params = [
        Param("gate", True, "workers spin, runnable, until the last fork, then allocate (false: version 2's harness, for comparison)"),
    ]

    def steps(self, topo):
        # The guest's ids of what is pinned: one CPU of every other LLC, or the Ice Lake's 0-15.
        # --main-works: the main thread is one of the N threads (module docstring).
        ice = icelake_shape(topo)
        pick = f"labcpu {ICELAKE_PIN}" if ice else "labsel llc-firsts every=2"
        secs = ICELAKE_SECONDS if ice else SECONDS
        gate = " --gate" if self.p["gate"] else ""
        return f"""
CPUS=$({pick}) || exit 1
N=$(labsel count "$CPUS")
echo "$CPUS" > allowed
lab_trace_on
lab_run stream taskset -c "$CPUS" stream --main-works{gate} -t "$N" -s {secs}
lab_trace_off
"""

    def allowed_cpus(self, r, phase):
        # `taskset -c "$CPUS" stream`: every thread named stream may run only on the CPUs
        # the job wrote (the affinity check every run gets; not part of the verdict).
        cpus = r.allowed("allowed")
        return {COMM: cpus} if cpus else None

    def check(self, r):
        allowed = r.allowed("allowed")
        w = r.wakeups(comms=COMM, kinds=["sched_wakeup_new"])
        news, targets, outside = w.wakeups, w.targets(), w.outside(allowed)
        main = main_worker(r, news)
        # The threads placed on the pinned CPUs: the forked workers, and the main thread when
        # it is thread 0 (--main-works).  A run recorded before --main-works had N forked
        # workers and a main thread that only forked and joined: it is judged by the same
        # rules, so its last fork, which had no free CPU, counts as any other (tests say which
        # recorded runs that changes).
        workers = {x.pid for x in news} | ({main} if main is not None else set())
        threads = len(workers)
        paths = r.task_paths(pids=workers)
        piled = pileups_on_busy_cpus(news, paths)
        migs = [m for m in r.migrations(comms=COMM, keep=True).items if m.pid in workers]
        early, late = early_migrations(r, workers, migs)
        cause = self.cause(r)
        churn = churn_only(paths, allowed, news, early)
        last_fork = max((x.ts for x in news), default=0.0)
        main_cpu = where(paths[main], last_fork) if main is not None and main in paths else None
        main_outside = main is not None and main_cpu not in allowed
        no_balancing = Expectation(
            "no balancing needed after the fork (no worker migrates to correct it before one finishes)",
            not early or churn,
            evidence=[f"{m.ts:.6f}: sched_migrate_task: pid={m.pid} orig_cpu={m.src} dest_cpu={m.dst}" for m in early],
            figures={"migrations": len(early), "after_first_exit": late, "churn_of_an_even_placement": churn},
            note=f"the {len(early)} migrations moved workers between allowed CPUs that each had one worker after the "
            "last fork and again when the first worker finished: the balancer shuffled an even placement, it "
            "corrected nothing the fork did"
            if churn
            else (
                f"{len(early)} migration{'s' if len(early) != 1 else ''} of workers while every worker still ran: the "
                "balancer corrected the fork's placement"
                if early
                else ""
            ),
            inconclusive=cause if early and not churn else "",
            kernel_scheduler=LOAD_BALANCE,
        )
        ice = icelake_shape(r.topo)
        split = socket_split(r, threads, allowed, migs, cause, paths, news)
        if ice:  # the post claims the split there (module docstring): the rest are figures
            split.figures.update({"piled": len(piled), "migrations_before_first_exit": len(early), "after_first_exit": late})
        distinct = Expectation(
            "targets distinct (no pile-up)",
            not piled and bool(news),
            evidence=[x.line() + " (a worker is on that CPU)" for x in piled],
            note="" if not piled and news else (
                f"{len(piled)} fork{'s' if len(piled) != 1 else ''} placed a worker on a CPU another worker already ran on"
                if piled
                else "no sched_wakeup_new of a worker in the trace"
            ),
            figures={"targets": ",".join(map(str, targets)), "distinct": len(set(targets)), "piled": len(piled),
                     "main_thread_cpu": main_cpu},  # fmt: skip
            # the vendor effect: the guest's CPU model, not the kernel, decided the pile-up
            inconclusive="" if not piled and news else cause,
            claim=True,
        )
        forks = len(allowed) - (1 if main is not None else 0)
        return [
            Expectation(
                "a sched_wakeup_new per thread",  # but the main thread, with --main-works (figure main_works)
                len(news) == forks and threads == len(allowed),
                evidence=[] if len(news) == forks else [f"{len(news)} sched_wakeup_new for {forks} forked threads"],
                figures={"threads": len(allowed), "wakeup_new": len(news), "allowed": ",".join(map(str, allowed)),
                         "main_works": main is not None},  # fmt: skip
            ),
            Expectation(
                "every target inside the allowed CPUs",
                not outside and not main_outside and bool(news),
                evidence=[x.line() for x in outside] + ([f"the main thread (thread 0) on CPU {main_cpu}"] if main_outside else []),
                figures={"outside": len(outside) + int(main_outside)},
            ),
            *([] if ice else [distinct]),
            split,
            *([] if ice else [no_balancing]),
        ]

    @staticmethod
    def cause(r):
        """The vendor effect, when this run proves it (proven_vendor_effect()), else "":
        the expectations it would excuse then FAIL, so a kernel that drops SD_BALANCE_FORK
        on its own is a FAIL that `lab bisect` can act on, not an INCONCLUSIVE it skips."""
        return proven_vendor_effect(r)
