"""lab minimize and lab attribute (lab/minimize.py) against a fake runner whose verdict
depends on the machine: no VM.  The fake fails while the machine has more than one socket
and more than one LLC per socket (seed 000's pile-up needs both), and its figure depends on
the cross-socket distance, so the exact smallest machine, chain and table flags are known."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lab import minimize
from lab.errors import UserError

ZEN = {
    "name": "zen-fake",
    "arch": "x86_64",
    "cpu": {"vendor": "amd", "model": "AMD EPYC 7763", "family": 0x19},
    "topology": {"sockets": 2, "nodes_per_socket": 1, "llcs_per_node": 4, "cores_per_cluster": 2,
                 "threads_per_core": 2, "numbering": "smt-last"},
    "numa": {"distances": [[10, 32], [32, 10]], "memory_mb": 512},
}  # fmt: skip


class Fake:
    """A run: FAIL while sockets > 1 and LLCs per socket > 1; figure 'spread' is 10 at a
    cross-socket distance of 32 or more, 5 below, with a small per-run wobble."""

    def __init__(self, wall: float = 60.0, unrunnable: tuple[str, ...] = ()):
        self.calls: list[str] = []
        self.wall = wall
        self.unrunnable = unrunnable

    def __call__(self, spec: dict[str, Any], label: str) -> dict[str, Any]:
        if label in self.unrunnable:
            raise UserError(f"QEMU cannot express {label}")
        t = minimize.model(spec)
        self.calls.append(label)
        sockets = len(t.groups("socket"))
        llcs_per_socket = len(t.groups("llc")) // sockets
        fails = sockets > 1 and llcs_per_socket > 1
        far = max(v for row in t.distances for v in row)
        spread = (10.0 if far >= 32 else 5.0) + 0.01 * (len(self.calls) % 3)
        return {
            "status": "FAIL" if fails else "PASS",
            "expectations": [{"name": "targets distinct", "status": "FAIL" if fails else "PASS", "figures": {"spread": spread}}],
            "timing": {"wall_s": self.wall},
            "run_dir": f"/runs/{len(self.calls)}",
        }


def failing_run(wall: float = 60.0) -> dict[str, Any]:
    return {"status": "FAIL", "timing": {"wall_s": wall}, "run_dir": "/runs/input", "expectations": []}


def test_minimize_finds_the_smallest_failing_machine_and_its_chain():
    fake = Fake()
    m = minimize.minimize(copy.deepcopy(ZEN), failing_run(), fake, runs=3)
    t = minimize.model(m.smallest)
    assert m.smallest["topology"] == {"sockets": 2, "nodes_per_socket": 1, "llcs_per_node": 2, "cores_per_cluster": 1, "numbering": "smt-last"}
    assert (t.n_cpus, len(t.groups("socket")), len(t.groups("llc"))) == (4, 2, 4)
    assert m.smallest["cpu"] == {"vendor": "intel", "model": "", "family": 6}
    assert m.smallest["numa"]["distances"] == [[10, 20], [20, 10]]
    assert [s["change"] for s in m.chain] == [
        "the failing run's machine", "LLCs per node 4 -> 2", "cores per cluster 2 -> 1", "SMT off",
        "distances 20", "vendor intel",
    ]  # fmt: skip
    assert [s["cpus"] for s in m.chain] == [32, 16, 8, 4, 4, 4]
    # Each kept step failed all of its runs; the baseline is the input run plus 2 more.
    assert m.chain[0]["failed"] == 3 and all(s["failed"] == 3 and s["passed"] == 0 for s in m.chain[1:])
    # Biggest removal first: one LLC per node (8 CPUs) was tried before two (16), and
    # passed, so it was not kept; one socket and one LLC were tried at every step.
    first = [t["change"] for t in m.tried[:3]]
    assert first == ["LLCs per node 4 -> 1", "sockets 2 -> 1", "LLCs per node 4 -> 2"]
    # (change, CPUs it leaves) of the candidates that passed.  A machine already judged is
    # not run again: LLCs 2 -> 1 from 16 CPUs is LLCs 4 -> 1 from 32, and one socket
    # after distances 20 is the one socket before it (one node has no distances).
    rejected = [(t["change"], t["cpus"]) for t in m.tried if not t["kept"]]
    assert rejected == [("LLCs per node 4 -> 1", 8), ("sockets 2 -> 1", 16),
                        ("sockets 2 -> 1", 8),
                        ("sockets 2 -> 1", 4), ("LLCs per node 2 -> 1", 4),
                        ("sockets 2 -> 1", 2), ("LLCs per node 2 -> 1", 2),  # then distances 20 kept
                        ("LLCs per node 2 -> 1", 2),  # then vendor intel kept
                        ("sockets 2 -> 1", 2), ("LLCs per node 2 -> 1", 2)]  # fmt: skip
    # A rejected candidate stops at its passing majority: 2 runs, not 3.
    assert all(t["passed"] == 2 and t["failed"] == 0 for t in m.tried if not t["kept"])
    assert m.stopped == "no single reduction keeps the failure (1-minimal)"
    assert {s["change"]: s["why"] for s in m.skipped}["numbering linear"] == "already linear"
    assert m.smallest_run is not None and m.smallest_run["status"] == "FAIL"


def test_minimize_skips_what_the_scenario_refuses_and_what_qemu_cannot_express():
    def needs_two_sockets(topo):
        return None if len(topo.groups("socket")) >= 2 else "at least 2 sockets"

    fake = Fake(unrunnable=("vendor intel",))
    m = minimize.minimize(copy.deepcopy(ZEN), failing_run(), fake, runs=1, check=needs_two_sockets)
    skipped = {s["change"]: s["why"] for s in m.skipped}
    assert skipped["sockets 2 -> 1"] == "the scenario cannot run there: at least 2 sockets"
    assert skipped["vendor intel"] == "QEMU cannot express vendor intel"
    assert "sockets 2 -> 1" not in fake.calls
    assert m.smallest["cpu"]["vendor"] == "amd"
    assert [s["change"] for s in m.chain][1:] == ["LLCs per node 4 -> 2", "cores per cluster 2 -> 1", "SMT off", "distances 20"]


def test_minimize_refuses_a_passing_run_and_a_budget_below_one_run():
    with pytest.raises(UserError, match="the run passed: nothing to keep"):
        minimize.minimize(copy.deepcopy(ZEN), {**failing_run(), "status": "PASS"}, Fake(), runs=1)
    with pytest.raises(UserError, match="verdict is ERROR"):
        minimize.minimize(copy.deepcopy(ZEN), {**failing_run(), "status": "ERROR"}, Fake(), runs=1)
    with pytest.raises(UserError, match=r"--budget 30s is too small for one run: one run of this machine is estimated at 60s"):
        minimize.minimize(copy.deepcopy(ZEN), failing_run(60), Fake(), runs=1, budget_s=30)


def test_minimize_stops_when_the_budget_is_spent():
    fake = Fake(wall=60)
    # 5 runs of 60 s: the baseline takes 2 (runs=3), then LLCs 4 -> 1 passes in 2 and
    # one more candidate of 3 runs does not fit.
    m = minimize.minimize(copy.deepcopy(ZEN), failing_run(60), fake, runs=3, budget_s=300)
    assert len(fake.calls) == 4
    assert m.stopped.startswith("budget: 4.0m of 5.0m spent, the next candidate (sockets 2 -> 1) is estimated at 3.0m")
    assert m.smallest == ZEN


def test_the_failure_must_reproduce():
    def passes(spec, label):
        return {"status": "PASS", "timing": {"wall_s": 1}}

    with pytest.raises(UserError, match="the failure does not reproduce: the failing machine 1/3 failed"):
        minimize.minimize(copy.deepcopy(ZEN), failing_run(), passes, runs=3)


def test_a_candidate_that_fails_significantly_less_often_is_not_kept():
    base = minimize.Judged([{"status": "FAIL"}] * 20)
    weaker = minimize.Judged([{"status": "FAIL"}] * 11 + [{"status": "PASS"}] * 9)
    kept, test = minimize.keeps_failure(base, weaker)
    assert not kept and test["result"] == "significant"
    same = minimize.Judged([{"status": "FAIL"}] * 19 + [{"status": "PASS"}])
    assert minimize.keeps_failure(base, same)[0]


def test_variations_are_valid_machines_or_say_why():
    v = {c.name: c for c in minimize.variations(ZEN, merges=True)}
    assert v["sockets 2 -> 1"].spec["topology"]["sockets"] == 1
    assert "distances" not in v["sockets 2 -> 1"].spec["numa"]  # one node left
    merged = v["LLCs per node merged (4 -> 1, cores per cluster x4)"].spec
    assert merged["topology"]["cores_per_cluster"] == 8 and minimize.model(merged).n_cpus == 32
    assert minimize.model(v["sockets merged (2 -> 1, nodes per socket x2)"].spec).n_nodes == 2
    assert v["numbering linear"].spec["topology"]["numbering"] == "linear"
    groups = {"name": "g", "arch": "x86_64", "cpu": {"vendor": "intel"},
              "groups": {"nodes": {"0": "0-3"}, "llcs": ["0-3"], "cores": ["0", "1", "2", "3"]}}  # fmt: skip
    g = {c.name: c for c in minimize.variations(groups)}
    assert g["fewer sockets"].spec is None and "groups form" in g["fewer sockets"].skipped
    assert g["distances 20"].skipped == "one node: no distances"
    explicit = copy.deepcopy(ZEN)
    explicit["topology"].update(numbering="explicit", cpus=list(range(32)))
    e = {c.name: c for c in minimize.variations(explicit)}
    assert "numbering linear comes first" in e["sockets 2 -> 1"].skipped
    assert e["numbering linear"].spec is not None


def test_attribute_table_flags():
    fake = Fake()
    doc = minimize.attribute(copy.deepcopy(ZEN), fake, runs=8)
    rows = {r["change"]: r for r in doc["rows"]}
    assert doc["base"]["verdict"] == "FAIL"
    flagged = {name: minimize.flags(r) for name, r in rows.items()}
    assert flagged == {
        "sockets 2 -> 1": "FLIPS, rate*, targets distinct: spread*",  # one node left: no distance
        "sockets merged (2 -> 1, nodes per socket x2)": "FLIPS, rate*",
        "LLCs per node 4 -> 1": "FLIPS, rate*",
        "LLCs per node merged (4 -> 1, cores per cluster x4)": "FLIPS, rate*",
        "cores per cluster 2 -> 1": "-",
        "SMT off": "-",
        "numbering linear": "-",
        "distances 20": "targets distinct: spread*",
        "vendor intel": "-",
    }
    # A figure per row and the rates that differ (Fisher's "identical" is no test).
    assert doc["correction"]["tests"] == 9 + 4
    text = minimize.render_attribution(doc)
    assert "distances 20" in text and "Holm over" in text


def test_attribute_too_few_runs_says_so_and_skips_are_named():
    def needs_two_sockets(topo):
        return None if len(topo.groups("socket")) >= 2 else "at least 2 sockets"

    doc = minimize.attribute(copy.deepcopy(ZEN), Fake(), runs=2, check=needs_two_sockets)
    assert {s["change"] for s in doc["skipped"]} == {"sockets 2 -> 1", "sockets merged (2 -> 1, nodes per socket x2)"}
    llc = next(r for r in doc["rows"] if r["change"] == "LLCs per node 4 -> 1")
    assert llc["flips"] and not llc["rate_moves"] and llc["rate_test"]["result"] == "too few runs"


def test_attribute_reduces_a_level_the_scenario_needs_as_far_as_it_takes():
    """cluster-wakeup refuses a machine without clusters: the removal to 1 is skipped and
    the fewest count the scenario takes (half, one less) is a row of its own in its place."""

    def needs_two_llcs(topo):
        return None if len(topo.groups("llc")) // len(topo.groups("socket")) >= 2 else "at least 2 LLCs per socket"

    doc = minimize.attribute(copy.deepcopy(ZEN), Fake(), runs=2, check=needs_two_llcs)
    rows = {r["change"]: r for r in doc["rows"]}
    skipped = {s["change"]: s["why"] for s in doc["skipped"]}
    assert skipped["LLCs per node 4 -> 1"] == ("the scenario cannot run there: at least 2 LLCs per socket; "
                                               "LLCs per node 4 -> 2 is run in its place (the fewest the scenario takes)")  # fmt: skip
    assert skipped["LLCs per node merged (4 -> 1, cores per cluster x4)"] == "the scenario cannot run there: at least 2 LLCs per socket"
    half = rows["LLCs per node 4 -> 2"]
    assert half["instead_of"] == "LLCs per node 4 -> 1" and half["verdict"] == "FAIL" and not half["flips"]
    assert "LLCs per node 4 -> 3" not in rows and "instead_of" not in rows["SMT off"]
    order = [r["change"] for r in doc["rows"]]
    assert order.index("LLCs per node 4 -> 2") == order.index("sockets merged (2 -> 1, nodes per socket x2)") + 1
    # Without a refusal the table is as before: no partial counts.
    assert all("instead_of" not in r for r in minimize.attribute(copy.deepcopy(ZEN), Fake(), runs=1)["rows"])


@pytest.mark.parametrize("text,secs", [("90", 90), ("90s", 90), ("20m", 1200), ("1.5h", 5400)])
def test_durations(text, secs):
    assert minimize.parse_duration(text) == secs


@pytest.mark.parametrize("text", ["", "ten", "-5m", "0", "5x", "nan"])
def test_bad_durations(text):
    with pytest.raises(UserError, match="--budget"):
        minimize.parse_duration(text)


def test_toml_round_trip():
    import tomllib

    assert tomllib.loads(minimize.to_toml(ZEN)) == ZEN
