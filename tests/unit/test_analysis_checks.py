"""The checks every run gets (lab.analysis.checks) on tiny traces with hand-computed answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lab import runner
from lab import scenario as sc
from lab.analysis.checks import (
    ChecksAccumulator,
    CheckSyntaxError,
    Traced,
    checks,
    format_checks,
    parse_check,
    percentile,
    switch_comm,
    trace_checks,
    untraced,
)
from lab.errors import UserError
from lab.plan import VmPlan
from lab.scenario import Scenario
from lab.topology import loads
from lab.trace import parse

# 2 sockets x 1 node x 2 LLCs x 2 cores x 2 threads, linear numbering:
#   node 0: LLC {0-3} (cores {0,1} {2,3}), LLC {4-7}; node 1: LLC {8-11}, LLC {12-15}
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

ALL = ["sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new", "sched:sched_waking", "sched:sched_migrate_task"]


def line(cpu: int, ts: float, name: str, body: str, comm: str = "w", pid: int = 10) -> str:
    return f"{comm:>16}-{pid:<7} [{cpu:03d}] d..2. {ts:12.6f}: {name}: {body}\n"


def switch(cpu, ts, prev, ppid, nxt, npid, state="S"):
    return line(cpu, ts, "sched_switch",
                f"prev_comm={prev} prev_pid={ppid} prev_prio=120 prev_state={state} ==> "
                f"next_comm={nxt} next_pid={npid} next_prio=120", prev, ppid)  # fmt: skip


def wake(cpu, ts, kind, comm, pid, target, by="w", by_pid=10):
    return line(cpu, ts, kind, f"comm={comm} pid={pid} prio=120 target_cpu={target:03d}", by, by_pid)


def migrate(cpu, ts, comm, pid, src, dst):
    return line(cpu, ts, "sched_migrate_task", f"comm={comm} pid={pid} prio=120 orig_cpu={src} dest_cpu={dst}", "w", 10)


# Three tasks named 'w' (pids 10, 12, 13) on CPUs 0 and 1 (one core, one LLC, node 0):
#   1.0  CPU0 idle -> 10 runs; CPU1 x(99) sleeps -> idle
#   1.1  waking 12 (latency starts);  1.2 wakeup 12 on CPU0: waits while CPU1 idles
#   1.5  CPU0: 10 preempted (R+) -> 12 runs (waited 0.3, latency 0.4); 10 waits on CPU0
#   1.6  10 pulled to CPU1 (idle: the only queue is the idle CPU's own, no waste after)
#   1.7  CPU1: idle -> 10 (waited 0.2)
#   2.0  CPU0: 12 sleeps -> idle
#   2.2  wakeup_new 13 on CPU1, while CPU0 idles (waste again)
#   2.5  CPU1: 10 preempted (R) -> 13 (waited 0.3, latency 0.3); 10 waits on CPU1
#   2.9  10 moved to CPU0 (idle: no waste after);  3.0 CPU0: idle -> 10 (waited 0.5)
TRACE = [
    switch(0, 1.0, "swapper/0", 0, "w", 10, "R"),
    switch(1, 1.0, "x", 99, "swapper/1", 0),
    wake(0, 1.1, "sched_waking", "w", 12, 0),
    wake(0, 1.2, "sched_wakeup", "w", 12, 0),
    switch(0, 1.5, "w", 10, "w", 12, "R+"),
    migrate(1, 1.6, "w", 10, 0, 1),
    switch(1, 1.7, "swapper/1", 0, "w", 10, "R"),
    switch(0, 2.0, "w", 12, "swapper/0", 0),
    wake(1, 2.2, "sched_wakeup_new", "w", 13, 1),
    switch(1, 2.5, "w", 10, "w", 13, "R"),
    migrate(0, 2.9, "w", 10, 1, 0),
    switch(0, 3.0, "swapper/0", 0, "w", 10, "R"),
]


def run(trace=TRACE, events=ALL, filters=None, allowed=None):
    reader = parse(trace)
    return checks(reader, SMALL, traced=Traced.of(events, filters), allowed=allowed, allowed_source="test")


def test_starvation_is_the_longest_runnable_wait_with_its_task():
    s = run()["starvation"]
    assert s == {"longest_s": 0.5, "pid": 10, "comm": "w", "cpu": 0, "since": 2.5, "from": "preempted", "open": False}


def test_a_task_still_waiting_at_the_end_counts_to_the_trace_end():
    s = run(TRACE[:-1] + [line(1, 4.0, "sched_switch", "prev_comm=w prev_pid=13 prev_prio=120 prev_state=R ==> next_comm=w next_pid=13 next_prio=120", "w", 13)])["starvation"]
    # 10 waits from 2.5 (queued on CPU0 since 2.9) to the last event, 4.0
    assert s["longest_s"] == 1.5 and s["pid"] == 10 and s["open"] is True and s["cpu"] == 0


def test_wakeup_latency_starts_at_waking_and_uses_nearest_rank_percentiles():
    w = run()["wakeup_latency"]
    assert w == {"count": 2, "p50_s": 0.3, "p90_s": 0.4, "p99_s": 0.4, "max_s": 0.4, "max_pid": 12, "max_comm": "w", "from": "sched_waking"}
    no_waking = run([x for x in TRACE if "sched_waking" not in x], events=[e for e in ALL if "waking" not in e])
    assert no_waking["wakeup_latency"]["p90_s"] == 0.3 and no_waking["wakeup_latency"]["from"] == "sched_wakeup"


def test_percentile_nearest_rank():
    xs = [float(i) for i in range(1, 101)]
    assert [percentile(xs, p) for p in (50, 90, 99, 100)] == [50.0, 90.0, 99.0, 100.0]
    assert percentile([7.0], 50) == 7.0


def test_work_conservation_counts_idle_cpu_time_while_a_task_waits_elsewhere_in_the_group():
    wc = run()["work_conservation"]
    # 1.2-1.6 (CPU1 idle, 12 then 10 waiting on CPU0) and 2.2-2.9 (CPU0 idle, 13 then 10 on CPU1)
    assert wc["llc"] == {"idle_while_waiting_s": 1.1, "share": 0.275}  # of 2 CPUs x 2.0 s
    assert wc["node"] == wc["llc"]
    assert wc["observed_cpu_s"] == 4.0 and wc["masks"].startswith("assumed: every CPU allowed")


def test_work_conservation_honours_recorded_masks():
    # Every 'w' allowed on both CPUs: the same answer through the masks' path.
    assert run(allowed={"w": [0, 1]})["work_conservation"]["llc"]["idle_while_waiting_s"] == 1.1
    # Allowed on CPU0 only: CPU1's idling is no waste, CPU0's (2.2-2.9) is.
    wc = run(allowed={"w*": [0]})["work_conservation"]
    assert wc["llc"]["idle_while_waiting_s"] == 0.7 and wc["masks"].startswith("allowed CPUs from test")


def test_waiting_in_another_llc_is_not_llc_waste_but_is_node_waste():
    trace = [
        switch(0, 1.0, "swapper/0", 0, "w", 10, "R"),
        switch(4, 1.0, "x", 99, "swapper/4", 0),  # CPU4: the other LLC of node 0
        switch(8, 1.0, "x", 98, "swapper/8", 0),  # CPU8: node 1
        wake(0, 1.0, "sched_wakeup", "w", 12, 0),
        switch(0, 2.0, "w", 10, "w", 12),
    ]
    wc = run(trace)["work_conservation"]
    assert wc["llc"]["idle_while_waiting_s"] == 0.0
    assert wc["node"]["idle_while_waiting_s"] == 1.0  # CPU4 only: CPU8 is the other node
    assert wc["observed_cpu_s"] == 3.0


def test_fairness_spread_of_cpu_time_among_tasks_of_one_comm():
    f = run()["fairness"]
    # 10: 1.0-1.5 + 1.7-2.5 = 1.3 s; 12: 1.5-2.0 = 0.5 s; 13: 2.5-3.0 (running at the end) = 0.5 s
    mean = (1.3 + 0.5 + 0.5) / 3
    cv = math.sqrt(((1.3 - mean) ** 2 + 2 * (0.5 - mean) ** 2) / 3) / mean
    assert f["groups"] == 1 and f["worst"] == "w"
    assert f["by_comm"]["w"] == {"tasks": 3, "min_s": 0.5, "max_s": 1.3, "max_over_min": 2.6, "cv": round(cv, 6)}
    assert round(cv, 6) == 0.4919


def test_migrations_per_second_by_level():
    m = run()["migrations"]
    assert m["total"] == 2 and m["span_s"] == 2.0
    assert m["by_level"]["core"] == 2 and m["per_s"]["core"] == 1.0 and m["per_s"]["node"] == 0.0


def test_affinity_violations_against_the_recorded_masks():
    assert run()["affinity"] == {"not_measured": "not measured: the run records no task's allowed CPUs"}
    ok = run(allowed={"w": [0, 1]})["affinity"]
    assert ok["violations"] == 0 and ok["tasks"] == [] and ok["allowed_from"] == "test"
    bad = run(allowed={"w": [0]})["affinity"]
    # 10 pulled to CPU1 (1.6) and run there (1.7); 13 placed on CPU1 (2.2) and run there (2.5)
    assert bad["violations"] == 4 and bad["tasks"] == [10, 13]
    assert bad["evidence"][0] == "1.600000: sched_migrate_task w-10 to CPU 1 (allowed 0)"
    assert bad["judged_on"] == ["sched_switch", "sched_wakeup", "sched_wakeup_new", "sched_migrate_task"]


def test_missing_or_filtered_events_are_not_measured_never_a_number():
    no_new = run(events=[e for e in ALL if not e.endswith("wakeup_new")])
    assert no_new["starvation"] == {"not_measured": "not measured: event sched_wakeup_new not traced"}
    assert no_new["work_conservation"] == {"not_measured": "not measured: event sched_wakeup_new not traced"}
    assert "p50_s" in no_new["wakeup_latency"] and "cv" in no_new["fairness"]["by_comm"]["w"]
    filtered = run(filters={"sched_switch": 'prev_comm == "x" || next_comm == "x" || next_comm == "w"'})
    assert filtered["fairness"]["not_measured"].startswith("not measured: event sched_switch traced with a filter (prev_comm")
    assert filtered["starvation"]["not_measured"] == filtered["fairness"]["not_measured"]
    assert run(events=["sched:sched_migrate_task"])["wakeup_latency"] == {"not_measured": "not measured: event sched_switch not traced"}
    off = run([x for x in TRACE if "sched_switch" not in x])
    assert off["fairness"]["not_measured"].startswith("not measured: no sched_switch event in the trace")
    mf = run(filters={"sched_migrate_task": 'comm == "w"'})["migrations"]
    assert mf["filtered"] == 'comm == "w"' and mf["total"] == 2


def test_unknown_events_list_takes_the_events_the_trace_holds():
    out = checks(parse(TRACE), SMALL)
    assert out["starvation"]["longest_s"] == 0.5
    none = checks(parse([]), SMALL)
    assert none["fairness"] == {"not_measured": "not measured: event sched_switch not traced"}


def test_guest_numbering_is_translated_before_groups_are_looked_up():
    # Guest CPUs 0 and 1 are spec CPUs 4 and 8 (different nodes): no LLC or node waste.
    trace = [
        switch(0, 1.0, "swapper/0", 0, "w", 10, "R"),
        switch(1, 1.0, "x", 99, "swapper/1", 0),
        wake(0, 1.0, "sched_wakeup", "w", 12, 0),
        switch(0, 2.0, "w", 10, "w", 12),
    ]
    acc = ChecksAccumulator(SMALL, cpu_map={0: 4, 1: 8}.__getitem__, traced=Traced.of(ALL))
    for ev in parse(trace):
        acc.feed(ev)
    wc = acc.result()["work_conservation"]
    assert wc["node"]["idle_while_waiting_s"] == 0.0
    same = checks(parse(trace), SMALL, traced=Traced.of(ALL))["work_conservation"]
    assert same["llc"]["idle_while_waiting_s"] == 1.0


@pytest.mark.parametrize("events", [None, ALL])
def test_a_cpu_outside_the_topology_is_ignored_not_a_crash(events):
    trace = [
        switch(40, 1.0, "swapper/40", 0, "w", 10, "R"),
        wake(40, 1.5, "sched_wakeup", "w", 12, 40),
        migrate(40, 1.6, "w", 12, 40, 41),
        switch(41, 2.0, "w", 10, "w", 12, "R"),
    ]
    out = checks(parse(trace), SMALL, traced=Traced.of(events) if events else None)
    if events:
        assert out["work_conservation"]["observed_cpu_s"] == 0.0 and out["starvation"]["longest_s"] == 0.5
        assert out["migrations"]["total"] == 0
    else:
        assert out["starvation"] == {"not_measured": "not measured: event sched_wakeup_new not traced"}


def test_fairness_under_a_filter_keeping_one_comms_switches_is_of_that_comm():
    f = run(filters={"sched_switch": 'next_comm == "w" || prev_comm == "w"'})["fairness"]
    assert f["by_comm"]["w"]["tasks"] == 3 and f["scope"].startswith("comm w only")
    assert switch_comm('prev_comm == "hackbench" || next_comm == "hackbench"') == "hackbench"
    for other in ('prev_comm == "a" || next_comm == "b"', 'prev_comm == "a*" || next_comm == "a*"', 'prev_comm == "a"', "prev_pid == 3"):
        assert switch_comm(other) is None


# ---- recorded runs ----------------------------------------------------------------------------

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "runs"
NO_SWITCH = {"not_measured": "not measured: event sched_switch not traced"}


def recorded(name: str) -> tuple[Path, VmPlan, Scenario]:
    d = RUNS / name
    return d, VmPlan.read(d), sc.load(json.loads((d / "results.json").read_text())["scenario"])


def test_recorded_llc_spread_pinned_migration_rates_and_affinity():
    d, plan, s = recorded("llc-spread-pinned-zen3-2s-mini-lab-6.1")
    c = runner.run_checks(s, plan, d)
    assert list(c) == ["main"]
    main = c["main"]
    for name in ("starvation", "work_conservation", "fairness", "wakeup_latency"):
        assert main[name] == NO_SWITCH  # the scenario traces fork placement only
    m = main["migrations"]
    assert m["total"] == 4 and m["by_level"] == {"core": 0, "llc": 1, "node": 2, "socket": 0, "machine": 1}
    assert m["span_s"] == 2.530973 and m["per_s"]["node"] == round(2 / 2.530973, 6)
    # The same migrations as the analysis the scenarios use, over every task.
    r = sc.Result(s, plan.topo, plan, plan.kernel, d / "out")
    assert dict(r.migrations().by_level) == {k: v for k, v in m["by_level"].items() if v}
    a = main["affinity"]  # stream's threads, from the CPUs the job wrote
    assert a == {"violations": 0, "tasks": [], "evidence": [], "judged_on": ["sched_wakeup_new", "sched_migrate_task"],
                 "allowed_from": "llc-spread-pinned's allowed_cpus()"}


def test_recorded_run_against_a_narrower_mask_shows_the_violations():
    d, plan, s = recorded("llc-spread-pinned-zen3-2s-mini-lab-6.1")
    r = sc.Result(s, plan.topo, plan, plan.kernel, d / "out")
    allowed = r.allowed("allowed")
    keep = allowed[:1]
    a = trace_checks(r.trace_path("main"), plan.topo, r.cpu_map, Traced.of(s.events), {"stream": keep}, "test")["affinity"]
    # every stream placement (fork target, migration destination) off the first allowed CPU
    events = list(r.events("main", only=["sched_wakeup_new", "sched_migrate_task"]))
    off = [e for e in events if e.task_comm == "stream" and r.cpu(e.target_cpu if e.name == "sched_wakeup_new" else e.dest_cpu) not in keep]
    assert off and a["violations"] == len(off)
    assert a["tasks"] == sorted({e.task_pid for e in off}) and len(a["evidence"]) == min(5, len(off))


def test_recorded_soft_affinity_fairness_is_the_residency_of_hackbench():
    d, plan, s = recorded("soft-affinity-xeon-2s22c-mini-lab-6.1-soft-affinity")
    c = runner.run_checks(s, plan, d)
    assert sorted(c) == ["hard", "none", "soft", "soft1"]
    # The job turns sched_switch off for the hard phase: said, not a figure of nothing.
    assert c["hard"]["fairness"]["not_measured"].startswith("not measured: no sched_switch event in the trace")
    assert c["hard"]["starvation"] == {"not_measured": "not measured: event sched_wakeup not traced"}
    f = c["soft1"]["fairness"]
    assert f["scope"] == "comm hackbench only (sched_switch traced with a filter keeping its switches)"
    assert f["by_comm"]["hackbench"] == {"tasks": 41, "min_s": 0.057946, "max_s": 0.420452, "max_over_min": 7.255928, "cv": 0.558279}
    r = sc.Result(s, plan.topo, plan, plan.kernel, d / "out")
    res = r.residency("soft1", comms="hackbench", keep_intervals=False)
    totals = [round(t.total, 6) for t in res.tasks.values()]
    assert len(totals) == 41 and min(totals) == 0.057946 and max(totals) == 0.420452
    assert c["soft1"]["migrations"]["total"] == 471 and c["soft1"]["migrations"]["filtered"] == 'comm == "hackbench"'
    assert c["soft1"]["wakeup_latency"] == {"not_measured": "not measured: event sched_wakeup not traced"}


def test_recorded_cluster_wakeup_traces_no_switch_and_no_migration():
    d, plan, s = recorded("cluster-wakeup-kunpeng920-2s-mini-debian")
    main = runner.run_checks(s, plan, d)["main"]
    assert main["starvation"] == NO_SWITCH and main["fairness"] == NO_SWITCH
    assert main["migrations"] == {"not_measured": "not measured: event sched_migrate_task not traced"}
    assert main["affinity"] == {"not_measured": "not measured: the run records no task's allowed CPUs"}


def test_format_checks_one_line_per_check():
    lines = format_checks({"main": run(allowed={"w": [0]})})
    assert lines == [
        "checks (main), figures, not judged:",
        "  starvation: 500 ms (w-10, preempted)",
        "  work conservation (idle while others wait): llc 18% (700 ms), node 18% (700 ms) of 4 s",
        "  affinity: 4 violation(s) of test",
        "  fairness: worst w: 3 tasks, max/min 2.6, cv 0.49 (1 comm(s))",
        "  wakeup latency: p50 300 ms, p90 400 ms, p99 400 ms, max 400 ms (2 wakeups)",
        "  migrations/s: core 1 (2 in 2 s)",
    ]
    assert format_checks({"x": {"not_measured": "not measured: why"}}) == ["checks (x), figures, not judged:", "  not measured: why"]


def copy_run(tmp_path: Path, name: str) -> Path:
    import shutil

    d = tmp_path / name
    shutil.copytree(RUNS / name, d)
    return d


@pytest.mark.parametrize("name", ["llc-spread-pinned-zen3-2s-mini-lab-6.1", "llc-spread-pinned-zen3-2s-mini-lab-6.1-no-affinity-imbalance"])
def test_recheck_reports_the_checks_and_the_rest_is_as_without_them(tmp_path, monkeypatch, name):
    d = copy_run(tmp_path, name)
    doc = runner.recheck(d).to_dict()
    assert doc["checks"]["main"]["affinity"]["violations"] == 0
    monkeypatch.setattr(runner, "run_checks", lambda *a: {})
    without = runner.recheck(d).to_dict()
    assert "checks" not in without
    assert {k: v for k, v in doc.items() if k != "checks"} == without  # the verdict and every other figure
    assert "checks" not in runner.RunOutcome("s", "t", "k", "SKIP", None).to_dict()  # nothing judged, no section


def test_a_scenario_hook_that_raises_costs_only_the_affinity_figure(tmp_path, monkeypatch):
    d, plan, s = recorded("llc-spread-pinned-zen3-2s-mini-lab-6.1")

    def boom(r, phase):
        raise RuntimeError("boom")

    monkeypatch.setattr(s, "allowed_cpus", boom)
    main = runner.run_checks(s, plan, d)["main"]
    assert main["affinity"] == {"not_measured": "not measured: llc-spread-pinned's allowed_cpus() raised RuntimeError: boom"}
    assert main["migrations"]["total"] == 4


def test_a_hook_reading_a_file_the_run_lacks_leaves_masks_unrecorded(tmp_path):
    d = copy_run(tmp_path, "llc-spread-pinned-zen3-2s-mini-lab-6.1")
    (d / "out" / "allowed").unlink()
    _, plan, s = recorded("llc-spread-pinned-zen3-2s-mini-lab-6.1")
    main = runner.run_checks(s, plan, d)["main"]
    assert main["affinity"] == {"not_measured": "not measured: the run records no task's allowed CPUs"}


def test_a_trace_lab_will_not_read_is_one_line_not_measured(tmp_path):
    d = copy_run(tmp_path, "llc-spread-pinned-zen3-2s-mini-lab-6.1")
    t = d / "out" / "trace.main.txt"
    t.unlink()
    t.symlink_to("/etc/hostname")
    _, plan, s = recorded("llc-spread-pinned-zen3-2s-mini-lab-6.1")
    main = runner.run_checks(s, plan, d)["main"]
    assert list(main) == ["not_measured"] and main["not_measured"].startswith("not measured: ")
    assert "\n" not in main["not_measured"]


# ---- --check expressions ----------------------------------------------------------------------


def test_check_expressions_parse_with_units_and_default_stats():
    e = parse_check("starvation < 100ms")
    assert (e.name, e.stat, e.op, e.value, e.check) == ("starvation", "longest", "<", 0.1, "starvation")
    assert parse_check("wakeup-latency p99 <= 5 us").value == 5e-6
    assert parse_check("work-conservation < 2%").value == 0.02 and parse_check("work-conservation node < 2%").stat == "node"
    assert parse_check("migrations node < 10/s").stat == "node" and parse_check("affinity == 0").value == 0
    assert parse_check("fairness max/min < 3").stat == "max/min"


@pytest.mark.parametrize("text,col,what", [
    ("starvaton < 1ms", 1, "unknown check 'starvaton'"),
    ("starvation <", 13, "expected a number"),
    ("starvation 100ms", 12, "expected one of < <= > >= == !="),
    ("starvation < 1 kg", 16, "starvation takes s or ms or us, not 'kg'"),
    ("wakeup-latency p95 < 1ms", 16, "wakeup-latency has no 'p95'"),
    ("affinity == 0 and more", 15, "affinity takes no unit, not 'and'"),
    ("starvation < 5 ms extra", 19, "unexpected 'extra' after the value"),
    ("starvation ~ 3", 12, "cannot read '~ 3'"),
    ("", 1, "expected a check's name"),
    ("starvation < 1e999s", 14, "the value is not a finite number"),
])  # fmt: skip
def test_a_bad_expression_names_its_column_and_the_checks(text, col, what):
    with pytest.raises(CheckSyntaxError) as e:
        parse_check(text)
    msg = str(e.value)
    assert msg.startswith(f"--check {text!r}: column {col}: {what}") and "\n" not in msg
    assert msg.endswith("the checks: starvation; work-conservation [llc|node]; wakeup-latency [p50|p90|p99|max]; affinity; "
                        "fairness [cv|max/min]; migrations [total|core|cluster|llc|node|socket|machine]")


def test_expressions_judge_the_synthetic_figures():
    figs = run(allowed={"w": [0]})
    assert parse_check("starvation < 600ms").figure(figs) == (0.5, "")
    assert parse_check("wakeup-latency p50 < 1s").figure(figs) == (0.3, "")
    assert parse_check("work-conservation < 50%").figure(figs) == (0.175, "")
    assert parse_check("affinity == 0").figure(figs) == (4.0, "") and not parse_check("affinity == 0").holds(4.0)
    assert parse_check("migrations core < 2/s").figure(figs) == (1.0, "")
    assert parse_check("fairness cv < 1").figure(figs) == (0.4919, "")
    no_new = run(events=[e for e in ALL if not e.endswith("wakeup_new")])
    assert parse_check("starvation < 1s").figure(no_new) == (None, "not measured: event sched_wakeup_new not traced")


def test_an_expression_the_scenarios_events_cannot_measure_is_refused_before_booting():
    s = sc.load("cluster-wakeup")
    with pytest.raises(UserError, match=r"^--check 'starvation < 100ms' needs sched_switch traced; scenario cluster-wakeup traces "):
        runner.set_user_checks(s, ["starvation < 100ms"])
    assert untraced(parse_check("starvation < 1s"), Traced.of(ALL, {"sched_switch": "prev_pid > 0"})) == (
        "needs sched_switch unfiltered (the scenario filters it: prev_pid > 0)"
    )
    s = sc.load("soft-affinity")
    runner.set_user_checks(s, ["fairness cv < 2", "migrations < 10000/s"])  # measurable as filtered
    assert [e.text for e in runner.user_checks(s)] == ["fairness cv < 2", "migrations < 10000/s"]


def test_recorded_expressions_are_judged_again_by_recheck(tmp_path):
    d = copy_run(tmp_path, "llc-spread-pinned-zen3-2s-mini-lab-6.1")
    rec = json.loads((d / "results.json").read_text())
    base = runner.recheck(d).status
    rec["check_expressions"] = ["affinity == 0", "migrations < 100/s"]
    (d / "results.json").write_text(json.dumps(rec))
    o = runner.recheck(d)
    assert o.status == base and o.check_expressions == rec["check_expressions"]
    added = {e.name: e for e in o.expectations if e.name.startswith("--check ")}
    assert added["--check affinity == 0"].ok and added["--check affinity == 0"].figures == {"affinity violations (main)": 0.0}
    assert added["--check migrations < 100/s"].figures == {"migrations total (main)": 4 / 2.530973}
    rec["check_expressions"] = ["migrations node < 0.5/s"]
    (d / "results.json").write_text(json.dumps(rec))
    o = runner.recheck(d)
    assert o.status == "FAIL"
    e = o.expectations[-1]
    assert not e.ok and e.evidence == ["main: migrations node = 0.79021, not < 0.5"]
    rec["check_expressions"] = ["starvation < 1s"]  # not traced: no verdict from it
    (d / "results.json").write_text(json.dumps(rec))
    o = runner.recheck(d)
    assert o.status == "INCONCLUSIVE" and o.expectations[-1].inconclusive == "--check 'starvation < 1s': main: not measured: event sched_switch not traced"
    rec["check_expressions"] = ["starvation <"]
    (d / "results.json").write_text(json.dumps(rec))
    with pytest.raises(UserError, match=r"results.json: --check 'starvation <': column 13: expected a number"):
        runner.recheck(d)
