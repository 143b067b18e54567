"""Seed 001: NUMA balancing should converge each process's threads onto their own nodes.

Srikar Dronamraju, "[PATCH 00/19] Fixes for sched/numa_balancing" (v4.17-rc5, 2018)
benchmarks with the autonuma-benchmark scripts on a 4-node / 96-CPU machine; numa01 is
``perf bench numa mem --no-data_rand_walk -p 2 -t $((ncpus/2)) -G 0 -P 3072 -T 0 -l 50
-c -s 2000``: two processes, each with ncpus/2 threads sharing the process's memory.
The cover letter compares run time, sched_move_numa / sched_swap_numa /
sched_stick_numa counts and the numa_* vmstat counters, and says the patches give
"faster and better consolidation with lesser task migrations".

Here the same shapes run on the topology's CPU count, scaled to finish under TCG:

- numa01: 2 processes x ncpus/2 threads sharing 16 MiB per process (the seed: 3 GiB),
  for a time cap instead of 50 loops, run as two perf instances of one process each
  that start mixed: as each worker appears the job puts it on its instance's half of
  every node's CPUs, and once all are there frees them on every CPU (below).  Convergence is judged from the trace: each thread's node over the last
  quarter of the run (its CPU from sched_wakeup_new, then every sched_migrate_task),
  the thread's process being the one that created it (sched_process_fork).  A process
  with T threads on nodes of C CPUs needs ceil(T / C) nodes; it has converged when its
  threads sit on that many nodes and share none with the other process (perf's "-c"
  criterion, generalised to processes larger than a node).  The time to converge is
  when the threads last took such a placement and kept it to the run's end (the first
  worker's exit).
- numa02: 1 process x ncpus threads, each with 2 MiB of its own memory (the seed: 32 MiB).
  Its memory is local to its threads when most of the phase's hinting faults are local
  (the seed's figure: 92%): where a thread moved, its memory followed it; /proc/vmstat,
  sampled every 2 s, shows the faults over time (they thin out once memory is local:
  the scanner's period grows while its faults are local).

What differs from the seed's machine, and why (every knob written is recorded in
``knobs``; the committed measurement is bench/results/bench_verdicts-20261125-234233.json,
the rest was seen in the design runs of issue 18, whose run directories were not kept):

- The machine: numa4-96-micro (4 nodes x 4 vCPUs, the seed's distances) by default,
  not the 32-vCPU numa4-96-mini.  QEMU runs many vCPUs on one TCG thread, each busy
  vCPU for 100 ms in turn: on the mini a thread runs 100 ms in every 3.2 s, on the micro
  in every 1.6 s, and NUMA balancing decides from the faults a thread takes while it
  runs.  In the design runs of issue 18 (not kept) the mini's 32 threads mostly did not
  converge within 180-240 s; the micro's 16 converge well inside it (5 of 5 runs PASS on
  Debian's 6.1: bench/results/bench_verdicts-20261125-234233.json).  With the
  scenario as it is now (numa01 up to 180 s, stopping once converged and held) the
  32-vCPU minis converged too: 3 of 3 runs PASS on Debian's 6.1 on each of numa4-96-mini,
  zen3-2s-mini and icelake-2s-mini (bench/results/bench_verdicts-20261126-120641.json,
  beside a CI run, load 0.8-2.3) and of xeon-2s22c-mini and epyc7551-8n-mini
  (bench/results/bench_verdicts-20261126-125614.json; the recorded run
  tests/fixtures/runs/numa-balancing-numa4-96-mini-debian converged 77.6 s in); 2 more
  each beside another CI run (load 2.1-5.4) PASSed but one on zen3-2s-mini, which
  converged at 175.5 s of the 180 s cap and so FAILed
  (bench/results/bench_verdicts-20261126-153227.json): 5 of 5 on four minis, 4 of 5 on
  zen3-2s-mini.  With KVM the mini
  (``-t numa4-96-mini``) is the closer machine (not measured: no KVM here).
- numa01's two processes are two perf instances.  One perf's processes also share
  perf's MAP_SHARED bookkeeping, which every thread writes after each loop; with 16 MiB
  a loop is 190 times shorter than the seed's 3 GiB one, so those shared pages take a
  large share of the hinting faults, and a fault on a page another process wrote last
  joins the two processes into one NUMA group (task_numa_group(), TNF_SHARED): one group
  has no reason to separate.  That happened on 6.12 in the design runs (a sched_*_numa
  event's ngid carrying both processes' tgids; not kept), and those runs did not converge.
- numa01 starts mixed, both processes on every node.  Started as two instances, the
  kernel's fork placement sometimes put them apart from the start (design runs, not
  kept): NUMA balancing
  then has nothing to show, and with it off the run would pass by luck.  One perf's
  processes create their threads side by side and started mixed in every run here.
- NUMA balancing's scanner starts and repeats sooner (scan_delay 100 ms instead of
  1000, period 100..1000 ms instead of 1000..60000, 256 MB per scan): under TCG a
  guest second holds a small fraction of the work a real CPU does in it, and the run is
  minutes, not the seed's 440-941 s.  A scanner 10 times slower (1000..10000 ms) made too
  few swaps to converge in a 240 s run (design runs, not kept).
- Transparent huge pages are off: 16 MiB is only 8 huge pages per process, the unit
  NUMA balancing faults and migrates; with so few samples the processes' memory
  ping-pongs and numa01 did not converge (design runs, not kept; the seed's 3 GiB is 1536
  huge pages).
  With 4 KiB pages a process has 4096.

When numa01 stops.  SECONDS (180 s) is a cap: a guest-side watcher (WATCH_AWK, busybox awk)
reads each worker's CPU every WATCH_S (field 39 of /proc/TGID/task/TID/stat, mapped to its
node from sysfs) and ends numa01 once the placement has been converged (placement_converged()'s
rule: each process on at most ceil(T/C) nodes, no node shared) without a break for a hold
H >= max(HOLD_MIN, FINAL/(1-FINAL) x P), P being the time from perf's start to the start of
the hold.  Why that hold: the verdict reads the run's last FINAL share, [E - FINAL(E - S), E]
for a run from S to E; stopped at E = C + H, with C = S + P when the hold began, that window
lies inside the hold when E - FINAL(E - S) >= C, i.e. H - FINAL(P + H) >= 0, i.e.
H >= FINAL/(1-FINAL) x P (P/3 with FINAL 0.25).  The watcher measures from perf's start,
before the first worker exists, and decides before the workers exit; the trace's run starts
at the last worker's creation and ends at the first worker's exit, so its P is shorter and
its H longer: the bound holds for the trace's window too (up to the watcher's 1 s sampling:
a break shorter than a sample is missed by the watcher, and the trace's majority node per
thread is what judges).  HOLD_MIN: in the recorded micro runs (bench/results/bench_numa_holds-20261126-080114.json)
converged stretches of up to 17.1 s were left again, none of 30 s or more, and in the runs
measured with the watcher up to 18.6 s (bench/results/bench_numa_holds-20261126-082853.json);
30 s is above all of them.  The judgement stays the trace's (the watcher only decides when to stop); a run that
does not converge and hold runs to the cap and is judged as before.  The watcher writes its
decisions to numa01.watch (when it saw convergence, when it left, when it stopped, how many
samples it took).  Its "every WATCH_S" is a sleep between samples: under TCG with every vCPU
busy it took one every 3-4 s (13 samples in 52 s), so it can miss a short break the trace
sees: in the first run below the trace has the placement converged from 21.8 s for 11.2 s
and again from 33.1 s to the end at 51.8 s, the watcher saw it converged from 19.8 s; the
final window (the last 13 s) lay inside the second stretch.  Measured on numa4-96-micro with
Debian's 6.1 (bench/results/bench_verdicts-20261126-080346.json, each run in
bench/results/bench_numa_holds-20261126-082853.json): 3 of 3 PASS, 178 s a run against 254 s
before (bench/results/bench_verdicts-20261125-234233.json); numa01 stopped at 52.2 and
61.1 s, and in the third run, converged only at 134.4 s, at the cap; with NUMA balancing off
3 of 3 FAIL, each run to the cap (255 s a run, as before).
perf bench numa has no graceful early stop: it handles no signal (tools/perf/bench/numa.c:
a signalled worker process trips the parent's BUG_ON(!WIFEXITED)), and its -m
(--measure_convergence) stops one instance at its own first convergence by perf's criterion,
which sees neither the other instance nor a hold.  So the watcher ends both instances with
SIGTERM (perf's main processes, then the worker processes) and perf prints no summary; "the
benchmark ran" is then judged from the watcher's stop and the trace's workers (all 2 x T
seen), and the run's length is the phase's.  Where the run is stopped, the figure
``stopped_at_s`` says when, and ``converged_after_s`` (the trace's) stays the convergence time.
numa02 keeps its 60 s: in the recorded runs its local share is 0.85 or more from the first
2 s sample on (bench/results/bench_numa_holds-20261126-080114.json), i.e. set by first touch before threads
have moved; what the 60 s buys is threads moving and their memory following, and the
samples do not show when that is decided, so a shorter phase would weaken the check.

Where numa01 ends unconverged with NUMA balancing on, the work the emulation gave it is
measured: hinting faults per worker thread per scan period (scan_period_max_ms).  Under one,
NUMA balancing had nothing to place a thread by (MIN_FAULTS_PER_PERIOD): convergence is
INCONCLUSIVE with that figure as its cause, never FAIL.  Above it the verdict is the kernel's.

One verdict is the majority of up to 3 runs (verdict_runs).  A single run converges
most of the time here, not always (CONVERGED_HERE): CI at 0a11451, beside another guest
on the host, judged one numa4-96-micro run FAIL on Debian's 6.1 with plenty of work per
scan period (far above MIN_FAULTS_PER_PERIOD, so the kernel's by the rule above).  numa01
converged early in that run and then left the converged placement again and again until
the cap.  Not enough for a bisection step or a CI gate, as for llc-spread-pinned and
preferred-node-migrations.  NUMA balancing off FAILs every run (no convergence at all), so
2 runs decide the known-bad side; a kernel that breaks NUMA balancing still FAILs.

CONVERGED_HERE says how often numa01 converged here.  With NUMA balancing off
(``--append numa_balancing=disable``, which the job leaves off) it must FAIL every
claim, and does (5 of 5 runs FAIL: bench/results/bench_verdicts-20261125-234233.json); the
VM tests check both verdicts.

Which expectations carry seed 001's claim (``claim=True``): "each process's threads end
on their own node(s) (convergence)" and numa02's "each thread's memory is local to it";
the rest (NUMA balancing active, the workloads ran, the knobs) are preconditions whose
failure is still a FAIL but never a PASS on their own.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict

from lab.scenario import Expectation, Scenario, at_least, kernel_config, sysctl_lines

PHASE = "numa01"
SECONDS = 180  # perf's -s cap
# Whether numa01 converges is not the same every run.  The committed figure: 5 of 5 runs
# PASS on numa4-96-micro with Debian's 6.1, 5 of 5 FAIL with numa_balancing=disable
# (bench/results/bench_verdicts-20261125-234233.json); on the five 32-vCPU minis 5 of 5
# PASS on four and 4 of 5 on zen3-2s-mini (bench/results/bench_verdicts-20261126-120641.json,
# bench/results/bench_verdicts-20261126-125614.json, bench/results/bench_verdicts-20261126-153227.json,
# 3 + 2 runs each; the FAIL ran beside a CI run and converged at 175.5 s of the 180 s cap); numa4-96-mini
# then 3 of 6 more at load 2-3 (bench/results/bench_matrix-20261127-042600.json: 0 of 2;
# bench/results/bench_verdicts-20261127-042808.json: 3 of 4), 8 of 11 in all; 6.12 converged less
# often in the design runs of issue 18 (not kept: no count is quoted for them).
CONVERGED_HERE = (
    "Under TCG on numa4-96-micro numa01 converged in 5 of 5 runs on Debian's 6.1 "
    "(bench/results/bench_verdicts-20261125-234233.json), in 5 of 5 on each of the 32-vCPU "
    "numa4-96-mini, icelake-2s-mini, xeon-2s22c-mini and epyc7551-8n-mini and in 4 of 5 on zen3-2s-mini "
    "(bench/results/bench_verdicts-20261126-120641.json, bench/results/bench_verdicts-20261126-125614.json, "
    "bench/results/bench_verdicts-20261126-153227.json; zen3-2s-mini's one FAIL, beside a CI run, "
    "converged at 175.5 s of the 180 s cap); on numa4-96-mini 3 of 6 more at host load 2-3: 0 of 2 "
    "in a full mini matrix (bench/results/bench_matrix-20261127-042600.json) and 3 of 4 beside a CI run "
    "(bench/results/bench_verdicts-20261127-042808.json), so 8 of 11 there, while the micro converged "
    "4 of 4 beside the same CI run; on the arm64 kunpeng920-2s-mini 5 of 5 with the cortex-a72 CPU model "
    "(bench/results/bench_verdicts-20261126-184005.json, bench/results/bench_verdicts-20261126-190432.json) "
    "and 5 of 5 on QEMU's max, lab's arm64 model since (bench/results/bench_verdicts-20261127-123820.json); "
    "on 6.12 it converged less often (design runs of issue 18, not kept).  Where it did not, "
    "a thread of each process was left on the other's nodes with its memory migrated after it, "
    "where NUMA balancing found no better place, or the processes took nodes 40 apart"
)
# numa01 stops once converged and held (docstring, "When numa01 stops"): at least HOLD_MIN
# seconds, and long enough that the verdict's final window lies inside the hold.
HOLD_MIN = 30
WATCH_S = 1  # the watcher's sampling period
PROC_MB = 16  # perf's -P (the seed: 3072)
PHASE2 = "numa02"
SECONDS2 = 60
THREAD_MB = 2  # perf's -T (the seed: 32)
SAMPLE_S = 2  # /proc/vmstat sampling period during numa02
# Memory left on the node where it was first touched, after its thread moved to another
# node, faults locally 1 time in 4 on 4 nodes; memory local to its thread, every time.
# 60% is well clear of the first (the seed's numa02: 92%; here 97% in the recorded run
# tests/fixtures/runs/numa-balancing-numa4-96-mini-debian, which a unit test checks).
LOCAL_MIN = 0.6
FINAL = 0.25  # the share of the run, at its end, that decides where a thread "ended"
# The knobs the seed's kernel ran with are the defaults (scan_delay 1000 ms, period
# 1000..60000 ms); a run of minutes under TCG needs the scanner to start and repeat sooner.
THP = "/sys/kernel/mm/transparent_hugepage/enabled"
NO_THP = "no CONFIG_TRANSPARENT_HUGEPAGE: no huge pages to turn off"
ON = "/proc/sys/kernel/numa_balancing"
OFF_BY_CMDLINE = "left off: numa_balancing=disable on the kernel command line"
KNOBS = {
    ON: 1,
    "/sys/kernel/debug/sched/numa_balancing/scan_delay_ms": 100,
    "/sys/kernel/debug/sched/numa_balancing/scan_period_min_ms": 100,
    "/sys/kernel/debug/sched/numa_balancing/scan_period_max_ms": 1000,
    "/sys/kernel/debug/sched/numa_balancing/scan_size_mb": 256,
    # 16 MiB is 8 huge pages: too few for NUMA balancing's fault statistics (docstring).
    THP: "never",
}



# The least work per scan period NUMA balancing can place a thread from: task_numa_placement()
# halves a task's fault statistics every scan period, so a thread taking fewer hinting faults
# than one per period has nothing left to be placed by.  A lower bound, not what convergence
# takes: the recorded 6.1 numa4-96-mini run converged at 31 per thread per 1000 ms period
# (179419 faults, 32 threads, 180 s); the 25 s THP run, 8 huge pages per process, had 0.31
# (tests/fixtures/runs/numa-balancing-numa4-96-mini-debian and its -25s-thp: unit-tested).
MIN_FAULTS_PER_PERIOD = 1.0
SCAN_PERIOD_MAX = "/sys/kernel/debug/sched/numa_balancing/scan_period_max_ms"
THREAD = re.compile(r"thread (\d+)/(\d+)$")
VMSTAT = (
    "numa_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "pgmigrate_success",
)


def hold_needed(before: float, final: float = FINAL, hold_min: float = HOLD_MIN) -> float:
    """How long numa01's placement must stay converged before the watcher stops it, when it
    converged *before* seconds after perf started: the verdict's final window (the last
    *final* share of the run) then lies inside the hold (docstring: the derivation)."""
    return max(float(hold_min), final / (1 - final) * before)


# The guest's watcher: decides when numa01 has been converged long enough (busybox awk).
# Input, every WATCH_S: 't UPTIME', one 'w PROC STATLINE' per worker (its
# /proc/TGID/task/TID/stat: field 39, the CPU it runs on or last ran on), then 'e'.
# -v: cpunode ('CPU:NODE ...'), need (nodes a process needs), workers (how many), start
# (the uptime perf started at), hold_min, ratio (FINAL / (1 - FINAL)), kill (the pids to
# SIGTERM on stop; empty: decide only).  Output: its decisions, one a line, times in
# seconds after start (parsed by watch_figures()).
WATCH_AWK = r"""
BEGIN {
    n = split(cpunode, a, " ")
    for (i = 1; i <= n; i++) { split(a[i], b, ":"); node[b[1]] = b[2] }
    since = ""; stopped = 0; now = start
    printf "watch: %d workers, each process on at most %d node(s), none shared; hold >= max(%d s, %.4f x the time before it)\n", workers, need, hold_min, ratio
}
$1 == "t" { now = $2; nw = 0; samples++; split("", seen); split("", nodes_of); split("", holders); next }
$1 == "w" {
    line = $0; sub(/^.*\) /, "", line)  # past "pid (comm) ": the comm may hold spaces
    split(line, f, " "); cpu = f[37]  # field 39
    if (!(cpu in node)) next
    k = $2 SUBSEP node[cpu]
    if (!(k in seen)) { seen[k] = 1; nodes_of[$2]++; holders[node[cpu]]++ }
    nw++; next
}
$1 == "e" {
    ok = (nw == workers)
    for (p in nodes_of) if (nodes_of[p] > need) ok = 0
    for (x in holders) if (holders[x] > 1) ok = 0
    if (ok && since == "") { since = now; printf "converged at %.1f s\n", since - start }
    else if (!ok && since != "") { printf "left at %.1f s, converged since %.1f s\n", now - start, since - start; since = "" }
    if (ok) {
        hold = ratio * (since - start); if (hold < hold_min) hold = hold_min
        if (now - since >= hold) {
            printf "stop at %.1f s: converged since %.1f s, held %.1f s >= %.1f s (%d samples)\n", now - start, since - start, now - since, hold, samples
            stopped = 1
            if (kill != "") system("kill -TERM " kill " 2>/dev/null")
            exit
        }
    }
}
END {
    if (!stopped) printf "end at %.1f s: perf ended at its cap, %s (%d samples)\n", now - start, since == "" ? "unconverged" : sprintf("converged since %.1f s", since - start), samples
}
"""
STOP = re.compile(r"stop at ([\d.]+) s: converged since ([\d.]+) s, held ([\d.]+) s")


def watch_figures(text: str) -> dict:
    """The watcher's decisions (numa01.watch): when it stopped numa01 and since when it saw
    the placement converged, in seconds after perf started (None: it did not stop it)."""
    m = next((STOP.match(ln) for ln in text.splitlines() if STOP.match(ln)), None)
    return {
        "stopped_at_s": float(m.group(1)) if m else None,
        "watch_converged_s": float(m.group(2)) if m else None,
        "held_s": float(m.group(3)) if m else None,
    }


def perf_figures(out: str) -> dict[str, float]:
    """perf bench numa's summary lines: ' main, <value>, <unit>, <name>' -> {name: value}.
    Where *out* holds several instances' summaries (numa01 runs two), a '-max' figure is
    their largest, a '-min' one their smallest, a total their sum, any other the last."""
    figs: dict[str, float] = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0] == "main":
            try:
                v = float(parts[1])
            except ValueError:
                continue
            name = parts[3]
            if name in figs and "-max" in name:
                v = max(v, figs[name])
            elif name in figs and "-min" in name:
                v = min(v, figs[name])
            elif name in figs and "total" in name:
                v += figs[name]
            figs[name] = v
    return figs


def worker_procs(paths, forks=()) -> dict[int, int]:
    """pid -> process index (0, 1, ...) of each perf worker ('thread P/T' with a path).

    A worker belongs to the process that created it (its sched_process_fork parent, from
    *forks*: (parent_pid, child_pid) pairs), numbered in the order the processes' first
    workers were placed: numa01's two perf instances each name their workers
    'thread 0/T'.  A worker whose creation the trace does not show counts by its P."""
    parent = dict((c, p) for p, c in forks)
    order: list[tuple[str, int]] = []
    out = {}
    for pid, t in sorted(paths.items(), key=lambda kv: (kv[1].path[0][0] if kv[1].path else 0, kv[0])):
        m = THREAD.match(t.comm)
        if not (m and t.path):
            continue
        key = ("fork", parent[pid]) if pid in parent else ("name", int(m.group(1)))
        if key not in order:
            order.append(key)
        out[pid] = order.index(key)
    return out


def run_window(paths, workers) -> tuple[float, float]:
    """(start, end) of the run in trace seconds: from the last worker's placement to the
    first worker's exit (the first instance to finish frees CPUs the others then take)."""
    start = max(paths[p].path[0][0] for p in workers)
    last = max(paths[p].path[-1][0] for p in workers)
    end = min((paths[p].exit_ts for p in workers if paths[p].exit_ts is not None), default=last)
    return start, (end if end > start else last)


def thread_nodes(paths, topo, final: float = FINAL, procs=None):
    """Each perf worker thread's node over the last *final* share of the run.

    *paths* is Result.task_paths(), *procs* worker_procs()'s map (by default from the
    workers' names).  Returns (threads, window): threads maps pid -> {"proc": P, "name":
    comm, "node": majority node in the window, "share": that node's share of the window,
    "path": [(ts, node), ...]}; window is (start, end) in trace seconds.
    """
    workers = worker_procs(paths) if procs is None else procs
    if not workers:
        return {}, (0.0, 0.0)
    start, end = run_window(paths, workers)
    lo = end - final * (end - start)
    out = {}
    for p in workers:
        t = paths[p]
        spent = t.time_by_group(topo, "node", lo, end)
        if not spent:  # no time inside the window: where it was last put
            spent[topo.node_of(t.path[-1][1])] = 1.0
        node, secs = max(spent.items(), key=lambda kv: kv[1])  # the first reached wins a tie
        out[p] = {
            "proc": workers[p],
            "name": t.comm,
            "node": node,
            "share": secs / sum(spent.values()),
            "path": [(round(ts, 3), topo.node_of(cpu)) for ts, cpu in t.path],
        }
    return out, (lo, end)


def numa_counts(r, phase) -> dict[str, int]:
    """The phase's sched_move_numa / sched_swap_numa / sched_stick_numa counts."""
    nb = r.numa_balancing(phase)
    return {f"sched_{k}_numa": nb.count(k) for k in ("move", "swap", "stick")}


def placement_converged(nodes_of: dict[int, Counter[int]], need: int) -> bool:
    """Processes (process -> threads per node) each on at most *need* nodes, none shared."""
    holders = Counter(n for nodes in nodes_of.values() for n, k in nodes.items() if k)
    return (
        bool(nodes_of)
        and all(sum(1 for k in nodes.values() if k) <= need for nodes in nodes_of.values())
        and max(holders.values(), default=0) <= 1
    )


def placement_timeline(paths, topo, need: int, procs=None) -> tuple[float, float, list[tuple[float, bool]]]:
    """The exact placement's history up to the end of the run (run_window()): (t0, end,
    [(ts, converged), ...]) with an entry each time placement_converged() changes, ts in
    trace seconds; t0 is the first worker's placement.  *procs* as for thread_nodes()."""
    workers = worker_procs(paths) if procs is None else procs
    if not workers:
        return 0.0, 0.0, []
    _, end = run_window(paths, workers)
    moves = sorted(
        (ts, p, topo.node_of(cpu)) for p in workers for ts, cpu in paths[p].path if ts <= end
    )
    if not moves:
        return 0.0, 0.0, []
    where: dict[int, int] = {}
    nodes_of: dict[int, Counter[int]] = defaultdict(Counter)
    changes: list[tuple[float, bool]] = []
    for i, (ts, pid, node) in enumerate(moves):
        if pid in where:
            nodes_of[workers[pid]][where[pid]] -= 1
        where[pid] = node
        nodes_of[workers[pid]][node] += 1
        if i + 1 < len(moves) and moves[i + 1][0] == ts:
            continue  # judge the placement once every move at this instant is in
        ok = len(where) == len(workers) and placement_converged(nodes_of, need)
        if not changes or changes[-1][1] != ok:
            changes.append((ts, ok))
    return moves[0][0], max(end, moves[-1][0]), changes


def converged_since(paths, topo, need: int, procs=None, *, timeline=None) -> float | None:
    """When the perf workers last took a converged placement and kept it to the end of the
    run (run_window()), in seconds after the first worker was placed; None if they ended
    unconverged (perf's own "de-converged").  *procs* as for thread_nodes(); *timeline*:
    placement_timeline()'s, when the caller has it."""
    t0, _, changes = timeline or placement_timeline(paths, topo, need, procs)
    if not changes or not changes[-1][1]:
        return None
    return round(changes[-1][0] - t0, 1)


def placement_history(paths, topo, need: int, window, procs=None, *, timeline=None) -> dict:
    """Figures of the exact placement's history (placement_timeline()): when it first
    converged (perf's "converged", in seconds after the first worker was placed), how
    often it left a converged placement again, and the share of the final *window* (lo,
    end) it was converged.  The verdict is the final window's majority node per thread
    (convergence()): a swap between two node pairs in progress at the very end leaves
    the run converged by that rule with no converged_since() time, and these say so.
    *timeline*: placement_timeline()'s, when the caller has it."""
    t0, end, changes = timeline or placement_timeline(paths, topo, need, procs)
    first = next((ts for ts, ok in changes if ok), None)
    left = sum(1 for (_, a), (_, b) in zip(changes, changes[1:], strict=False) if a and not b)
    lo, hi = window
    inside = 0.0
    for (ts, ok), nxt in zip(changes, [*(c[0] for c in changes[1:]), hi], strict=False):
        if ok:
            inside += max(0.0, min(nxt, hi) - max(ts, lo))
    return {
        "first_converged_s": None if first is None else round(first - t0, 1),
        "deconverged": left,
        "final_window_converged_share": round(inside / (hi - lo), 3) if hi > lo else None,
    }


def vmstat_samples(text: str) -> list[tuple[float, dict[str, int]]]:
    """'t <uptime>' lines each followed by '<counter> <value>' lines -> [(t, counters)]."""
    out: list[tuple[float, dict[str, int]]] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        try:
            if parts[0] == "t":
                out.append((float(parts[1]), {}))
            elif out:
                out[-1][1][parts[0]] = int(parts[1])
        except ValueError:
            continue
    return [(t, c) for t, c in out if "numa_hint_faults" in c and "numa_hint_faults_local" in c]


def memory_follows(r) -> Expectation:
    """numa02: the share of the phase's hinting faults that were local (the seed's figure,
    from /proc/vmstat before and after), with the 2 s samples as the timeline."""
    step = r.step(PHASE2)
    counts = numa_counts(r, PHASE2)
    pf = perf_figures(step.out)
    vm = r.vmstat(PHASE2)
    faults, local = vm.get("numa_hint_faults", 0), vm.get("numa_hint_faults_local", 0)
    share = local / faults if faults else 0.0
    samples = vmstat_samples(r.text(f"vmstat.{PHASE2}.samples"))
    timeline = []
    for (_, a), (t, b) in zip(samples, samples[1:], strict=False):
        f = b["numa_hint_faults"] - a["numa_hint_faults"]
        loc = b["numa_hint_faults_local"] - a["numa_hint_faults_local"]
        timeline.append(
            f"{t - samples[0][0]:.1f} s: {f} hinting faults"
            + (f", {loc / f:.0%} local" if f else "")
        )
    ran = step.rc == 0 and bool(pf)
    ok = ran and faults > 0 and share >= LOCAL_MIN
    if not ran:
        note = f"{PHASE2} did not run to its end (exit {step.rc})"
    elif not faults:
        note = f"no hinting faults during {PHASE2}: the scanner did not run"
    else:
        note = f"only {share:.0%} of {faults} hinting faults were local: threads moved and their memory did not follow"
    # Once memory is local the scanner backs off (its period grows with the share of local
    # faults), so the run's end has few faults: the timeline shows it, the share is the run's.
    return Expectation(
        f"{PHASE2}: each thread's memory is local to it (>= {LOCAL_MIN:.0%} of hinting faults local)",
        ok,
        evidence=(timeline[:4] + ["..."] + timeline[-4:]) if len(timeline) > 8 else timeline,
        figures={
            "threads": r.topo.n_cpus,
            "thread_mb": THREAD_MB,
            "runtime_max_s": pf.get("runtime-max/thread"),
            "local_share": round(share, 3),
            "numa_hint_faults": faults,
            "numa_hint_faults_local": local,
            "numa_pages_migrated": vm.get("numa_pages_migrated", 0),
            **counts,
            "seed_local_share": 0.92,
        },
        note="" if ok else note,
        claim=True,
    )


def knobs_written(r) -> Expectation:
    knobs = [ln for ln in r.text("knobs").splitlines() if ln.strip()]
    failed = [k for k in knobs if "FAILED" in k]
    return Expectation(
        "NUMA balancing enabled and sped up (knobs written)",
        bool(knobs) and not failed,
        evidence=failed or knobs,
        figures={"knobs": len(knobs), "failed": len(failed), "numa_balancing": "off" if balancing_off(r) else "on"},
        note="a knob could not be written (is debugfs mounted, CONFIG_NUMA_BALANCING=y?)"
        if failed
        else "",
    )


def mixed_workers(text: str) -> int | None:
    """How many workers the job put on their instance's half of every node before freeing
    them ('N workers mixed by uptime T'); None when the run did not record it."""
    m = re.match(r"(\d+) workers mixed", text)
    return int(m.group(1)) if m else None


def threads_per_proc(r, threads) -> int:
    """What the guest wrote, else the largest process the trace shows."""
    written = int(r.text("threads_per_proc").strip() or 0)
    return written or max(Counter(t["proc"] for t in threads.values()).values(), default=0)


def balancing_off(r) -> bool:
    return OFF_BY_CMDLINE in r.text("knobs")


def why_not_converged(run_s, counts, vmf, tpp, off: bool = False) -> str:
    if off:
        return (
            f"not converged in a {run_s:.0f} s run with NUMA balancing off ({OFF_BY_CMDLINE.split(': ')[1]}): "
            f"the load balancer alone does not gather a process's threads"
        )
    return (
        f"not converged in a {run_s:.0f} s run: NUMA balancing made {counts['sched_move_numa']} moves and "
        f"{counts['sched_swap_numa']} swaps, and found no better place {counts['sched_stick_numa']} times "
        f"(sched_stick_numa), from {vmf['numa_hint_faults']} hinting faults; {2 * tpp} busy threads fill every vCPU, "
        f"so only swaps consolidate. {CONVERGED_HERE}"
    )


def scan_period_ms(knobs_text: str) -> int:
    """The scan period the scanner backs off to, as the guest wrote it (else the knob lab
    writes): the longest, so the fewest periods in a run and the most work per period."""
    for line in knobs_text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == SCAN_PERIOD_MAX and value.strip().isdigit():
            return int(value.strip())
    return int(KNOBS[SCAN_PERIOD_MAX])


def work_per_scan_period(faults: int, threads: int, run_s: float, period_ms: int) -> float | None:
    """Hinting faults per worker thread per scan period over the run (None: nothing to say)."""
    if not (faults and threads and run_s and period_ms):
        return None
    return faults / threads / (run_s * 1000 / period_ms)


def too_little_work(per: float | None, faults: int, threads: int, run_s: float, period_ms: int) -> str:
    """Why the emulation, not the kernel, left numa01 unconverged: too little work per scan
    period for NUMA balancing to place a thread at all ('' when there was enough)."""
    if per is None or per >= MIN_FAULTS_PER_PERIOD:
        return ""
    return (
        f"too little work per scan period under emulation: {per:.2f} hinting faults per thread per "
        f"{period_ms} ms scan period ({faults} faults, {threads} threads, {run_s:.0f} s), under the "
        f"{MIN_FAULTS_PER_PERIOD:g} NUMA balancing needs to place a thread at all (its fault statistics "
        "halve every period)"
    )


def convergence(threads, window, tpp, topo, perf_out, why_not) -> Expectation:
    """Each process's threads on the nodes it needs and on none of the other's."""
    node_cpus = min(len(topo.node_cpus(n)) for n in topo.node_ids)
    need = max(1, math.ceil(tpp / node_cpus)) if tpp else 1
    procs: dict[int, Counter[int]] = defaultdict(Counter)  # process -> its threads per node
    for t in threads.values():
        procs[t["proc"]][t["node"]] += 1
    holders = Counter(n for nodes in procs.values() for n in nodes)
    shared = sorted(n for n, k in holders.items() if k > 1)
    spread = {p: len(nodes) for p, nodes in procs.items()}
    converged = placement_converged(procs, need)
    evidence = [
        f"process {p}: threads on nodes {dict(sorted(nodes.items()))} (needs {need} node(s) of {node_cpus} CPUs for {tpp} threads)"
        for p, nodes in sorted(procs.items())
    ]
    if shared:
        evidence.append(f"nodes holding threads of both processes: {shared}")
    evidence += [
        f"{t['name']} (pid {pid}): node {t['node']} for {t['share']:.0%} of the final window; path {t['path'][-6:]}"
        for pid, t in sorted(threads.items(), key=lambda kv: (kv[1]["proc"], kv[1]["name"]))
        if spread.get(t["proc"], 0) > need or t["node"] in shared
    ][:16]
    perf_says = [
        ln.strip()
        for ln in perf_out.splitlines()
        if "converged" in ln or re.search(r"\[\s*\d+/\d+\s*\]", ln)
    ]
    lo, hi = window
    return Expectation(
        "each process's threads end on their own node(s) (convergence)",
        converged,
        evidence=evidence + perf_says[-3:],
        figures={
            "nodes_needed": need,
            **{
                f"proc{p}_nodes": "+".join(f"{n}:{c}" for n, c in sorted(nodes.items()))
                for p, nodes in sorted(procs.items())
            },
            # How far apart a process's nodes are: the seed's machine pairs its nodes at
            # distance 20 (0-1, 2-3) and puts 40 between the pairs.
            **{
                f"proc{p}_distance": max(
                    (topo.distance(a, b) for a in nodes for b in nodes), default=0
                )
                for p, nodes in sorted(procs.items())
            },
            "shared_nodes": len(shared),
            "window_s": round(hi - lo, 2),
            "threads_seen": len(threads),
        },
        note=why_not if not converged and procs else "",
        claim=True,
    )


# Why the claims (and "NUMA balancing was active") are the kernel's own scheduler's: under
# --scheduler they are INCONCLUSIVE with their figures (lab.scenario.under_scheduler).
NUMA_SCAN = (
    "NUMA balancing's scan runs from the fair class's tick (task_tick_numa()) and its task moves are "
    "task_numa_migrate(); a task of a BPF scheduler gets neither"
)


class NumaBalancing(Scenario):
    name = "numa-balancing"
    summary = "perf bench numa mem shaped like numa01 (2 procs x ncpus/2 threads) and numa02 (ncpus threads, private memory): NUMA balancing counts, convergence, local faults (seed 001)"
    seed = "001"
    claim = (
        "'each process's threads end on their own node(s) (convergence)' and numa02's 'each thread's memory is "
        "local to it': seed 001's claim that NUMA balancing converges tasks and memory onto common nodes"
    )
    kernel_scheduler = NUMA_SCAN
    # -micro under TCG (docstring); -mini and the full machine with KVM.
    topologies = ["numa4-96-micro", "numa4-96-mini"]
    # numa02's claim and 'NUMA balancing was active' are judged by /proc/vmstat's numa_* event
    # counters, which a kernel without VM_EVENT_COUNTERS (lab's tinyconfig builds) does not
    # have: on lab-6.1-arm64 numa02 "FAILed" at 0 hinting faults while NUMA balancing made
    # 101 moves and 199 swaps (issue 39).  A SKIP naming it, before booting.
    requires = [
        at_least("nodes", 2),
        kernel_config("NUMA_BALANCING", "automatic NUMA balancing"),
        kernel_config("VM_EVENT_COUNTERS", "/proc/vmstat's NUMA hinting-fault counters, which numa02 is judged by",
                      "Debian's kernels have it, lab's tinyconfig builds do not"),
    ]  # fmt: skip
    events = [
        "sched:sched_wakeup_new",
        "sched:sched_migrate_task",
        "sched:sched_process_fork",
        "sched:sched_process_exit",
        "sched:sched_move_numa",
        "sched:sched_swap_numa",
        "sched:sched_stick_numa",
    ]
    # perf names its processes "numa-mem" / "process N" and its workers "thread P/T".
    filters = {"sched_migrate_task": 'comm ~ "thread*" || comm ~ "process*" || comm == "numa-mem"'}
    tools = ["perf"]
    workloads = False
    timeout = 480  # numa01's 180 s cap + numa02 60 s, the boot and the trace
    # 2: the workers are freed with one taskset per process, not one per worker (steps(),
    # mix): on kunpeng920-2s-mini the per-worker frees took 75-104 s of numa01's 180 s cap
    # (bench/results/bench_verdicts-20261126-180233.json, 5 runs; 4 PASS); with one taskset
    # -a per process they take 9.5-19.4 s and version 2 PASSed 5 of 5 there, 3 beside a CI
    # run and 2 on the quiet host (bench/results/bench_verdicts-20261126-184005.json,
    # bench/results/bench_verdicts-20261126-190432.json); on numa4-96-micro PASS 2 of 2 and,
    # with numa_balancing=disable, FAIL 2 of 2 (bench/results/bench_verdicts-20261126-182712.json).
    version = 2
    verdict_runs = 3  # see the module docstring: a single run does not always converge

    def steps(self, topo):
        knobs = sysctl_lines({k: v for k, v in KNOBS.items() if k != ON}, {THP: NO_THP})
        # `--append numa_balancing=disable` runs the same workload with the mechanism off:
        # the verdict must then FAIL (tests/vm).
        return f"""
if grep -qw numa_balancing=disable /proc/cmdline; then
    echo "{ON}={OFF_BY_CMDLINE}" >> "$LAB_OUT/knobs"
else
    lab_sysctl {ON} 1
fi
{knobs}
NCPU=$(labsel count "$(labsel all)")
THREADS=$((NCPU / 2))
echo "$THREADS" > threads_per_proc
# Each node's CPUs split in halves, one half per instance: numa01 starts mixed.
# CPUNODE ("CPU:NODE ...") and NEED (nodes a process of THREADS needs) for the watcher.
MIX_A=""; MIX_B=""; CPUNODE=""; NODE_MIN=0
for n in $(labsel nodes | tr , ' '); do
    cpus=$(labsel node "$n" | tr , ' '); k=0; i=0
    for c in $cpus; do k=$((k + 1)); CPUNODE="$CPUNODE $c:$n"; done
    if [ "$NODE_MIN" = 0 ] || [ "$k" -lt "$NODE_MIN" ]; then NODE_MIN=$k; fi
    k=$((k / 2))
    for c in $cpus; do
        if [ "$i" -lt "$k" ]; then MIX_A="$MIX_A,$c"; else MIX_B="$MIX_B,$c"; fi
        i=$((i + 1))
    done
done
MIX_A=${{MIX_A#,}}; MIX_B=${{MIX_B#,}}; ALL=$(labsel all)
NEED=$(((THREADS + NODE_MIN - 1) / NODE_MIN))
# mix A B: put each perf worker on its instance's half of every node as it appears (perf
# binds its workers to every CPU when they start), then, all there, free them on all CPUs.
mix() {{
    done_=" "; n=0; tries=0; tga=; tgb=  # the instances' worker processes, once seen
    while [ "$n" -lt $((2 * THREADS)) ] && [ "$tries" -lt 600 ]; do
        for c in /proc/[0-9]*/task/[0-9]*/comm; do
            cm=""; read -r cm 2>/dev/null < "$c"
            case "$cm" in "thread "*) ;; *) continue ;; esac
            t=${{c%/comm}}; tid=${{t##*/}}; tg=${{c#/proc/}}; tg=${{tg%%/*}}
            case "$done_" in *" $tid "*) continue ;; esac
            if [ "$tg" != "$tga" ] && [ "$tg" != "$tgb" ]; then
                pp=$(awk '/^PPid:/ {{print $2}}' /proc/"$tg"/status 2>/dev/null)
                if [ "$pp" = "$1" ]; then tga=$tg; elif [ "$pp" = "$2" ]; then tgb=$tg; else continue; fi
            fi
            if [ "$tg" = "$tga" ]; then set_=$MIX_A; else set_=$MIX_B; fi
            taskset -p -c "$set_" "$tid" > /dev/null 2>&1 && done_="$done_$tid " && n=$((n + 1))
        done
        tries=$((tries + 1)); sleep 0.2
    done
    echo "$n workers mixed by uptime $(cut -d' ' -f1 /proc/uptime)" > {PHASE}.mixed
    sleep 2
    # One taskset per process (-a: every thread of it), not one per worker: with every
    # vCPU busy, each fork and exec waits its turn on the emulator, and 32 of them took
    # 4-17 s on the x86 minis and 75-104 s on kunpeng920-2s-mini (arm64), most of
    # numa01's 180 s there (version 2).
    for tg in $tga $tgb; do taskset -a -p -c "$ALL" "$tg" > /dev/null 2>&1; done
    echo "freed at uptime $(cut -d' ' -f1 /proc/uptime)" >> {PHASE}.mixed
}}
# sample A B: every {WATCH_S} s while both instances run, each worker's stat line (the CPU
# it is on: field 39) for the watcher; WL lists "PROC:/proc/TGID/task/TID/stat".
sample01() {{
    while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do
        read -r up_ rest_ < /proc/uptime
        echo "t $up_"
        for w in $WL; do
            l_=""; read -r l_ 2>/dev/null < "${{w#*:}}" && echo "w ${{w%%:*}} $l_"
        done
        echo e
        sleep {WATCH_S}
    done
}}
# numa01's two processes as two perf instances: one perf's processes also share its
# bookkeeping (docstring).  Each instance writes outside $LAB_OUT: the step's .out and
# .err carry both, once.  Once the placement has been converged long enough the watcher
# (awk, WATCH_AWK) ends both instances: perf has no graceful early stop (docstring).
numa01() {{
    read -r S0 rest_ < /proc/uptime
    perf bench numa mem --no-data_rand_walk -p 1 -t "$THREADS" -G 0 -P {PROC_MB} -T 0 -l 1000000 -c -s {SECONDS} > /tmp/{PHASE}.a 2> /tmp/{PHASE}.a.err &
    A=$!
    perf bench numa mem --no-data_rand_walk -p 1 -t "$THREADS" -G 0 -P {PROC_MB} -T 0 -l 1000000 -c -s {SECONDS} > /tmp/{PHASE}.b 2> /tmp/{PHASE}.b.err &
    B=$!
    mix $A $B
    WL=""
    for tid in $done_; do
        if [ -e "/proc/$tga/task/$tid" ]; then WL="$WL 0:/proc/$tga/task/$tid/stat"; else WL="$WL 1:/proc/$tgb/task/$tid/stat"; fi
    done
    sample01 $A $B | awk -v cpunode="$CPUNODE" -v need="$NEED" -v workers="$n" -v start="$S0" \
        -v hold_min={HOLD_MIN} -v ratio={FINAL / (1 - FINAL):.6f} -v kill="$A $B $tga $tgb" '{WATCH_AWK}' > {PHASE}.watch &
    W=$!
    wait $A; ra=$?
    wait $B; rb=$?
    wait $W
    cat /tmp/{PHASE}.a /tmp/{PHASE}.b
    cat /tmp/{PHASE}.a.err /tmp/{PHASE}.b.err >&2
    # Ended by the watcher: SIGTERM (143), or perf's own end in the same instant.
    if grep -q '^stop at' {PHASE}.watch; then
        case "$ra.$rb" in 0.0|0.143|143.0|143.143) return 0 ;; *) return 1 ;; esac
    fi
    [ $ra = 0 ] && [ $rb = 0 ]
}}
lab_trace_on {PHASE}
lab_run {PHASE} numa01
lab_trace_off {PHASE}
sample() {{ echo "t $(cut -d' ' -f1 /proc/uptime)"; grep '^numa_' /proc/vmstat; }}
lab_trace_on {PHASE2}
( while :; do sample; sleep {SAMPLE_S}; done ) > vmstat.{PHASE2}.samples &
SAMPLER=$!
lab_run {PHASE2} perf bench numa mem --no-data_rand_walk -p 1 -t "$NCPU" -G 0 -P 0 -T {THREAD_MB} -l 1000000 -c -s {SECONDS2}
kill $SAMPLER; wait $SAMPLER 2>/dev/null
sample >> vmstat.{PHASE2}.samples
lab_trace_off {PHASE2}
"""

    def check(self, r):
        vm = r.vmstat(PHASE)
        vmf = {k: vm.get(k, 0) for k in VMSTAT}
        counts = numa_counts(r, PHASE)
        step = r.step(PHASE)
        # A figure (mixed_start), judged nowhere: runs from before the mixed start lack it.
        mixed = r.text(f"{PHASE}.mixed", optional=True)
        # The watcher's decisions: runs from before it lack the file (they ran to the cap).
        watch_text = r.text(f"{PHASE}.watch", optional=True)
        watch = watch_figures(watch_text)
        stopped = watch["stopped_at_s"] is not None
        pf = perf_figures(step.out)
        run_s, phase_s = pf.get("runtime-max/thread"), r.phase_seconds(PHASE)
        paths = r.task_paths(PHASE)  # parsed once: thread_nodes() and converged_since() read it
        forks = [(e.parent_pid, e.child_pid) for e in r.events(PHASE, only=["sched_process_fork"])]
        procs = worker_procs(paths, forks)
        threads, window = thread_nodes(paths, r.topo, procs=procs)
        tpp = threads_per_proc(r, threads)
        why_not = why_not_converged(run_s or phase_s or 0, counts, vmf, tpp, balancing_off(r))
        conv = convergence(threads, window, tpp, r.topo, step.out, why_not)
        # The exact placement's history, sorted once: when it converged and how it held.
        need = conv.figures["nodes_needed"]
        timeline = placement_timeline(paths, r.topo, need, procs)
        since = converged_since(paths, r.topo, need, procs, timeline=timeline) if conv.ok else None
        conv.figures["converged_after_s"] = since
        hist = placement_history(paths, r.topo, need, window, procs, timeline=timeline)
        conv.figures.update(hist)
        # Work per scan period: where the emulation gave NUMA balancing too little to place a
        # thread at all, an unconverged end is the emulation's, not the kernel's.
        period = scan_period_ms(r.text("knobs"))
        run = run_s or phase_s or 0.0
        per = work_per_scan_period(vmf["numa_hint_faults"], 2 * tpp, run, period)
        conv.figures["hint_faults_per_thread_per_scan_period"] = None if per is None else round(per, 2)
        if not conv.ok and not balancing_off(r):
            conv.inconclusive = too_little_work(per, vmf["numa_hint_faults"], 2 * tpp, run, period)
        conv.figures["watch_converged_s"] = watch["watch_converged_s"]
        # Ran: perf's summary (it ran to its cap), or, ended early by the watcher (perf has no
        # graceful early stop: no summary), the watcher's stop and every worker in the trace.
        ran_note = ""
        if step.rc != 0:
            ran_note = f"{PHASE} exited {step.rc}"
        elif stopped and len(threads) != 2 * tpp:
            ran_note = f"stopped by the watcher, but the trace shows {len(threads)} of {2 * tpp} workers"
        elif not stopped and run_s is None:
            ran_note = "perf printed no summary and the watcher did not stop it"
        ran = not ran_note
        if stopped:
            conv.evidence.insert(
                0, f"the watcher saw it converged from {watch['watch_converged_s']} s and stopped numa01 at "
                f"{watch['stopped_at_s']} s (cap {SECONDS} s)"
            )
        if since is not None:
            conv.evidence.insert(
                0, f"converged {since} s into the {run_s or phase_s or 0:.0f} s run and stayed so"
            )
        elif conv.ok and hist["first_converged_s"] is not None:
            share = hist["final_window_converged_share"] or 0.0
            conv.evidence.insert(
                0, f"first converged {hist['first_converged_s']} s into the {run_s or phase_s or 0:.0f} s run; "
                f"left it {hist['deconverged']} time(s) and was not converged at the very end (a move in "
                f"progress); converged for {share:.0%} of the final window, whose majority nodes judge"
            )
        return [
            knobs_written(r),
            Expectation(
                "the benchmark ran (numa01 shape)",
                ran,
                evidence=[ln for ln in mixed.splitlines() if ln.strip()]
                + [ln for ln in watch_text.splitlines() if ln.strip()][-4:]
                + [ln for ln in step.err.splitlines() if ln.strip()][-5:],
                figures={
                    "processes": 2,
                    "mixed_start": mixed_workers(mixed),
                    "threads_per_proc": tpp,
                    "proc_mb": PROC_MB,
                    "runtime_max_s": run_s,
                    "phase_s": round(phase_s or 0, 2),
                    "total_GBps": pf.get("total-speed"),
                    "stopped_at_s": watch["stopped_at_s"],
                    "cap_s": SECONDS,
                },
                note="" if ran else ran_note,
            ),
            Expectation(
                "NUMA balancing was active (hinting faults, task moves)",
                vmf["numa_hint_faults"] > 0 and sum(counts.values()) > 0,
                evidence=[f"{k} {v}" for k, v in vmf.items()],
                figures={**counts, **vmf},
                note=""
                if vmf["numa_hint_faults"] > 0
                else "no NUMA hinting faults: the scanner never ran (kernel.numa_balancing off or the run too short)",
                kernel_scheduler=NUMA_SCAN,
            ),
            conv,
            memory_follows(r),
        ]
