"""Cpuset isolation: the tasks of two sibling cgroups with disjoint cpusets never cross,
and no CPU runs tasks of both.

Mechanism.  A cgroup v2 cpuset (kernel/cgroup/cpuset.c) gives its tasks
cpuset.cpus.effective as their allowed CPUs: a task written into cgroup.procs has
set_cpus_allowed_ptr() applied (cpuset_attach()), and a task forked inside inherits the
parent's mask (dup_task_struct(); cpuset_fork()).  The scheduler then never places a task
outside its mask: fork and wakeup placement (select_task_rq() -> is_cpu_allowed(),
select_fallback_rq() falls back only inside the cpuset first) and the load balance
(can_migrate_task(): a task whose cpus_ptr lacks the destination is skipped, LBF_SOME_PINNED
/ LBF_ALL_PINNED).  Here the other CPUs of the machine stay idle, so every load balance on
them wants to pull the cgroups' runnable tasks over: the masks are what keeps them home.

Here: cgroup2 is mounted at /sys/fs/cgroup if lab's init has not (it mounts no cgroup
file system), the cpuset controller enabled (``+cpuset`` in the root's
cgroup.subtree_control), and two sibling cgroups made, A with the spec's node 0 CPUs and B
with node 1's (cpuset.mems: each one's node).  In each, a launcher shell writes its own pid
into cgroup.procs and names itself (cpuset-a / cpuset-b, /proc/self/comm), and only then
forks the work: as many busy loops as the cgroup has CPUs and a pipe of two shells
(one writing lines, one reading them: a wakeup each time the pipe empties or fills), all
shell builtins, so nothing is forked while traced but these.  Every task judged is a
descendant of a launcher (sched_process_fork from it or its descendants), forked after it
joined, so inside from its first instruction; the launcher itself is not judged: it ran
outside its cgroup before writing its pid.  Traced (sched_switch, sched_wakeup(_new),
sched_migrate_task, sched_process_fork/exit) for ``-p seconds``; the cgroups' effective
cpusets and thread lists are written to out/ before the work is killed (cgroup.kill).
From sched_switch: the CPUs each cgroup's tasks ran on and for how long.  The
claim-carrying expectation: no task of A ran on a CPU outside A's cpuset, nor of B
outside B's, and no CPU ran tasks of both.  Figures: tasks seen per cgroup, CPU-seconds
per cgroup, the CPUs used.  ``allowed_cpus()`` gives the generic affinity check
(lab.analysis.checks) the same cpusets by comm, so it agrees.

Known-bad variant: a workload variant, ``-p overlap=N``: B's cpuset also includes the
first N of A's CPUs (siblings' cpusets may overlap in cgroup v2 unless made exclusive
partitions), and B runs as many busy loops as its larger cpuset has CPUs, so B's tasks
run on those CPUs too, where A's run: "no CPU ran tasks of both" FAILs.  No kernel knob
breaks cpuset enforcement in 6.1, so this shows only that the check can fail.  The
scenario's real use is under ``--scheduler``: a sched_ext scheduler that ignores a task's
cpumask is caught there (the kernel refuses a dispatch to a CPU outside it and ejects the
scheduler, a FAIL with the kernel's reason); this scenario gives that case a workload
with many idle CPUs tempting it.

Expected verdicts on Debian's 6.1 (numa4-96-micro, TCG): PASS; FAIL with ``-p
overlap=2`` (tests/vm/test_scenarios_vm.py).  Measured, 5 runs a side (host load 2.6 on
2 cores): PASS 5/5, A on CPUs 0-3 and B on 4-7 only, 17.1 to 17.7 CPU-seconds each, 6
tasks each; overlap=2 FAIL 5/5, CPUs 0-1 ran both every time
(bench/results/bench_verdicts-20261126-060131.json,
figures-cpuset-isolation-disjoint-20261126-060406.json,
figures-cpuset-isolation-overlap-2-20261126-060406.json).  The claim has no threshold: one
switch-in outside a cpuset, or onto a CPU the other group used, FAILs it.

Which expectation carries the claim (``claim=True``): "the tasks of A and B stayed in
their cpusets and no CPU ran both"; the other says the cgroups were made and the work ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lab import cpulist
from lab.errors import UserError
from lab.scenario import Expectation, Param, Scenario, at_least
from lab.topology import Topology
from lab.trace.events import SchedProcessFork, SchedSwitch

PHASE = "main"
SECONDS = 4
GROUPS = ("a", "b")
COMM = {"a": "cpuset-a", "b": "cpuset-b"}
EVIDENCE_SHOWN = 6
CLAIM = "the tasks of A and B stayed in their cpusets and no CPU ran both"


def descendants(events: Iterable[Any], roots: dict[str, int]) -> dict[str, set[int]]:
    """From sched_process_fork events (others are skipped): group -> the pids forked by
    its root (a launcher pid) or by any of their descendants; the roots left out."""
    owner: dict[int, str] = {pid: g for g, pid in roots.items() if pid}
    out: dict[str, set[int]] = {g: set() for g in roots}
    for ev in events:
        if type(ev) is not SchedProcessFork:
            continue
        g = owner.get(ev.parent_pid)
        if g is not None:
            owner[ev.child_pid] = g
            out[g].add(ev.child_pid)
    return out


def occupancy(events: Iterable[Any], cpu_map: Callable[[int], int], members: dict[str, set[int]]) -> dict[str, Any]:
    """From sched_switch events (others are skipped): per group, the pids seen running,
    the seconds they ran on each (spec) CPU, and the first switch-ins of each onto a CPU;
    a task still running at the last event counts to it."""
    of: dict[int, str] = {pid: g for g, pids in members.items() for pid in pids}
    on: dict[int, tuple[str, int, float]] = {}  # cpu -> (group, pid, since)
    secs: dict[str, dict[int, float]] = {g: {} for g in members}
    seen: dict[str, set[int]] = {g: set() for g in members}
    first_in: dict[tuple[str, int], tuple[float, int]] = {}  # (group, cpu) -> (ts, pid)
    last: float | None = None

    def close(cpu: int, ts: float) -> None:
        g, _, t0 = on.pop(cpu)
        secs[g][cpu] = secs[g].get(cpu, 0.0) + ts - t0

    for ev in events:
        if type(ev) is not SchedSwitch:
            continue
        ts = ev.ts
        last = ts
        cpu = cpu_map(ev.cpu)
        if cpu in on:
            close(cpu, ts)
        g = of.get(ev.next_pid)
        if g is not None:
            on[cpu] = (g, ev.next_pid, ts)
            seen[g].add(ev.next_pid)
            first_in.setdefault((g, cpu), (ts, ev.next_pid))
    if last is not None:
        for cpu in list(on):
            close(cpu, last)
    return {"secs": secs, "seen": seen, "first_in": first_in}


def judge(occ: dict[str, Any], allowed: dict[str, set[int]]) -> dict[str, Any]:
    """The CPUs each group ran on outside its cpuset, and the CPUs that ran both groups,
    with evidence (the first switch-in of each)."""
    used = {g: set(occ["secs"][g]) for g in allowed}
    outside = {g: sorted(used[g] - allowed[g]) for g in allowed}
    both = sorted(used["a"] & used["b"])
    evidence = []
    for g in allowed:
        for cpu in outside[g]:
            ts, pid = occ["first_in"][(g, cpu)]
            evidence.append(f"{ts:.6f}: {COMM[g]} pid {pid} ran on CPU {cpu}, outside {g.upper()}'s cpuset {cpulist.format(sorted(allowed[g]))}")
    for cpu in both:
        ta, pa = occ["first_in"][("a", cpu)]
        tb, pb = occ["first_in"][("b", cpu)]
        evidence.append(f"CPU {cpu} ran both: cpuset-a pid {pa} from {ta:.6f}, cpuset-b pid {pb} from {tb:.6f}")
    return {"used": used, "outside": outside, "both": both, "evidence": evidence}


def _cpusets(topo: Topology, overlap: int) -> dict[str, list[int]]:
    """Spec CPUs of A (node 0's) and B (node 1's, plus the first *overlap* of A's)."""
    nodes = sorted({c.node for c in topo.cpus})
    a = sorted(c.id for c in topo.cpus if c.node == nodes[0])
    b = sorted(c.id for c in topo.cpus if c.node == nodes[1])
    if overlap > len(a):
        raise UserError(f"-p overlap={overlap}: A has only {len(a)} CPUs on {topo.name} (node {nodes[0]}: {cpulist.format(a)})")
    return {"a": a, "b": sorted({*b, *a[:overlap]})}


class CpusetIsolation(Scenario):
    name = "cpuset-isolation"
    summary = "two sibling cgroups with disjoint cpusets: their tasks never run outside their cpuset, no CPU runs both"
    seed = "issue 36"  # the scenario library (item 3), not a seed post
    claim = "'the tasks of A and B stayed in their cpusets and no CPU ran both': cpuset enforcement (cpuset_attach/fork, is_cpu_allowed, can_migrate_task)"
    topologies = ["numa4-96-micro"]
    requires = [at_least("nodes", 2)]
    workloads = False
    events = [
        "sched:sched_switch",
        "sched:sched_wakeup",
        "sched:sched_wakeup_new",
        "sched:sched_migrate_task",
        "sched:sched_process_fork",
        "sched:sched_process_exit",
    ]
    buffer_kb = 4096
    timeout = 300
    params = [
        Param("seconds", SECONDS, "how long the cgroups' work runs (traced)", min=1, max=120),
        Param("overlap", 0, "the known-bad workload variant: B's cpuset also takes this many of A's CPUs", min=0, max=1024),
    ]

    def steps(self, topo):
        sets = _cpusets(topo, int(self.p["overlap"]))
        a, b = cpulist.format(sets["a"]), cpulist.format(sets["b"])
        return f"""
CG=/sys/fs/cgroup
if ! awk -v d="$CG" '$2 == d && $3 == "cgroup2" {{f = 1}} END {{exit !f}}' /proc/mounts; then
    mkdir -p "$CG" && mount -t cgroup2 cgroup2 "$CG"
fi
nodeof() {{ for d in /sys/devices/system/cpu/cpu"$1"/node[0-9]*; do echo "${{d##*/node}}"; done; }}
lab_run setup sh -c '
set -e
CG=$1
cat "$CG/cgroup.controllers"
echo +cpuset > "$CG/cgroup.subtree_control"
for g in a b; do
    mkdir -p "$CG/lab-$g"
    if [ "$g" = a ]; then C=$2; M=$4; else C=$3; M=$5; fi
    echo "$C" > "$CG/lab-$g/cpuset.cpus"
    echo "$M" > "$CG/lab-$g/cpuset.mems"
    echo "lab-$g cpus $(cat "$CG/lab-$g/cpuset.cpus.effective") mems $(cat "$CG/lab-$g/cpuset.mems.effective")"
done' setup "$CG" "$(labcpu {a})" "$(labcpu {b})" "$(nodeof "$(labcpu {sets['a'][0]})")" "$(nodeof "$(labcpu {sets['b'][-1]})")"
for g in a b; do cat "$CG/lab-$g/cpuset.cpus.effective" > "$g.cpus" 2>/dev/null; done
# group CGROUP COMM N: a launcher that joins CGROUP, names itself COMM, then forks N
# busy loops (as many as the cgroup has CPUs) and a pipe of two shells, each held at a
# read of one line from the FIFO until all are forked (nothing spins while the launchers
# fork), says it is ready, and waits.
group() {{
    sh -c '
echo $$ > "$1/cgroup.procs" || exit 1
printf %s "$2" > /proc/$$/comm
F=$4
i=0
while [ "$i" -lt "$3" ]; do (read -r x < "$F"; while :; do :; done) & i=$((i + 1)); done
(read -r x < "$F"; while :; do echo x; done) | (read -r y < "$F"; while read -r x; do :; done) &
echo ready > "$5"
wait' group "$1" "$2" "$3" "$GO" "$4" &
}}
GO=/tmp/cpuset-go.fifo
rm -f "$GO"; mkfifo "$GO"
exec 3<> "$GO"
lab_trace_on
group "$CG/lab-a" {COMM['a']} {len(sets['a'])} a.ready
echo $! > a.launcher
group "$CG/lab-b" {COMM['b']} {len(sets['b'])} b.ready
echo $! > b.launcher
i=0
while [ "$i" -lt 300 ] && ! {{ [ -e a.ready ] && [ -e b.ready ]; }}; do sleep 0.1; i=$((i + 1)); done
# one line per task held at the FIFO: each takes one, whenever it gets to its read
awk -v n={len(sets['a']) + len(sets['b']) + 4} 'BEGIN {{ for (i = 0; i < n; i++) print "go" }}' >&3
sleep {self.p['seconds']}
# From the phase's end until the work is killed, nothing forks: beside the busy loops a
# fork costs seconds under TCG (lab_trace_stop and lab_copy are shell builtins only).
lab_trace_stop
for g in a b; do lab_copy "$CG/lab-$g/cgroup.threads" "$g.threads"; done
for g in a b; do echo 1 > "$CG/lab-$g/cgroup.kill"; done
wait
lab_trace_save
sleep 0.2
for g in a b; do rmdir "$CG/lab-$g"; done
exec 3>&-
rm -f "$GO"
"""

    def allowed_cpus(self, r, phase):
        # The cgroups' tasks carry their launcher's comm (cpuset-a / cpuset-b) and may run
        # only on its cgroup's effective cpuset, which the job wrote (guest numbering).
        out = {COMM[g]: r.allowed(f"{g}.cpus") for g in GROUPS}
        return out if all(out.values()) else None

    def check(self, r):
        allowed = {g: set(r.allowed(f"{g}.cpus")) for g in GROUPS}
        roots = {g: int(r.text(f"{g}.launcher").strip() or 0) for g in GROUPS}
        listed = {g: {int(x) for x in r.text(f"{g}.threads").split() if x.isdigit()} for g in GROUPS}
        members = descendants(r.events(PHASE, only=["sched_process_fork"]), roots)
        occ = occupancy(r.events(PHASE, only=["sched_switch"]), r.cpu, members)
        f = judge(occ, allowed)
        expected = {g: len(allowed[g]) + 2 for g in GROUPS}  # busy loops and the pipe's two shells
        in_cgroup = {g: len(occ["seen"][g] & listed[g]) for g in GROUPS}
        ran = r.step("setup").rc == 0 and all(allowed.values()) and all(len(occ["seen"][g]) >= expected[g] and in_cgroup[g] >= expected[g] for g in GROUPS)
        crossed = any(f["outside"].values())
        ok = ran and not crossed and not f["both"]
        overlap = int(self.p["overlap"])
        note = ""
        if ran and not ok:
            parts = [f"{COMM[g]} ran on CPUs {cpulist.format(f['outside'][g])} outside its cpuset" for g in GROUPS if f["outside"][g]]
            if f["both"]:
                parts.append(f"CPUs {cpulist.format(f['both'])} ran tasks of both")
            note = "; ".join(parts)
            if overlap:
                note += f" (B's cpuset took {overlap} of A's CPUs: -p overlap={overlap}, the known-bad variant)"
        return [
            Expectation(
                "the cgroups were made and their work ran, traced",
                ran,
                figures={
                    "cpuset_a": cpulist.format(sorted(allowed["a"])),
                    "cpuset_b": cpulist.format(sorted(allowed["b"])),
                    "tasks_expected": expected,
                    "tasks_seen": {g: len(occ["seen"][g]) for g in GROUPS},
                    "tasks_seen_in_cgroup_threads": in_cgroup,
                },
                note="" if ran else (f"setup rc {r.step('setup').rc} ({r.step('setup').err.strip()[:200]}); tasks seen running "
                                     + ", ".join(f"{g.upper()} {len(occ['seen'][g])} (listed in its cgroup {in_cgroup[g]}) of {expected[g]}" for g in GROUPS)),
            ),
            Expectation(
                CLAIM,
                ok,
                evidence=f["evidence"][:EVIDENCE_SHOWN],
                figures={
                    "cpus_used": {g: cpulist.format(sorted(f["used"][g])) for g in GROUPS},
                    "cpu_s": {g: round(sum(occ["secs"][g].values()), 3) for g in GROUPS},
                    "outside": {g: cpulist.format(f["outside"][g]) for g in GROUPS},
                    "cpus_running_both": cpulist.format(f["both"]),
                },
                note=note,
                claim=True,
            ),
        ]
