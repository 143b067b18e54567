"""Seed 002: wakeups inside one node should land in the waker's cluster.

Yicong Yang / Barry Song, "[PATCH v9 2/2] sched/fair: Scan cluster before scanning
LLC in wake-up path" (2023, merged for 6.7): on Kunpeng 920 (clusters of 4 CPUs
sharing L3 tags, 8 clusters per node, one LLC per node) select_idle_sibling() now
looks for an idle CPU in the target's cluster before the rest of the LLC; tbench and
netperf TCP_RR "pinned to one numa" gain 12-19 % at low thread counts.

Here: waker/wakee ping-pong pairs (lab's ``pingpong``, the shape of tbench and
TCP_RR) restricted to the CPUs of node 0, as many pairs as a quarter of the node's
CPUs so idle CPUs remain to choose from.  Every pair starts split across two clusters
(``pingpong --start``: its waker pinned in cluster k, its wakee in cluster k+1, for the
first 64 round trips, then both free on the node): with a start left to chance, a pair
that happened to begin inside one cluster stayed there on any kernel (the wakee's idle
previous CPU is taken before any scan), and lab-6.1-arm64 passed now and then (design
runs on kunpeng920-2s-mini, not kept).  From a
split start the two kernels part as the patch says: 6.1 keeps returning the wakee's
idle previous CPU in the other cluster (select_idle_sibling() takes prev when it shares
the LLC), the patched kernel takes prev only inside the target's cluster
(cpus_share_resources()) and otherwise scans the waker's cluster first.  For every wakeup of a pingpong task,
sched_waking gives the waker's CPU (it fires in the waker's context; its target_cpu
is only the wakee's previous CPU) and the wakee's next sched_wakeup gives the CPU
chosen; the pair is classified by the smallest topology level holding both: the
waker's own CPU or cluster, the rest of its LLC, or elsewhere.  A kernel with the
patch keeps most of them in the cluster; without it (6.1) the LLC-wide scan takes
the first idle CPU it finds, in either cluster.

Which expectation carries seed 002's claim (``claim=True``): "most wakeups land in the
waker's cluster"; the others say the workload ran and was traced.
"""

from __future__ import annotations

from lab.scenario import Expectation, Param, Scenario, clusters, kernel_config

PHASE = "main"
COMM = "pingpong"
SECONDS = 5
# Round trips per pair, a cap beside SECONDS (pingpong stops at whichever comes first), so
# that the trace holds every wakeup whatever the scheduler: a round trip is 4 traced events
# (2 sched_waking, 2 sched_wakeup), all on one CPU when the scheduler keeps the pair there,
# and an 8192 KiB buffer held about 70,000 of these events per CPU (a run under scx_simple
# on jacobsville-24c-mini: 629,696 entries in the 9 full CPUs' buffers).  Uncapped,
# scx_simple ran each pair on one CPU at 15,300 round trips/s, 307,000 events per CPU in
# the 5 s, and the phase lost 294,678 events (an ERROR, not a verdict).  12,000 round trips
# are 48,000 events, 69 % of one CPU's buffer.  The kernel's own scheduler splits a pair
# over two CPUs of the cluster at about 6,000 round trips/s (Debian's 6.12, jacobsville-
# 24c-mini), so it reaches the cap in about 2 s with ~24,000 wakeups per pair judged; capped,
# Debian's 6.12 PASSed 5 of 5 (99.5 % in the waker's cluster) and 6.1 FAILed 5 of 5 (0 to
# 25.5 %) (bench/results/bench_verdicts-20261126-172205.json); on kunpeng920-2s-mini
# lab-6.12-scx-arm64 (6.12 has the patch) PASSed 3 of 3 (99.5 %) and lab-6.1-arm64 FAILed
# 3 of 3 (0 %) (bench/results/bench_verdicts-20261126-182606.json).
ROUNDS = 12000
# The share of wakeups in the waker's cluster that passes.  From split starts (module
# docstring), on kunpeng920-2s-mini, the design runs of lab-6.1-arm64-cluster-scan kept
# nearly every wakeup in the waker's cluster and lab-6.1-arm64 well under 90 %, most runs
# none (bench/bench_verdicts.py; their result files were not committed, so no count of
# theirs is quoted); before the split start (pairs placed by chance) 6.1 ranged from none
# to all.  The committed series is x86's cluster machine: on jacobsville-24c-mini Debian's
# 6.12 PASSed 10 of 10 and Debian's 6.1 FAILed 10 of 10
# (bench/results/bench_verdicts-20261125-233351.json).  The seed's mechanism is "the
# waker's cluster first", so 90 % states it and separates the two kernels.
MOSTLY = 0.9
PATCH = '8881e1639f1f ("sched/fair: Scan cluster before scanning LLC in wake-up path", v6.7)'


def landing(w) -> dict[str, int]:
    """Wakeups by where they landed from the waker's CPU: that CPU, its cluster (an SMT
    sibling counts: it is in the cluster), the rest of its LLC, or elsewhere."""
    lv = w.level_counts()
    c = {"cpu": lv["cpu"], "cluster": lv["core"] + lv["cluster"], "llc": lv["llc"]}
    c["elsewhere"] = len(w.wakeups) - sum(c.values())
    return c


class ClusterWakeup(Scenario):
    name = "cluster-wakeup"
    summary = "ping-pong pairs inside one node: share of wakeups in the waker's cluster / LLC / elsewhere (seed 002)"
    seed = "002"
    claim = "'most wakeups land in the waker's cluster': seed 002's claim that a wakeup's idle-CPU scan tries the waker's cluster first"
    kernel_scheduler = (
        "the wakee's CPU is select_idle_sibling()'s cluster-first scan (select_task_rq_fair()); "
        "a BPF scheduler's ops.select_cpu decides instead"
    )
    topologies = ["kunpeng920-2s-mini"]
    # Without CONFIG_SCHED_CLUSTER (Debian's arm64 6.1) the guest builds no CLS level, so
    # no kernel could keep wakeups in the cluster: known before booting, a SKIP.
    requires = [clusters, kernel_config("SCHED_CLUSTER", "the cluster sched-domain level", "--kernel lab-6.1-arm64 has it")]
    events = ["sched:sched_waking", "sched:sched_wakeup", "sched:sched_wakeup_new"]
    filters = {
        "sched_waking": f'comm == "{COMM}"',
        "sched_wakeup": f'comm == "{COMM}"',
        "sched_wakeup_new": f'comm == "{COMM}"',
    }
    workloads = True
    buffer_kb = 8192
    timeout = 300
    # 2: each pair stops at ROUNDS round trips as well as after the seconds (a run of
    # version 1 ran the whole 5 s whatever its rate).
    version = 2
    params = [
        Param("seconds", SECONDS, "how long the ping-pong pairs run (traced), at most", min=1, max=120),
        Param("rounds", ROUNDS, "round trips per pair, at most (sized so a pair alone on a CPU fits its trace buffer)", min=100, max=1000000),
    ]

    def steps(self, topo):
        return f"""
NODE=$(labsel nodes | cut -d, -f1)
CPUS=$(labsel node "$NODE")
N=$(labsel count "$CPUS")
PAIRS=$((N / 4))
[ "$PAIRS" -ge 1 ] || PAIRS=1
echo "$CPUS" > allowed
echo "$PAIRS" > pairs
# Each pair starts split: its waker on a CPU of cluster k, its wakee on one of cluster k+1
# (pinned for pingpong's first --settle round trips, then free on the node's CPUs).
CL=""
K=0
while C=$(labsel cluster "$NODE" "$K" 2>/dev/null); do CL="$CL $C"; K=$((K + 1)); done
START=$(echo "$CL" | awk -v pairs="$PAIRS" '
{{ C = NF; for (k = 1; k <= C; k++) {{ n[k] = split($k, t, ","); for (j = 1; j <= n[k]; j++) cpu[k, j] = t[j]; used[k] = 0 }} }}
END {{ s = ""; for (i = 0; i < pairs; i++) {{ w = i % C + 1; e = (i + 1) % C + 1
        if (used[w] >= n[w] || used[e] >= n[e]) exit 1
        s = s (i ? "," : "") cpu[w, ++used[w]] ":" cpu[e, ++used[e]] }}
      print s }}') || {{ echo "cannot split $PAIRS pairs over the clusters:$CL" >&2; exit 1; }}
echo "$START" > start
lab_trace_on
lab_run pingpong pingpong -p "$PAIRS" -s {self.p['seconds']} -n {self.p['rounds']} --cpus "$CPUS" --start "$START"
lab_trace_off
"""

    def check(self, r):
        allowed = r.allowed("allowed") or r.topo.cpu_ids
        w = r.wakeups(PHASE, comms=COMM, kinds=["sched_wakeup"], paired=True)
        n, c, outside = len(w.wakeups), landing(w), w.outside(allowed)
        share = {k: (v / n if n else 0.0) for k, v in c.items()}
        in_cluster = share["cpu"] + share["cluster"]
        return [
            Expectation(
                "wakeups observed (sched_waking paired with sched_wakeup)",
                n > 0,
                figures={
                    "wakeups": n,
                    "pairs": int(r.text("pairs").strip() or 0),
                    "total_rtt_per_s": r.step("pingpong").json.get("total_rtt_per_s"),
                },
                note="" if n else "no pingpong wakeups in the trace",
            ),
            Expectation(
                "every wakeup inside the node the pairs are restricted to",
                n > 0 and not outside,
                evidence=[
                    f"{x.ts:.6f}: pid {x.pid} woken from CPU {x.waker_cpu} onto CPU {x.target_cpu}"
                    for x in outside[:20]
                ],
                figures={"outside": len(outside)},
            ),
            Expectation(
                "most wakeups land in the waker's cluster",
                n > 0 and in_cluster >= MOSTLY,
                evidence=[f"{k}: {c[k]} of {n} ({share[k]:.1%})" for k in share],
                figures={
                    "same_cpu": round(share["cpu"], 3),
                    "waker_cluster": round(in_cluster, 3),
                    "waker_llc_other_cluster": round(share["llc"], 3),
                    "elsewhere": round(share["elsewhere"], 3),
                },
                note=""
                if in_cluster >= MOSTLY or not n
                else f"{in_cluster:.0%} in the waker's cluster: select_idle_sibling() scans the whole LLC for an idle CPU; "
                f"the cluster-first scan is {PATCH}, not in kernels before 6.7",
                claim=True,
            ),
        ]
