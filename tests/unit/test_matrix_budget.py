"""lab matrix --budget: the cells chosen to fit a time from their costs (lab/matrix.py's
"a time budget" section).  choose() is tested with known costs; the Runner with the
stand-in `lab run` of test_matrix.py and a costs file of the test's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_matrix import fake  # noqa: F401  (a fixture)

from lab import matrix as mx
from lab.errors import UserError
from lab.plan import VmOptions


def P(s: str, t: str, k: str, cost: float, measured: bool = True, changed: str = "") -> mx.Pick:
    return mx.Pick(mx.Cell(s, t, k), cost, measured, changed)


def test_choose_covers_every_value_then_changed_cells_then_the_rest():
    picks = [
        P("a", "t1", "k1", 100), P("a", "t2", "k1", 300), P("a", "t1", "k2", 100),
        P("b", "t1", "k1", 50), P("b", "t2", "k2", 200, changed="kernel changed"), P("b", "t1", "k2", 60),
    ]  # fmt: skip
    chosen, out, uncovered = mx.choose(picks, 400)
    # The cover, greedily by values not yet covered per second: b@t1@k1 (3 in 50 s), then
    # a@t1@k2 (a and k2 in 100 s), then b@t2@k2 (t2 in 200 s): 350 s.  Then the changed
    # cells (none left), then in order: nothing else fits the 50 s left.
    assert [p.cell.id for p in chosen] == ["a@t1@k2", "b@t1@k1", "b@t2@k2"]
    assert uncovered == []
    why = dict((p.cell.id, w) for p, w in out)
    assert why == {
        "a@t1@k1": "unchanged since its last run, costs 100s (measured); 50s of 6.7m was left",
        "a@t2@k1": "unchanged since its last run, costs 5.0m (measured); 50s of 6.7m was left",
        "b@t1@k2": "unchanged since its last run, costs 60s (measured); 50s of 6.7m was left",
    }


def test_changed_cells_come_before_unchanged_ones():
    picks = [P("a", "t", "k", 10), P("a", "t", "k2", 10), P("a", "t", "k3", 10, changed="never run"),
             P("a", "t", "k4", 10, changed="scenario source changed")]  # fmt: skip
    # The cover takes all four kernels if it can; with 25 s it takes two: the first by
    # order among equals prefers a changed cell.
    chosen, out, uncovered = mx.choose(picks, 25)
    assert [p.cell.id for p in chosen] == ["a@t@k3", "a@t@k4"]
    assert uncovered == ["kernel k", "kernel k2"]
    chosen, _, _ = mx.choose(picks, 35)
    assert [p.cell.id for p in chosen] == ["a@t@k", "a@t@k3", "a@t@k4"]


def test_a_budget_below_the_cheapest_cell_names_its_cost():
    picks = [P("a", "t", "k", 300, measured=False), P("b", "t", "k", 90)]
    with pytest.raises(UserError, match=r"--budget 1m is too small for one cell: the cheapest, b@t@k, costs 90s \(measured\)"):
        mx.choose(picks, 60, "1m")


def test_changed_says_why():
    assert mx.changed(None, "s", "k") == "never run"
    assert mx.changed({"scenario": "s", "kernel_id": "k"}, "s", "k") == ""
    assert mx.changed({"scenario": "s0", "kernel_id": "k0"}, "s", "k") == "kernel changed, scenario source changed"


def test_estimates_and_the_costs_file(tmp_path):
    assert mx.estimate_s(32, 900) == 1.5 * 32 + 90
    assert mx.estimate_s(4, 300, repeat=2) == 2 * (6 + 30)
    f = tmp_path / "costs.json"
    assert mx.read_costs(f) == {}
    f.write_text("not json")
    assert mx.read_costs(f) == {}
    mx.record_cost(f, mx.Cell("a", "t", "k"), 120.0, 2, "sh", "kid")
    got = mx.read_costs(f)["a@t@k"]
    assert (got["run_s"], got["scenario"], got["kernel_id"]) == (60.0, "sh", "kid")


def test_runner_runs_what_fits_records_costs_and_says_what_it_left_out(tmp_path, fake):  # noqa: F811
    child, _, ran, _ = fake
    costs = tmp_path / "costs.json"
    m = mx.expand("soft-affinity,llc-spread-pinned", "xeon-2s22c-mini,zen3-2s-mini", "debian")
    # Nothing measured: estimates from vCPUs and the scenarios' timeouts.
    runnable = [c for c in m.cells if not c.skip]
    assert len(runnable) == 3
    est = {c.id: mx.estimate_s(__import__("lab.topology", fromlist=["load"]).load(c.topology).n_cpus,
                               __import__("lab.scenario", fromlist=["load"]).load(c.scenario).timeout) for c in runnable}  # fmt: skip
    cheapest = min(est.values())
    with pytest.raises(UserError, match="too small for one cell"):
        mx.Runner(m, tmp_path / "o0", child=child, costs=costs, budget_s=cheapest - 1).run()
    # 108 s each for soft-affinity (timeout 600 s), 138 s for llc-spread-pinned (900 s):
    # the cover takes soft-affinity on xeon (3 values), then llc-spread-pinned on zen3
    # (2 values for 138 s beat 1 for 108 s), and soft-affinity on zen3 no longer fits.
    budget = est["soft-affinity@xeon-2s22c-mini@debian"] + est["llc-spread-pinned@zen3-2s-mini@debian"] + 1
    r = mx.Runner(m, tmp_path / "o1", child=child, costs=costs, budget_s=budget, budget_text="B")
    res = {x.cell.id: x for x in r.run()}
    doc = json.loads((tmp_path / "o1" / "matrix.json").read_text())
    assert sorted(ran()) == ["llc-spread-pinned@zen3-2s-mini", "soft-affinity@xeon-2s22c-mini"]
    assert doc["budget"]["uncovered"] == [] and doc["budget"]["estimated_s"] == budget - 1
    assert doc["budget"]["left_out"] == [{"id": "soft-affinity@zen3-2s-mini@debian",
                                          "why": "changed (never run), costs 108s (estimated); 1s of B was left"}]  # fmt: skip
    left = res["soft-affinity@zen3-2s-mini@debian"]
    assert left.status == "SKIP" and left.message.startswith("left out by --budget B: changed (never run)")
    assert mx.skip_cause(left)[0] == "budget"
    # The cells that ran are measured now (their wall times, in the costs file); the one
    # left out is still estimated and new.
    assert set(mx.read_costs(costs)) == set(doc["budget"]["chosen"])
    r2 = mx.Runner(m, tmp_path / "o2", child=child, costs=costs, budget_s=200)
    assert all(x.status == "PASS" for x in r2.run() if not x.cell.skip)
    c2 = r2.budget_doc["costs"]
    assert c2["soft-affinity@zen3-2s-mini@debian"] == {"cost_s": 108.0, "measured": False, "basis": "estimate", "changed": "never run"}
    assert all(c2[c]["measured"] and c2[c]["changed"] == "" for c in doc["budget"]["chosen"])


def test_a_stand_in_child_records_no_cost(tmp_path, fake, monkeypatch):  # noqa: F811
    child, _, _, _ = fake
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    mx.Runner(mx.expand("soft-affinity", "xeon-2s22c-mini", "debian"), tmp_path / "o", child=child).run()
    assert not (tmp_path / "cache" / mx.COSTS_FILE).exists()


def test_cells_start_longest_first_and_report_in_the_matrix_s_order(tmp_path, fake):  # noqa: F811
    """Issue 39 item 3: with one slot, cells start by cost, the longest first (measured
    where the costs file has them, estimated otherwise); the table keeps the matrix's order."""
    child, _, ran, _ = fake
    costs = tmp_path / "costs.json"
    m = mx.expand("soft-affinity,llc-spread-pinned", "xeon-2s22c-mini,zen3-2s-mini", "debian")
    runnable = [c for c in m.cells if not c.skip]
    assert [c.id for c in runnable] == [
        "soft-affinity@xeon-2s22c-mini@debian", "soft-affinity@zen3-2s-mini@debian", "llc-spread-pinned@zen3-2s-mini@debian",
    ]  # fmt: skip
    # Measured: the matrix's last cell is the longest, its first the shortest.
    for c, s in zip(runnable, (10.0, 50.0, 90.0), strict=True):
        mx.record_cost(costs, c, s, 1, "sh", "kid")
    r = mx.Runner(m, tmp_path / "o", jobs=1, child=child, costs=costs)
    res = r.run()
    assert ran() == ["llc-spread-pinned@zen3-2s-mini", "soft-affinity@zen3-2s-mini", "soft-affinity@xeon-2s22c-mini"]
    assert [x.cell.id for x in res] == [c.id for c in m.cells]  # reported in the matrix's order
    doc = json.loads((tmp_path / "o" / "matrix.json").read_text())
    assert [(o["id"], o["cost_s"], o["measured"]) for o in doc["start_order"]] == [
        ("llc-spread-pinned@zen3-2s-mini@debian", 90.0, True), ("soft-affinity@zen3-2s-mini@debian", 50.0, True),
        ("soft-affinity@xeon-2s22c-mini@debian", 10.0, True),
    ]  # fmt: skip


def test_a_stand_in_child_without_a_costs_file_orders_by_estimates_only(tmp_path, fake, monkeypatch):  # noqa: F811
    """The developer's own cache must not decide a test's order: estimates (vCPUs and the
    scenario's timeout) only.  llc-spread-pinned's longer timeout puts it first."""
    child, _, ran, _ = fake
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    m = mx.expand("soft-affinity,llc-spread-pinned", "xeon-2s22c-mini,zen3-2s-mini", "debian")
    c0 = next(c for c in m.cells if not c.skip)
    mx.record_cost(tmp_path / "cache" / mx.COSTS_FILE, c0, 9999.0, 1, "sh", "kid")
    r = mx.Runner(m, tmp_path / "o", jobs=1, child=child)
    r.run()
    assert ran()[0] == "llc-spread-pinned@zen3-2s-mini"
    assert not any(o["measured"] for o in r.order)


def _base(**cells) -> dict:
    return {"format": 1, "accel": "tcg", "cells": cells}


def test_the_baseline_applies_only_to_the_same_scenario_version_topology_and_accelerator():
    base = _base(**{"s@t": {"run_s": 240.0, "version": 2, "topology_sha": "abc"}})
    ok = dict(version=2, topology_sha="abc", accel="tcg")
    assert mx.baseline_s(base, "s", "t", **ok) == 240.0
    assert mx.baseline_s(base, "s", "t", **{**ok, "version": 3}) is None  # the scenario changed since
    assert mx.baseline_s(base, "s", "t", **{**ok, "topology_sha": "def"}) is None  # another spec of that name
    assert mx.baseline_s(base, "s", "t", **{**ok, "accel": "kvm"}) is None  # measured under TCG
    assert mx.baseline_s(base, "s", "u", **ok) is None and mx.baseline_s({}, "s", "t", **ok) is None
    bad = _base(**{"s@t": {"run_s": "x", "version": 2, "topology_sha": "abc"}})
    assert mx.baseline_s(bad, "s", "t", **ok) is None
    assert mx.read_baseline(None) == {} and mx.read_baseline(Path("/nonexistent/matrix-costs.json")) == {}


def test_a_never_run_cell_costs_what_the_baseline_measured(tmp_path, fake, monkeypatch):  # noqa: F811
    """Issue 39 item 3: on a fresh runner (no costs file) the start order and --budget
    follow lab's baseline where it applies, the timeout formula elsewhere.  The formula
    puts llc-spread-pinned (timeout 900 s: 138 s) before soft-affinity (600 s: 108 s);
    a baseline measuring llc-spread-pinned at 30 s puts it last, and --budget says how its
    cost was estimated."""
    from lab import scenario as sc

    child, _, ran, _ = fake
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    m = mx.expand("soft-affinity,llc-spread-pinned", "xeon-2s22c-mini,zen3-2s-mini", "debian", options=VmOptions(accel="tcg"))
    llc = "llc-spread-pinned@zen3-2s-mini"
    base = tmp_path / "matrix-costs.json"
    base.write_text(json.dumps(_base(**{llc: {"run_s": 30.0, "version": sc.load("llc-spread-pinned").version,
                                              "topology_sha": m.inputs["topology:zen3-2s-mini"]}})))  # fmt: skip
    r = mx.Runner(m, tmp_path / "o", jobs=1, child=child, baseline=base)
    r.run()
    assert ran()[-1] == llc
    assert [(o["id"], o["cost_s"], o["basis"]) for o in r.order] == [
        ("soft-affinity@xeon-2s22c-mini@debian", 108.0, "estimate"), ("soft-affinity@zen3-2s-mini@debian", 108.0, "estimate"),
        (f"{llc}@debian", 30.0, "baseline"),
    ]  # fmt: skip
    # Without it (a stand-in child reads none unless given one): the formula's order.
    r0 = mx.Runner(m, tmp_path / "o0", jobs=1, child=child)
    r0.run()
    assert r0.order[0]["id"] == f"{llc}@debian" and r0.order[0]["basis"] == "estimate"
    # --budget: 108 + 30 fit in 140 s; the other soft-affinity cell is left out, and a
    # budget under the cheapest names the baseline's cost as such.
    with pytest.raises(UserError, match=r"the cheapest, llc-spread-pinned@zen3-2s-mini@debian, costs 30s \(estimated from lab's baseline\)"):
        mx.Runner(m, tmp_path / "o1", child=child, baseline=base, budget_s=29).run()
    rb = mx.Runner(m, tmp_path / "o2", child=child, baseline=base, budget_s=140, budget_text="B")
    rb.run()
    assert rb.budget_doc["costs"][f"{llc}@debian"] == {"cost_s": 30.0, "measured": False, "basis": "baseline", "changed": "never run"}
    assert sorted(rb.budget_doc["chosen"]) == ["llc-spread-pinned@zen3-2s-mini@debian", "soft-affinity@xeon-2s22c-mini@debian"]


def test_lab_s_baseline_is_traceable_to_its_matrix():
    """scenarios/matrix-costs.json: every cost is its bench_matrix file's cell wall time
    (one run per cell), for a catalog scenario and topology, measured under TCG."""
    from lab import paths, topology
    from lab import scenario as sc

    doc = json.loads(mx.baseline_file().read_text())
    src = json.loads((paths.ROOT / doc["measured_by"]).read_text())
    cells = src["runs"][-1]["cells"]
    assert doc["accel"] == "tcg" and len(doc["cells"]) >= 40
    for key, e in doc["cells"].items():
        s, t = key.split("@")
        assert s in sc.names() and t in topology.catalog_names(), key
        assert e["run_s"] == round(cells[f"{key}@{e['kernel']}"]["wall_s"], 1), key
        assert cells[f"{key}@{e['kernel']}"]["status"] == e["status"] in ("PASS", "FAIL", "INCONCLUSIVE")
