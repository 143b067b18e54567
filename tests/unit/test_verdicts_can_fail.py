"""Every seed verdict can fail, and CI proves it (issue 31 items 1 and 6): each scenario
names the expectation that carries its claim, and has a known-good and a known-bad side
whose *exact* verdicts a test checks in CI, either live (a VM test on a kernel CI has) or
from a recorded run of the scenario's current design (results.json's scenario_version is
the scenario's version: a recording that predates the design fails here, by name, and
must be recorded again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import runner
from lab import scenario as sc

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "fixtures" / "runs"

# scenario -> side -> proofs: ("vm", a KNOWN_VERDICTS row of tests/vm/test_scenarios_vm.py)
# or ("recorded", fixture directory, exact verdict).
BOTH_SIDES: dict[str, dict[str, list[tuple]]] = {
    "llc-spread-pinned": {
        "good": [("vm", ("llc-spread-pinned", "zen3-2s-mini", "debian", "PASS")),
                 ("recorded", "llc-spread-pinned-zen3-2s-mini-lab-6.1-gate", "PASS")],
        "bad": [("recorded", "llc-spread-pinned-zen3-2s-mini-lab-6.1-no-affinity-imbalance-gate", "FAIL")],
    },
    "numa-balancing": {
        "good": [("vm", ("numa-balancing", "numa4-96-micro", "debian", "PASS"))],
        "bad": [("vm", ("numa-balancing", "numa4-96-micro", "debian", "FAIL", ("--append", "numa_balancing=disable")))],
    },
    "cluster-wakeup": {
        "good": [("vm", ("cluster-wakeup", "jacobsville-24c-mini", "debian-6.12", "PASS"))],
        "bad": [("vm", ("cluster-wakeup", "jacobsville-24c-mini", "debian", "FAIL"))],
    },
    "preferred-node-migrations": {
        "good": [("vm", ("preferred-node-migrations", "epyc7551-8n-mini", "debian", "PASS"))],
        "bad": [("vm", ("preferred-node-migrations", "epyc7551-8n-mini", "debian", "FAIL", ("--append", "numa_balancing=disable")))],
    },
    "scheduler-survives": {
        "good": [("vm", ("scheduler-survives", "zen3-2s-mini", "debian", "PASS"))],
        "bad": [("vm", ("scheduler-survives", "zen3-2s-mini", "debian", "FAIL", ("--append", "isolcpus=2-3")))],
    },
    "smt-spread": {
        "good": [("vm", ("smt-spread", "numa4-96-micro", "debian", "PASS"))],
        "bad": [("vm", ("smt-spread", "numa4-96-micro", "debian", "FAIL", ("-p", "pin=siblings")))],
    },
    "misfit-migration": {
        "good": [("vm", ("misfit-migration", "tensor-gs101", "debian", "PASS"))],
        "bad": [("vm", ("misfit-migration", "tests/fixtures/topologies/tensor-gs101-symmetric.toml", "debian", "FAIL", ("-p", "big=6-7")))],
    },
    "wake-affine": {
        "good": [("vm", ("wake-affine", "zen3-2s-mini", "debian", "PASS"))],
        "bad": [("vm", ("wake-affine", "zen3-2s-mini", "debian", "FAIL", ("-p", "wake_affine=off")))],
    },
    "cpuset-isolation": {
        "good": [("vm", ("cpuset-isolation", "numa4-96-micro", "debian", "PASS"))],
        "bad": [("vm", ("cpuset-isolation", "numa4-96-micro", "debian", "FAIL", ("-p", "overlap=2")))],
    },
    "work-conservation": {
        "good": [("vm", ("work-conservation", "numa4-96-micro", "debian", "PASS"))],
        "bad": [("vm", ("work-conservation", "numa4-96-micro", "debian", "FAIL", ("--append", "isolcpus=domain,2-3,6-7,10-11,14-15")))],
    },
    "numa-locality": {
        "good": [("vm", ("numa-locality", "numa4-96-micro", "debian", "PASS"))],
        "bad": [("vm", ("numa-locality", "numa4-96-micro", "debian", "FAIL", ("--append", "numa_balancing=disable")))],
    },
    "soft-affinity": {
        "good": [("recorded", "soft-affinity-xeon-2s22c-mini-lab-6.1-soft-affinity", "PASS")],
        "bad": [("recorded", "soft-affinity-xeon-2s22c-mini-lab-6.1-soft-affinity-preference-off", "FAIL")],
    },
}  # fmt: skip


def _known_verdicts() -> list[tuple]:
    """KNOWN_VERDICTS of tests/vm/test_scenarios_vm.py, read as the literal it is."""
    import ast

    tree = ast.parse((ROOT / "tests" / "vm" / "test_scenarios_vm.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KNOWN_VERDICTS" for t in node.targets):
            return [tuple(x) for x in ast.literal_eval(node.value)]
    raise AssertionError("tests/vm/test_scenarios_vm.py has no KNOWN_VERDICTS")


def test_every_scenario_has_both_sides():
    assert sorted(BOTH_SIDES) == sc.names(), "a scenario without its known-good and known-bad proof"
    for name, sides in BOTH_SIDES.items():
        assert sides["good"] and sides["bad"], name
        s = sc.load(name)
        assert s.claim.strip(), f"{s.path}: no claim"


@pytest.mark.parametrize(
    "name, side, proof",
    [(n, side, p) for n, sides in BOTH_SIDES.items() for side in ("good", "bad") for p in sides[side]],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_each_side_is_checked_exactly(name, side, proof):
    if proof[0] == "vm":
        row = proof[1]
        assert row in _known_verdicts(), f"{row} is not a live VM test any more (tests/vm/test_scenarios_vm.py)"
        assert row[3] == ("PASS" if side == "good" else "FAIL")
        return
    _, fixture, want = proof
    d = RUNS / fixture
    assert d.is_dir(), f"{d}: no such recording"
    res = json.loads((d / "results.json").read_text())
    s = sc.load(name)
    got = res.get("scenario_version")
    assert got == s.version, (
        f"{d.name} was recorded with {name} version {got or '1 or older'}; the scenario is version {s.version}: "
        "record it again (its design changed)"
    )
    o = runner.recheck(d)
    assert o.status == want, (o.status, o.message)
    claims = [e for e in o.expectations if e.claim and not e.vacuous]
    assert claims, "judged without a claim-carrying expectation"
    if want == "FAIL":
        assert any(not e.ok for e in claims), "a FAIL that is not the claim's"
