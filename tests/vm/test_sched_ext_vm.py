"""sched_ext in a guest (issue 35): scx_simple, built by lab against lab-6.12-scx's BTF,
loads before the command and stays enabled through a scenario's run.

Hand-run: the kernel is a full 6.12 build with debug info (BTF), about an hour on this
2-core host (kernels/README.md); once it and the scheduler are in the cache, each test
is one TCG boot.  `pytest -m handrun tests/vm/test_sched_ext_vm.py`."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main

pytestmark = [pytest.mark.build, pytest.mark.handrun]

KERNEL = "lab-6.12-scx"
MINI = "zen3-2s-mini"


def test_scx_simple_is_enabled_when_the_command_runs():
    r = CliRunner().invoke(main, ["boot", MINI, "--kernel", KERNEL, "--scheduler", "scx_simple", "--", "cat", "/sys/kernel/sched_ext/state", "/sys/kernel/sched_ext/root/ops"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "enabled\nsimple\n"
    assert "scheduler scx_simple stayed enabled throughout" in r.stderr
    run_dir = sorted(Path(os.environ["LAB_RUNS"]).glob(f"*-boot-{MINI}-*"))[-1]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["scheduler"]["name"] == "scx_simple" and plan["scheduler"]["args"] == []
    assert plan["options"]["scheduler"] == "scx_simple"
    assert (run_dir / "out" / "scheduler" / "during").read_text().strip() == "kept"


def test_a_scenario_runs_under_scx_simple():
    """llc-spread-pinned's claims are the kernel's own fork placement (issue 35 item 6):
    under scx_simple they are INCONCLUSIVE (exit 4), naming the scheduler and each claim,
    with every placement figure; what holds for any scheduler (a wakeup_new per thread,
    every target inside the allowed CPUs) is judged and PASSes."""
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", MINI, "--kernel", KERNEL, "--scheduler", "scx_simple",
                                  "--runs-per-verdict", "1", "--json"])  # fmt: skip
    assert r.exit_code == 4, r.output
    doc = json.loads(r.stdout)
    run = doc["runs"][0]
    assert run["status"] == "INCONCLUSIVE", run
    assert run["integrity"]["scheduler"] == "kept", run
    assert run["message"].startswith("run under the sched_ext scheduler scx_simple: its claims about the kernel's own scheduler are not judged ('targets distinct (no pile-up)' ")
    exps = {e["name"].split(" (")[0]: e for e in run["expectations"]}
    assert exps["a sched_wakeup_new per thread"]["status"] == exps["every target inside the allowed CPUs"]["status"] == "PASS"
    for name in ("targets distinct", "even split between sockets", "no balancing needed after the fork"):
        assert exps[name]["status"] == "INCONCLUSIVE" and "scx_simple" in exps[name]["inconclusive"], exps[name]
    assert "select_task_rq_fair()" in exps["targets distinct"]["inconclusive"]
    figs = exps["even split between sockets"]["figures"]
    assert {"socket0", "socket1", "migrations", "stable_after_s"} <= set(figs)  # computed and shown
    assert exps["targets distinct"]["figures"]["distinct"] >= 1
    plan = json.loads((Path(run["run_dir"]) / "plan.json").read_text())
    assert plan["scheduler"]["ops"] == "simple"


@pytest.mark.parametrize(
    "scenario, topo, claims, judged",
    [
        # scx_simple keeps nearly every wakeup on the waker's own CPU (0.997 in
        # bench/results/figures-seed-scenarios-under-scx-simple-20261126-081902.json)
        ("cluster-wakeup", "jacobsville-24c-mini", ["most wakeups land in the waker's cluster"],
         ["wakeups observed (sched_waking paired with sched_wakeup)", "every wakeup inside the node the pairs are restricted to"]),
        # NUMA balancing's scan is the fair class's tick: no hinting fault of the probe's
        ("preferred-node-migrations", "epyc7551-8n-mini",
         ["nb1: NUMA balancing on: the probe's hinting faults make node 0 its preferred node", "nb1: NUMA balancing on: the probe is pulled into node 0"],
         ["nb0: NUMA balancing off: nothing NUMA-driven moves the probe", "nb1: the probe's buffer stayed on node 0"]),
    ],
)  # fmt: skip
def test_the_other_seed_scenarios_claims_are_inconclusive_under_scx_simple(scenario, topo, claims, judged):
    r = CliRunner().invoke(main, ["run", scenario, "--topology", topo, "--kernel", KERNEL, "--scheduler", "scx_simple",
                                  "--runs-per-verdict", "1", "--json"])  # fmt: skip
    assert r.exit_code == 4, r.output
    run = json.loads(r.stdout)["runs"][0]
    assert run["status"] == "INCONCLUSIVE" and run["integrity"]["scheduler"] == "kept", run
    exps = {e["name"]: e for e in run["expectations"]}
    for name in claims:
        assert exps[name]["status"] == "INCONCLUSIVE" and "scx_simple" in exps[name]["inconclusive"] and exps[name]["figures"], exps[name]
    for name in judged:
        assert exps[name]["status"] == "PASS", exps[name]


def test_a_kernel_without_sched_ext_is_a_skip_before_booting():
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", MINI, "--kernel", "debian-6.12", "--scheduler", "scx_simple", "--json"])
    assert r.exit_code == 0, r.output
    run = json.loads(r.stdout)["runs"][0]
    assert run["status"] == "SKIP" and run["run_dir"] is None
    assert "CONFIG_SCHED_CLASS_EXT" in run["message"] and KERNEL in run["message"]


def test_a_scheduler_that_never_loads_is_an_error_with_its_output():
    """An argument scx_simple refuses: it prints its usage and exits, the command never runs
    (the argument reaches it as data: `$(reboot)` is a word, not a command)."""
    r = CliRunner().invoke(main, ["boot", MINI, "--kernel", KERNEL, "--scheduler", 'scx_simple:-Z "$(reboot)"', "--", "echo", "ran"])
    assert r.exit_code == 3, r.output
    assert r.stdout == ""
    assert "lab: ERROR: scheduler scx_simple never reached enabled" in r.stderr
    assert "invalid option -- 'Z'" in r.stderr and "Usage: scx_simple" in r.stderr


def test_an_ejection_during_the_command_is_a_fail_with_the_kernels_reason():
    """scx_qmap -e COUNT calls scx_bpf_error() after COUNT enqueues: the kernel disables it
    while the command runs (measured: enabled at 14.6 s, ejected before the command ends)."""
    job = "for i in $(seq 1500); do /bin/true; done; cat /sys/kernel/sched_ext/state"
    r = CliRunner().invoke(main, ["boot", MINI, "--kernel", KERNEL, "--scheduler", "scx_qmap:-e 5000", "--", "sh", "-c", job])
    assert r.exit_code == 1, r.output
    assert r.stdout == "disabled\n"
    assert "lab: FAIL: sched_ext ejected scheduler scx_qmap during the run" in r.stderr
    assert "scx_bpf_error: test triggering error" in r.stderr


# ---- a user's own scheduler (issue 35 items 2c and 5) ------------------------------------------------

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures"
LLCNODE = FIXTURE / "schedulers" / "scx_llcnode"
DENSE = "numa4-96-micro"  # one LLC per node: scx_llcnode's assumption holds
SPLIT = str(FIXTURE / "topologies" / "zen3-2s-micro.toml")  # two LLCs per node: it does not


def _build(path) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, ["scheduler", "build", str(path), "--kernel", KERNEL])
    return r.exit_code, r.stdout.strip(), r.stderr


def test_a_users_source_tree_is_built_once_and_again_after_an_edit(tmp_path):
    """A copy of the fixture: built (the kernel's tools/sched_ext, its make and link),
    found built the second time, rebuilt after an edit.  The times are printed (-s)."""
    import shutil
    import time

    d = tmp_path / "mine"
    shutil.copytree(LLCNODE, d)
    (d / "scx_llcnode.c").write_text((d / "scx_llcnode.c").read_text() + f"/* {tmp_path} */\n")  # new content: not in the store
    t0 = time.monotonic()
    rc, sid, err = _build(d)
    cold = time.monotonic() - t0
    assert rc == 0, err
    t0 = time.monotonic()
    rc, again, err = _build(d)
    cached = time.monotonic() - t0
    assert rc == 0 and again == sid, err
    (d / "scx_llcnode.c").write_text((d / "scx_llcnode.c").read_text() + "/* edited */\n")
    rc, edited, err = _build(d)
    assert rc == 0 and edited != sid, err
    meta = json.loads(CliRunner().invoke(main, ["scheduler", "show", edited]).stdout)["metadata"]
    assert meta["ops"] == "llcnode" and meta["static"] and meta["user"] == {"kind": "source", "path": str(d), "ops_known": True}
    print(f"user scheduler build: cold {cold:.1f}s (lab: {meta['timings']}), cached {cached:.1f}s")


def test_a_users_scheduler_that_does_not_compile_is_exit_2_with_the_compilers_words(tmp_path):
    import shutil

    d = tmp_path / "broken"
    shutil.copytree(LLCNODE, d)
    bpf = d / "scx_llcnode.bpf.c"
    bpf.write_text(bpf.read_text().replace("return cpu_llc[cpu];", "return cpu_llc[cpu] +;"))
    rc, out, err = _build(d)
    assert rc == 2 and out == "", err
    assert "lab: error: scheduler scx_llcnode failed to build (exit 2) at " in err
    assert "scx_llcnode.bpf.c:" in err and "error: expected expression" in err


def test_the_broken_scheduler_passes_where_its_assumption_holds():
    r = CliRunner().invoke(main, ["run", "scheduler-survives", "--topology", DENSE, "--kernel", KERNEL, "--scheduler", str(LLCNODE),
                                  "--runs-per-verdict", "1", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    run = json.loads(r.stdout)["runs"][0]
    assert run["status"] == "PASS", run
    assert run["integrity"]["scheduler"] == "kept"
    plan = json.loads((Path(run["run_dir"]) / "plan.json").read_text())
    assert plan["scheduler"]["name"] == "scx_llcnode" and plan["scheduler"]["ops"] == "llcnode"
    assert plan["options"]["scheduler"] == str(LLCNODE)
    assert (Path(run["run_dir"]) / "out" / "scheduler" / "output").read_text().startswith("nodes=4 llcs=4\n")


def test_the_broken_scheduler_is_ejected_where_it_does_not_with_the_kernels_reason():
    """Two LLCs per node: a CPU hog on LLC 2 or 3 goes to DSQ 2 or 3, which was never
    created (one per node: 0 and 1); the kernel ejects it naming that DSQ, as the hog's
    dispatch ("non-existent DSQ 0x2 for TASK") or as a CPU of that LLC consuming from it
    ("invalid DSQ ID 0x...2"), whichever comes first."""
    import re

    said = re.compile(r"runtime error: (non-existent DSQ 0x[0-9a-f]+ for \S+|invalid DSQ ID 0x[0-9a-f]+)")
    r = CliRunner().invoke(main, ["run", "scheduler-survives", "--topology", SPLIT, "--kernel", KERNEL, "--scheduler", str(LLCNODE),
                                  "--runs-per-verdict", "1", "--json"])  # fmt: skip
    assert r.exit_code == 1, r.output
    run = json.loads(r.stdout)["runs"][0]
    assert run["status"] == "FAIL", run
    assert run["integrity"]["scheduler"] == "FAIL"
    assert "sched_ext ejected scheduler scx_llcnode during the run" in run["message"]
    assert said.search(run["message"]), run["message"]
    stayed = next(e for e in run["expectations"] if e["name"] == "the scheduler stayed enabled throughout")
    assert stayed["status"] == "FAIL"
    assert "the kernel said: runtime error: " in stayed["note"] and said.search(stayed["note"]), stayed
    assert any(x.startswith("the kernel (dmesg): BPF scheduler disabled (runtime error: ") and said.search(x) for x in stayed["evidence"]), stayed
    out = (Path(run["run_dir"]) / "out" / "scheduler" / "output").read_text()
    assert out.startswith("nodes=2 llcs=4\n") and "EXIT: runtime error (" in out


# ---- the scx project's Rust schedulers from crates.io (issue 35 item 2b) -----------------------------

# Built by bench/bench_scx_crate.py --version 1.0.20 --root ~/.cache/lab/scx-crates/root-1.0.20
# (cargo install --locked, zig's clang 22 for BPF): dynamically linked, so lab packs its
# loader and libraries (as --scheduler PATH; lab's own build, --scheduler scx_bpfland:
# tests/vm/test_scheduler_survives_vm.py).  1.1.x's loader refused lab-6.12-scx until its
# fragment got CONFIG_FUNCTION_TRACER (README, crates.io paragraph).
SCX_CRATE = Path(os.environ.get("LAB_CACHE", Path.home() / ".cache" / "lab")) / "scx-crates" / "root-1.0.20" / "bin" / "scx_bpfland"


@pytest.mark.skipif(not SCX_CRATE.is_file(), reason=f"{SCX_CRATE} not built: run bench/bench_scx_crate.py --zig DIR")
def test_scx_bpfland_from_crates_io_is_enabled_and_survives():
    r = CliRunner().invoke(main, ["boot", MINI, "--kernel", KERNEL, "--scheduler", str(SCX_CRATE), "--",
                                  "cat", "/sys/kernel/sched_ext/state", "/sys/kernel/sched_ext/root/ops"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert r.stdout == "enabled\nbpfland_1.0.20_x86_64_unknown_linux_gnu\n"  # its ops name carries version and target
    r = CliRunner().invoke(main, ["run", "scheduler-survives", "--topology", MINI, "--kernel", KERNEL, "--scheduler", str(SCX_CRATE),
                                  "--runs-per-verdict", "1", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    run = json.loads(r.stdout)["runs"][0]
    assert run["status"] == "PASS" and run["integrity"]["scheduler"] == "kept", run
    plan = json.loads((Path(run["run_dir"]) / "plan.json").read_text())
    assert plan["scheduler"]["name"] == "scx_bpfland" and plan["scheduler"]["ops"] == "bpfland"
