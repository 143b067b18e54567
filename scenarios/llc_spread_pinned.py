"""Seed 000: threads pinned to one CPU in every other LLC must spread across sockets at fork.

K Prateek Nayak, "sched/fair: Consider CPU affinity when allowing NUMA imbalance in
find_idlest_group()" (merged for 5.19): with 8 stream threads pinned one per LLC on a
2-socket Zen3 (numactl -C 0,16,...,112), threads 5-8 piled onto socket 0's CPUs because
the NUMA imbalance allowance (imb_numa_nr = LLCs per socket) ignored that only 4 CPUs
of the socket were allowed.  Here: on a topology with L LLCs per socket, pin one CPU in
every other LLC, start as many threads as pinned CPUs, and look at sched_wakeup_new.
"""

from collections import Counter

from lab.scenario import Expectation, Scenario, at_least


def line(r, e, target):
    return (
        f"{e.comm}-{e.pid} [{r.cpu(e.cpu):03d}] {e.ts:.6f}: sched_wakeup_new: "
        f"comm={e.task_comm} pid={e.task_pid} prio={e.prio} target_cpu={target:03d}"
    )


class LlcSpreadPinned(Scenario):
    name = "llc-spread-pinned"
    summary = "stream threads pinned one per every-other LLC: fork placement must use both sockets (seed 000)"
    seed = "000"
    topologies = ["zen3-2s-mini", "epyc7551-8n-mini", "icelake-2s-mini"]
    requires = [at_least("sockets", 2), at_least("llcs_per_socket", 2)]
    events = ["sched:sched_wakeup_new", "sched:sched_migrate_task", "sched:sched_process_fork", "sched:sched_process_exit"]
    workloads = True

    def steps(self, topo):
        return """
CPUS=$(labsel llc-firsts every=2) || exit 1
N=$(labsel count "$CPUS")
echo "$CPUS" > allowed
lab_trace_on
lab_run stream taskset -c "$CPUS" stream -t "$N" -s 2
lab_trace_off
"""

    def check(self, r):
        allowed = r.cpus(r.text("allowed").strip())
        news, migs = [], []
        for e in r.events(only=["sched_wakeup_new", "sched_migrate_task"]):
            if e.name == "sched_wakeup_new" and e.task_comm == "stream":
                news.append(e)
            elif e.name == "sched_migrate_task" and e.task_comm == "stream":
                migs.append(e)
        # The worker threads are the forked tasks; the main thread only forks and joins.
        workers = {e.task_pid for e in news}
        migs = [e for e in migs if e.task_pid in workers]
        targets = [r.cpu(e.target_cpu) for e in news]
        sock = {c: r.topo.cpu(c).socket for c in r.topo.cpu_ids}
        per_socket = Counter(sock[c] for c in targets)
        allowed_per_socket = Counter(sock[c] for c in allowed)
        cause = self.cause(r)
        inside = [line(r, e, t) for e, t in zip(news, targets, strict=True) if t not in allowed]
        dup = Counter(targets)
        piled = [line(r, e, t) for e, t in zip(news, targets, strict=True) if dup[t] > 1]
        first_ts = news[0].ts if news else 0.0
        last_mig = max((e.ts for e in migs), default=first_ts)
        mig_lines = [
            f"{e.ts:.6f}: sched_migrate_task: pid={e.task_pid} orig_cpu={r.cpu(e.orig_cpu)} dest_cpu={r.cpu(e.dest_cpu)}"
            for e in migs
        ]
        split = {f"socket{s}": per_socket.get(s, 0) for s in sorted(allowed_per_socket)}
        even = len(news) == len(allowed) and all(
            per_socket.get(s, 0) == n for s, n in allowed_per_socket.items()
        )
        return [
            Expectation(
                "a sched_wakeup_new per thread",
                len(news) == len(allowed),
                evidence=[] if len(news) == len(allowed) else [f"{len(news)} sched_wakeup_new for {len(allowed)} threads"],
                figures={"threads": len(allowed), "wakeup_new": len(news), "allowed": ",".join(map(str, allowed))},
            ),
            Expectation(
                "every target inside the allowed CPUs",
                not inside and bool(news),
                evidence=inside,
                figures={"outside": len(inside)},
            ),
            Expectation(
                "targets distinct (no pile-up)",
                len(set(targets)) == len(targets) and bool(news),
                evidence=piled,
                figures={"targets": ",".join(map(str, targets)), "distinct": len(set(targets))},
                note=cause,
            ),
            Expectation(
                "even split between sockets",
                even,
                evidence=[] if even else [f"targets per socket {split}, allowed per socket {dict(sorted(allowed_per_socket.items()))}"],
                figures={**split, "migrations": len(migs), "stable_after_s": round(last_mig - first_ts, 3)},
                note=cause,
            ),
            Expectation(
                "no balancing needed after the fork (no worker migrates)",
                not migs,
                evidence=mig_lines,
                figures={"migrations": len(migs)},
                note=cause if migs else "",
            ),
        ]

    @staticmethod
    def cause(r):
        """Name the vendor effect when the guest's NUMA domain cannot fork-balance."""
        if r.guest_view is None:
            return ""
        cpu0 = r.topo.cpu_ids[0]
        cv = r.guest_view.cpus.get(cpu0)
        if cv is None:
            return ""
        socket0 = set(r.topo.group_of("socket", cpu0))
        for d in cv.domains:
            if not set(d.span) <= socket0:
                if "SD_BALANCE_FORK" in d.flags:
                    return ""
                dist = max(r.topo.distances[0])
                return (
                    f"the guest's first domain spanning sockets ({d.name}, {len(d.span)} CPUs) has no "
                    f"SD_BALANCE_FORK: the guest kernel's node_reclaim_distance is {r.plan.guest_reclaim_distance} "
                    f"(a {r.plan.cpu_vendor} CPU model) and the distance is {dist}, so fork placement never leaves "
                    f"the parent's socket whatever the kernel; the real {r.topo.vendor} machine uses "
                    f"{r.topo.node_reclaim_distance}. Boot a lab-built kernel (--kernel lab-6.1) to pass "
                    f"node_reclaim_distance={r.topo.node_reclaim_distance}"
                )
        return ""
