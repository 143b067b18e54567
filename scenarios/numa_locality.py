"""NUMA locality: memory-bound workers, each with its memory bound to one node and started
on another, end up running on their memory's node.

Mechanism.  NUMA balancing (kernel/sched/fair.c, mm/memory.c): task_numa_work() walks
a task's address space every scan period and makes its PTEs PROT_NONE
(change_prot_numa()); the next access takes a NUMA hinting fault (do_numa_page()),
which task_numa_fault() counts against the node holding the page.  task_numa_placement()
makes the node with most of the task's faults its preferred node (numa_preferred_nid),
and numa_migrate_preferred() / task_numa_migrate() then move the task there
(sched_move_numa) or swap it with a task on that node whose own placement gets no worse
(task_numa_compare(), sched_swap_numa), or give up (sched_stick_numa).  The load balancer
helps keep it there: fbq_type() / migrate_degrades_locality() prefer moving tasks that
are not on their preferred node.  Without NUMA balancing nothing in the scheduler knows
where a task's memory is: a task is placed by load only.

Here, unlike ``preferred-node-migrations`` (seed 003: one probe bound to node 0, its CPU
floating under a background load), the whole machine: lab's ``memprobe`` (a pointer
chase through a buffer, every load dependent on the last) as workers, one group per node,
as many workers as the node has CPUs (``-p per_node``; on numa4-96-micro 4 per node, 16
on 16 vCPUs), so the placement with every worker on its memory's node exists and is
balanced.  Each worker's buffer (``MIB`` MiB) is bound to its group's node with
mbind(MPOL_BIND | MPOL_F_NUMA_BALANCING) (``memprobe --node G --balancing``: without the
flag the scanner skips a VMA with its own bind policy; the pages never leave the node
either way), and each worker starts on the WRONG node: ``--start-cpus`` runs its setup
(allocation, first touch, the shuffle) on the CPUs of the next node in the guest's list,
then gives the worker back every CPU.  Every worker is forked first, held at a read of one
line from a FIFO, and all are released at once (version 2: "Other machines" below says
why).  Started so, the workers are spread evenly, a node's worth on each node: the load
balancer has no reason to move any, so only NUMA balancing brings them home, by swaps (a
move would unbalance two full nodes).  Traced: sched_wakeup_new, sched_migrate_task (the
workers' and their shells'), sched_move/swap/stick_numa, sched_process_fork/exit, for
``-p seconds`` of work.

Why full nodes, not half (the design's first shape, measured): with half a node's CPUs
per group (``-p per_node=2``) the workers stayed on the wrong nodes with NUMA balancing ON.
6.1's task_numa_compare() refuses a swap between two tasks of no NUMA group while the
destination node has spare capacity ("Swapping does not address the load imbalance and
helps one task at the cost of punishing another"), and task_numa_find_cpu() refuses a
move that leaves the nodes more imbalanced than adjust_numa_imbalance() allows, so with
two busy CPUs of four on every node nothing moves once the start is balanced: only the
workers moved while the others were still starting got home.  Measured, 3 runs with
``-p per_node=2`` and NUMA balancing on: FAIL 3/3, local share 0 to 25 %, 0 swaps, 409 to
602 sched_stick_numa, 1416 to 1517 hinting faults per worker per scan period (plenty to
place by: the kernel's choice, not the emulation's;
bench/results/figures-numa-locality-design-half-20261126-081539.json).  With full nodes
no node has spare capacity and the swaps go through.

From the trace each worker's node over time (its fork placement, then every migration);
the run is from the last worker's fork to the first worker's exit.  The claim-carrying
expectation: over the final ``FINAL`` share of the run, at least ``LOCAL_MIN`` of the
workers' time is on their memory's node (per worker and per memory node as figures), with
the time the count of workers at home last rose to that share and held (``local_since_s``).
NUMA balancing's scanner is sped up as numa-balancing's (scan_delay 100 ms, period 100 to
1000 ms, 256 MB a scan), transparent huge pages off (each 4 KiB page a hinting fault,
not 512 per huge page), every knob recorded in ``knobs``.

Known-bad variant: the kernel knob ``--append numa_balancing=disable`` (as numa-balancing
and preferred-node-migrations take it; the job keeps it): no hinting faults, no preferred
node, and the workers stay where their start put them, the balanced but wrong placement:
the local share stays far under the threshold and the claim FAILs (whatever else below).
Where NUMA balancing was on, a run is INCONCLUSIVE, never FAIL, with its measured cause,
when the emulation did not give the claim's situation: the workers never ran together (the
first exited before the last was forked: ``together_s`` <= 0, whatever the window shows);
or the claim failed and (a) they ran together for under ``TOGETHER_MIN`` of the seconds
each ran, too short to settle, or (b) NUMA balancing had a preferred node for fewer workers
by the final window than the threshold needs at home (``workers_with_preferred_node``,
from memprobe's per-loop /proc/self/sched samples; a kernel without SCHED_DEBUG reports
-1 -1 and the rule does not apply), or (c) fewer hinting faults than one per worker per
scan period over the run (``MIN_FAULTS_PER_PERIOD``, numa-balancing's too-little-work
figure).  With enough workers placed and still away, the FAIL is the kernel's placement.

Expected verdicts on Debian's 6.1 (numa4-96-micro, TCG): PASS; FAIL with ``--append
numa_balancing=disable`` (tests/vm/test_scenarios_vm.py).  Measured, 5 runs a side (host
load 3.4 on 2 cores): PASS 5/5, every worker at home in the final quarter (local share
1.0 on each node), the count at home reaching ``LOCAL_MIN`` for good 5.1 to 7.8 s after
the last worker's fork, by 44 to 67 sched_move_numa (mostly while the workers were still
starting) and 11 to 22 sched_swap_numa, from 260 to 422 hinting faults per worker per
scan period; numa_balancing=disable FAIL 5/5, local share 0 to 6.3 % (a worker or none of
16 moved home by the load balance), no hinting fault
(bench/results/bench_verdicts-20261126-080316.json,
figures-numa-locality-on-20261126-081301.json,
figures-numa-locality-off-20261126-081301.json).

Other machines (issue 39).  Version 1 forked the workers one by one and each started
its 30 s at once.  On kunpeng920-2s-mini (arm64, 32 vCPUs, 4 nodes at distances 10/12/20/22/24,
Debian's 6.1 arm64) that loop took 92 to 118 s for 32 workers, each running 30 s after its
setup (one TCG thread runs each busy vCPU in turn, so a fork onto a busy vCPU waits its
turn): the first had exited 59 to 84 s before the last was forked, the nodes were never
all full, and the claim FAILed 3/3 (local share 48 to 53 %) on a placement the design
never set up; re-judged by version 2 they are INCONCLUSIVE.  On the x86 numa4-96-mini the
same loop took 19 to 28 s and the workers overlapped 7.5 and 16 s (PASS 2/2).  With the
barrier the forks take 2.7 to 3.7 s on kunpeng920-2s-mini, and the workers run together
for 40.0 to 43.5 s.  There, under the default TCG threading, 11 to 17 of the 32 workers
took no hinting fault in their whole 30 s and only 10 to 16 had a preferred node by 75 %
of their run (20 are needed), while the run's 63 to 87 faults per worker per scan period
looked ample: the faults fell on a few workers (memprobe's samples).  Those runs are
INCONCLUSIVE by (b): 5/5 (3 re-judged, 2 judged so live:
bench/results/bench_verdicts-20261126-113013.json, load 5.1 to 9.9).  On the x86
numa4-96-mini all 32 had one (version 1's two runs above).  Those runs were on lab's
arm64 CPU model then, cortex-a72 with KPTI, where under single-threaded TCG each
broadcast TLB flush ends the vCPU's turn (lab/render/qemu.py's ARM_MODEL); on QEMU's max
CPU, lab's arm64 model since (TLB range flushes, no KPTI), the same scenario PASSed 4 of
4 single runs (bench/results/bench_verdicts-20261127-064942.json: the bench still
expected INCONCLUSIVE, so it counts them as outliers, all PASS; load 0.8 to 1.0) and once
in the Kunpeng column of bench/results/bench_matrix-20261127-064311.json.  Whether the
flushes were what starved NUMA balancing of work was not measured apart.

Not established: with one TCG thread per vCPU (``--tcg-threads multi``) on
kunpeng920-2s-mini every worker took hinting faults and 31 or 32 of 32 preferred their
memory's node, yet the claim FAILed 2/2 (local share 16 and 10 %; 80 of NUMA balancing's
104 moves of a worker and 95 of 131 went to a node neither its memory's nor its source,
3290 and 4319 sticks).  Neither the distances (x86 numa4-96-mini with kunpeng920-2s-mini's
distances, the kernel's NUMA_GLUELESS_MESH: PASS 2/2, local share 1.0;
tests/fixtures/topologies/numa4-96-mini-mesh.toml) nor MTTCG itself (x86 numa4-96-mini
under ``--tcg-threads multi``: PASS, 1.0) reproduces it, which leaves what else differs:
arm64 (its 6.1 kernel, or arm64 under TCG), one thread per core, no cluster level
(Debian's arm64 config has no SCHED_CLUSTER), not told apart here.  That FAIL stands as a
FAIL (NUMA balancing had what it needed) with this open.  Figures:
bench/results/bench_locality_start-numa-locality-issue39-20261126-113338.json (every run
this paragraph and the last quote, re-judged by this version); numa4-96-micro after the
barrier: PASS 2/2, numa_balancing=disable FAIL 2/2
(bench/results/bench_verdicts-20261126-112023.json).

Machine: numa4-96-micro (16 vCPUs, 4 nodes), not the mini: QEMU's TCG thread runs each
busy vCPU in turn, and NUMA balancing places a task from the faults it takes while it runs
(numa-balancing's docstring).

Which expectation carries the claim (``claim=True``): "each worker runs on its memory's
node"; the others say the knobs were written and the workers ran as set up.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from lab import integrity
from lab.scenario import Expectation, Param, Scenario, at_least, kernel_config, sysctl_lines

PHASE = "main"
COMM = "memprobe"
SECONDS = 30
MIB = 8
FINAL = 0.25  # the share of the run, at its end, that judges where each worker runs
# The share of the workers' time in the final window on their memory's node.  Chance is
# 1 / nodes (25 % on 4 nodes), the wrong start 0 %; measured on Debian's 6.1: 100 % in
# every run with NUMA balancing on, 0 to 6.3 % with it off (the docstring's files).  60 %
# is a majority, far from both.
LOCAL_MIN = 0.6
MIN_FAULTS_PER_PERIOD = 1.0  # numa-balancing's: under one a task has nothing to be placed by
# How long all workers must have run at once (last fork to first exit), as a share of the
# seconds each runs: the claim is about full nodes (the docstring's "Why full nodes").
# With the start barrier a worker's seconds start when all are forked, so only setups that
# take longer than half the run under emulation fall short.
TOGETHER_MIN = 0.5
CLAIM = f"each worker runs on its memory's node (>= {LOCAL_MIN:.0%} of the final window)"
EVIDENCE_SHOWN = 8
# memprobe samples its buffer's pages with move_pages(2) after its last loop; a page the
# kernel reports no node for (a negative status) is counted in mem_pages_unknown.  In two
# VM test runs on Debian's 6.1 (not kept) the whole buffer of one or two workers was
# reported so, in none of the 10 bench runs (which judged a buffer with no page reported a
# failure, and PASSed); the cause is not established.  MPOL_BIND
# with MPOL_MF_STRICT allocates each page on the bound node, so only a page reported on
# another node is a failure; the unreported ones are a figure (buffer_pages_unreported).
UNREPORTED = "buffer_pages_unreported"
THP = "/sys/kernel/mm/transparent_hugepage/enabled"
NO_THP = "no CONFIG_TRANSPARENT_HUGEPAGE: no huge pages to turn off"
ON = "/proc/sys/kernel/numa_balancing"
OFF_BY_CMDLINE = "left off: numa_balancing=disable on the kernel command line"
SCAN_PERIOD_MAX = "/sys/kernel/debug/sched/numa_balancing/scan_period_max_ms"
PERIOD_MAX_MS = 1000
KNOBS: dict[str, int | str] = {
    "/sys/kernel/debug/sched/numa_balancing/scan_delay_ms": 100,
    "/sys/kernel/debug/sched/numa_balancing/scan_period_min_ms": 100,
    SCAN_PERIOD_MAX: PERIOD_MAX_MS,
    "/sys/kernel/debug/sched/numa_balancing/scan_size_mb": 256,
    THP: "never",
}



VMSTAT = ("numa_pte_updates", "numa_hint_faults", "numa_hint_faults_local", "numa_pages_migrated")


def read_workers(text: str) -> list[dict[str, int]]:
    """The job's 'PID MEM_NODE START_NODE INDEX' lines (guest numbering) -> dicts."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        vals = [integrity.count(p) for p in parts]
        if len(parts) == 4 and all(v is not None for v in vals):
            pid, mem, start, i = (int(v) for v in vals if v is not None)
            out.append({"pid": pid, "mem": mem, "start": start, "index": i})
    return out


def run_window(paths: dict[int, Any], pids: list[int]) -> tuple[float, float]:
    """(start, end) in trace seconds: the last worker's first placement to the first
    worker's exit (the last placement's time when none exited in the trace)."""
    seen = [paths[p] for p in pids if p in paths and paths[p].path]
    if not seen:
        return 0.0, 0.0
    start = max(t.path[0][0] for t in seen)
    last = max(t.path[-1][0] for t in seen)
    end = min((t.exit_ts for t in seen if t.exit_ts is not None), default=last)
    return start, (end if end > start else last)


def locality(paths: dict[int, Any], topo, home: dict[int, int], final: float = FINAL) -> dict[str, Any]:
    """Each worker's time on its memory's node (*home*: pid -> spec node) over the last
    *final* share of the run: {"window": (lo, end), "start": s, "workers": {pid: {"home",
    "share", "nodes": {node: s}}}, "local_share": the workers' time at home over all their
    time in the window, "per_node": {home node: share}}."""
    pids = sorted(home)
    start, end = run_window(paths, pids)
    lo = end - final * (end - start)
    workers: dict[int, dict[str, Any]] = {}
    at_home = total = 0.0
    per: dict[int, list[float]] = {}
    for pid in pids:
        t = paths.get(pid)
        if t is None or not t.path:
            continue
        spent = t.time_by_group(topo, "node", lo, end)
        if not spent:  # no time inside the window: where it was last put
            spent = {topo.node_of(t.path[-1][1]): 1.0}
        tot = sum(spent.values())
        mine = spent.get(home[pid], 0.0)
        at_home += mine
        total += tot
        workers[pid] = {"home": home[pid], "share": mine / tot, "nodes": spent}
        per.setdefault(home[pid], [0.0, 0.0])
        per[home[pid]][0] += mine
        per[home[pid]][1] += tot
    return {
        "start": start,
        "window": (lo, end),
        "workers": workers,
        "local_share": at_home / total if total else 0.0,
        "per_node": {n: (a / b if b else 0.0) for n, (a, b) in sorted(per.items())},
    }


def home_timeline(paths: dict[int, Any], topo, home: dict[int, int], end: float) -> list[tuple[float, int]]:
    """[(ts, workers on their memory's node)], an entry each time the count changes, up to *end*."""
    moves = sorted((ts, pid, topo.node_of(cpu)) for pid in home if pid in paths for ts, cpu in paths[pid].path if ts <= end)
    where: dict[int, int] = {}
    out: list[tuple[float, int]] = []
    for i, (ts, pid, node) in enumerate(moves):
        where[pid] = node
        if i + 1 < len(moves) and moves[i + 1][0] == ts:
            continue
        n = sum(1 for p, nd in where.items() if nd == home[p])
        if not out or out[-1][1] != n:
            out.append((ts, n))
    return out


def local_since(timeline: list[tuple[float, int]], need: int, t0: float) -> tuple[float | None, float | None]:
    """(first, last): seconds after *t0* when the count of workers at home first reached
    *need*, and when it last rose to it and held to the end (None: never / not at the end)."""
    first = next((ts for ts, n in timeline if n >= need), None)
    last = None
    for ts, n in timeline:
        if n >= need and last is None:
            last = ts
        elif n < need:
            last = None
    def rel(t: float | None) -> float | None:
        return None if t is None else round(max(0.0, t - t0), 1)

    return rel(first), rel(last)


def scan_period_ms(knobs_text: str) -> int:
    """scan_period_max_ms as the guest wrote it (else lab's value)."""
    for line in knobs_text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == SCAN_PERIOD_MAX and value.strip().isdigit():
            return int(value.strip())
    return PERIOD_MAX_MS


def faults_per_period(faults: int | None, workers: int, run_s: float, period_ms: int) -> float | None:
    """Hinting faults per worker per scan period over the run (None: nothing to say, or not counted)."""
    if not (faults and workers and run_s and period_ms):
        return None
    return faults / workers / (run_s * 1000 / period_ms)


def together_s(paths: dict[int, Any], pids: list[int]) -> tuple[float | None, float | None]:
    """(together, fork span): seconds from the last worker's fork to the first worker's
    exit, how long all ran together (negative: the first had exited before the last was
    forked; None: no exit traced), and from the first worker's fork to the last's."""
    seen = [paths[p] for p in pids if p in paths and paths[p].path]
    if not seen:
        return None, None
    forks = [t.path[0][0] for t in seen]
    exits = [t.exit_ts for t in seen if t.exit_ts is not None]
    return (min(exits) - max(forks) if exits else None), max(forks) - min(forks)


def placed_by(js: dict[str, Any], share: float = 1 - FINAL) -> bool | None:
    """Whether NUMA balancing had a preferred node for a worker by *share* of its run, from
    memprobe's per-loop /proc/self/sched samples ("numa": [seconds, cpu, numa_preferred_nid,
    total_numa_faults]); None: not known (no samples, or -1 -1: no SCHED_DEBUG)."""
    total = js.get("total_s")
    rows = [x for x in js.get("numa") or [] if isinstance(x, list) and len(x) == 4 and all(isinstance(v, (int, float)) for v in x)]
    if not rows or not isinstance(total, (int, float)) or all(x[3] < 0 for x in rows):
        return None
    return any(x[2] >= 0 for x in rows if x[0] <= share * total)


def never_faulted(js: dict[str, Any]) -> bool:
    """No hinting fault in any of memprobe's samples (all known, all zero)."""
    rows = [x for x in js.get("numa") or [] if isinstance(x, list) and len(x) == 4]
    return bool(rows) and all(x[3] == 0 for x in rows)


def balancing_off(knobs_text: str) -> bool:
    return OFF_BY_CMDLINE in knobs_text


def judge_locality(loc: dict[str, Any], timeline, n_workers: int, topo) -> dict[str, Any]:
    """The claim's verdict, figures and evidence from locality() and home_timeline()."""
    need = math.ceil(LOCAL_MIN * n_workers)
    first, since = local_since(timeline, need, loc["start"])
    ws = loc["workers"]
    evidence = [
        f"pid {pid} (memory on node {w['home']}): {w['share']:.0%} at home; node seconds "
        + ", ".join(f"{n}: {s:.1f}" for n, s in w["nodes"].items())
        for pid, w in sorted(ws.items(), key=lambda kv: (kv[1]["share"], kv[0]))
    ][:EVIDENCE_SHOWN]
    lo, hi = loc["window"]
    return {
        "ok": bool(ws) and len(ws) == n_workers and loc["local_share"] >= LOCAL_MIN,
        "evidence": evidence,
        "figures": {
            "local_share": round(loc["local_share"], 3),
            "threshold": LOCAL_MIN,
            "chance_share": round(1 / len(topo.node_ids), 3),
            "workers_mostly_home": sum(1 for w in ws.values() if w["share"] > 0.5),
            "workers": len(ws),
            "per_node_local_share": {str(n): round(s, 3) for n, s in loc["per_node"].items()},
            "first_reached_s": first,
            "local_since_s": since,
            "workers_home_needed": need,
            "run_s": round(hi - loc["start"], 1),
            "window_s": round(hi - lo, 1),
        },
    }


class NumaLocality(Scenario):
    name = "numa-locality"
    summary = "memory-bound memprobe workers, memory bound to their group's node, started on the next node: NUMA balancing brings them home (local share of the final window)"
    seed = "issue 36"  # the scenario library (item 3), not a seed post
    claim = f"'{CLAIM}': NUMA balancing moves a task to the node of its memory (task_numa_placement(), task_numa_migrate())"
    kernel_scheduler = (
        "NUMA balancing's scan runs from the fair class's tick (task_tick_numa()) and its task moves are "
        "task_numa_migrate(); a task of a BPF scheduler gets neither"
    )
    topologies = ["numa4-96-micro"]
    requires = [at_least("nodes", 2), kernel_config("NUMA_BALANCING", "automatic NUMA balancing")]
    events = [
        "sched:sched_wakeup_new",
        "sched:sched_migrate_task",
        "sched:sched_move_numa",
        "sched:sched_swap_numa",
        "sched:sched_stick_numa",
        "sched:sched_process_fork",
        "sched:sched_process_exit",
    ]
    # A worker's migrations before its exec carry its shell's comm (sched_exec()).
    filters = {"sched_migrate_task": f'comm == "{COMM}" || comm == "sh"'}
    workloads = True  # memprobe
    timeout = 420
    # 2: the workers wait at a barrier until all are forked (they did not run together on
    # kunpeng920-2s-mini under TCG), and a run where they still did not is INCONCLUSIVE.
    version = 2
    params = [
        Param("seconds", SECONDS, "how long each worker runs (traced)", min=10, max=600),
        Param("per_node", 0, "workers per node (0: as many as the node has CPUs)", min=0, max=1024),
    ]

    def steps(self, topo):
        knobs = sysctl_lines(KNOBS, {THP: NO_THP})
        return f"""
# `--append numa_balancing=disable` (the known-bad knob) is kept: the claim must FAIL.
if grep -qw numa_balancing=disable /proc/cmdline; then
    echo "{ON}={OFF_BY_CMDLINE}" >> "$LAB_OUT/knobs"
else
    lab_sysctl {ON} 1
fi
{knobs}
NODES=$(labsel nodes | tr , ' ')
: > workers
# Each worker is held at a read of one line from the FIFO until all are forked, so all
# run together: under TCG forking one can take seconds (the module docstring).
GO=/tmp/numa-locality-go.fifo
rm -f "$GO"; mkfifo "$GO"
exec 3<> "$GO"
lab_trace_on
i=0
for g in $NODES; do
    # the next node in the list: where group g's workers start (their memory stays on g)
    w=$(echo "$NODES" | awk -v g="$g" '{{for (i = 1; i <= NF; i++) if ($i == g) print $(i % NF + 1)}}')
    start=$(labsel node "$w")
    k={self.p['per_node']}; [ "$k" -ge 1 ] || k=$(labsel count "$(labsel node "$g")")
    j=0
    while [ "$j" -lt "$k" ]; do
        (read -r x <&3; exec memprobe -m {MIB} --node "$g" --balancing --start-cpus "$start" -s {self.p['seconds']} 3<&- > w$i.out 2> w$i.err) &
        echo "$! $g $w $i" >> workers
        i=$((i + 1)); j=$((j + 1))
    done
done
# one line per worker held at the FIFO: each takes one, whenever it gets to its read
awk -v n="$i" 'BEGIN {{ for (i = 0; i < n; i++) print "go" }}' >&3
: > workers.exit
while read -r pid g w n; do wait "$pid"; echo "$pid $?" >> workers.exit; done < workers
lab_trace_off
exec 3>&-
rm -f "$GO"
"""

    def check(self, r):
        knobs_text = r.text("knobs")
        knobs = [ln for ln in knobs_text.splitlines() if ln.strip()]
        failed_knobs = [k for k in knobs if "FAILED" in k]
        off = balancing_off(knobs_text)
        workers = read_workers(r.text("workers"))
        rcs = dict(ln.split()[:2] for ln in r.text("workers.exit").splitlines() if len(ln.split()) >= 2)
        home = {w["pid"]: r.node(w["mem"]) for w in workers}
        paths = r.task_paths(PHASE, pids=list(home))
        problems: list[str] = []
        started_away = unreported = 0
        placed: list[bool | None] = []  # per worker: a preferred node by the final window (placed_by())
        unfaulted = 0
        for w in workers:
            i, pid = w["index"], w["pid"]
            js = _json(r.text(f"w{i}.out"))
            if rcs.get(str(pid)) != "0":
                problems.append(f"worker {i} (pid {pid}) exited {rcs.get(str(pid), '?')}: {r.text(f'w{i}.err').strip()[-200:]}")
                continue
            placed.append(placed_by(js))
            unfaulted += never_faulted(js)
            mem = {r.node(int(k)): v for k, v in (js.get("mem_nodes") or {}).items() if str(k).isdigit()}
            unknown = js.get("mem_pages_unknown")
            unreported += unknown if isinstance(unknown, int) else 0
            # Pages move_pages(2) gives no node for are counted, not judged (UNREPORTED).
            if set(mem) - {home[pid]} or "mem_nodes" not in js:
                problems.append(f"worker {i} (pid {pid}): buffer pages on nodes {mem or '?'}, bound to {home[pid]}")
            setup = js.get("cpu_setup")
            if isinstance(setup, int) and r.topo.node_of(r.cpu(setup)) == r.node(w["start"]) != home[pid]:
                started_away += 1
            else:
                problems.append(f"worker {i} (pid {pid}): setup ran on CPU {setup}, not on node {r.node(w['start'])}")
            if pid not in paths or not paths[pid].path:
                problems.append(f"worker {i} (pid {pid}): no placement in the trace")
        ran = bool(workers) and not problems
        loc = locality(paths, r.topo, home)
        timeline = home_timeline(paths, r.topo, home, loc["window"][1])
        j = judge_locality(loc, timeline, len(workers), r.topo)
        vm = r.vmstat(PHASE)
        # None: not counted (a kernel without VM_EVENT_COUNTERS, as lab's tinyconfig builds, has no
        # numa_* counters in /proc/vmstat), not 0 faults; the claim is judged from the trace.
        vmf = {k: vm.get(k) for k in VMSTAT}
        faults = "uncounted (no CONFIG_VM_EVENT_COUNTERS)" if vmf["numa_hint_faults"] is None else vmf["numa_hint_faults"]
        nb = r.numa_balancing(PHASE)
        counts = {f"sched_{k}_numa": nb.count(k) for k in ("move", "swap", "stick")}
        period = scan_period_ms(knobs_text)
        run_s = j["figures"]["run_s"] or (r.phase_seconds(PHASE) or 0.0)
        per = faults_per_period(vmf["numa_hint_faults"], len(workers), run_s, period)
        together, fork_span = together_s(paths, list(home))
        apart = together is not None and together < TOGETHER_MIN * self.p["seconds"]
        known = any(v is not None for v in placed)
        # An unknown worker counts as placed: only what the samples show makes a run INCONCLUSIVE.
        n_placed = sum(v is not False for v in placed) if known else None
        claim = Expectation(
            CLAIM,
            ran and j["ok"],
            evidence=j["evidence"],
            figures={
                **j["figures"],
                **counts,
                **vmf,
                "hint_faults_per_worker_per_scan_period": None if per is None else round(per, 2),
                "workers_with_preferred_node": n_placed,
                "workers_without_hinting_fault": unfaulted if known else None,
            },
            claim=True,
        )
        if ran and not off and together is not None and together <= 0:
            # The final window then falls back to the last placements (run_window()): not a
            # time all ran, so neither a PASS nor a FAIL is about full nodes.
            claim.inconclusive = (
                f"the workers never ran together under emulation: the first exited {-together:.1f} s before the last "
                f"was forked (forks over {fork_span:.1f} s), so the nodes were never all full (the placement this "
                "claim is about)"
            )
        if not claim.ok:
            f = j["figures"]
            claim.note = (
                f"only {f['local_share']:.0%} of the workers' time in the final {f['window_s']} s was on their memory's node "
                f"(threshold {LOCAL_MIN:.0%}, chance {f['chance_share']:.0%}); NUMA balancing made {counts['sched_move_numa']} moves, "
                f"{counts['sched_swap_numa']} swaps, {counts['sched_stick_numa']} sticks from {faults} hinting faults"
            )
            if not ran:
                claim.note = "the workers did not run as set up (see the first expectation)"
            elif off:
                claim.note += f"; NUMA balancing was {OFF_BY_CMDLINE}: nothing moves a task to its memory"
            elif apart and not claim.inconclusive:
                claim.inconclusive = (
                    f"the workers ran together for only {together:.1f} s under emulation (the last worker's fork to the "
                    f"first one's exit; forks over {fork_span:.1f} s), under {TOGETHER_MIN:.0%} of the {self.p['seconds']} s "
                    "each ran: too short for the placement to settle"
                )
            elif n_placed is not None and n_placed < j["figures"]["workers_home_needed"]:
                claim.inconclusive = (
                    f"too little work for NUMA balancing under emulation: it had a preferred node for only {n_placed} of "
                    f"{len(workers)} workers by {1 - FINAL:.0%} of their run ({unfaulted} took no hinting fault at all), under "
                    f"the {j['figures']['workers_home_needed']} at home the threshold needs: nothing to place the rest by"
                )
            elif per is not None and per < MIN_FAULTS_PER_PERIOD:
                claim.inconclusive = (
                    f"too little work per scan period under emulation: {per:.2f} hinting faults per worker per {period} ms "
                    f"scan period ({vmf['numa_hint_faults']} faults, {len(workers)} workers, {run_s:.0f} s), under the "
                    f"{MIN_FAULTS_PER_PERIOD:g} NUMA balancing needs to place a task at all"
                )
        return [
            Expectation(
                "NUMA balancing's knobs written (or left off on the command line)",
                bool(knobs) and not failed_knobs,
                evidence=failed_knobs or knobs,
                figures={"knobs": len(knobs), "failed": len(failed_knobs), "numa_balancing": "off" if off else "on"},
                note="a knob could not be written (is debugfs mounted, CONFIG_NUMA_BALANCING=y?)" if failed_knobs or not knobs else "",
            ),
            Expectation(
                "the workers ran, each buffer on its node, each started on another node",
                ran,
                evidence=problems[:EVIDENCE_SHOWN],
                figures={
                    "workers": len(workers),
                    "per_node": {str(n): c for n, c in sorted(Counter(home.values()).items())},
                    "started_away": started_away,
                    "together_s": None if together is None else round(together, 1),
                    "fork_span_s": None if fork_span is None else round(fork_span, 1),
                    UNREPORTED: unreported,
                    "mib": MIB,
                    "seconds": self.p["seconds"],
                },
                note="" if ran else ("no workers recorded" if not workers else problems[0]),
            ),
            claim,
        ]


def _json(text: str) -> dict[str, Any]:
    import json

    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                v = json.loads(line)
            except ValueError:
                return {}
            return v if isinstance(v, dict) else {}
    return {}
