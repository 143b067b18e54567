"""lab compare's model: statistics against values worked out by hand, the document on
recorded runs, the refusals, and the text it prints (golden file)."""

import copy
import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import compare
from lab.cli import main
from lab.errors import UserError
from lab.report import compare as render

RUNS = Path(__file__).parent.parent / "fixtures" / "runs"
GOLDEN = Path(__file__).parent.parent / "golden" / "compare"
LLC_LAB = RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1"
LLC_LATE = RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1-late-migration"
LLC_DEB = RUNS / "llc-spread-pinned-zen3-2s-mini-debian"
CLUSTER = RUNS / "cluster-wakeup-kunpeng920-2s-mini-debian"


# --- statistics against known values ------------------------------------------------------


def test_summary_uses_the_sample_stddev():
    s = compare.summary([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    # sum of squared deviations from the mean 5 is 32; 32 / 7 = 4.571..., sqrt = 2.138
    assert s["n"] == 8 and s["min"] == 2 and s["max"] == 9 and s["mean"] == 5
    assert s["stddev"] == pytest.approx(math.sqrt(32 / 7))
    assert compare.summary([3.0])["stddev"] == 0 and compare.summary([])["mean"] is None


def test_welch_against_the_formula():
    a, b = [1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 4.0, 6.0, 8.0, 10.0]
    # by hand: means 3 and 6, sample variances 2.5 and 10; se^2 = 2.5/5 + 10/5 = 2.5
    # t = -3 / sqrt(2.5) = -1.8974; Welch-Satterthwaite df = 2.5^2 / (0.5^2/4 + 2^2/4) = 5.8824
    t = -3 / math.sqrt(2.5)
    df = 2.5**2 / (0.5**2 / 4 + 2.0**2 / 4)
    from scipy.stats import t as tdist

    r = compare.welch(a, b)
    assert r["method"] == "welch" and r["statistic"] == pytest.approx(t)
    assert r["p"] == pytest.approx(2 * tdist.sf(abs(t), df))  # R: t.test(a, b) p-value = 0.1075
    assert r["p"] == pytest.approx(0.1075, abs=5e-4)
    assert r["result"] == compare.NOT_SIGNIFICANT
    # Student's t-test (equal variances, df 8) would give p = 0.0944: not what is used
    assert abs(r["p"] - 0.0944) > 0.005


def test_welch_significant_and_undefined_cases():
    r = compare.welch([10.0, 10.5, 9.5, 10.2, 9.8], [20.0, 21.0, 19.0, 20.5, 19.5])
    assert r["result"] == compare.SIGNIFICANT and r["p"] < 1e-6
    assert compare.welch([1.0], [1.0, 2.0])["result"] == compare.TOO_FEW
    assert compare.welch([3.0, 3.0], [3.0, 3.0, 3.0])["result"] == compare.IDENTICAL
    # constant and different: the exact permutation p is 2 / C(10, 5) = 2/252 for 5 + 5
    r = compare.welch([2.0] * 5, [4.0] * 5)
    assert r["method"] == "permutation" and r["p"] == pytest.approx(2 / 252) and r["result"] == compare.SIGNIFICANT
    r = compare.welch([2.0] * 2, [4.0] * 2)  # 2/6: two runs a side cannot tell
    assert r["p"] == pytest.approx(1 / 3) and r["result"] == compare.TOO_FEW


def test_fisher_against_known_values():
    # The lady tasting tea: [[3, 1], [1, 3]], two-sided p = 34/70 = 0.4857
    r = compare.fisher(3, 4, 1, 4)
    assert r["p"] == pytest.approx(34 / 70) and r["result"] == compare.NOT_SIGNIFICANT
    # 5/5 against 0/5: p = 2 / C(10, 5) = 0.0079
    r = compare.fisher(5, 5, 0, 5)
    assert r["p"] == pytest.approx(2 / 252) and r["result"] == compare.SIGNIFICANT
    # 3/3 against 0/3: p = 2/20 = 0.1, and that is the best 3 runs a side can do
    r = compare.fisher(3, 3, 0, 3)
    assert r["p"] == pytest.approx(0.1) and r["result"] == compare.TOO_FEW and "4 runs per side" in r["why"]
    assert compare.runs_needed() == 4  # 4/4 against 0/4: 2/70 = 0.029
    assert compare.fisher(5, 5, 5, 5)["result"] == compare.IDENTICAL
    assert compare.fisher(2, 2, 0, 0)["result"] == compare.TOO_FEW


def test_change_pct():
    # seed 002: 325.9673 -> 378.9117 is 16.24%
    assert compare.change_pct(325.9673, 378.9117) == pytest.approx(16.24, abs=0.005)
    assert compare.change_pct(-2.0, -1.0) == pytest.approx(50.0)
    assert compare.change_pct(0.0, 0.0) == 0.0 and compare.change_pct(0.0, 1.0) is None


# --- the document on recorded runs --------------------------------------------------------


def _runs(d: Path, n: int, **change) -> list[dict]:
    """*n* copies of a recorded run, each a distinct run directory name."""
    rec = compare.load_run(d, stored=True)
    out = []
    for i in range(n):
        r = copy.deepcopy(rec)
        r["run_dir"] = f"{d}#{i}"
        r.update(change)
        out.append(r)
    return out


def test_compare_recorded_runs():
    a = [compare.load_run(LLC_LAB, stored=True), compare.load_run(LLC_LATE, stored=True), *_runs(LLC_LAB, 3)]
    b = _runs(LLC_DEB, 5)
    doc = compare.compare(a, b, interleaved=True)
    assert doc["schema"] == "lab.compare" and doc["version"] == compare.VERSION
    assert doc["scenario"] == "llc-spread-pinned" and doc["topology"] == "zen3-2s-mini"
    assert doc["sides"]["a"]["kernel"] == "lab-6.1" and doc["sides"]["b"]["kernel"] == "debian"
    pile = next(e for e in doc["expectations"] if e["name"] == "targets distinct (no pile-up)")
    assert (pile["a"], pile["b"]) == ({"passed": 5, "runs": 5}, {"passed": 0, "runs": 5})
    assert pile["test"]["result"] == compare.SIGNIFICANT and pile["test"]["p"] == pytest.approx(2 / 252)
    s0 = next(f for f in doc["figures"] if f["figure"] == "socket0")
    assert s0["a"]["mean"] == 2 and s0["b"]["mean"] == 4 and s0["change_pct"] == pytest.approx(100.0)
    assert s0["test"]["result"] == compare.SIGNIFICANT
    json.dumps(doc)  # the document is JSON as it is


def test_not_judged_runs_count_on_no_side(tmp_path):
    a = _runs(LLC_LAB, 4)
    b = [*_runs(LLC_DEB, 4), *_runs(LLC_DEB, 1, status="ERROR", message="guest never reported ready")]
    doc = compare.compare(a, b)
    assert doc["verdict"]["b"] == {"passed": 0, "runs": 4}
    assert doc["sides"]["b"]["not_judged"] == 1
    assert doc["not_judged"][0]["message"] == "guest never reported ready"
    assert "guest never reported ready" in render.text(doc)


def test_unfinished_run_is_not_judged(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    rec = json.loads((LLC_LAB / "results.json").read_text())
    rec["status"] = "RUNNING"
    rec["integrity"] = {"stage": "boot", "pid": 2**22 + 1, "host": "elsewhere"}
    (d / "results.json").write_text(json.dumps(rec))
    r = compare.load_run(d, stored=True)
    assert r["status"] == "ERROR" and "did not finish" in r["message"]


def test_different_scenarios_or_topologies_are_refused():
    with pytest.raises(UserError, match=f"different scenarios: {LLC_LAB} is llc-spread-pinned, {CLUSTER} is cluster-wakeup"):
        compare.compare([compare.load_run(LLC_LAB, stored=True)], [compare.load_run(CLUSTER, stored=True)])
    other = _runs(LLC_DEB, 1, topology="zen3-2s")
    with pytest.raises(UserError, match="different topologies: .* is zen3-2s-mini, .* is zen3-2s$"):
        compare.compare([compare.load_run(LLC_LAB, stored=True)], other)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(UserError, match="not a run directory"):
        compare.load_run(tmp_path, stored=True)
    with pytest.raises(UserError, match="no such run directory"):
        compare.load_run(tmp_path / "nope", stored=True)


def test_check_document():
    doc = compare.compare(_runs(LLC_LAB, 2), _runs(LLC_DEB, 2))
    assert compare.check_document(doc) is doc
    with pytest.raises(UserError, match="newer lab"):
        compare.check_document({**doc, "version": compare.VERSION + 1}, "x.json")
    with pytest.raises(UserError, match="not a lab compare document"):
        compare.check_document({"runs": []}, "x.json")


# --- the text ------------------------------------------------------------------------------


def _golden(name: str, text: str) -> None:
    p = GOLDEN / name
    if os.environ.get("LAB_REGEN"):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    assert text == p.read_text(), f"{p} differs (LAB_REGEN=1 to regenerate, then review the diff)"


def _plain(text: str) -> None:
    for line in text.splitlines():
        assert line.isascii() and len(line) <= 80, repr(line)


def test_text_golden():
    a = [compare.load_run(LLC_LAB, stored=True), compare.load_run(LLC_LATE, stored=True), *_runs(LLC_LAB, 3)]
    b = [*_runs(LLC_DEB, 4), *_runs(LLC_DEB, 1, status="ERROR", message="guest never reported ready")]
    doc = compare.compare(a, b, interleaved=True)
    for r in doc["not_judged"]:
        r["run_dir"] = Path(r["run_dir"]).name  # the golden file must not depend on the checkout
    t = render.text(doc)
    _plain(t)
    _golden("llc-spread-pinned.txt", t)


def test_compare_run_dirs_cli():
    # --stored: the Debian run re-judges INCONCLUSIVE (the vendor effect) without it, leaving
    # B no judged run (test_run_directories_are_re_judged...); this checks the tables.
    r = CliRunner().invoke(main, ["compare", "--stored", str(LLC_LAB), str(LLC_LATE), "--", str(LLC_DEB)])
    assert r.exit_code == 0, r.output
    _plain(r.output)
    assert "A: lab-6.1 (2 runs" in r.output and "B: debian (1 runs" in r.output and "too few" in r.output
    r = CliRunner().invoke(main, ["compare", "--json", "--stored", str(LLC_LAB), "--", str(LLC_DEB)])
    assert r.exit_code == 0 and json.loads(r.output)["schema"] == "lab.compare"


@pytest.mark.parametrize(
    "args, match",
    [
        ([str(LLC_LAB), "--", str(CLUSTER)], "different scenarios"),
        ([str(LLC_LAB), str(LLC_DEB)], "--"),
        ([str(LLC_LAB), "--"], "both sides"),
        (["/nonexistent/run", "--", str(LLC_DEB)], "no such run directory"),
        (["llc-spread-pinned", "--kernel", "debian"], "two --kernel"),
    ],
)
def test_compare_bad_input_is_one_line(args, match):
    r = CliRunner().invoke(main, ["compare", *args])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("lab: error: ") and len(r.output.strip().splitlines()) == 1 and match in r.output, r.output


def test_each_run_records_the_lab_run_line_that_repeats_it(tmp_path, monkeypatch):
    """A run made by compare or bisect records `lab run ...` for that one run (its kernel
    by store id), valid for `lab run` from any directory."""
    import click

    from lab import session, topology
    from lab.plan import VmOptions

    spec = tmp_path / "mybox.toml"
    spec.write_text((Path(__file__).parents[2] / "topologies" / "zen3-2s-mini.toml").read_text())
    for topo, want in ((topology.load("zen3-2s-mini"), "zen3-2s-mini"), (topology.load(spec), str(spec.resolve()))):
        argv = session.run_argv("llc-spread-pinned", topo, VmOptions(kernel="0123abcd", append="a=1 b"))
        assert argv == ["run", "llc-spread-pinned", "--topology", want, "--kernel", "0123abcd", "--append", "a=1 b",
                        "--runs-per-verdict", "1"]  # fmt: skip
        run = main.commands["run"]
        ctx = run.make_context("run", argv[1:])  # lab run parses it
        assert ctx.params["runs_per_verdict"] == 1 and isinstance(run, click.Command)
    with session.command(["run", "x"]):
        d = session.new_run_dir("run", topology.load("zen3-2s-mini"), "k", base=tmp_path / "runs")
    assert (d / "command").read_text() == "lab run x\n"


@pytest.mark.parametrize("v", [111793.4, 120560, 0.2622, -0.000123456, 1e9 + 0.5, 12345.67, -1234.5678, 2.5e-12, -9.99e99, 0.1 + 0.2])
def test_a_number_leaves_a_space_in_its_column(v):
    """Each number column is 9 wide and a number takes at most 8: a mean of 111793.4 as
    '1.118e+05' (9) ran into the maximum before it ('1205601.118e+05')."""
    from lab.report.compare import _NUM, num

    s = num(v)
    assert 0 < len(s) < _NUM, s
    assert abs(float(s) - v) <= max(abs(v) * 0.05, 1e-12) or abs(v) >= 1e8, (s, v)  # 2 digits at worst


# --- stored verdicts are re-judged (issue 31 item 5) ------------------------------------------


def test_run_directories_are_re_judged_and_say_where_the_stored_verdict_differs(tmp_path):
    """A stored verdict is what the scenario said when the run was made: lab compare on
    run directories re-judges the data with the current scenario, as lab recheck does,
    and names each run whose verdict changed; --stored keeps and labels the old ones."""
    stored = compare.load_run(LLC_DEB, stored=True)
    now = compare.load_run(LLC_DEB)
    assert stored["status"] == "FAIL" and stored["verdict_source"] == "stored (--stored)"
    # Recorded before the vendor-effect gate: Debian 6.1 under the Intel model loses
    # SD_BALANCE_FORK across sockets (reclaim distance 30 < 32), the emulation's doing.
    assert now["status"] == "INCONCLUSIVE" and now["stored_status"] == "FAIL" and now["verdict_source"] == "re-judged"
    doc = compare.compare([compare.load_run(LLC_LAB)], [now])
    assert {"side": "b", "run_dir": str(LLC_DEB), "stored": "FAIL", "now": "INCONCLUSIVE"} in doc["verdicts"]["changed"]
    assert "B stored FAIL, now INCONCLUSIVE" in render.text(doc)
    r = CliRunner().invoke(main, ["compare", "--stored", str(LLC_LAB), "--", str(LLC_DEB)])
    assert "verdicts as stored, not re-judged" in r.output
    r = CliRunner().invoke(main, ["compare", str(LLC_LAB), "--", str(LLC_DEB)])
    # B's one run is INCONCLUSIVE now: in no pass rate, but its data is complete, so its
    # figures are compared and the comparison is not empty (exit 0, not 3; issue 35 item 6).
    assert r.exit_code == 0 and "stored FAIL, now INCONCLUSIVE" in r.output and "verdicts as stored" not in r.output
    assert doc["verdict"]["b"]["runs"] == 0 and doc["figures"] and all(f["b"]["n"] == 1 for f in doc["figures"])
    assert "an INCONCLUSIVE run's figures are in the tables" in r.output


def test_holm_corrects_the_figures_as_one_family():
    """Twenty figures each at p=0.01 alone: Holm keeps each (0.01 * 20 > 0.05 for the
    first is not significant) -- a single p of 0.001 among nineteen of 0.5 stays."""
    tests = [{"p": 0.01, "result": compare.SIGNIFICANT, "why": "w"} for _ in range(20)]
    assert compare.holm(tests) == 20
    assert all(t["result"] == compare.NOT_SIGNIFICANT and t["p_holm"] == pytest.approx(0.2) for t in tests)
    assert "after Holm's correction over 20 figures" in tests[0]["why"]
    tests = [{"p": 0.001, "result": compare.SIGNIFICANT, "why": "w"}] + [{"p": 0.5, "result": compare.NOT_SIGNIFICANT, "why": "w"} for _ in range(19)]
    compare.holm(tests)
    assert tests[0]["result"] == compare.SIGNIFICANT and tests[0]["p_holm"] == pytest.approx(0.02)
    assert all(t["p_holm"] == pytest.approx(1.0) for t in tests[1:])
    # too-few and identical results are not in the family
    assert compare.holm([{"p": None, "result": compare.TOO_FEW, "why": ""}, {"p": 1.0, "result": compare.IDENTICAL, "why": ""}]) == 0


# --- two schedulers on one kernel (issue 35 item 3) -------------------------------------------


def test_compare_two_schedulers_is_two_sides_on_one_kernel():
    """--scheduler A --scheduler B: A and B share the kernel and differ in the scheduler
    (eevdf: the kernel's own, no --scheduler in the run's argv); each run's lab run line
    names its own."""
    from lab import session, topology
    from lab.cli.compare import sides

    vms, labels = sides("llc-spread-pinned", ("lab-6.12-scx",), ("eevdf", "scx_simple"), {"accel": "auto"})
    assert labels == ["eevdf", "scx_simple"]
    assert [vm.kernel for vm in vms] == ["lab-6.12-scx", "lab-6.12-scx"] and [vm.scheduler for vm in vms] == ["", "scx_simple"]
    topo = topology.load("zen3-2s-mini")
    assert session.run_argv("scheduler-survives", topo, vms[1]) == [
        "run", "scheduler-survives", "--topology", "zen3-2s-mini", "--kernel", "lab-6.12-scx",
        "--scheduler", "scx_simple", "--runs-per-verdict", "1"]  # fmt: skip
    assert session.run_argv("scheduler-survives", topo, vms[0]) == [
        "run", "scheduler-survives", "--topology", "zen3-2s-mini", "--kernel", "lab-6.12-scx",
        "--runs-per-verdict", "1"]  # fmt: skip
    # Two kernels under one scheduler: both sides load it; the sides are the kernels.
    vms, labels = sides("x", ("a", "b"), ("scx_simple",), {"accel": "auto"})
    assert labels is None and [(vm.kernel, vm.scheduler) for vm in vms] == [("a", "scx_simple"), ("b", "scx_simple")]


def test_a_side_names_its_scheduler_in_the_document_and_the_table():
    a = [{"scenario": "s", "topology": "t", "kernel": "lab-6.12-scx", "status": "PASS", "scheduler": "eevdf", "run_dir": "a"}]
    b = [{"scenario": "s", "topology": "t", "kernel": "lab-6.12-scx", "status": "PASS", "scheduler": "scx_simple", "run_dir": "b"}]
    doc = compare.compare(a, b)
    assert doc["sides"]["a"]["scheduler"] == "eevdf" and doc["sides"]["b"]["scheduler"] == "scx_simple"
    from lab.report.compare import text

    assert "A: lab-6.12-scx under eevdf (1 runs" in text(doc) and "B: lab-6.12-scx under scx_simple (1 runs" in text(doc)
    a[0].pop("scheduler")
    b[0].pop("scheduler")
    assert "scheduler" not in compare.compare(a, b)["sides"]["a"]  # a kernel A/B's document is as before


@pytest.mark.parametrize(
    "args, match",
    [
        (["llc-spread-pinned", "--scheduler", "scx_nosuch", "--scheduler", "eevdf"], "scx_nosuch"),
        (["llc-spread-pinned", "--scheduler", "eevdf", "--scheduler", "cfs"], "the same"),
        (["llc-spread-pinned", "--kernel", "a", "--kernel", "b", "--scheduler", "eevdf", "--scheduler", "scx_simple"], "not both"),
        (["llc-spread-pinned", "--scheduler", "eevdf", "--scheduler", "scx_simple", "--scheduler", "scx_qmap"], "once"),
        ([str(LLC_LAB), "--scheduler", "scx_simple", "--", str(LLC_DEB)], "--scheduler"),
    ],
)
def test_compare_scheduler_bad_input_is_one_line(args, match):
    r = CliRunner().invoke(main, ["compare", *args])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("lab: error: ") and len(r.output.strip().splitlines()) == 1 and match in r.output, r.output


@pytest.mark.parametrize("v", [0.0, -100.0, 99999.9, 37350.0, -37350.0, 1234567.0, 1e12, -1e12])
def test_a_change_leaves_a_space_in_its_column(v):
    """%Change is 9 wide like the numbers: +37350.0% (a stable_after_s of 0.0016 s against
    0.599 s, bench_sched_compare) ran into the standard deviation before it."""
    from lab.report.compare import _NUM, pct_col

    s = pct_col(v)
    assert 0 < len(s) < _NUM and s.endswith("%"), s
    assert abs(float(s[:-1]) - v) <= max(abs(v) * 0.5, 0.05), (s, v)
