"""llc-spread-pinned's check() on two runs recorded from real guests (zen3-2s-mini):
lab-6.1 (node_reclaim_distance=32 passed: fork balancing crosses sockets) spreads;
Debian's kernel (Intel CPU model, no SD_BALANCE_FORK on the NUMA domain) piles up,
and the verdict names that cause."""

from pathlib import Path

from lab import runner

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def by_name(o):
    return {e.name: e for e in o.expectations}


def test_lab_kernel_spreads():
    o = runner.recheck(RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1")
    assert o.status == "PASS", [e.to_dict() for e in o.expectations if not e.ok]
    e = by_name(o)
    targets = [int(x) for x in e["targets distinct (no pile-up)"].figures["targets"].split(",")]
    assert sorted(targets) == [0, 4, 8, 12]  # one CPU in every other LLC, spec numbering
    assert e["even split between sockets"].figures["socket0"] == 2


def test_debian_kernel_piles_up_and_says_why():
    o = runner.recheck(RUNS / "llc-spread-pinned-zen3-2s-mini-debian")
    assert o.status == "FAIL"
    e = by_name(o)
    pile = e["targets distinct (no pile-up)"]
    assert not pile.ok and pile.evidence and all("sched_wakeup_new" in ln for ln in pile.evidence)
    assert "SD_BALANCE_FORK" in pile.note and "node_reclaim_distance" in pile.note
    split = e["even split between sockets"]
    assert split.figures["socket1"] == 0
