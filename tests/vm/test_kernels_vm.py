"""Seed 000 with and without its fix, on lab-built kernels (built on demand; CI builds
them in tests/build first, with ccache): lab-6.1 spreads the pinned threads, the same
kernel with the fix reverted piles them onto one socket."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main


def run(kernel: str) -> dict:
    """The verdict's last run (the one that decided the majority of up to 3 runs)."""
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", "zen3-2s-mini", "--kernel", kernel, "--json"])
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.stdout)
    runs = sorted(Path(os.environ["LAB_RUNS"]).glob("*-llc-spread-pinned-*"))
    assert len(runs) == doc["verdict"]["runs"] and doc["verdict"]["of"] == 3
    res = json.loads((runs[-1] / "results.json").read_text())
    assert res["status"] == doc["verdict"]["status"] == ("PASS" if r.exit_code == 0 else "FAIL"), doc["verdict"]
    return res


def exp(res, name):
    return next(e for e in res["expectations"] if e["name"] == name)


@pytest.mark.build
def test_fix_spreads_threads(debian_kernel):
    res = run("lab-6.1")
    assert res["status"] == "PASS", res
    assert exp(res, "even split between sockets")["figures"]["socket1"] == 2


@pytest.mark.build
def test_revert_piles_threads_up(debian_kernel):
    res = run("lab-6.1-no-affinity-imbalance")
    pile = exp(res, "targets distinct (no pile-up)")
    assert pile["status"] == "FAIL" and pile["evidence"], res
    # The vendor effect is fixed by the boot parameter, so no vendor note here:
    # the pile-up is the find_idlest_group() bug the seed describes.
    assert "SD_BALANCE_FORK" not in pile["note"]
