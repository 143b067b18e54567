"""Every expectation that fails says why, in words (its note: the `why:` line of `lab run`,
what a reader of a mail or a bisect log acts on): every recorded run in tests/fixtures/runs,
rechecked with the current scenarios.  Until this test, llc-spread-pinned's three claims
failed on the reverted kernel with evidence and figures but an empty note."""

from pathlib import Path

import pytest

from lab import runner

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


@pytest.mark.parametrize("run", sorted(d.name for d in RUNS.iterdir() if (d / "results.json").is_file()))
def test_every_failed_expectation_of_a_recorded_run_says_why(run):
    o = runner.recheck(RUNS / run)
    silent = [e.name for e in o.expectations if not e.ok and not e.note]
    assert not silent, f"{run}: {o.status} with expectations failing without a note: {silent}"
