"""Idle balance and work conservation under a bursty load: no CPU sits idle for long
while a task waits runnable on another CPU of its LLC.

Mechanism.  hackbench's senders and receivers block and wake all the time, so runqueues
fill and drain in bursts.  A CPU about to go idle runs the newly-idle balance
(sched_balance_newidle() in Debian's 6.1, newidle_balance() upstream: load_balance()
with CPU_NEWLY_IDLE over each domain, the LLC's first) and pulls a waiting task from
a busier CPU; the nohz idle balance and the periodic balance catch what it misses, a
tick or more later.  Which task may move is can_migrate_task()'s call: a task that ran
on its CPU less than sysctl_sched_migration_cost ago is cache-hot (task_hot()) and is
pulled only after the domain's balance has failed more than cache_nice_tries times,
which newly-idle balancing never counts.

Here: ``hackbench -g -p groups -l -p loops`` (sockets, processes) on every CPU, traced
(sched_switch, sched_wakeup(_new), sched_migrate_task), judged by the work-conservation
figure every run gets (lab.analysis.checks.ChecksAccumulator.work_conservation): the
CPU-seconds a CPU was idle while a task allowed there waited runnable on another CPU of
the same LLC, over the CPU-seconds observed.  The claim-carrying expectation: that
share is at most MAX_IDLE_WAITING.  Expected verdict on Debian's 6.1 (numa4-96-micro,
TCG): PASS.

Known-bad variant: a kernel knob, ``-p migration_cost_ns=4294967295`` (debugfs
sched/migration_cost_ns set to (unsigned) -1, where task_hot() in kernel/sched/fair.c
returns 1 for every task: every task is cache-hot, so the newly-idle balance pulls
nothing and the periodic balance moves a task only after repeated failures).  Idle CPUs
then wait for the next wakeup to be placed on them while their LLC's queues hold tasks:
the share rises above the bound and the check FAILs (measured: MAX_IDLE_WAITING).

Which expectation carries the claim (``claim=True``): "CPUs idle while a task waits in
their LLC at most ..."; the others say the workload ran, the knob was set as asked.
"""

from __future__ import annotations

from lab.analysis.checks import EVENTS, ChecksAccumulator, Traced
from lab.scenario import Expectation, Param, Scenario

PHASE = "main"
KNOB = "/sys/kernel/debug/sched/migration_cost_ns"
# The largest share of the observed CPU-seconds a CPU may spend idle while a task waits
# in its LLC: set from measured runs (see the module docstring).
MAX_IDLE_WAITING = 0.05
# A domain's max_newidle_lb_cost above any avg_idle (capped at twice max_idle_balance_cost,
# about 1 ms) skips its newly-idle balance; it decays by 1 % a second: 1e15 ns stays huge.
NEWIDLE_OFF_NS = 10**15


class WorkConservation(Scenario):
    name = "work-conservation"
    summary = "hackbench groups on every CPU: CPUs idle while a task waits runnable in their LLC, at most a small share"
    seed = "issue 36"  # the scenario library (item 3), not a seed post
    claim = "'CPUs idle while a task waits in their LLC at most ...': the newly-idle and idle balance keep an LLC's CPUs busy while it has waiting tasks"
    topologies = ["numa4-96-micro"]
    requires = []
    tools = ["hackbench"]
    workloads = False
    buffer_kb = 8192
    timeout = 300
    params = [
        Param("groups", 2, "hackbench groups (40 tasks each)", min=1, max=64),
        Param("loops", 300, "hackbench's loops", min=1, max=100000),
        Param("migration_cost_ns", -1, "write debugfs sched/migration_cost_ns first (-1: leave the kernel's; 4294967295: every task cache-hot, the known-bad knob)",
              min=-1, max=4294967295),  # fmt: skip
        Param("newidle", True, "false: write a huge max_newidle_lb_cost (NEWIDLE_OFF_NS) on every CPU's sched domains, so the newly-idle balance never runs"),
    ]

    def steps(self, topo):
        mc = self.p["migration_cost_ns"]
        knob = f"lab_sysctl {KNOB} {mc}\n" if mc >= 0 else ": > knobs\n"
        if not self.p["newidle"]:
            knob += f'for f in /sys/kernel/debug/sched/domains/cpu*/domain*/max_newidle_lb_cost; do lab_sysctl "$f" {NEWIDLE_OFF_NS}; done\n'
        return f"""
{knob}cat {KNOB} > migration_cost 2>/dev/null || echo unknown > migration_cost
lab_trace_on
lab_run hackbench hackbench -g {self.p['groups']} -l {self.p['loops']}
lab_trace_off
"""

    def check(self, r):
        acc = ChecksAccumulator(r.topo, r.cpu, Traced.of(self.events, self.filters))
        for ev in r.events(PHASE, only=list(EVENTS)):
            acc.feed(ev)
        wc = acc.result()["work_conservation"]
        measured = "not_measured" not in wc
        share = wc["llc"]["share"] if measured else None
        ran = r.step("hackbench").rc == 0
        knobs = r.text("knobs", optional=True).split()
        want = self.p["migration_cost_ns"]
        cost = r.text("migration_cost").strip()
        set_ok = want < 0 or (f"{KNOB}={want}" in knobs and cost == str(want))
        ok = measured and ran and share is not None and share <= MAX_IDLE_WAITING
        return [
            Expectation(
                "hackbench ran and was traced",
                ran and measured and wc.get("observed_cpu_s", 0) > 0,
                figures={"hackbench_s": _seconds(r.step("hackbench").out), "observed_cpu_s": wc.get("observed_cpu_s")},
                note="" if ran and measured else (wc.get("not_measured") or "hackbench failed"),
            ),
            Expectation(
                "sched/migration_cost_ns as asked",
                set_ok,
                figures={"migration_cost_ns": cost},
                note="" if set_ok else f"asked {want}, the guest has {cost} ({' '.join(knobs) or 'no knob written'})",
            ),
            Expectation(
                f"CPUs idle while a task waits in their LLC at most {MAX_IDLE_WAITING:.0%} of the time",
                ok,
                evidence=[f"{lv}: {wc[lv]['idle_while_waiting_s']} CPU-s idle while a task waited ({wc[lv]['share']:.2%})" for lv in ("llc", "node")]
                if measured else [],  # fmt: skip
                figures={
                    "llc_share": share,
                    "node_share": wc["node"]["share"] if measured else None,
                    "llc_idle_while_waiting_s": wc["llc"]["idle_while_waiting_s"] if measured else None,
                    "max_share": MAX_IDLE_WAITING,
                },
                note=""
                if ok or not measured
                else f"CPUs sat idle {share:.1%} of the time while a task waited in their LLC"
                + (" (every task cache-hot: migration_cost_ns -1, the known-bad knob)" if want == 4294967295 else
                   " (the newly-idle / idle balance did not pull the waiting tasks)"),
                claim=True,
            ),
        ]


def _seconds(out: str) -> float | None:
    """hackbench's 'Time: 1.234'."""
    for line in out.splitlines():
        if line.startswith("Time:"):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None
