"""NUMA balancing counts and the /proc snapshots around a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.analysis import (
    NUMA_VMSTAT_KEYS,
    ProcFormatError,
    numa_balancing,
    parse_schedstat,
    parse_vmstat,
    schedstat_delta,
    vmstat_delta,
)
from lab.topology import loads
from lab.trace import parse, parse_file

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"

# 4 nodes of 2 single-thread CPUs, linear: node n = CPUs 2n, 2n+1.
NUMA4 = loads(
    """
name = "numa4"
arch = "x86_64"
[cpu]
vendor = "intel"
[topology]
sockets = 4
nodes_per_socket = 1
llcs_per_node = 1
cores_per_cluster = 2
threads_per_core = 1
numbering = "linear"
[numa]
distances = [[10, 20, 40, 40], [20, 10, 40, 40], [40, 40, 10, 20], [40, 40, 20, 10]]
"""
)


def line(cpu, ts, name, body, comm="w", pid=1):
    return f"{comm:>16}-{pid:<7} [{cpu:03d}] d..2. {ts:12.6f}: {name}: {body}\n"


def move(ts, pid, tgid, src, sn, dst, dn):
    return line(
        src,
        ts,
        "sched_move_numa",
        f"pid={pid} tgid={tgid} ngid={tgid} src_cpu={src} src_nid={sn} dst_cpu={dst} dst_nid={dn}",
        "numa01",
        pid,
    )


def pair(kind, ts, pid, tgid, src, sn, dpid, dtgid, dst, dn):
    return line(
        src,
        ts,
        f"sched_{kind}_numa",
        f"src_pid={pid} src_tgid={tgid} src_ngid={tgid} src_cpu={src} src_nid={sn} "
        f"dst_pid={dpid} dst_tgid={dtgid} dst_ngid={dtgid} dst_cpu={dst} dst_nid={dn}",
        "numa01",
        pid,
    )


TRACE = [
    move(1.0, 100, 100, 0, 0, 2, 1),
    move(1.1, 101, 100, 1, 0, 4, 2),
    pair("swap", 1.2, 100, 100, 2, 1, 200, 200, 6, 3),
    pair("stick", 1.3, 101, 100, 4, 2, 0, 0, -1, -1),
    pair("stick", 1.4, 200, 200, 6, 3, 300, 300, 0, 0),
    move(1.5, 200, 200, 6, 3, 7, 3),
    line(
        0,
        1.6,
        "sched_switch",
        "prev_comm=a prev_pid=1 prev_prio=1 prev_state=S ==> next_comm=b next_pid=2 next_prio=1",
    ),
]


def test_numa_counts_hand_computed():
    n = numa_balancing(parse(TRACE))
    assert (n.count("move"), n.count("swap"), n.count("stick"), n.total) == (3, 1, 2, 6)
    assert n.stick_no_dst == 1
    assert n.per_task == {
        100: {"move": 1, "swap": 1},
        101: {"move": 1, "stick": 1},
        200: {"stick": 1, "move": 1},
    }
    assert n.per_tgid == {100: {"move": 2, "swap": 1, "stick": 1}, 200: {"stick": 1, "move": 1}}
    assert n.swap_partners == {200: 1}
    # moves and swaps by the events' node ids (no topology given)
    assert n.node_pairs == {(0, 1): 1, (0, 2): 1, (1, 3): 1, (3, 3): 1}
    assert (n.first_ts, n.last_ts) == (1.0, 1.5)
    d = n.to_dict()
    assert (d["sched_move_numa"], d["sched_swap_numa"], d["sched_stick_numa"]) == (3, 1, 2)
    json.dumps(d)


def test_numa_filter_by_tgid_pid_and_comm():
    assert numa_balancing(parse(TRACE), pids=[100]).total == 4  # tgid 100: pids 100 and 101
    assert numa_balancing(parse(TRACE), pids=[101]).total == 2
    assert numa_balancing(parse(TRACE), comms="numa01").total == 6
    assert numa_balancing(parse(TRACE), comms="other").total == 0


def test_numa_nodes_from_topology_and_cpu_map():
    # Guest CPU g is spec CPU (g + 2) % 8: node of spec CPU c is c // 2.
    n = numa_balancing(parse(TRACE), NUMA4, cpu_map=lambda g: (g + 2) % 8)
    # move 0->2 becomes 2->4: nodes 1->2; move 1->4: 3->6: 1->3; swap 2->6: 4->0: 2->0; move 6->7: 0->1: 0->0
    assert n.node_pairs == {(1, 2): 1, (1, 3): 1, (2, 0): 1, (0, 0): 1}


def test_numa_events_in_the_fixture():
    n = numa_balancing(parse_file(TRACES / "all-events.txt"))
    assert (n.count("move"), n.count("swap"), n.count("stick"), n.stick_no_dst) == (1, 1, 1, 1)


# ---- /proc/vmstat ------------------------------------------------------------------------------

VMSTAT_BEFORE = """nr_free_pages 123
numa_hit 1000
numa_miss 0
numa_hint_faults 10
numa_hint_faults_local 4
numa_pages_migrated 0
pgfault 5000
"""
VMSTAT_AFTER = """nr_free_pages 100
numa_hit 1500
numa_miss 3
numa_hint_faults 7293
numa_hint_faults_local 3689
numa_pages_migrated 693
pgfault 8000
"""


def test_vmstat_delta():
    d = vmstat_delta(VMSTAT_BEFORE, VMSTAT_AFTER)
    assert d == {
        "numa_hit": 500,
        "numa_miss": 3,
        "numa_hint_faults": 7283,
        "numa_hint_faults_local": 3685,
        "numa_pages_migrated": 693,
        "pgfault": 3000,
    }
    # keys absent from the snapshots (NUMA balancing not built in) are left out, not 0
    assert "numa_pte_updates" in NUMA_VMSTAT_KEYS and "numa_pte_updates" not in d
    assert (
        vmstat_delta(parse_vmstat(VMSTAT_BEFORE), VMSTAT_AFTER, keys=None)["nr_free_pages"] == -23
    )


def test_vmstat_bad_line():
    with pytest.raises(ProcFormatError, match="line 2"):
        parse_vmstat("numa_hit 1\nnuma_miss lots\n")


# ---- /proc/schedstat ------------------------------------------------------------------------------


def _domain(index, mask, base):
    return f"domain{index} {mask} " + " ".join(str(base + i) for i in range(36))


SCHEDSTAT_BEFORE = "\n".join(
    [
        "version 15",
        "timestamp 4294967000",
        "cpu0 0 0 100 40 50 20 1000000 2000 60",
        _domain(0, "03", 0),
        _domain(1, "0f", 100),
        "cpu1 1 0 200 80 70 30 3000000 4000 90",
        _domain(0, "03", 0),
        _domain(1, "0f", 100),
    ]
)
SCHEDSTAT_AFTER = "\n".join(
    [
        "version 15",
        "timestamp 4294967100",
        "cpu0 0 0 150 41 55 21 1500000 2500 70",
        _domain(0, "03", 10),
        _domain(1, "0f", 100),
        "cpu1 3 0 260 80 90 35 3100000 4100 95",
        _domain(0, "03", 0),
        _domain(1, "0f", 107),
    ]
)


def test_schedstat_parse():
    s = parse_schedstat(SCHEDSTAT_BEFORE)
    assert (s.version, s.timestamp, sorted(s.cpus)) == (15, 4294967000, [0, 1])
    c0 = s.cpus[0]
    assert c0.values["sched_count"] == 100 and c0.values["ttwu_local"] == 20
    assert c0.values["run_delay"] == 2000 and c0.values["pcount"] == 60
    assert [d.span for d in c0.domains] == [(0, 1), (0, 1, 2, 3)]
    d1 = c0.domains[1].values
    # 3 idle types x 8 lb fields, then alb(3) sbe(3) sbf(3) ttwu(3)
    assert (
        d1["lb_count.idle"] == 100
        and d1["lb_count.busy"] == 108
        and d1["lb_count.newly_idle"] == 116
    )
    assert (
        d1["alb_count"] == 124 and d1["ttwu_wake_remote"] == 133 and d1["ttwu_move_balance"] == 135
    )
    assert s.total("ttwu_count") == 120
    json.dumps(s.to_dict())


def test_schedstat_delta_and_cpu_map():
    d = schedstat_delta(SCHEDSTAT_BEFORE, SCHEDSTAT_AFTER)
    assert d.timestamp == 100
    assert d.cpus[0].values["sched_count"] == 50 and d.cpus[1].values["yld_count"] == 2
    assert d.total("ttwu_count") == 25
    assert set(d.cpus[0].domains[0].values.values()) == {10}
    assert set(d.cpus[1].domains[1].values.values()) == {7}
    m = parse_schedstat(SCHEDSTAT_BEFORE, cpu_map=lambda g: g + 4)
    assert sorted(m.cpus) == [4, 5] and m.cpus[4].domains[0].span == (4, 5)


def test_schedstat_errors():
    with pytest.raises(ProcFormatError, match="no 'version'"):
        parse_schedstat("cpu0 1 2 3 4 5 6 7 8 9\n")
    with pytest.raises(ProcFormatError, match="line 2"):
        parse_schedstat("version 15\ndomain0 03 1 2\n")
    other = parse_schedstat("version 16\ncpu0 1 2 3\n")  # unknown layout: raw field names
    assert other.cpus[0].values == {"f0": 1, "f1": 2, "f2": 3}
