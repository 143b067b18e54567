"""lab matrix: expansion, skips, shards, capacity, reading a cell's `lab run`, reuse,
interruption, merge, plan and the CI files that use it.

The runner's tests give each cell a stand-in for `lab run` (a small Python script that
prints what `lab run --json` prints): booting VMs is tests/vm/test_matrix_vm.py's job."""

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lab import matrix as mx
from lab.cli import main
from lab.errors import UserError
from lab.paths import ROOT, pid_alive
from lab.progress import Progress

MINIS = ["epyc7551-8n-mini", "icelake-2s-mini", "jacobsville-24c-mini", "kunpeng920-2s-mini", "numa4-96-mini", "xeon-2s22c-mini", "zen3-2s-mini"]


def test_all_minis_times_all_scenarios():
    m = mx.expand("all", "all-minis", "debian")
    assert m.topologies == tuple(MINIS)
    # jacobsville-24c-mini: cluster-wakeup only; icelake-2s-mini: llc-spread-pinned too (the seed's Ice Lake)
    # scheduler-survives (issue 35) needs nothing of a topology: a cell on every mini;
    # smt-spread (issue 36) one on each mini with SMT (all but jacobsville and kunpeng920);
    # misfit-migration (issue 36) none: no mini has asymmetric CPU capacities;
    # wake-affine (issue 36) one on each mini with two or more LLCs in a node (zen3-2s, epyc7551-8n);
    # cpuset-isolation (issue 36) one on each mini with two or more nodes (all but jacobsville);
    # work-conservation (issue 36) needs 4 CPUs: a cell on every mini;
    # numa-locality (issue 36) one on each mini with two or more nodes and CONFIG_NUMA_BALANCING
    assert len(m.cells) == 7 * 12 and len(m.runnable) == 24 + 7 + 5 + 2 + 6 + 7 + 6
    skips = {c.id: c.skip for c in m.cells if c.skip}
    assert skips["misfit-migration@kunpeng920-2s-mini@debian"] == (
        "kunpeng920-2s-mini lacks asymmetric CPU capacities (or -p big=CPUS naming the CPUs to judge against)"
    )
    assert skips["wake-affine@numa4-96-mini@debian"] == "numa4-96-mini lacks at least 2 llcs per node"
    assert skips["cpuset-isolation@jacobsville-24c-mini@debian"] == "jacobsville-24c-mini lacks at least 2 nodes"
    assert skips["numa-locality@jacobsville-24c-mini@debian"] == "jacobsville-24c-mini lacks at least 2 nodes"
    assert skips["smt-spread@jacobsville-24c-mini@debian"] == "jacobsville-24c-mini lacks SMT (two or more threads per core)"
    assert skips["llc-spread-pinned@xeon-2s22c-mini@debian"] == (
        "xeon-2s22c-mini lacks at least 2 LLCs per socket, or one per socket with the sockets interleaved (the seed's Ice Lake)"
    )
    assert "llc-spread-pinned@icelake-2s-mini@debian" not in skips
    assert skips["cluster-wakeup@zen3-2s-mini@debian"].startswith("zen3-2s-mini lacks clusters")
    assert "cluster-wakeup@kunpeng920-2s-mini@debian" not in skips
    # The order is scenarios, then topologies, then kernels, as given.
    assert [c.id for c in m.cells[:2]] == ["cluster-wakeup@epyc7551-8n-mini@debian", "cluster-wakeup@icelake-2s-mini@debian"]


def test_a_kernel_of_another_arch_is_a_skip_with_the_reason():
    m = mx.expand("numa-balancing", "zen3-2s-mini,kunpeng920-2s-mini", "debian,lab-6.1-arm64")
    skips = {c.id: c.skip for c in m.cells}
    assert skips["numa-balancing@zen3-2s-mini@lab-6.1-arm64"] == "kernel lab-6.1-arm64 is arm64, zen3-2s-mini is x86_64"
    assert skips["numa-balancing@kunpeng920-2s-mini@lab-6.1-arm64"] == ""
    assert skips["numa-balancing@zen3-2s-mini@debian"] == ""


def test_duplicates_are_dropped_and_order_kept():
    m = mx.expand("soft-affinity,soft-affinity", "zen3-2s-mini,xeon-2s22c-mini,zen3-2s-mini", "debian")
    assert m.scenarios == ("soft-affinity",) and m.topologies == ("zen3-2s-mini", "xeon-2s22c-mini")


def one_line_error(args: list[str]) -> str:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lab: error: "), r.stderr
    assert r.exception is None or isinstance(r.exception, SystemExit)
    return lines[0]


@pytest.mark.parametrize(
    ("axis", "value", "nearest"),
    [
        ("--topologies", "zen3-2s-mimi", "zen3-2s-mini"),
        ("--scenarios", "soft-afinity", "soft-affinity"),
        ("--kernels", "lab-6.2", "lab-6.1"),
    ],
)
@pytest.mark.parametrize("cmd", [["matrix"], ["matrix", "plan"]])
def test_unknown_name_in_any_axis_names_the_nearest(cmd, axis, value, nearest):
    args = {"--topologies": "zen3-2s-mini", "--scenarios": "soft-affinity", "--kernels": "debian"}
    args[axis] = value
    line = one_line_error([*cmd, *(x for kv in args.items() for x in kv)])
    assert value in line and nearest in line


@pytest.mark.parametrize("spec", ["3/2", "0/2", "a/b", "1/0", "", "2"])
def test_bad_shard_specs(spec):
    line = one_line_error(["matrix", "--topologies", "zen3-2s-mini", "--shard", spec])
    assert "--shard" in line and "I/N" in line or "from 1 to N" in line


def test_empty_axis_entries_and_missing_topologies():
    assert "none empty" in one_line_error(["matrix", "plan", "--topologies", "zen3-2s-mini,,xeon-2s22c-mini"])
    assert "--topologies" in one_line_error(["matrix", "plan"])


def test_axes_before_a_subcommand_are_refused():
    assert "after `plan`" in one_line_error(["matrix", "--topologies", "zen3-2s-mini", "plan"])


def test_backend_flags_are_checked():
    # Until lab run has --backend (the libvirt and vng backends), the matrix says so.
    from lab.cli.run import run_cmd

    if "backend" not in {p.name for p in run_cmd.params}:
        assert "qemu backend" in one_line_error(["matrix", "--topologies", "zen3-2s-mini", "--backend", "libvirt"])
    assert "--connect" in one_line_error(["matrix", "--topologies", "zen3-2s-mini", "--connect", "qemu:///system"])
    assert "nope" in one_line_error(["matrix", "--topologies", "zen3-2s-mini", "--backend", "nope"])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 22, 30])
def test_shards_partition_the_runnable_cells(n):
    m = mx.expand("all", "all-minis", "debian")
    slices = [m.shard(i, n) for i in range(1, n + 1)]
    flat = [c for s in slices for c in s]
    assert sorted(c.id for c in flat) == sorted(c.id for c in m.runnable) and len(flat) == len(set(flat))
    assert [m.shard(i, n) for i in range(1, n + 1)] == slices  # deterministic
    assert all(m.shard_of(c, n) == i for i, s in enumerate(slices, 1) for c in s)
    assert max(map(len, slices)) - min(map(len, slices)) <= 1


def test_capacity_rule():
    one, big = mx.Cost(1, 1500), mx.Cost(8, 1500)
    assert mx.default_jobs(2, 24000, [one, one]) == 2
    assert mx.default_jobs(2, 2000, [one]) == 1  # memory for one
    assert mx.default_jobs(2, 24000, [big]) == 1
    assert mx.default_jobs(16, 12000, [one]) == 8  # memory: 12000 // 1500
    assert mx.can_start([], big, jobs=1, host_cpus=2, mem_mb=100)  # one VM always runs
    assert mx.can_start([one], one, jobs=4, host_cpus=2, mem_mb=24000)
    assert not mx.can_start([one, one], one, jobs=4, host_cpus=2, mem_mb=24000)  # one busy thread per core
    assert not mx.can_start([one], one, jobs=1, host_cpus=8, mem_mb=24000)  # -j
    assert not mx.can_start([one], one, jobs=4, host_cpus=8, mem_mb=2000)  # memory
    assert mx.mem_available_mb("MemTotal: 100 kB\nMemAvailable:   2097152 kB\n") == 2048


CELL = mx.Cell("soft-affinity", "xeon-2s22c-mini", "debian")


def lab_run_json(*statuses, verdict=None):
    runs = []
    for st in statuses:
        exps = [{"name": "no cross-node", "status": "FAIL" if st == "FAIL" else "PASS", "evidence": ["pid 7 0->40", "pid 8"], "note": "n"}]
        runs.append({"status": st, "expectations": exps if st in ("PASS", "FAIL") else [], "message": "guest lost", "run_dir": "/r",
                     "kernel_info": {"id": "debian-6.1"}})  # fmt: skip
    doc = {"runs": runs}
    if verdict:
        doc["verdict"] = {"status": verdict}
    return json.dumps(doc)


def test_reading_a_cells_lab_run():
    r = mx.from_lab_run(CELL, 1, lab_run_json("FAIL"), "")
    assert (r.status, r.message, r.kernel_id) == ("FAIL", "no cross-node: pid 7 0->40", "debian-6.1")
    assert "why: n" in r.detail and r.run_dirs == ["/r"]
    r = mx.from_lab_run(CELL, 0, lab_run_json("FAIL", "PASS", "PASS", verdict="PASS"), "")
    assert (r.status, r.label()) == ("PASS", "PASS 2/3")
    assert mx.from_lab_run(CELL, 3, lab_run_json("PASS", "ERROR"), "").status == "ERROR"
    assert mx.from_lab_run(CELL, 3, lab_run_json("ERROR"), "").message == "guest lost"
    r = mx.from_lab_run(CELL, 2, "", "noise\nlab: error: cannot pack perf for arm64 guests yet\n")
    assert (r.status, r.message) == ("ERROR", "cannot pack perf for arm64 guests yet")
    assert "interrupted" in mx.from_lab_run(CELL, 130, "", "lab: interrupted\n").message
    r = mx.from_lab_run(CELL, 1, "{not json", "Traceback (most recent call last):\nKeyError: 'x'\n")
    assert r.status == "ERROR" and "exited 1 without a verdict" in r.message and "KeyError" in r.message
    skip = json.dumps({"status": "SKIP", "message": "SKIP it"})
    assert mx.from_lab_run(CELL, 0, skip, "").status == "SKIP"


def test_an_inconclusive_cell_is_its_own_status_and_exit_code():
    """lab run exits 4 on INCONCLUSIVE: the cell says so with the cause; a FAIL or an
    ERROR elsewhere in the matrix still decides the matrix's exit code."""
    doc = json.loads(lab_run_json("INCONCLUSIVE"))
    doc["runs"][0]["message"] = "vendor effect: node_reclaim_distance 30"
    r = mx.from_lab_run(CELL, 4, json.dumps(doc), "")
    assert (r.status, r.message) == ("INCONCLUSIVE", "vendor effect: node_reclaim_distance 30")
    assert "INCONCLUSIVE" in mx.REUSED  # complete data: reused like a PASS or a FAIL
    ok = mx.CellResult(CELL, "PASS")
    assert mx.exit_code([ok, r]) == 4
    assert mx.exit_code([r, mx.CellResult(CELL, "FAIL")]) == 1
    assert mx.exit_code([r, mx.CellResult(CELL, "ERROR")]) == 3
    assert mx.counts_line([ok, r]) == "2 cells: 1 PASS, 0 FAIL, 1 INCONCLUSIVE, 0 ERROR, 0 SKIP"
    assert mx.counts_line([ok]) == "1 cells: 1 PASS, 0 FAIL, 0 ERROR, 0 SKIP"


# ---- the runner, with a stand-in for each cell's lab run ------------------------------------

FAKE = r"""
import json, os, sys, time
scenario, topology, kernel, mode = sys.argv[1:5]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(f"{scenario}@{topology} {os.getpid()} {os.environ['LAB_RUNS']}\n")
if mode == "sleep":
    time.sleep(600)
status = {"pass": "PASS", "fail": "FAIL"}.get(mode, "ERROR")
exp = {"name": "no cross-node", "status": status, "evidence": ["pid 7 \x01 0->40"], "note": "why"}
run = {"status": status, "expectations": [exp] if status != "ERROR" else [], "message": "guest lost", "run_dir": None,
       "kernel_info": {"id": kernel}}
print(json.dumps({"runs": [run]}))
sys.exit({"PASS": 0, "FAIL": 1}.get(status, 3))
"""


@pytest.fixture
def fake(tmp_path, monkeypatch, debian_kernel):
    log = tmp_path / "fake.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    modes: dict[str, str] = {}

    def child(cell, kernel_id, connect):
        return [sys.executable, "-c", FAKE, cell.scenario, cell.topology, kernel_id, modes.get(cell.id, "pass")]

    def ran() -> list[str]:
        return [ln.split()[0] for ln in log.read_text().splitlines()] if log.exists() else []

    return child, modes, ran, log


AXES = ("soft-affinity,llc-spread-pinned", "xeon-2s22c-mini,zen3-2s-mini", "debian")


def test_runner_writes_reuses_and_reruns(tmp_path, fake):
    child, modes, ran, _ = fake
    modes["soft-affinity@zen3-2s-mini@debian"] = "fail"
    m = mx.expand(*AXES)
    out = tmp_path / "out"
    res = mx.Runner(m, out, jobs=2, child=child).run()
    assert {r.cell.id: r.status for r in res} == {
        "soft-affinity@xeon-2s22c-mini@debian": "PASS", "soft-affinity@zen3-2s-mini@debian": "FAIL",
        "llc-spread-pinned@xeon-2s22c-mini@debian": "SKIP", "llc-spread-pinned@zen3-2s-mini@debian": "PASS",
    }  # fmt: skip
    assert sorted(ran()) == sorted(["soft-affinity@xeon-2s22c-mini", "soft-affinity@zen3-2s-mini", "llc-spread-pinned@zen3-2s-mini"])
    assert mx.exit_code(res) == 1
    doc = json.loads((out / "matrix.json").read_text())
    assert doc["finished"] and doc["counts"] == {"PASS": 2, "FAIL": 1, "INCONCLUSIVE": 0, "ERROR": 0, "SKIP": 1}
    assert doc["identity"]["kernel_ids"] == {"debian@x86_64": res[0].kernel_id}
    import junitparser

    cases = {(c.classname, c.name): c for s in junitparser.JUnitXml.fromfile(str(out / "junit.xml")) for c in s}
    failed = cases[("lab.soft_affinity.zen3_2s_mini", "debian")]
    assert failed.result[0].message == "no cross-node: pid 7 \\x01 0->40"
    assert "| soft-affinity | zen3-2s-mini | FAIL |" in (out / "summary.md").read_text()
    # Each cell's runs go under the output directory.
    assert all(str(out / "runs") in ln.split()[2] for ln in fake[3].read_text().splitlines())

    # The same matrix again: every judged cell is reused, nothing runs.
    before = len(ran())
    again = mx.Runner(m, out, jobs=2, child=child).run()
    assert len(ran()) == before and all(r.reused for r in again if r.status != "SKIP")
    assert [r.status for r in again] == [r.status for r in res]
    # --rerun runs them all again; an ERROR is never reused.
    modes["soft-affinity@xeon-2s22c-mini@debian"] = "error"
    mx.Runner(m, out, jobs=2, rerun=True, child=child).run()
    assert len(ran()) == before + 3
    mx.Runner(m, out, jobs=2, child=child).run()
    assert ran()[-1] == "soft-affinity@xeon-2s22c-mini" and len(ran()) == before + 4


def test_a_changed_input_runs_the_cell_again(tmp_path, fake, monkeypatch):
    child, _, ran, _ = fake
    out = tmp_path / "out"
    mx.Runner(mx.expand("soft-affinity", "xeon-2s22c-mini", "debian"), out, child=child).run()
    m2 = mx.expand("soft-affinity", "xeon-2s22c-mini", "debian")
    m2.inputs["scenario:soft-affinity"] = "edited"
    mx.Runner(m2, out, child=child).run()
    assert len(ran()) == 2


class StopAfterFirst(Progress):
    """Ctrl-C once the first cell is done and the second one's process has started
    (it has written its pid to the log)."""

    def __init__(self, log: Path):
        super().__init__()
        self.log = log

    def _update(self, name, detail):
        started = self.log.exists() and "soft-affinity@zen3-2s-mini " in self.log.read_text()
        if detail.startswith("1 done, 1 running") and started:
            raise KeyboardInterrupt


def test_interrupt_keeps_finished_cells_and_stops_running_ones(tmp_path, fake):
    child, modes, ran, log = fake
    m = mx.expand("soft-affinity", "xeon-2s22c-mini,zen3-2s-mini", "debian")
    modes["soft-affinity@zen3-2s-mini@debian"] = "sleep"
    out = tmp_path / "out"
    r = mx.Runner(m, out, jobs=1, child=child, progress=StopAfterFirst(log))
    r.jobs_asked = 2
    with pytest.raises(KeyboardInterrupt):
        r.run()
    doc = json.loads((out / "matrix.json").read_text())
    got = {c["id"]: (c["status"], c["message"]) for c in doc["cells"]}
    assert got["soft-affinity@xeon-2s22c-mini@debian"] == ("PASS", "")
    assert got["soft-affinity@zen3-2s-mini@debian"][0] == "ERROR"
    assert "interrupted" in got["soft-affinity@zen3-2s-mini@debian"][1] and not doc["finished"]
    assert "NOT FINISHED" in (out / "summary.md").read_text().splitlines()[0]
    pid = int(next(ln for ln in log.read_text().splitlines() if ln.startswith("soft-affinity@zen3")).split()[1])
    assert not pid_alive(pid)


def test_shards_merge_into_the_whole_matrix(tmp_path, fake):
    child, modes, ran, _ = fake
    m = mx.expand(*AXES)
    dirs = []
    for i in (1, 2):
        d = tmp_path / f"shard-{i}-2"
        mx.Runner(m, d, shard=(i, 2), child=child).run()
        dirs.append(d)
    assert sorted(ran()) == sorted(c.id.rsplit("@", 1)[0] for c in m.runnable)  # each cell once
    doc = mx.merge(dirs)
    assert [c["id"] for c in doc["cells"]] == [c.id for c in m.cells]
    assert doc["counts"] == {"PASS": 3, "FAIL": 0, "INCONCLUSIVE": 0, "ERROR": 0, "SKIP": 1}
    r = CliRunner().invoke(main, ["matrix", "merge", "-o", str(tmp_path / "merged"), *map(str, dirs)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "merged" / "junit.xml").exists() and "3 PASS" in r.output

    # A shard missing: its cells are ERRORs naming it, never silently absent.
    doc = mx.merge(dirs[:1])
    missing = [c for c in doc["cells"] if c["status"] == "ERROR"]
    assert missing and all("shard 2/2 is not among the merged" in c["message"] for c in missing)
    # The same shard twice.
    with pytest.raises(UserError, match="shard 1/2 given twice"):
        mx.merge([dirs[0], dirs[0]])


def test_merge_refuses_different_matrices_naming_the_difference(tmp_path, fake):
    child, *_ = fake
    a, b = tmp_path / "a", tmp_path / "b"
    mx.Runner(mx.expand("soft-affinity", "xeon-2s22c-mini", "debian"), a, shard=(1, 2), child=child).run()
    mx.Runner(mx.expand("soft-affinity", "zen3-2s-mini", "debian"), b, shard=(2, 2), child=child).run()
    line = one_line_error(["matrix", "merge", "-o", str(tmp_path / "m"), str(a), str(b)])
    assert "different matrices" in line and "topologies" in line and '["xeon-2s22c-mini"]' in line
    c = tmp_path / "c"
    mx.Runner(mx.expand("soft-affinity", "xeon-2s22c-mini", "debian", repeat=2), c, shard=(2, 2), child=child).run()
    assert f"repeat is 1 in {a} and 2 in {c}" in one_line_error(["matrix", "merge", str(a), str(c)])
    assert "not a lab matrix output directory" in one_line_error(["matrix", "merge", str(tmp_path)])


# ---- plan and the CI files ------------------------------------------------------------------


def test_plan_github_include_list_covers_every_cell():
    r = CliRunner().invoke(main, ["matrix", "plan", "--format", "github", "--topologies", "all-minis", "--shards", "4"])
    assert r.exit_code == 0, r.output
    inc = json.loads(r.stdout)["include"]
    assert [x["shard"] for x in inc] == ["1/4", "2/4", "3/4", "4/4"] and inc[0]["dir"] == "shard-1-4"
    cells = [c for x in inc for c in x["cells"].split(", ")]
    assert sorted(cells) == sorted(c.id for c in mx.expand("all", "all-minis", "debian").runnable)
    # Default: one job per cell that runs.
    r = CliRunner().invoke(main, ["matrix", "plan", "--format", "github", "--topologies", "all-minis"])
    # one shard per runnable cell (scheduler-survives on every mini, smt-spread on 5, wake-affine on 2, cpuset-isolation on 6,
    # work-conservation on every mini, numa-locality on 6)
    assert len(json.loads(r.stdout)["include"]) == 24 + 7 + 5 + 2 + 6 + 7 + 6
    assert "at most 256" in one_line_error(["matrix", "plan", "--format", "github", "--topologies", "all-minis", "--shards", "300"])


def test_plan_gitlab_is_a_child_pipeline_with_parallel_matrix():
    args = ["--topologies", "xeon-2s22c-mini,zen3-2s-mini", "--scenarios", "soft-affinity", "--accel", "tcg"]
    r = CliRunner().invoke(main, ["matrix", "plan", "--format", "gitlab", *args])
    assert r.exit_code == 0, r.output
    doc = yaml.safe_load(r.stdout)
    shards = doc["lab-matrix"]["parallel"]["matrix"][0]["LAB_SHARD"]
    assert shards == ["1/2", "2/2"]
    (cmd,) = [s for s in doc["lab-matrix"]["script"] if s.startswith("lab matrix")]
    assert "--accel tcg" in cmd and "--shard $LAB_SHARD" in cmd
    assert doc["lab-matrix-merge"]["artifacts"]["reports"]["junit"] == "merged/junit.xml"
    for job in ("lab-matrix", "lab-matrix-merge"):
        check_commands(doc[job]["script"])


def test_plan_json_names_each_cells_shard():
    r = CliRunner().invoke(main, ["matrix", "plan", "--topologies", "xeon-2s22c-mini", "--scenarios", "soft-affinity,llc-spread-pinned"])
    doc = json.loads(r.stdout)
    assert {c["id"]: c["shard"] for c in doc["cells"]} == {
        "soft-affinity@xeon-2s22c-mini@debian": 1, "llc-spread-pinned@xeon-2s22c-mini@debian": None,
    }  # fmt: skip


PLACEHOLDER = {"--shard": "1/2", "--shards": "2", "--topologies": "all-minis", "--kernels": "debian", "--scenarios": "all", "-o": "out"}


def check_commands(script: list[str] | str) -> int:
    """Every `lab ...` command in *script* names a command lab has, with options it takes
    (CI expressions and shell variables stand for sample values).  Returns how many."""
    from lab.cli import main as group

    text = "\n".join(script) if isinstance(script, list) else script
    n = 0
    for line in text.splitlines():
        m = re.search(r"(?:^|[\s$(])(?:\.venv/bin/)?lab (matrix|run|topo|kernel|boot|verify)\b(.*?)(?:\)|\|\||>|$)", line)
        if not m:
            continue
        words = shlex.split(re.sub(r"\$\{\{[^}]*\}\}", "X", f"{m[1]} {m[2]}"))
        args = []
        for i, w in enumerate(words):
            if "$" in w or w == "X" or "*" in w:
                prev = words[i - 1] if i else ""
                w = PLACEHOLDER.get(prev, "out")
            args.append(w)
        cmd, rest = group, args
        while hasattr(cmd, "commands") and rest and rest[0] in cmd.commands:
            cmd, rest = cmd.commands[rest[0]], rest[1:]
        cmd.make_context(cmd.name, list(rest))  # raises click's UsageError on an unknown option
        n += 1
    return n


def test_github_workflow_is_valid_and_calls_lab_commands_that_exist():
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "topology-matrix.yml").read_text())
    jobs = doc["jobs"]
    assert set(jobs) == {"plan", "cells", "merge"}
    assert jobs["cells"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert jobs["merge"]["if"] == "always()" and jobs["merge"]["needs"] == "cells"
    runs = [s["run"] for j in jobs.values() for s in j["steps"] if "run" in s]
    assert sum(check_commands(r) for r in runs) == 3  # plan, a shard, merge
    steps = [s for s in jobs["merge"]["steps"]]
    assert any("GITHUB_STEP_SUMMARY" in s.get("run", "") for s in steps)
    assert any(s.get("with", {}).get("report_paths") == "merged/junit.xml" for s in steps)
    assert "--privileged" in jobs["cells"]["container"]["options"]  # /dev/kvm where the runner has it
    # The shard's output and artifact are named by the include list's "dir".
    assert "matrix.dir" in " ".join(runs)


def test_gitlab_snippet_is_valid_and_its_plan_command_runs(tmp_path):
    doc = yaml.safe_load((ROOT / "ci" / "gitlab" / "topology-matrix.yml").read_text())
    assert doc["lab-matrix"]["trigger"]["include"][0] == {"artifact": "lab-matrix-pipeline.yml", "job": "lab-matrix-plan"}
    script = doc["lab-matrix-plan"]["script"]
    assert check_commands(script) == 1
    line = next(s for s in script if "lab matrix plan" in s)
    cmd = line.split("lab ", 1)[1].split(" >")[0]
    env = {k: str(v) for k, v in doc["variables"].items()}
    args = [os.path.expandvars(w) if w.startswith("$") else w for w in shlex.split(re.sub(r'"\$(\w+)"', lambda m: env[m[1]], cmd))]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    child = yaml.safe_load(r.stdout)
    assert len(child["lab-matrix"]["parallel"]["matrix"][0]["LAB_SHARD"]) == int(env["LAB_SHARDS"])


def test_progress_says_done_running_left_and_eta():
    m = mx.expand("soft-affinity", "xeon-2s22c-mini", "debian")
    r = mx.Runner(m, Path("/nonexistent"))
    r.jobs = 2
    assert r._status(4, [1, 2], [], []) == "2 done, 0 running, 2 left, ETA ?: "
    assert "ETA 1m40s" in r._status(4, [1, 2], [], [100.0])


def test_eta_samples_only_cells_that_ran():
    cell = mx.Cell("soft-affinity", "xeon-2s22c-mini", "debian")
    assert mx.eta_sample(mx.CellResult(cell, "PASS", wall_s=42.0)) == 42.0
    assert mx.eta_sample(mx.CellResult(cell, "SKIP", "kernel lacks CONFIG_SCHED_CLUSTER=y", wall_s=0.3)) is None
    assert mx.eta_sample(mx.CellResult(cell, "PASS", wall_s=42.0, reused=True)) is None


def test_a_scenario_file_runs_as_its_path_and_counts_by_its_name():
    path = ROOT / "tests" / "fixtures" / "scenarios" / "pinned_stays.py"
    m = mx.expand(f"{path},soft-affinity", "xeon-2s22c-mini", "debian")
    assert m.scenarios == ("pinned-stays", "soft-affinity")
    cells = {c.scenario: c for c in m.cells}
    argv = mx.Runner(m, Path("/nonexistent")).lab_run_argv(cells["pinned-stays"], "debian-x", None)
    assert argv[3:5] == ["run", str(path)] and argv[argv.index("--kernel") + 1] == "debian-x"
    assert mx.Runner(m, Path("/nonexistent")).lab_run_argv(cells["soft-affinity"], "k", None)[4] == "soft-affinity"
    assert "--backend" not in argv and "--repeat" not in argv


def test_shards_of_different_arches_merge_and_a_kernel_id_that_differs_is_refused(tmp_path, fake):
    from lab.kernel import resolve

    try:
        resolve("debian", "arm64", build=False)
    except UserError as e:
        pytest.skip(f"Debian's arm64 kernel is not fetched ({e})")
    child, *_ = fake
    m = mx.expand("numa-balancing", "kunpeng920-2s-mini,xeon-2s22c-mini", "debian")
    a, b = tmp_path / "a", tmp_path / "b"
    mx.Runner(m, a, shard=(1, 2), child=child).run()  # the arm64 cell
    mx.Runner(m, b, shard=(2, 2), child=child).run()  # the x86 one
    doc = mx.merge([a, b])
    assert set(doc["identity"]["kernel_ids"]) == {"debian@arm64", "debian@x86_64"}
    assert doc["counts"]["PASS"] == 2
    # The same kernel name resolved to another kernel on one runner: not the same matrix.
    other = tmp_path / "c"
    mx.Runner(m, other, shard=(1, 2), child=child).run()
    d = json.loads((other / "matrix.json").read_text())
    d["identity"]["kernel_ids"]["debian@arm64"] = "debian-6.1.0-99-arm64"
    (other / "matrix.json").write_text(json.dumps(d))
    with pytest.raises(UserError, match="kernel_ids.debian@arm64 is .* in .* and \"debian-6.1.0-99-arm64\""):
        mx.merge([a, b, other])


def test_each_cell_records_the_libvirt_uri_it_ran_on(tmp_path, fake):
    """--connect URI1 --connect URI2: the cells spread over both, and each cell's result
    (matrix.json) names the URI it ran on."""
    child, _, _, _ = fake
    m = mx.expand("soft-affinity", "xeon-2s22c-mini,zen3-2s-mini", "debian")
    uris = ("qemu:///system", "qemu+ssh://root@host-b/system")
    res = mx.Runner(m, tmp_path / "out", jobs=2, connect=uris, child=child).run()
    assert sorted(r.connect for r in res) == sorted(uris)
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    assert sorted(c["connect"] for c in doc["cells"]) == sorted(uris)


# ---- SKIPs grouped by cause (issue 39 item 4) -------------------------------------------------

PACK = "no Debian arm64 package for perf (linux-perf) in bookworm: cannot be packed for arm64 guests"


def _skips() -> list[mx.CellResult]:
    C = mx.Cell
    return [
        mx.CellResult(C("numa-balancing", "kunpeng920-2s-mini", "debian"), "SKIP", PACK),
        mx.CellResult(C("numa-balancing", "kunpeng920-2s-mini", "lab-6.1-arm64"), "SKIP", PACK),
        mx.CellResult(C("preferred-node-migrations", "kunpeng920-2s-mini", "debian"), "SKIP", PACK),
        mx.CellResult(C("llc-spread-pinned", "xeon-2s22c-mini", "debian"), "SKIP", "xeon-2s22c-mini lacks at least 2 LLCs per socket"),
        mx.CellResult(C("llc-spread-pinned", "xeon-2s22c-mini", "lab-6.1-arm64"), "SKIP", "kernel lab-6.1-arm64 is arm64, xeon-2s22c-mini is x86_64"),
        mx.CellResult(C("llc-spread-pinned", "icelake-2s-mini", "debian"), "PASS"),
        mx.CellResult(C("llc-spread-pinned", "zen3-2s-mini", "debian"), "SKIP", "zen3-2s-mini lacks at least 2 LLCs per socket"),
        mx.CellResult(C("soft-affinity", "zen3-2s-mini", "lab-6.1-arm64"), "SKIP", "kernel lab-6.1-arm64 is arm64, zen3-2s-mini is x86_64"),
        mx.CellResult(C("soft-affinity", "zen3-2s-mini", "debian"), "FAIL", "no cross-node"),
        mx.CellResult(C("soft-affinity", "kunpeng920-2s-mini", "debian"), "SKIP", "the topology lacks at least 2 NUMA nodes; " + PACK),
    ]


def test_skips_are_grouped_by_cause_once_each():
    groups = mx.skip_groups(_skips())
    C = mx.Cell
    assert groups == [
        ("tool packing", [
            (PACK, [C("numa-balancing", "kunpeng920-2s-mini", "debian"), C("numa-balancing", "kunpeng920-2s-mini", "lab-6.1-arm64"),
                    C("preferred-node-migrations", "kunpeng920-2s-mini", "debian")]),
            ("the topology lacks at least 2 NUMA nodes; " + PACK, [C("soft-affinity", "kunpeng920-2s-mini", "debian")]),
        ]),
        ("topology", [
            ("the topology lacks at least 2 LLCs per socket", [C("llc-spread-pinned", "xeon-2s22c-mini", "debian"),
                                                              C("llc-spread-pinned", "zen3-2s-mini", "debian")]),
        ]),
        ("kernel arch", [
            ("kernel lab-6.1-arm64 is arm64, the topology is x86_64", [C("llc-spread-pinned", "xeon-2s22c-mini", "lab-6.1-arm64"),
                                                                      C("soft-affinity", "zen3-2s-mini", "lab-6.1-arm64")]),
        ]),
    ]  # fmt: skip


def test_summary_tells_each_skip_cause_once_and_junit_keeps_every_cell():
    m = {"kernels": ["debian", "lab-6.1-arm64"]}
    res = _skips()
    md = mx.summary_markdown(m, res)
    tail = md[md.index("| SKIP cause |") :].splitlines()
    assert tail == [
        "| SKIP cause | cells | why | which |",
        "|---|---|---|---|",
        f"| tool packing | 3 | {PACK} | numa-balancing on kunpeng920-2s-mini; preferred-node-migrations on kunpeng920-2s-mini (debian) |",
        f"| tool packing | 1 | the topology lacks at least 2 NUMA nodes; {PACK} | soft-affinity on kunpeng920-2s-mini (debian) |",
        "| topology | 2 | the topology lacks at least 2 LLCs per socket | llc-spread-pinned on xeon-2s22c-mini, zen3-2s-mini (debian) |",
        "| kernel arch | 2 | kernel lab-6.1-arm64 is arm64, the topology is x86_64 | llc-spread-pinned on xeon-2s22c-mini (lab-6.1-arm64); soft-affinity on zen3-2s-mini (lab-6.1-arm64) |",
    ]
    assert PACK not in md[: md.index("| SKIP cause |")]  # not once per cell above
    assert "| soft-affinity@zen3-2s-mini@debian | FAIL | no cross-node |" in md
    import junitparser

    xml = junitparser.JUnitXml.fromstring(mx.junit_report(m, res))
    skipped = [c for s in xml for c in s if c.result and isinstance(c.result[0], junitparser.Skipped)]
    assert len(skipped) == 8  # one testcase per SKIP cell


def test_the_cli_summary_tells_each_skip_cause_once(tmp_path, capsys):
    from lab.cli import matrix as cli_matrix

    cli_matrix._show({"kernels": ["debian", "lab-6.1-arm64"]}, _skips(), tmp_path, {"wall_s": 12})
    out = capsys.readouterr().out
    assert out.count(PACK) == 2  # two reasons carry it: each said once, not once per cell
    assert f"SKIP tool packing (3 cells): {PACK}: numa-balancing on kunpeng920-2s-mini; preferred-node-migrations on kunpeng920-2s-mini (debian)" in out
    assert "SKIP topology (2 cells): the topology lacks at least 2 LLCs per socket: llc-spread-pinned on xeon-2s22c-mini, zen3-2s-mini (debian)" in out
    assert "FAIL soft-affinity@zen3-2s-mini@debian: no cross-node" in out
    assert "SKIP numa-balancing@" not in out


# --- the --schedulers axis (issue 35 item 3) --------------------------------------------------


def test_schedulers_are_an_axis_inside_the_kernels(tmp_path, fake):
    """--schedulers eevdf,scx_simple: each kernel column becomes one per scheduler; a
    cell's lab run gets --scheduler, eevdf (the kernel's own) none; a matrix without the
    axis keeps its ids, definition and argv."""
    child, modes, ran, _ = fake
    m = mx.expand("soft-affinity", "zen3-2s-mini", "debian", schedulers="eevdf,scx_simple")
    assert [c.id for c in m.cells] == ["soft-affinity@zen3-2s-mini@debian@eevdf", "soft-affinity@zen3-2s-mini@debian@scx_simple"]
    assert m.definition()["schedulers"] == ["eevdf", "scx_simple"] and "schedulers" not in mx.expand("soft-affinity", "zen3-2s-mini", "debian").definition()
    r = mx.Runner(m, tmp_path / "argv")
    plain = [sys.executable, "-m", "lab", "run", "soft-affinity", "--topology", "zen3-2s-mini", "--kernel", "0123", "--json",
             "--accel", "auto", "--cpu-model", "auto", "--tcg-threads", "auto", "--bringup", "auto", "--jobs", "1"]  # fmt: skip
    m0 = mx.expand("soft-affinity", "zen3-2s-mini", "debian")
    assert mx.Runner(m0, tmp_path / "argv0").lab_run_argv(m0.cells[0], "0123", None) == plain
    assert r.lab_run_argv(m.cells[0], "0123", None) == plain
    assert r.lab_run_argv(m.cells[1], "0123", None) == [*plain, "--scheduler", "scx_simple"]
    assert mx.Cell.from_id(m.cells[1].id) == mx.Cell("soft-affinity", "zen3-2s-mini", "debian", scheduler="scx_simple")
    assert "scheduler" not in mx.Cell("s", "t", "k").to_dict()
    modes["soft-affinity@zen3-2s-mini@debian@scx_simple"] = "fail"
    out = tmp_path / "out"
    res = mx.Runner(m, out, child=child).run()
    assert [(x.cell.id, x.status) for x in res] == [("soft-affinity@zen3-2s-mini@debian@eevdf", "PASS"),
                                                   ("soft-affinity@zen3-2s-mini@debian@scx_simple", "FAIL")]  # fmt: skip
    md = (out / "summary.md").read_text()
    assert "| scenario | topology | debian eevdf | debian scx_simple |" in md and "| soft-affinity | zen3-2s-mini | PASS | FAIL |" in md


@pytest.mark.parametrize(
    "value, match",
    [("eevdf,scx_nosuch", "scx_nosuch"), ("eevdf,cfs", "given twice"), ("eevdf,,scx_simple", "schedulers")],
)
def test_schedulers_bad_input_is_one_line(value, match):
    r = CliRunner().invoke(main, ["matrix", "plan", "--topologies", "zen3-2s-mini", "--scenarios", "soft-affinity", "--schedulers", value])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("lab: error: ") and len(r.output.strip().splitlines()) == 1 and match in r.output, r.output
