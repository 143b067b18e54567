"""Issue 36 items 2, 4 and 5 without a VM: `lab run --workload CMD --check EXPR` and TOML
scenarios (lab.scenario.DataScenario: bad input, argv passed as data, the run's record), scenario
parameters (-p, validated before booting, recorded, swept by the matrix) and `lab scenario
new` (each skeleton loads and passes as written).  The end-to-end run is
tests/vm/test_workload_vm.py."""

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from lab import matrix, runner, scaffold, topology
from lab import scenario as sc
from lab.cli import main
from lab.errors import UserError

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"

GOOD = """
name = "hb"
summary = "hackbench groups: nobody starves"
topologies = ["zen3-2s-mini"]
requires = ["sockets >= 2", "llcs_per_socket >= 2"]
workloads = ["hackbench -g {groups} -l 200", ["stream", "-t", "2"]]
checks = ["starvation < 1s", "wakeup-latency p99 < 50ms"]

[params.groups]
default = 2
min = 1
max = 8
"""


def _one_line(r) -> str:
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and "Traceback" not in r.output, r.output
    return r.output


# ---- --check expressions and --workload on the command line --------------------------------


@pytest.mark.parametrize(
    "expr, col",
    [("starvation <", 13), ("starvaton < 1s", 1), ("wakeup-latency p42 < 1ms", 16), ("starvation < 1 parsec", 16), ("< 1s", 1)],
)
def test_a_check_that_does_not_parse_is_one_line_with_its_column_and_the_checks(expr, col):
    out = _one_line(CliRunner().invoke(main, ["run", "--workload", "true", "--check", expr]))
    assert f"column {col}:" in out and "the checks: starvation" in out and "wakeup-latency" in out


def test_workload_needs_a_check_and_no_scenario():
    assert "at least one --check" in _one_line(CliRunner().invoke(main, ["run", "--workload", "true"]))
    assert "not both" in _one_line(CliRunner().invoke(main, ["run", "llc-spread-pinned", "--workload", "true", "--check", "starvation < 1s"]))
    assert "give a SCENARIO" in _one_line(CliRunner().invoke(main, ["run"]))
    assert "No closing quotation" in _one_line(CliRunner().invoke(main, ["run", "--workload", "sh -c 'x", "--check", "starvation < 1s"]))


def test_a_command_lab_cannot_pack_is_a_skip_before_booting(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_RUNS", str(tmp_path / "runs"))
    r = CliRunner().invoke(main, ["run", "--workload", "no-such-tool-xyz -q", "--check", "starvation < 1s", "--topology", "zen3-2s-mini"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("SKIP workload on zen3-2s-mini:") and "'no-such-tool-xyz' not found" in r.output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # nothing booted


def test_the_first_word_is_packed_unless_the_guest_has_it():
    assert sc.tool_of(["hackbench", "-g", "2"]) == "hackbench"
    assert sc.tool_of(["stream", "-t", "2"]) is None  # lab's own workload
    assert sc.tool_of(["/usr/local/bin/x"]) is None  # a path in the guest: not packed
    if sc._applets():
        assert sc.tool_of(["sleep", "1"]) is None  # busybox's


# ---- commands as data, end to end in a shell ----------------------------------------------

NASTY = ["printf", "%s|", "two words", "it's", 'say "hi"', "$(touch pwned)", "*", "`id`", "tail\n\n", "", "-- \\n ;&|"]


def test_commands_are_split_on_the_host_and_pass_to_the_guest_as_bytes(tmp_path):
    import shlex

    s = sc.from_workloads([shlex.join(NASTY)], ["starvation < 1s"])
    assert s.commands() == [NASTY]
    files = s.guest_files(topology.load("zen3-2s-mini"))
    assert files["lab/workload/0/nargs"] == f"{len(NASTY)}\n".encode()
    assert files["lab/workload/0/arg.4"] == b'say "hi"' and files["lab/workload/0/arg.8"] == b"tail\n\n"
    # The guest's half: steps()'s reader, with lab_run replaced by one that writes "$@"
    # NUL-separated, run by busybox's sh (the guest's) when the host has it.
    for path, data in files.items():
        p = tmp_path / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    steps = s.steps(topology.load("zen3-2s-mini"))
    reader = steps[steps.index("lab_argv_run() {") : steps.index("}\n") + 2]
    script = ("lab_run() { shift; for a in \"$@\"; do printf '%s\\0' \"$a\"; done > argv.bin; }\n" + reader
              + f"lab_argv_run w1 {tmp_path}/lab/workload/0\n")  # fmt: skip
    sh = next((b for b in ("/bin/busybox", "/usr/bin/busybox") if os.path.exists(b)), None)
    argv = [sh, "sh", "-c", script] if sh else ["sh", "-c", script]
    subprocess.run(argv, cwd=tmp_path, check=True, timeout=30)
    assert (tmp_path / "argv.bin").read_bytes().split(b"\0")[:-1] == [a.encode() for a in NASTY]
    assert not (tmp_path / "pwned").exists()


def test_the_job_starts_every_command_at_once_in_one_traced_phase():
    s = sc.from_workloads(["hackbench -g 2 -l 200", "stream -t 2"], ["starvation < 1s"])
    job = runner.job_script(s, topology.load("zen3-2s-mini"))
    assert "lab_argv_run w1-hackbench /lab/workload/0 &\nlab_argv_run w2-stream /lab/workload/1 &\nwait\nlab_trace_off main" in job
    assert "hackbench -g" not in job  # the commands are never in the script
    assert s.tools == ["hackbench"] and "sched:sched_switch" in s.events


# ---- TOML scenarios -------------------------------------------------------------------------


def test_a_toml_scenario_loads_with_its_parameters(tmp_path):
    p = tmp_path / "hb.toml"
    p.write_text(GOOD)
    s = sc.load(str(p))
    assert isinstance(s, sc.DataScenario) and s.name == "hb" and s.path == str(p)
    assert [r.description for r in s.requires] == ["at least 2 sockets", "at least 2 llcs per socket"]
    assert s.commands() == [["hackbench", "-g", "2", "-l", "200"], ["stream", "-t", "2"]]
    s.set_params({"groups": "4"})
    assert s.commands()[0][2] == "4"
    assert [e.text for e in runner.user_checks(s)] == ["starvation < 1s", "wakeup-latency p99 < 50ms"]


def test_toml_scenarios_are_catalog_names_and_listed(tmp_path, monkeypatch):
    (tmp_path / "hb_toml.toml").write_text(GOOD.replace('name = "hb"', 'name = "hb-toml"'))
    monkeypatch.setenv("LAB_SCENARIOS", str(tmp_path))
    assert "hb-toml" in sc.names() and sc.load("hb-toml").name == "hb-toml"
    r = CliRunner().invoke(main, ["scenarios"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "hb-toml (TOML)" in r.output and "llc-spread-pinned" in r.output


@pytest.mark.parametrize(
    "change, what",
    [
        (("checks = [", "chex = ["), "unknown key(s) chex"),
        (('checks = ["starvation < 1s", "wakeup-latency p99 < 50ms"]', "checks = []"), "checks must be a non-empty list"),
        (('"starvation < 1s"', '"starvation < 1 furlong"'), "column 16"),
        (('"sockets >= 2"', '"sockets > 2"'), "requirement 'sockets > 2'"),
        (("-g {groups}", "-g {gropus}"), "names {gropus}, which is no parameter (groups)"),
        (("min = 1", "min = 3"), "default 2 is not a whole number from 3 to 8"),
        (("workloads = [", "workloads = 3 #["), "workloads must be a list"),
        (('name = "hb"', "name = "), "not TOML"),
    ],
)
def test_a_bad_toml_scenario_is_one_line_naming_the_file(tmp_path, change, what):
    p = tmp_path / "bad.toml"
    p.write_text(GOOD.replace(*change))
    with pytest.raises(UserError) as e:
        sc.load(str(p))
    assert str(p) in str(e.value) and what in str(e.value) and "\n" not in str(e.value)


# ---- the run's record: recheck, compare and replay rebuild a data scenario --------------------


def test_the_record_rebuilds_the_same_data_scenario(tmp_path):
    p = tmp_path / "hb.toml"
    p.write_text(GOOD)
    s = sc.load(str(p))
    s.set_params({"groups": "3"})
    rec = json.loads(json.dumps(s.record()))  # as plan.json holds it
    assert rec["kind"] == "data" and rec["params"] == {"groups": 3} and rec["commands"][0][:3] == ["hackbench", "-g", "3"]
    (tmp_path / "plan.json").write_text(json.dumps({"scenario": rec}))
    again = sc.from_run("hb", "results.json", sc.recorded_in(tmp_path))
    assert again.commands() == s.commands() and again.own_checks() == s.own_checks()
    with pytest.raises(UserError, match="a path"):  # a name that is not the record's: the catalog only
        sc.from_run("../hb.py", "results.json", rec)


def test_a_recorded_runs_parameters_are_applied_on_recheck(tmp_path):
    rec = {"name": "soft-affinity", "params": {"groups": 4, "loops": 600}}
    s = sc.from_run("soft-affinity", "results.json", rec)
    assert s.p == {"groups": 4, "loops": 600}
    assert "hackbench -g 4 -f 10 -l 600" in s.steps(topology.load("xeon-2s22c-mini"))
    with pytest.raises(UserError, match="groups=99: scenario soft-affinity's parameter groups takes"):
        sc.from_run("soft-affinity", "results.json", {"name": "soft-affinity", "params": {"groups": 99}})


def test_check_expressions_of_a_data_scenario_carry_its_claim():
    e = runner.user_checks(sc.from_workloads(["true"], ["starvation < 1s"]))[0]
    figs = {"main": {"starvation": {"longest_s": 0.2}}}
    x = runner.check_expectation(e, figs, claim=True)
    assert x.ok and x.claim and sc.verdict_of([x]) == ("PASS", "")
    assert not runner.check_expectation(e, {"main": {"starvation": {"longest_s": 1.5}}}, claim=True).ok


# ---- parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arg, what",
    [
        ("groups=x", "-p groups=x: scenario soft-affinity's parameter groups takes a whole number"),
        ("groups=0", "takes a whole number from 1 to 16"),
        ("loops=2.5", "takes a whole number"),
        ("treads=4", "unknown parameter of scenario soft-affinity 'treads'"),
        ("groups", "give NAME=VALUE"),
    ],
)
def test_a_bad_parameter_is_refused_before_booting(arg, what):
    out = _one_line(CliRunner().invoke(main, ["run", "soft-affinity", "-p", arg]))
    assert what in out


def test_parameter_types_and_ranges():
    q = sc.Param("x", 1.5, min=0, max=2)
    assert q.value("0.25") == 0.25 and q.value(2) == 2.0
    for bad in ("nan", "3", True):
        with pytest.raises(ValueError):
            q.value(bad)
    b = sc.Param("on", False)
    assert b.value("yes") is True and b.value("off") is False
    with pytest.raises(ValueError):
        b.value("maybe")
    c = sc.Param("mode", "fast", choices=("fast", "slow"))
    assert c.value("slow") == "slow"
    with pytest.raises(ValueError, match="one of fast, slow"):
        c.value("medium")
    assert sc.Param("n", 16, min=1, max=64).describe() == "n: a whole number from 1 to 64 (default 16)"


def test_shipped_parameters_keep_the_default_steps():
    s = sc.load("cluster-wakeup")
    assert s.p == {"seconds": 5, "rounds": 12000} and "-s 5 -n 12000 --cpus" in s.steps(topology.load("kunpeng920-2s-mini"))
    s.set_params({"seconds": "9"})
    assert "-s 9 -n 12000 --cpus" in s.steps(topology.load("kunpeng920-2s-mini"))
    assert sc.load("soft-affinity").record() == {"name": "soft-affinity", "params": {"groups": 2, "loops": 300}}
    assert sc.load("numa-balancing").record() is None  # no parameters: plan.json as before
    assert sc.load("llc-spread-pinned").record() == {"name": "llc-spread-pinned", "params": {"gate": True}}


def test_a_scenario_declaring_bad_parameters_is_refused_at_load(tmp_path):
    p = tmp_path / "bad_params.py"
    p.write_text(
        "from lab.scenario import Expectation, Param, Scenario\n\n"
        "class B(Scenario):\n    name = 'bad-params'\n    summary = 's'\n    claim = 'c'\n    topologies = ['zen3-2s-mini']\n"
        "    params = [Param('n', 0, min=1)]\n    def steps(self, topo):\n        return ''\n    def check(self, r):\n        return []\n"
    )  # fmt: skip
    with pytest.raises(sc.ScenarioError, match="n's default 0 is not a whole number of at least 1"):
        sc.load(str(p))


def test_the_matrix_sweeps_a_parameter_as_rows_and_passes_it_to_each_cell(tmp_path):
    m = matrix.expand("soft-affinity,llc-spread-pinned", "xeon-2s22c-mini", "debian", params=["loops=100,600"])
    assert m.scenarios == ("soft-affinity loops=100", "soft-affinity loops=600", "llc-spread-pinned")
    cell = m.cells[1]
    assert cell.scenario == "soft-affinity loops=600" and "-" in cell.slug
    argv = matrix.Runner(m, tmp_path).lab_run_argv(cell, "kid", None)
    assert argv[argv.index("run") + 1] == "soft-affinity" and argv[argv.index("-p") + 1] == "loops=600"
    assert "-p" not in matrix.Runner(m, tmp_path).lab_run_argv(m.cells[2], "kid", None)
    with pytest.raises(UserError, match="loops=5: scenario soft-affinity's parameter loops takes"):
        matrix.expand("soft-affinity", "xeon-2s22c-mini", "debian", params=["loops=100,5"])
    with pytest.raises(UserError, match="no scenario of the matrix declares the parameter 'threads'"):
        matrix.expand("soft-affinity", "xeon-2s22c-mini", "debian", params=["threads=4,8"])


# ---- lab scenario new -------------------------------------------------------------------------


def test_the_python_skeleton_loads_and_passes_on_a_recorded_run(tmp_path):
    r = CliRunner().invoke(main, ["scenario", "new", "my-question", "-o", str(tmp_path)])
    assert r.exit_code == 0, r.output
    p = tmp_path / "my_question.py"
    s = sc.load(str(p))
    assert s.name == "my-question" and s.p == {"seconds": 2}
    assert "stream -t \"$N\" -s 2" in s.steps(topology.load("zen3-2s-mini"))
    # A run of the same shape (stream pinned, its forks traced): the skeleton's check() passes.
    o = runner.recheck(RUNS / "llc-spread-pinned-zen3-2s-mini-debian", str(p))
    assert o.status == "PASS", (o.message, [e.to_dict() for e in o.expectations])
    assert [e.claim for e in o.expectations] == [False, True]
    again = CliRunner().invoke(main, ["scenario", "new", "my-question", "-o", str(tmp_path)])
    assert "exists" in _one_line(again)
    assert "a name is lowercase" in _one_line(CliRunner().invoke(main, ["scenario", "new", "My Q", "-o", str(tmp_path)]))


def test_the_toml_skeleton_loads_and_passes_on_synthetic_figures(tmp_path):
    dest = scaffold.write("my-data", tmp_path, toml=True)
    s = sc.load(str(dest))
    assert s.name == "my-data" and s.commands() == [["stream", "-t", "4", "-s", "2"]] and s.tools == []
    assert s.skip_reason(topology.load("zen3-2s-mini")) is None
    out = tmp_path / "out"
    out.mkdir()
    for name, text in (("w1-stream.rc", "0\n"), ("w1-stream.out", "{}\n"), ("w1-stream.err", "")):
        (out / name).write_text(text)
    plan = SimpleNamespace(guest_to_spec=tuple(range(32)), guest_node_to_spec=(0, 1))
    exps = sc.call_check(s, sc.Result(s, topology.load("zen3-2s-mini"), plan, None, out))
    figs = {"main": {"starvation": {"longest_s": 0.05}, "wakeup_latency": {"p99_s": 0.002}}}
    exps += [runner.check_expectation(e, figs, claim=s.checks_carry_claim) for e in runner.user_checks(s)]
    assert sc.verdict_of(exps) == ("PASS", "") and len(exps) == 3


# ---- a recorded run of a data scenario (the TOML skeleton, run once under TCG) ---------------

TOML_RUN = RUNS / "my-check-toml-zen3-2s-mini-debian"


def test_a_recorded_data_scenario_run_is_rechecked_from_its_own_record():
    o = runner.recheck(TOML_RUN)
    assert o.status == "PASS" and o.scenario == "my-check", o.message
    assert [(e.name, e.status, e.claim) for e in o.expectations] == [
        ("w1-stream ran: stream -t 4 -s 2", "PASS", False),
        ("--check starvation < 2s", "PASS", True),
        ("--check wakeup-latency p99 < 1s", "PASS", True),
    ]
    assert o.check_expressions == ["starvation < 2s", "wakeup-latency p99 < 1s"]  # each once


def test_without_its_record_a_data_scenarios_name_is_only_a_catalog_name(tmp_path):
    import shutil

    d = tmp_path / "run"
    shutil.copytree(TOML_RUN, d)
    plan = json.loads((d / "plan.json").read_text())
    del plan["scenario"]
    (d / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(UserError, match="unknown scenario 'my-check'"):
        runner.recheck(d)


def test_a_bundle_of_a_data_scenario_replays_it_without_trust(tmp_path):
    from lab.report import bundle, replay

    bundle.make(TOML_RUN, tmp_path / "b.tar.gz")
    b = bundle.extract(tmp_path / "b.tar.gz", tmp_path / "x")
    assert b.manifest["scenario_params"] == {"threads": 4, "seconds": 2}
    assert b.manifest["scenario_commands"] == [["stream", "-t", "4", "-s", "2"]]
    s, which = replay.scenario_of(b)
    assert isinstance(s, sc.DataScenario) and s.commands() == [["stream", "-t", "4", "-s", "2"]]
    assert "the data scenario the bundle's plan.json defines" in which
