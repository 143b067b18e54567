"""Residency, wakeup targets and migrations on tiny traces with hand-computed answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.analysis import (
    MigrationAccumulator,
    PathAccumulator,
    ResidencyAccumulator,
    TaskFilter,
    WakeupAccumulator,
    count_by_group,
    migration_table,
    migrations,
    residency,
    run_all,
    task_paths,
    wakeup_targets,
)
from lab.topology import loads
from lab.trace import parse, parse_file

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"

# 2 sockets x 1 node x 2 LLCs x 2 cores x 2 threads, linear numbering:
#   node 0 = socket 0: LLC {0-3} (cores {0,1} {2,3}), LLC {4-7}
#   node 1 = socket 1: LLC {8-11}, LLC {12-15}
SMALL = loads(
    """
name = "small"
arch = "x86_64"
[cpu]
vendor = "amd"
family = 25
[topology]
sockets = 2
nodes_per_socket = 1
llcs_per_node = 2
cores_per_cluster = 2
threads_per_core = 2
numbering = "linear"
[numa]
distances = [[10, 32], [32, 10]]
"""
)

# Seed 000's machine: 2 x 64C/128T Zen3, 8 LLCs (8 cores each) per socket,
# CPUs 0-63,128-191 on socket 0 and 64-127,192-255 on socket 1.
ZEN3 = loads(
    """
name = "zen3"
arch = "x86_64"
[cpu]
vendor = "amd"
family = 25
[topology]
sockets = 2
nodes_per_socket = 1
llcs_per_node = 8
cores_per_cluster = 8
threads_per_core = 2
numbering = "smt-last"
[numa]
distances = [[10, 32], [32, 10]]
"""
)

# One socket, 2 nodes, 1 LLC per node with 2 clusters of 2 single-thread cores.
CLUSTERS = loads(
    """
name = "clusters"
arch = "arm64"
[cpu]
vendor = "hisilicon"
[topology]
sockets = 1
nodes_per_socket = 2
llcs_per_node = 1
clusters_per_llc = 2
cores_per_cluster = 2
threads_per_core = 1
numbering = "linear"
[numa]
distances = [[10, 16], [16, 10]]
"""
)


def test_the_layouts_the_expectations_below_assume():
    assert SMALL.groups("core") == tuple((i, i + 1) for i in range(0, 16, 2))
    assert SMALL.groups("llc") == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))
    assert SMALL.node_cpus(0) == tuple(range(8)) and SMALL.node_cpus(1) == tuple(range(8, 16))
    assert {c.socket for c in ZEN3.cpus if c.id in (0, 63, 128, 191)} == {ZEN3.cpu(0).socket}
    assert ZEN3.cpu(64).socket != ZEN3.cpu(0).socket
    assert ZEN3.cpu(192).socket == ZEN3.cpu(64).socket
    assert len({ZEN3.cpu(c).llc for c in range(0, 128, 16)}) == 8
    assert CLUSTERS.groups("cluster") == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert CLUSTERS.groups("llc") == ((0, 1, 2, 3), (4, 5, 6, 7))


def line(cpu: int, ts: float, name: str, body: str, comm: str = "x", pid: int = 1) -> str:
    return f"{comm:>16}-{pid:<7} [{cpu:03d}] d..2. {ts:12.6f}: {name}: {body}\n"


def switch(cpu, ts, prev, ppid, nxt, npid, state="S"):
    return line(
        cpu,
        ts,
        "sched_switch",
        f"prev_comm={prev} prev_pid={ppid} prev_prio=120 prev_state={state} ==> "
        f"next_comm={nxt} next_pid={npid} next_prio=120",
        prev,
        ppid,
    )


def migrate(ts, comm, pid, orig, dest, cpu=0):
    return line(
        cpu,
        ts,
        "sched_migrate_task",
        f"comm={comm} pid={pid} prio=120 orig_cpu={orig} dest_cpu={dest}",
    )


# ---- residency ---------------------------------------------------------------------------


RESIDENCY_TRACE = [
    switch(0, 1.0, "swapper/0", 0, "A", 100),
    line(1, 1.5, "sched_wakeup", "comm=A pid=100 prio=120 target_cpu=001"),  # cpu1's first event
    switch(1, 2.0, "C", 300, "A", 100),  # C ran on cpu1 since before the trace: 1.5-2.0
    switch(0, 3.0, "A", 100, "B", 200, state="R+"),
    switch(0, 4.0, "B", 200, "swapper/0", 0),
    switch(2, 4.5, "swapper/2", 0, "D", 400),  # D still running at the end
    switch(1, 5.0, "A", 100, "swapper/1", 0),
]


def test_residency_hand_computed():
    r = residency(parse(RESIDENCY_TRACE))
    assert sorted(r.tasks) == [100, 200, 300, 400]  # no idle
    a = r[100]
    assert a.per_cpu == {0: pytest.approx(2.0), 1: pytest.approx(3.0)}
    assert a.total == pytest.approx(5.0)
    assert a.fraction(1) == pytest.approx(0.6)
    assert a.main_cpu() == 1
    assert [(i.cpu, i.start, i.end) for i in a.intervals] == [(0, 1.0, 3.0), (1, 2.0, 5.0)]
    assert r[200].per_cpu == {0: pytest.approx(1.0)}
    c = r[300]
    assert c.per_cpu == {1: pytest.approx(0.5)}
    assert c.intervals[0].clipped_start and not c.intervals[0].clipped_end
    d = r[400]
    assert d.per_cpu == {2: pytest.approx(0.5)}
    assert d.intervals[0].clipped_end
    assert (r.start, r.end, r.inconsistent) == (1.0, 5.0, 0)
    # nodes/LLCs: cpus 0-2 are all in node 0 and LLC 0 of SMALL
    assert a.by_group(SMALL, "node") == {0: pytest.approx(5.0)}
    assert a.by_group(SMALL, "core") == {0: pytest.approx(5.0)}
    json.dumps(r.to_dict())


def test_residency_filters_cpu_map_and_end_ts():
    r = residency(parse(RESIDENCY_TRACE), comms="A", cpu_map=lambda c: c + 8, end_ts=6.0)
    assert list(r.tasks) == [100]
    assert r[100].per_cpu == {8: pytest.approx(2.0), 9: pytest.approx(3.0)}
    assert r[100].by_group(SMALL, "node") == {1: pytest.approx(5.0)}
    r = residency(parse(RESIDENCY_TRACE), pids=[400], end_ts=6.0)
    assert r[400].per_cpu == {2: pytest.approx(1.5)}
    r = residency(parse(RESIDENCY_TRACE), include_idle=True)
    # idle on cpu0: 4.0-5.0 (to the end); on cpu2: from cpu2's first event (4.5) to 4.5
    assert r[0].per_cpu[0] == pytest.approx(1.0)


def test_residency_of_all_tasks_together():
    r = residency(parse(RESIDENCY_TRACE), end_ts=6.0)
    # A 5.0, B 1.0, C 0.5, D 1.5 (4.5 to end_ts), all on CPUs 0-2
    assert r.total == pytest.approx(8.0)
    assert r.by_group(SMALL, "node") == {0: pytest.approx(8.0)}
    mapped = residency(parse(RESIDENCY_TRACE), cpu_map=lambda c: 8 + c if c else c, end_ts=6.0)
    assert mapped.by_group(SMALL, "node") == {0: pytest.approx(3.0), 1: pytest.approx(5.0)}
    assert residency(parse([])).total == 0 and residency(parse([])).by_group(SMALL, "node") == {}


def test_residency_counts_inconsistencies_from_lost_events():
    trace = [
        switch(0, 1.0, "swapper/0", 0, "A", 100),
        switch(0, 2.0, "B", 200, "A", 100),  # A's switch-out and B's switch-in were lost
        switch(0, 3.0, "A", 100, "swapper/0", 0),
    ]
    r = residency(parse(trace))
    assert r.inconsistent == 1
    assert 200 not in r.tasks  # no residency invented for B
    # A's first run ended somewhere in 1.0-2.0: dropped; tracking resumes at 2.0.
    assert r[100].per_cpu == {0: pytest.approx(1.0)}


# ---- wakeup targets ----------------------------------------------------------------------------


def test_seed000_pileup_before_the_fix():
    w = wakeup_targets(parse_file(TRACES / "seed000-tip.txt"), ZEN3)
    assert w.targets("sched_wakeup_new") == [32, 48, 0, 16, 16, 16, 16]
    assert w.pileups() == {16: 4}
    # socket groups are numbered by their first CPU: group 0 holds CPU 0
    assert w.split(ZEN3, "socket") == {0: 7, 1: 0}
    assert sorted(w.split(ZEN3, "node").items()) == [(0, 7), (1, 0)]
    # waker is on CPU 16: targets 32, 48, 0 are other LLCs of its node; 16 is itself
    assert w.level_counts() == {"node": 3, "cpu": 4}
    allowed = range(0, 128, 16)
    assert w.outside(allowed) == []
    assert {x.waker_cpu for x in w.wakeups} == {16}


def test_seed000_spread_after_the_fix():
    w = wakeup_targets(parse_file(TRACES / "seed000-fixed.txt"), ZEN3)
    assert w.pileups() == {}
    assert sorted(w.split(ZEN3, "node").items()) == [(0, 3), (1, 4)]
    assert w.level_counts() == {"node": 3, "machine": 4}
    assert len(set(w.targets())) == 7
    d = w.to_dict()
    assert d["by_kind"]["sched_wakeup_new"]["targets"] == [32, 48, 0, 112, 96, 80, 64]
    json.dumps(d)


def test_wakeups_cluster_levels_filters_and_cpu_map():
    trace = [
        line(0, 1.0, "sched_wakeup", "comm=pong pid=11 prio=120 target_cpu=001", "ping", 10),
        line(0, 1.1, "sched_wakeup", "comm=pong pid=11 prio=120 target_cpu=002", "ping", 10),
        line(0, 1.2, "sched_wakeup", "comm=pong pid=11 prio=120 target_cpu=000", "ping", 10),
        line(3, 1.3, "sched_wakeup", "comm=ping pid=10 prio=120 target_cpu=004", "pong", 11),
        line(3, 1.4, "sched_waking", "comm=ping pid=10 prio=120 target_cpu=004", "pong", 11),
        line(3, 1.5, "sched_wakeup_new", "comm=kid pid=12 prio=120 target_cpu=003", "pong", 11),
    ]
    w = wakeup_targets(parse(trace), CLUSTERS)
    assert [x.level for x in w.wakeups] == ["cluster", "llc", "cpu", "socket", "cpu"]
    assert w.by_task()[11][0].waker_pid == 10
    only_pong = wakeup_targets(parse(trace), CLUSTERS, comms="pong")
    assert only_pong.targets() == [1, 2, 0]
    waking = wakeup_targets(parse(trace), CLUSTERS, kinds=["sched_waking"])
    assert [(x.waker_cpu, x.target_cpu) for x in waking.wakeups] == [(3, 4)]
    # guest CPU g is spec CPU 7 - g: cpu 0 -> 7, targets 1,2,0 -> 6,5,7
    mapped = wakeup_targets(parse(trace), CLUSTERS, pids=[11], cpu_map=lambda g: 7 - g)
    assert [(x.waker_cpu, x.target_cpu, x.level) for x in mapped.wakeups] == [
        (7, 6, "cluster"),
        (7, 5, "llc"),
        (7, 7, "cpu"),
    ]
    with pytest.raises(ValueError):
        wakeup_targets(parse(trace), kinds=["sched_wakeup_old"])


def test_count_by_group_lists_every_group():
    assert count_by_group(SMALL, [0, 1, 9, 9], "node") == {0: 2, 1: 2}
    assert count_by_group(SMALL, [4, 12], "llc") == {0: 0, 1: 1, 2: 0, 3: 1}
    assert count_by_group(SMALL, [], "socket") == {0: 0, 1: 0}


def test_wakeup_line_is_the_trace_line_in_the_mapped_numbering():
    trace = [line(3, 1.25, "sched_wakeup_new", "comm=kid pid=12 prio=120 target_cpu=001", "sh", 11)]
    (w,) = wakeup_targets(parse(trace), SMALL, cpu_map=lambda g: g + 8).wakeups
    assert w.prio == 120 and w.to_dict()["prio"] == 120
    assert (
        w.line()
        == "sh-11 [011] 1.250000: sched_wakeup_new: comm=kid pid=12 prio=120 target_cpu=009"
    )


def waking(cpu, ts, wakee, wpid, target, waker="ping", waker_pid=10, kind="sched_waking"):
    return line(
        cpu, ts, kind, f"comm={wakee} pid={wpid} prio=120 target_cpu={target:03d}", waker, waker_pid
    )


PAIRED = [
    waking(0, 1.0, "pong", 11, 3),  # waker on CPU 0; 3 is only pong's previous CPU
    waking(1, 1.1, "pong", 11, 1, "<idle>", 0, "sched_wakeup"),  # queued: fired on the target
    waking(0, 2.0, "pong", 11, 1),  # pong still running: no sched_wakeup follows ...
    waking(2, 2.5, "pong", 11, 1),  # ... and the next waking replaces it
    waking(4, 2.6, "pong", 11, 4, "<idle>", 0, "sched_wakeup"),
    waking(5, 3.0, "pong", 11, 5, "<idle>", 0, "sched_wakeup"),  # no waking before: skipped
    waking(0, 3.1, "kworker/0:1", 7, 0),  # another task
    waking(0, 3.2, "kworker/0:1", 7, 0, "<idle>", 0, "sched_wakeup"),
    waking(6, 3.3, "kid", 12, 6, "pong", 11, "sched_wakeup_new"),  # not a wakeup of a sleeper
]


def test_paired_wakeups_take_the_waker_cpu_from_sched_waking():
    def paired(**kw):
        return wakeup_targets(parse(PAIRED), kinds=["sched_wakeup"], paired=True, **kw).wakeups

    w = paired(topo=CLUSTERS, comms="pong")
    assert [(x.ts, x.waker_cpu, x.target_cpu, x.level) for x in w] == [
        (1.1, 0, 1, "cluster"),
        (2.6, 2, 4, "socket"),
    ]
    assert (w[0].kind, w[0].pid, w[0].comm, w[0].waker_pid, w[0].waker_comm) == (
        "sched_wakeup",
        11,
        "pong",
        10,
        "ping",
    )
    assert len(paired()) == 3  # every task: the kworker too
    mapped = paired(topo=CLUSTERS, pids=[11], cpu_map=lambda g: 7 - g)
    assert [(x.waker_cpu, x.target_cpu, x.level) for x in mapped] == [
        (7, 6, "cluster"),
        (5, 3, "socket"),
    ]
    assert [x.level for x in paired(comms="pong")] == [None, None]
    # A new task has no sched_waking: sched_wakeup_new keeps its own CPU as the waker's.
    (acc,) = run_all(parse(PAIRED), WakeupAccumulator(CLUSTERS, pids=[12], paired=True))
    assert [(x.kind, x.waker_pid, x.waker_cpu) for x in acc.wakeups] == [
        ("sched_wakeup_new", 11, 6)
    ]
    with pytest.raises(ValueError, match="paired"):
        wakeup_targets(parse(PAIRED), kinds=["sched_waking"], paired=True)


PATHS = [
    line(0, 1.0, "sched_wakeup_new", "comm=main pid=21 prio=120 target_cpu=001", "main", 20),
    line(0, 1.0, "sched_wakeup_new", "comm=main pid=22 prio=120 target_cpu=008", "main", 20),
    migrate(2.0, "worker 0", 21, 1, 9),  # renamed itself after the fork
    migrate(4.0, "worker 0", 21, 9, 2),
    line(2, 6.0, "sched_process_exit", "comm=worker 0 pid=21 prio=120", "worker 0", 21),
    line(3, 7.0, "sched_process_exit", "comm=gone pid=30 prio=120", "gone", 30),
]


def test_task_paths_follow_fork_placement_then_migrations():
    paths = task_paths(parse(PATHS))
    assert list(paths) == [21, 22, 30]  # first seen first
    a = paths[21]
    assert (a.comm, a.path, a.exit_ts) == ("worker 0", [(1.0, 1), (2.0, 9), (4.0, 2)], 6.0)
    assert (paths[22].comm, paths[22].path, paths[22].exit_ts) == ("main", [(1.0, 8)], None)
    assert paths[30].path == []
    # node 0 1.0-2.0 and 4.0-end, node 1 2.0-4.0; groups in the order reached
    assert a.time_by_group(SMALL, "node", 0.0, 6.0) == {0: 3.0, 1: 2.0}
    assert list(a.time_by_group(SMALL, "node", 3.0, 6.0).items()) == [(1, 1.0), (0, 2.0)]
    assert a.time_by_group(SMALL, "node", 7.0, 8.0) == {0: 1.0}  # the last lasts to *end*
    assert a.time_by_group(SMALL, "node", 0.0, 0.5) == {}  # before the fork
    assert a.time_by_group(SMALL, "llc", 0.0, 6.0) == {0: 3.0, 2: 2.0}
    json.dumps(a.to_dict())
    mapped = task_paths(parse(PATHS), pids=[21], cpu_map=lambda g: 15 - g)
    assert list(mapped) == [21] and mapped[21].path == [(1.0, 14), (2.0, 6), (4.0, 13)]
    (one,) = run_all(parse(PATHS), PathAccumulator([22, 30]))
    assert list(one) == [22, 30]


# ---- migrations ----------------------------------------------------------------------------


MIGRATIONS = [
    migrate(1.0, "probe", 50, 0, 1),  # SMT sibling: core
    migrate(1.1, "probe", 50, 1, 3),  # same LLC {0-3}: llc
    migrate(1.2, "probe", 50, 3, 6),  # node 0, other LLC: node
    migrate(1.3, "probe", 50, 6, 9),  # node 0 -> node 1: cross, from 0
    migrate(1.4, "probe", 50, 9, 13),  # node 1, other LLC: node
    migrate(1.5, "probe", 50, 13, 12),  # core
    migrate(1.6, "probe", 50, 12, 2),  # node 1 -> node 0: cross, to 0
    migrate(1.7, "probe", 50, 2, 8),  # cross, from 0
    migrate(1.8, "other", 60, 0, 15),  # another task: cross, from 0
    migrate(1.9, "probe", 50, 8, 8),  # not a move
]


def test_migration_table_hand_computed():
    t = migration_table(parse(MIGRATIONS), SMALL, node=0, comms="probe")
    assert t.to_dict() == {
        "node": 0,
        "samecore": 2,
        "same_llc": 1,
        "samenode": 2,
        "crossnode": 3,
        "to_0": 1,
        "from_0": 2,
        "total": 8,
    }
    assert "num_migrations_crossnode: 3" in t.format()
    assert "num_migrations_to_0   : 1" in t.format()
    every = migration_table(parse(MIGRATIONS), SMALL, node=1)
    assert (every.crossnode, every.to_node, every.from_node, every.total) == (4, 3, 1, 9)


def test_migrations_details():
    m = migrations(parse(MIGRATIONS), SMALL, pids=[50], keep=True)
    assert m.by_level == {"core": 2, "llc": 1, "node": 2, "machine": 3}
    assert m.node_pairs == {(0, 0): 3, (1, 1): 2, (0, 1): 2, (1, 0): 1}
    assert [(x.src, x.dst, x.level) for x in m.items][:2] == [(0, 1, "core"), (1, 3, "llc")]
    assert m.per_task == {50: {"core": 2, "llc": 1, "node": 2, "machine": 3}}
    assert (m.first_ts, m.last_ts) == (1.0, 1.7)
    d = m.to_dict(items=True)
    assert d["by_level"] == {"core": 2, "llc": 1, "node": 2, "socket": 0, "machine": 3}
    json.dumps(d)


def test_migration_cpu_map_changes_classification():
    # Guest CPUs 0,1 are spec CPUs 0 and 8 (different nodes).
    m = migrations(parse([migrate(1.0, "p", 5, 0, 1)]), SMALL, cpu_map={0: 0, 1: 8}.__getitem__)
    assert m.by_level == {"machine": 1} and m.cross_node == 1


def test_migrations_seen_by_sched_switch():
    trace = [
        switch(0, 1.0, "swapper/0", 0, "t", 7),
        switch(0, 2.0, "t", 7, "swapper/0", 0),
        switch(1, 3.0, "swapper/1", 0, "t", 7),  # 0 -> 1: core
        switch(1, 4.0, "t", 7, "u", 8),
        switch(1, 5.0, "u", 8, "t", 7),  # still 1: not a migration
        switch(12, 6.0, "swapper/12", 0, "t", 7),  # 1 -> 12: cross node
        migrate(7.0, "t", 7, 12, 0),  # ignored with source='switch'
    ]
    m = migrations(parse(trace), SMALL, comms="t", source="switch")
    assert m.by_level == {"core": 1, "machine": 1}
    assert m.table(0).from_node == 1
    with pytest.raises(ValueError):
        migrations(parse(trace), SMALL, source="both")


def test_one_pass_feeds_several_analyses():
    res, mig, wak = run_all(
        parse(RESIDENCY_TRACE + MIGRATIONS),
        ResidencyAccumulator(),
        MigrationAccumulator(SMALL, TaskFilter.of(comms=["probe"])),
        WakeupAccumulator(SMALL),
    )
    assert res[100].total == pytest.approx(5.0)
    assert mig.total == 8
    assert wak.targets() == [1]


# ---- properties ------------------------------------------------------------------------------

CPU_IDS = st.sampled_from(SMALL.cpu_ids)


@given(st.lists(st.tuples(CPU_IDS, CPU_IDS), max_size=40), st.sampled_from(SMALL.node_ids))
def test_migration_classes_sum_to_total(pairs, node):
    trace = [migrate(1.0 + i, "p", 9, a, b) for i, (a, b) in enumerate(pairs)]
    m = migrations(parse(trace), SMALL)
    t = m.table(node)
    moves = [(a, b) for a, b in pairs if a != b]
    assert t.total == len(moves) == sum(m.by_level.values())
    assert t.samecore + t.same_llc + t.samenode + t.crossnode == t.total
    # independent definition of cross-node: the nodes differ
    assert t.crossnode == sum(1 for a, b in moves if SMALL.node_of(a) != SMALL.node_of(b))
    assert t.to_node == sum(1 for a, b in moves if SMALL.node_of(b) == node != SMALL.node_of(a))
    assert sum(m.to_node(n) for n in SMALL.node_ids) == m.cross_node
    assert sum(m.from_node(n) for n in SMALL.node_ids) == m.cross_node


@given(st.lists(st.tuples(CPU_IDS, CPU_IDS), max_size=30))
def test_migration_classification_is_symmetric(pairs):
    fwd = migrations(parse([migrate(1.0, "p", 9, a, b) for a, b in pairs]), SMALL)
    back = migrations(parse([migrate(1.0, "p", 9, b, a) for a, b in pairs]), SMALL)
    assert fwd.by_level == back.by_level
    assert fwd.table(0).to_node == back.table(0).from_node


@given(
    st.lists(st.tuples(st.integers(0, 3), st.floats(0.001, 1.0), st.integers(1, 5)), max_size=30)
)
def test_residency_never_exceeds_wall_time(steps):
    # Random switch sequences per CPU: each task's time on a CPU is at most the trace span,
    # and per CPU the tasks' times add up to at most the span.
    trace, ts, cur = [], 0.0, {}
    for cpu, dt, pid in steps:
        ts += dt
        prev = cur.get(cpu, 0)
        trace.append(switch(cpu, ts, f"t{prev}", prev, f"t{pid}", pid))
        cur[cpu] = pid
    r = residency(parse(trace))
    span = (r.end - r.start) if r.start is not None else 0.0
    for cpu in range(4):
        assert sum(t.per_cpu.get(cpu, 0.0) for t in r.tasks.values()) <= span + 1e-9
