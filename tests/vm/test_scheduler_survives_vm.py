"""scheduler-survives (issue 35 item 5) in a guest: PASSes under scx_simple on two x86
minis and under the kernel's own scheduler; the known-bad variant (isolcpus= keeps the
workload off two CPUs) FAILs "every CPU ran work".

Hand-run like tests/vm/test_sched_ext_vm.py (lab-6.12-scx is a full 6.12 build with
BTF, about an hour here; scx_simple built once): each case one TCG boot of ~20 s.
`pytest -m handrun tests/vm/test_scheduler_survives_vm.py`."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main

pytestmark = [pytest.mark.build, pytest.mark.handrun]

KERNEL = "lab-6.12-scx"
CLAIMS = ("the scheduler stayed enabled throughout", "every CPU ran work (a stress-ng or hackbench task)")


def _run(topo: str, *extra: str) -> dict:
    r = CliRunner().invoke(main, ["run", "scheduler-survives", "--topology", topo, "--kernel", KERNEL,
                                  "--runs-per-verdict", "1", "--json", *extra])  # fmt: skip
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)["runs"][0]


@pytest.mark.parametrize("topo", ["zen3-2s-mini", "epyc7551-8n-mini"])
def test_passes_under_scx_simple(topo):
    run = _run(topo, "--scheduler", "scx_simple")
    assert run["status"] == "PASS", run
    assert run["integrity"]["scheduler"] == "kept", run
    by = {e["name"]: e for e in run["expectations"]}
    assert by[CLAIMS[0]]["figures"]["sched_ext"] is True


def test_passes_under_the_kernels_own_scheduler():
    run = _run("zen3-2s-mini")
    assert run["status"] == "PASS", run
    by = {e["name"]: e for e in run["expectations"]}
    assert by[CLAIMS[0]]["figures"]["sched_ext"] is False


def test_isolcpus_fails_every_cpu_ran_work():
    run = _run("zen3-2s-mini", "--append", "isolcpus=2-3")
    assert run["status"] == "FAIL", run
    failed = [e["name"] for e in run["expectations"] if e["status"] == "FAIL"]
    assert failed == [CLAIMS[1]], failed


@pytest.mark.parametrize(("crate", "version"), [("scx_bpfland", "1.0.20"), ("scx_rusty", "1.0.20")])
def test_passes_under_a_rust_scheduler_from_crates_io(crate, version):
    """--scheduler scx_bpfland (scx_rusty): the scx project's Rust scheduler, built by lab
    from crates.io (`lab scheduler build NAME`, cargo, once) when the store lacks it."""
    run = _run("zen3-2s-mini", "--scheduler", crate)
    assert run["status"] == "PASS", run
    assert run["integrity"]["scheduler"] == "kept", run
    plan = json.loads((Path(run["run_dir"]) / "plan.json").read_text())
    assert plan["scheduler"]["name"] == crate and plan["scheduler"]["ops"] == crate.removeprefix("scx_")
    assert plan["scheduler"]["version"] == f"{crate} {version} (crates.io)"
