"""The scenario API: loading errors as file:line, requirements and --repeat aggregation (JUnit: test_junit.py)."""


import pytest
from click.testing import CliRunner

from lab import runner, topology
from lab import scenario as sc
from lab.cli import main
from lab.errors import UserError


def test_every_shipped_scenario_loads():
    names = sc.names()
    assert "llc-spread-pinned" in names
    for n in names:
        s = sc.load(n)
        assert s.name == n and s.summary and s.topologies
        for t in s.topologies:
            topology.load(t)  # default topologies exist


def test_unknown_scenario_suggests():
    with pytest.raises(UserError, match="did you mean llc-spread-pinned"):
        sc.load("llc-spread-pined")


def test_syntax_error_is_file_line(tmp_path):
    p = tmp_path / "broken.py"
    p.write_text("from lab.scenario import Scenario\n\nclass X(Scenario)\n    name = 'x'\n")
    r = CliRunner().invoke(main, ["run", str(p)])
    assert r.exit_code == 2
    assert f"{p}:3: syntax error" in r.output and r.output.count("\n") == 1


def test_api_error_is_file_line(tmp_path):
    p = tmp_path / "api.py"
    p.write_text("from lab.scenario import Scenario, at_least\n\nREQ = at_least('llcs_per_socket', 2)\nBOOM = 1 / 0\n")
    with pytest.raises(sc.ScenarioError, match=r"api.py:4: ZeroDivisionError"):
        sc.load(str(p))


def test_missing_methods_named(tmp_path):
    p = tmp_path / "half.py"
    p.write_text("from lab.scenario import Scenario\n\nclass Half(Scenario):\n    name = 'half'\n    summary = 's'\n    topologies = ['zen3-2s-mini']\n")
    with pytest.raises(sc.ScenarioError, match="must define steps"):
        sc.load(str(p))


def test_requirements_against_catalog():
    req = sc.at_least("llcs_per_socket", 2)
    assert req(topology.load("zen3-2s-mini")) and not req(topology.load("xeon-2s22c-mini"))
    assert sc.clusters(topology.load("kunpeng920-2s-mini")) and not sc.clusters(topology.load("zen3-2s-mini"))
    assert req.description == "at least 2 llcs per socket"


def test_skip_when_topology_lacks_requirement():
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", "xeon-2s22c-mini"])
    assert r.exit_code == 0 and "SKIP" in r.output and "at least 2 LLCs per socket" in r.output


def outcome(status, figs=None, ok=True):
    e = sc.Expectation("targets distinct", ok, evidence=["line <&>"], figures=figs or {})
    return runner.RunOutcome("s", "t", "k", status, None, expectations=[e] if status in ("PASS", "FAIL") else [], message="boom")


def test_repeat_aggregate():
    runs = [outcome("PASS", {"migrations": 0}), outcome("FAIL", {"migrations": 4}, ok=False), outcome("PASS", {"migrations": 2})]
    agg = runner.aggregate(runs)
    assert agg["runs"] == 3 and agg["passed"] == 2 and agg["pass_rate"] == pytest.approx(2 / 3)
    f = agg["figures"]["targets distinct: migrations"]
    assert (f["min"], f["max"], f["avg"]) == (0, 4, 2)
    assert f["stddev"] == pytest.approx(2.0)  # the sample stddev, as lab compare's: sqrt(8 / (3 - 1))
    assert agg["expectations"]["targets distinct"] == {"passed": 2, "runs": 3}


def test_result_helpers_answer_in_the_spec_numbering(tmp_path):
    """Every analysis helper on Result translates the guest's CPU and node numbers."""
    from types import SimpleNamespace

    topo = topology.load("zen3-2s-mini")  # smt-last: guest CPU 1 is spec CPU 16
    g2s = tuple(c.id for c in topo.cpus)
    plan = SimpleNamespace(guest_to_spec=g2s, guest_node_to_spec=(1, 0))
    s2g = {s: g for g, s in enumerate(g2s)}

    def ev(cpu, ts, name, body, comm="stream", pid=10):
        return f"{comm:>16}-{pid:<7} [{s2g[cpu]:03d}] d..2. {ts:12.6f}: {name}: {body}\n"

    trace = [
        ev(16, 1.0, "sched_wakeup_new", f"comm=stream pid=11 prio=120 target_cpu={s2g[8]:03d}"),
        ev(8, 2.0, "sched_switch", "prev_comm=swapper prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=stream next_pid=11 next_prio=120"),
        ev(8, 3.0, "sched_waking", f"comm=stream pid=12 prio=120 target_cpu={s2g[8]:03d}", pid=11),
        ev(9, 3.1, "sched_wakeup", f"comm=stream pid=12 prio=120 target_cpu={s2g[9]:03d}", "<idle>", 0),
        ev(8, 4.0, "sched_migrate_task", f"comm=stream pid=11 prio=120 orig_cpu={s2g[8]} dest_cpu={s2g[0]}"),
        ev(0, 5.0, "sched_move_numa", f"pid=11 tgid=10 ngid=0 src_cpu={s2g[0]} src_nid=0 dst_cpu={s2g[8]} dst_nid=1"),
        ev(8, 6.0, "sched_switch", "prev_comm=stream prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=swapper next_pid=0 next_prio=120"),
    ]  # fmt: skip
    (tmp_path / "trace.main.txt").write_text("".join(trace))
    (tmp_path / "allowed").write_text(f"{s2g[16]},{s2g[1]}\n")
    r = sc.Result(None, topo, plan, None, tmp_path)

    assert r.allowed("allowed") == [1, 16] and r.allowed("missing") == []
    assert r.node(0) == 1 and r.node(1) == 0 and r.node(7) == 7
    assert r.by_node({"0": 5, "1": 3, "7": 1, "x": 2}) == {1: 5, 0: 3, "7": 1, "x": 2}
    (new,) = r.wakeups(kinds=["sched_wakeup_new"]).wakeups
    assert (new.waker_cpu, new.target_cpu, new.level) == (16, 8, "machine")
    assert new.line().startswith("stream-10 [016] 1.000000: sched_wakeup_new:")
    assert [x.target_cpu for x in r.wakeups(comms="stream").wakeups] == [8, 9]
    (pair,) = r.wakeups(comms="stream", kinds=["sched_wakeup"], paired=True).wakeups
    assert (pair.waker_cpu, pair.target_cpu, pair.level) == (8, 9, "llc")
    m = r.migrations(comms="stream", keep=True)
    assert [(x.src, x.dst, x.cross_node) for x in m.items] == [(8, 0, True)]
    assert m.table(r.node(1)).to_node == 1
    assert r.migrations(pids=[11], source="switch").total == 0  # ran on CPU 8 only
    assert r.residency(comms="stream")[11].per_cpu == {8: pytest.approx(4.0)}
    assert r.residency().by_group(topo, "socket") == {1: pytest.approx(4.0)}
    nb = r.numa_balancing()
    assert nb.count("move") == 1 and dict(nb.node_pairs) == {(0, 1): 1}
    assert r.task_paths()[11].path == [(1.0, 8), (4.0, 0)]
    assert r.wakeups("absent").wakeups == [] and r.migrations("absent").total == 0


def test_the_docstring_example_runs(tmp_path):
    """lab/scenario.py's example is what new scenarios start from: it must load and check."""
    import re
    import textwrap
    from pathlib import Path

    block = re.search(r"\n(    class .*?)\n\n(?! )", sc.__doc__, re.S).group(1)
    p = tmp_path / "example.py"
    p.write_text("from lab.scenario import Expectation, Scenario, at_least\n\n" + textwrap.dedent(block))
    runs = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
    spread = runner.recheck(runs / "llc-spread-pinned-zen3-2s-mini-lab-6.1", str(p))
    assert spread.status == "PASS" and len(spread.expectations) == 2
    piled = runner.recheck(runs / "llc-spread-pinned-zen3-2s-mini-debian", str(p))
    distinct = piled.expectations[1]
    assert not distinct.ok and distinct.evidence and distinct.figures["socket1"] == 0


def _within(seconds: float, fn):
    """fn()'s result, or a failure if it blocks (a FIFO opened for reading waits for a writer)."""
    import threading

    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still reading after {seconds}s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_result_reads_only_regular_files_within_the_limit(tmp_path, monkeypatch):
    """What a check() reads from a run directory (`lab recheck` takes any directory) goes
    through limits.read_file: no links, no FIFOs, nothing larger than MAX_RESULT_BYTES,
    each refused in one line naming the file; numbers the guest wrote are parsed strictly."""
    import os
    from types import SimpleNamespace

    topo = topology.load("zen3-2s-mini")
    plan = SimpleNamespace(guest_to_spec=tuple(c.id for c in topo.cpus), guest_node_to_spec=(1, 0))
    secret = tmp_path / "secret"
    secret.write_text("not the guest's\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "link").symlink_to(secret)
    os.mkfifo(out / "fifo")
    (out / "big").write_bytes(b"x" * 100)
    (out / "s.rc").write_text("\u00b2\n")  # a digit to str.isdigit(), not to int()
    (out / "trace.main.lost").write_text("\u00b2\n")
    (out / "phase.main.start").write_text("\u0661\n")  # float() reads ARABIC-INDIC ONE as 1.0
    (out / "phase.main.end").write_text("12.5\n")
    (out / "trace.linked.txt").symlink_to(secret)
    os.mkfifo(out / "trace.piped.lost")
    (out / "trace.piped.txt").write_text("")
    monkeypatch.setattr(sc, "MAX_RESULT_BYTES", 64)
    r = sc.Result(None, topo, plan, None, out)

    assert r.text("missing") == "" and r.allowed("missing") == []
    for name, why in (("link", "a symbolic link, not a regular file"), ("fifo", "a FIFO, not a regular file"),
                      ("big", "larger than 64 bytes, the most lab reads from one file of a run's output")):  # fmt: skip
        with pytest.raises(UserError) as e:
            _within(5, lambda name=name: r.text(name))
        assert str(e.value) == f"{out / name}: {why}" and "secret" not in str(e.value)
    assert r.step("s").rc is None
    assert r.lost() == 0  # integrity.judge() names the count that is not one; check() never runs on it
    assert _within(5, lambda: r.lost("piped")) == 0
    assert r.phase_seconds() is None
    (out / "phase.main.start").write_text("11.0\n")
    assert r.phase_seconds() == pytest.approx(1.5)
    with pytest.raises(UserError, match="trace.linked.txt: a symbolic link"):
        list(r.events("linked"))
    assert r.by_node({"\u00b2": 1, "\u0661": 2, "-1": 3, "1": 4, 0: 5}) == {"\u00b2": 1, "\u0661": 2, "-1": 3, 0: 4, 1: 5}


def test_a_runs_verdict_from_its_expectations():
    """FAIL if any failed; else INCONCLUSIVE with each cause once; else PASS."""
    E = sc.Expectation
    assert sc.verdict_of([E("a", True), E("b", True, claim=True)]) == ("PASS", "")
    assert sc.verdict_of([E("a", False, inconclusive="cpu model"), E("b", False)]) == ("FAIL", "")
    got = sc.verdict_of([E("a", False, inconclusive="cpu model"), E("b", True, inconclusive="cpu model"), E("c", True, inconclusive="tcg")])
    assert got == ("INCONCLUSIVE", "cpu model; tcg")
    assert E("b", True, inconclusive="x").status == "INCONCLUSIVE" and "inconclusive" not in E("a", True).to_dict()


def test_a_pass_needs_a_claim_that_could_fail():
    """No PASS unless an expectation carrying the claim was judged and could have failed:
    none marked, or each marked one vacuous (the kernel lacks what it is about), is
    INCONCLUSIVE naming why; a FAIL still decides."""
    E = sc.Expectation
    status, why = sc.verdict_of([E("ran", True), E("counted", True)])
    assert status == "INCONCLUSIVE" and why.startswith(sc.NO_CLAIM) and "marked none claim=True" in why
    status, why = sc.verdict_of([E("ran", True), E("soft", True, claim=True, vacuous="no soft affinity")])
    assert (status, why) == ("INCONCLUSIVE", f"{sc.NO_CLAIM} (soft: no soft affinity)")
    assert sc.verdict_of([E("ran", False), E("soft", True, claim=True, vacuous="x")]) == ("FAIL", "")
    assert sc.verdict_of([E("soft", True, claim=True, vacuous="x"), E("split", True, claim=True)]) == ("PASS", "")
    assert sc.verdict_of([E("split", False, claim=True)]) == ("FAIL", "")
    d = E("soft", True, claim=True, vacuous="no soft affinity").to_dict()
    assert d["claim"] is True and d["vacuous"] == "no soft affinity"


def test_every_shipped_scenario_names_its_claim():
    """Each scenario says which expectation carries its claim (loading refuses one that
    does not, naming the file)."""
    for n in sc.names():
        s = sc.load(n)
        assert s.claim.strip(), f"{s.path}: {type(s).__name__}.claim is empty"


def test_a_scenario_without_a_claim_is_refused_naming_its_file(tmp_path):
    p = tmp_path / "noclaim.py"
    p.write_text(
        "from lab.scenario import Expectation, Scenario\n\nclass N(Scenario):\n    name = 'n'\n    summary = 's'\n"
        "    topologies = ['zen3-2s-mini']\n    def steps(self, t):\n        return ''\n"
        "    def check(self, r):\n        return [Expectation('x', True)]\n"
    )
    with pytest.raises(sc.ScenarioError, match=rf"^{p}: N.claim must be a sentence naming the expectation"):
        sc.load(str(p))
