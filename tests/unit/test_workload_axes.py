"""`--workload CMD --check EXPR` where a command takes a scenario and hands it on (issue 36
item 2): `lab matrix` (a row of the commands instead of --scenarios) and `lab bisect`
(instead of SCENARIO), through one TOML scenario file named by its content."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

import lab.matrix as mx
from lab import scenario as sc
from lab.cli import main
from lab.cli import matrix as cli_matrix

CMDS = ("hackbench -g 2 -l 100", "sh -c 'echo $(reboot); a\\b' é")
CHECKS = ("starvation < 100ms", "wakeup-latency p99 < 5ms")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))


def test_the_file_is_the_run_s_scenario_named_by_its_content():
    p = sc.workload_file(CMDS, CHECKS)
    d = tomllib.loads(p.read_text())
    assert (d["name"], d["workloads"], d["checks"]) == (sc.WORKLOAD_NAME, list(CMDS), list(CHECKS))
    s = sc.load(str(p))
    want = sc.from_workloads(CMDS, CHECKS)
    assert s.name == want.name and s.commands() == want.commands()
    assert s.commands()[1] == ["sh", "-c", "echo $(reboot); a\\b", "é"]  # data, never re-quoted
    assert sc.workload_file(CMDS, CHECKS) == p  # the same commands: the same file
    assert sc.workload_file(CMDS[:1], CHECKS) != p


def test_a_matrix_of_a_workload_runs_its_file_and_its_ci_job_makes_its_own():
    axes = {"topologies": "zen3-2s-mini,numa4-96-micro", "kernels": "debian", "scenarios": "all", "repeat": 1,
            "backend": "qemu", "params": (), "schedulers": "", "workloads": CMDS, "checks": CHECKS,
            "options": mx.VmOptions()}  # fmt: skip
    m = cli_matrix._expand(axes)
    assert [c.id for c in m.cells] == ["workload@zen3-2s-mini@debian", "workload@numa4-96-micro@debian"]
    argv = mx.Runner(m, Path("x")).lab_run_argv(m.cells[0], "k", None)
    assert argv[4] == str(sc.workload_file(CMDS, CHECKS))
    args = cli_matrix._args(axes)  # what a CI job is given: the commands, not this host's cache path
    assert "--scenarios" not in args and str(sc.workload_file(CMDS, CHECKS)) not in args
    assert args[4:12] == ["--workload", CMDS[0], "--workload", CMDS[1], "--check", CHECKS[0], "--check", CHECKS[1]]


def test_matrix_plan_hands_the_commands_to_each_job():
    r = CliRunner().invoke(main, ["matrix", "plan", "--topologies", "zen3-2s-mini", "--workload", CMDS[0], "--check", CHECKS[0]])
    assert r.exit_code == 0, r.output
    assert "--workload" in r.output and "hackbench" in r.output


def test_bisect_judges_each_commit_by_the_workload_s_file(monkeypatch):
    from types import SimpleNamespace

    from lab import bisect

    got = []
    monkeypatch.setattr(bisect, "drive", lambda name, *a, **kw: got.append(name) or SimpleNamespace(text="found\n", result=SimpleNamespace(first_bad="x")))
    r = CliRunner().invoke(main, ["bisect", "--kernel-tree", ".", "--good", "a", "--bad", "b", "--workload", CMDS[0], "--check", CHECKS[0]])
    assert r.exit_code == 0, r.output
    assert got == [str(sc.workload_file(CMDS[:1], CHECKS[:1]))]
