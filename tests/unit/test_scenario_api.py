"""The scenario API: loading errors as file:line, requirements, junit and --repeat aggregation."""

import xml.etree.ElementTree as ET

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
    assert r.exit_code == 0 and "SKIP" in r.output and "at least 2 llcs per socket" in r.output


def outcome(status, figs=None, ok=True):
    e = sc.Expectation("targets distinct", ok, evidence=["line <&>"], figures=figs or {})
    return runner.RunOutcome("s", "t", "k", status, None, expectations=[e] if status in ("PASS", "FAIL") else [], message="boom")


def test_junit_counts_and_escapes():
    xml = runner.junit([outcome("PASS"), outcome("FAIL", ok=False), outcome("ERROR"), outcome("SKIP")])
    root = ET.fromstring(xml)
    assert root.get("failures") == "1" and root.get("errors") == "1" and root.get("skipped") == "1"
    assert "line <&>" in "".join(root.itertext())


def test_repeat_aggregate():
    runs = [outcome("PASS", {"migrations": 0}), outcome("FAIL", {"migrations": 4}, ok=False), outcome("PASS", {"migrations": 2})]
    agg = runner.aggregate(runs)
    assert agg["runs"] == 3 and agg["passed"] == 2 and agg["pass_rate"] == pytest.approx(2 / 3)
    f = agg["figures"]["targets distinct: migrations"]
    assert (f["min"], f["max"], f["avg"]) == (0, 4, 2)
    assert f["stddev"] == pytest.approx((8 / 3) ** 0.5)
    assert agg["expectations"]["targets distinct"] == {"passed": 2, "runs": 3}
