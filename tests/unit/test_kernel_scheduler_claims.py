"""Claims about the kernel's own scheduler under a BPF scheduler (issue 35 item 6).

An expectation (or a scenario, for its claim-carrying ones) says why it is a claim about
the kernel's fair class (``kernel_scheduler``).  Under ``--scheduler`` such an expectation
is INCONCLUSIVE, naming the scheduler and the claim, whatever it measured; its figures
stay.  A run whose only claims are the kernel scheduler's is then INCONCLUSIVE (exit 4,
``git bisect skip``), never PASS; an expectation that holds for any scheduler still FAILs
the run.  On the kernel's own scheduler nothing changes: the recorded runs re-judge as
before, with and without the mark."""

import json
import shutil
from pathlib import Path

import pytest

from lab import bisect, compare, runner
from lab import scenario as sc
from lab.plan import SchedulerRef
from lab.report import compare as render

RUNS = Path(__file__).parent.parent / "fixtures" / "runs"
PASSING = RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1"  # PASS on the kernel's own scheduler
FAILING = RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1-no-affinity-imbalance"  # FAIL: the pile-up
SCX = SchedulerRef("scx_simple", "simple", (), "lab-6.12-scx tools/sched_ext/scx_simple", "i" * 32)


class _Marked(sc.Scenario):
    name = "marked"
    claim = "'c'"
    kernel_scheduler = "fork placement is select_task_rq_fair()'s"


def _judge(exps, scheduler=""):
    if scheduler:
        sc.under_scheduler(exps, _Marked(), scheduler)
    return sc.verdict_of(exps)


# ---- the rule on expectations --------------------------------------------------------------


def test_a_kernel_scheduler_claim_under_a_bpf_scheduler_is_inconclusive_naming_both():
    for ok in (True, False):  # held or not: neither is the kernel's scheduler's answer
        e = sc.Expectation("targets distinct", ok, figures={"distinct": 3}, claim=True)
        status, why = _judge([sc.Expectation("ran", True), e], "scx_simple")
        assert status == "INCONCLUSIVE" and e.status == "INCONCLUSIVE"
        held = "held" if ok else "did not hold"
        assert e.inconclusive == (
            "run under the sched_ext scheduler scx_simple: 'targets distinct' is a claim about the kernel's own "
            f"scheduler (fork placement is select_task_rq_fair()'s); under scx_simple it {held}"
        )
        assert why == (
            "run under the sched_ext scheduler scx_simple: its claims about the kernel's own scheduler are not "
            f"judged ('targets distinct' {held})"
        )
        assert e.figures == {"distinct": 3}  # still computed and shown
        assert (
            e.to_dict()["status"] == "INCONCLUSIVE"
            and e.to_dict()["inconclusive"] == e.inconclusive
        )
        assert "bpf_scheduler" not in e.to_dict()
        assert runner.EXIT[status] == 4 and bisect.exit_code(status) == bisect.SKIP


def test_the_same_expectations_without_a_scheduler_are_judged_as_before():
    assert _judge([sc.Expectation("ran", True), sc.Expectation("c", True, claim=True)]) == (
        "PASS",
        "",
    )
    assert _judge([sc.Expectation("ran", True), sc.Expectation("c", False, claim=True)]) == (
        "FAIL",
        "",
    )
    marked = sc.Expectation(
        "c", False, claim=True, kernel_scheduler="wake_affine() is the fair class's"
    )
    assert (
        _judge([marked]) == ("FAIL", "")
        and marked.status == "FAIL"
        and "inconclusive" not in marked.to_dict()
    )


def test_a_scheduler_agnostic_expectation_failing_under_a_bpf_scheduler_fails_the_run():
    claim = sc.Expectation("c", True, claim=True)
    assert _judge(
        [sc.Expectation("every target inside the allowed CPUs", False), claim], "scx_simple"
    ) == ("FAIL", "")
    assert claim.status == "INCONCLUSIVE"
    # a scenario whose claim holds for any scheduler (no mark) PASSes and FAILs as usual
    free = [sc.Expectation("the scheduler stayed enabled", True, claim=True)]
    sc.under_scheduler(free, sc.Scenario(), "scx_simple")
    assert sc.verdict_of(free) == ("PASS", "")
    free[0].ok = False
    assert sc.verdict_of(free) == ("FAIL", "")


def test_an_expectations_own_mark_covers_a_precondition_and_a_vacuous_claim_stays_as_it_was():
    own = sc.Expectation(
        "no balancing needed", False, kernel_scheduler="load_balance() is the fair class's"
    )
    plain = sc.Expectation("ran", True)  # not a claim, no mark of its own: judged
    vacuous = sc.Expectation(
        "soft affinity", True, claim=True, vacuous="the kernel has no soft affinity"
    )
    status, why = _judge([plain, own, vacuous], "scx_simple")
    assert (plain.status, own.status, vacuous.status) == ("PASS", "INCONCLUSIVE", "PASS")
    assert status == "INCONCLUSIVE" and why.endswith(
        "not judged ('no balancing needed' did not hold)"
    )
    assert "load_balance()" in own.inconclusive
    # an emulation's cause already there is kept after the scheduler's
    e = sc.Expectation("c", False, claim=True, inconclusive="the vendor effect")
    sc.under_scheduler([e], _Marked(), "scx_lavd")
    assert e.inconclusive.startswith(
        "run under the sched_ext scheduler scx_lavd: 'c'"
    ) and e.inconclusive.endswith("; the vendor effect")


def test_a_bad_mark_is_the_scenarios_one_line_error(tmp_path):
    assert "kernel_scheduler must be strings" in sc._bad_expectation(
        sc.Expectation("c", True, kernel_scheduler=1)
    )  # type: ignore[arg-type]
    f = tmp_path / "bad_mark.py"
    f.write_text(
        "from lab.scenario import Scenario\n"
        "class B(Scenario):\n    name = 'bad-mark'\n    summary = 's'\n    claim = 'c'\n    topologies = ['zen3-2s-mini']\n"
        "    kernel_scheduler = ['fork']\n    def steps(self, topo):\n        return ''\n    def check(self, r):\n        return []\n"
    )
    with pytest.raises(sc.ScenarioError, match="kernel_scheduler"):
        sc.load_file(f)


# ---- which scenarios are marked ------------------------------------------------------------

MARKED = {  # scenario -> its claims are the fair class's
    "llc-spread-pinned": "select_task_rq_fair",
    "cluster-wakeup": "select_idle_sibling",
    "preferred-node-migrations": "task_numa_migrate",
    "numa-balancing": "task_numa_migrate",
    "numa-locality": "task_numa_migrate",
    "wake-affine": "wake_affine",
    "smt-spread": "select_idle_core",
    "misfit-migration": "migrate_misfit",
    "soft-affinity": "preferred_cpus",
}


@pytest.mark.parametrize("name", sc.names())
def test_every_scenario_says_whether_its_claim_is_the_kernel_schedulers(name):
    s = sc.load(name)
    if name in MARKED:
        assert MARKED[name] in s.kernel_scheduler and "BPF scheduler" in s.kernel_scheduler
    else:  # cpuset enforcement, work conservation and a scheduler's basic duties hold for any scheduler
        assert name in ("cpuset-isolation", "scheduler-survives", "work-conservation") and s.kernel_scheduler == ""


# ---- recorded runs, re-judged as if a BPF scheduler had run them ------------------------------


def _as_if_under_scx(src: Path, tmp_path: Path) -> Path:
    """A copy of the recorded run *src* whose plan names scx_simple and whose agent recorded
    it enabled throughout: the data is the kernel's own scheduler's, the verdict rule is
    what is tested."""
    d = tmp_path / src.name
    shutil.copytree(src, d)
    plan = json.loads((d / "plan.json").read_text())
    plan["scheduler"] = SCX.to_dict()
    (d / "plan.json").write_text(json.dumps(plan))
    (d / "out" / "scheduler").mkdir()
    for name, text in (("status", "enabled"), ("during", "kept"), ("state", "enabled")):
        (d / "out" / "scheduler" / name).write_text(text + "\n")
    return d


@pytest.mark.parametrize("src, before", [(PASSING, "PASS"), (FAILING, "FAIL")])
def test_llc_spread_pinneds_recorded_runs_are_inconclusive_under_scx_simple_with_their_figures(
    src, before, tmp_path
):
    own = runner.recheck(src)
    assert own.status == before  # on the kernel's own scheduler: as recorded, unchanged
    o = runner.recheck(_as_if_under_scx(src, tmp_path))
    assert o.status == "INCONCLUSIVE" and o.integrity["scheduler"] == "kept"
    by_name = {e.name.split(" (")[0]: e for e in o.expectations}
    assert [
        by_name[n].status
        for n in ("a sched_wakeup_new per thread", "every target inside the allowed CPUs")
    ] == ["PASS", "PASS"]
    for n in (
        "targets distinct",
        "even split between sockets",
        "no balancing needed after the fork",
    ):
        assert by_name[n].status == "INCONCLUSIVE", n
        assert (
            "scx_simple" in by_name[n].inconclusive
            and f"{by_name[n].name!r}" in by_name[n].inconclusive
        )
    held = "held" if before == "PASS" else "did not hold"
    assert o.message == (
        "run under the sched_ext scheduler scx_simple: its claims about the kernel's own scheduler are not judged ("
        + "; ".join(
            f"{by_name[n].name!r} {held}"
            for n in (
                "targets distinct",
                "even split between sockets",
                "no balancing needed after the fork",
            )
        )
        + ")"
    )
    assert (
        "select_task_rq_fair()" in by_name["targets distinct"].inconclusive
        and "load_balance()" in by_name["no balancing needed after the fork"].inconclusive
    )
    # every figure as on the kernel's own scheduler
    assert [e.figures for e in o.expectations] == [e.figures for e in own.expectations]
    assert by_name["targets distinct"].inconclusive.endswith(f"under scx_simple it {held}")


def test_a_precondition_failing_under_scx_simple_is_still_a_fail(tmp_path):
    d = _as_if_under_scx(PASSING, tmp_path)
    (d / "out" / "allowed").write_text(
        "0\n"
    )  # the run said it allowed one CPU: the targets are outside it
    o = runner.recheck(d)
    assert o.status == "FAIL"
    assert (
        next(e for e in o.expectations if e.name == "every target inside the allowed CPUs").status
        == "FAIL"
    )


def test_compare_eevdf_against_scx_simple_shows_the_placement_figures_side_by_side(tmp_path):
    """lab compare --scheduler eevdf --scheduler scx_simple: B's runs are INCONCLUSIVE (no
    pass rate counts them) but their figures are compared beside A's."""
    a = [dict(compare.load_run(PASSING), scheduler="eevdf")]
    b = [dict(compare.load_run(_as_if_under_scx(PASSING, tmp_path)), scheduler="scx_simple")]
    assert b[0]["status"] == "INCONCLUSIVE"
    doc = compare.compare(a, b)
    assert (
        doc["verdict"]["b"] == {"passed": 0, "runs": 0} and doc["sides"]["b"]["inconclusive"] == 1
    )
    figs = {(f["expectation"].split(" (")[0], f["figure"]): f for f in doc["figures"]}
    for key in (
        ("targets distinct", "distinct"),
        ("even split between sockets", "socket0"),
        ("even split between sockets", "socket1"),
    ):
        assert (
            figs[key]["a"]["n"] == figs[key]["b"]["n"] == 1
            and figs[key]["a"]["mean"] == figs[key]["b"]["mean"]
        ), key
    rates = {e["name"].split(" (")[0]: e for e in doc["expectations"]}
    assert rates["every target inside the allowed CPUs"]["b"] == {
        "passed": 1,
        "runs": 1,
    }  # judged under any scheduler
    assert rates["targets distinct"]["b"] == {"passed": 0, "runs": 0}  # INCONCLUSIVE: neither
    t = render.text(doc)
    assert "B: lab-6.1 under scx_simple (1 runs: 0 PASS, 0 FAIL, 1 not judged)" in t
    assert (
        "an INCONCLUSIVE run's figures are in the tables" in t
        and "B INCONCLUSIVE: run under the sched_ext scheduler scx_simple" in t
    )
