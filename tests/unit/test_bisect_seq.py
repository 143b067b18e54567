"""lab bisect --confidence without a VM: the SPRT, the ends' rates, the step that cannot
be decided, the answer's confidence, and whole bisections of a simulated linear history
(a fake runner whose pass rate depends on the commit, seeded)."""

from __future__ import annotations

import math
import random

import pytest

from lab import bisect_seq as bs
from lab.errors import UserError

N, FIRST_BAD = 20, 13  # a linear history of 20 commits, the 14th (index 13) the planted regression


def runner(rate_good: float, rate_bad: float, rng: random.Random, first_bad: int = FIRST_BAD):
    """A fake lab run: commit *i* passes at *rate_good* before the planted commit, at *rate_bad* from it on."""
    used: list[int] = []

    def run(i: int) -> str:
        used.append(i)
        return "PASS" if rng.random() < (rate_good if i < first_bad else rate_bad) else "FAIL"

    return run, used


def test_confidence_must_be_a_probability_above_one_half():
    assert bs.check_confidence(0.95) == 0.95
    for bad in (0.5, 1.0, 0.0, 1.5, float("nan"), -1):
        with pytest.raises(UserError, match=r"^--confidence .*: give a probability above 0.5 and below 1"):
            bs.check_confidence(bad)


def test_wilson_interval():
    lo, hi = bs.wilson(4, 4, 0.95)
    assert lo == pytest.approx(0.5101, abs=1e-4) and hi == 1.0
    lo, hi = bs.wilson(0, 4, 0.95)
    assert lo == 0.0 and hi == pytest.approx(0.4899, abs=1e-4)
    assert bs.wilson(0, 0, 0.95) == (0.0, 1.0)


def test_sprt_decides_at_wald_s_bounds():
    t = bs.Sprt(0.9, 0.1, 0.95, 30)
    assert t.bound == pytest.approx(math.log(19))
    assert t.add("FAIL") == "" and t.llr == pytest.approx(math.log(9))
    assert t.add("FAIL") == "FAIL"  # 2 log 9 = 4.39 >= log 19 = 2.94
    assert t.decision_confidence == pytest.approx(81 / 82) and t.decision_confidence >= 0.95
    t = bs.Sprt(0.9, 0.1, 0.95, 30)
    assert [t.add(s) for s in ("PASS", "FAIL", "PASS", "PASS")] == ["", "", "", "PASS"]
    assert (t.passed, t.failed, t.runs) == (3, 1, 4)
    with pytest.raises(ValueError, match="already decided"):
        t.add("PASS")
    with pytest.raises(ValueError, match="p_bad < p_good"):
        bs.Sprt(0.3, 0.7, 0.95, 30)


def test_a_step_that_cannot_be_decided_is_undecided_with_its_rates():
    t = bs.Sprt(0.7, 0.3, 0.95, 6)
    for s in ("PASS", "FAIL") * 3:
        t.add(s)
    assert t.status == bs.UNDECIDED and t.decision_confidence is None
    assert t.reason() == "undecided after 6 runs (3/6 passed (50%); the good end passes 70%, the bad end 30%)"


def test_a_run_that_is_not_judged_ends_the_step_as_it_is():
    t = bs.judge_step(iter(["PASS", "ERROR", "PASS"]).__next__, 0.9, 0.1, 0.95, 30)
    assert t.status == "ERROR" and t.runs == 1 and t.decision_confidence is None


def test_ends_are_run_interleaved_until_their_rates_are_told_apart():
    rng = random.Random(1)
    run, used = runner(0.95, 0.05, rng)
    ends = bs.estimate_ends(lambda: run(0), lambda: run(N - 1), 0.95, 30)
    assert ends.state == "ready", ends.why
    assert used[:4] == [0, N - 1, 0, N - 1]  # good, bad, good, bad
    assert len(ends.good) == len(ends.bad) >= 4  # 4 of 4 against 0 of 4 is the first that can separate at 0.95
    assert 0 < ends.p_bad < ends.p_good < 1
    lo, _ = bs.wilson(*ends.good_rate, bs.ONE_SIGMA)
    assert ends.p_good == lo


def test_a_good_end_that_fails_more_often_is_refused_with_both_rates():
    ends = bs.estimate_ends(lambda: "FAIL", lambda: "PASS", 0.95, 30)
    assert ends.state == "refused" and not ends.unjudged
    assert ends.why == ("the good end fails more often than the bad end (good end 0/4 passed (0%), "
                        "bad end 4/4 passed (100%)): nothing to bisect")  # fmt: skip
    # At --max-runs the good end failing as often as the bad one is refused too.
    ends = bs.estimate_ends(iter(["PASS", "FAIL"] * 3).__next__, iter(["PASS", "FAIL"] * 3).__next__, 0.95, 6)
    assert ends.state == "refused" and "fails as often as the bad end (good end 3/6 passed (50%)" in ends.why


def test_ends_that_cannot_be_told_apart_are_refused():
    g = iter(["PASS", "PASS", "FAIL"] * 2).__next__
    b = iter(["PASS", "FAIL", "FAIL"] * 2).__next__
    ends = bs.estimate_ends(g, b, 0.95, 6)
    assert ends.state == "refused"
    assert ends.why.startswith("cannot tell the ends apart in 6 runs each (good end 4/6 passed (67%), bad end 2/6 passed (33%))")


def test_an_end_that_cannot_be_judged_is_refused_as_such():
    ends = bs.estimate_ends(lambda: "PASS", lambda: "ERROR", 0.95, 6)
    assert ends.state == "refused" and ends.unjudged and ends.why == "the bad end cannot be judged: a run was ERROR"


def test_overall_confidence_is_the_product_of_the_decisions():
    assert bs.overall_confidence([0.99, 0.98, None, 0.97]) == pytest.approx(0.99 * 0.98 * 0.97)
    assert bs.overall_confidence([]) == 1.0


def test_bisect_linear_finds_the_first_bad_and_reports_skips_that_hide_it():
    r = bs.bisect_linear(N, lambda i: "PASS" if i < FIRST_BAD else "FAIL")
    assert r.first_bad == FIRST_BAD and len(r.steps) <= 5
    r = bs.bisect_linear(N, lambda i: "SKIP" if i in (12, 13) else "PASS" if i < FIRST_BAD else "FAIL")
    assert r.first_bad is None and r.candidates == [12, 13, 14]
    r = bs.bisect_linear(N, lambda i: "SKIP" if i == 9 else "PASS" if i < FIRST_BAD else "FAIL")
    assert r.first_bad == FIRST_BAD and (9, "SKIP") in r.steps


@pytest.mark.parametrize(("rate_good", "rate_bad"), [(0.95, 0.05), (0.7, 0.3)])
def test_a_whole_sprt_bisection_of_a_planted_regression(rate_good, rate_bad):
    """Ends measured, each step an SPRT, the planted commit found; the flaky history costs
    more runs per step and the stated confidence says so."""
    rng = random.Random(37)
    run, used = runner(rate_good, rate_bad, rng)
    ends = bs.estimate_ends(lambda: run(0), lambda: run(N - 1), 0.95, 60)
    assert ends.state == "ready", ends.why
    steps: list[bs.Sprt] = []

    def judge(i: int) -> str:
        t = bs.judge_step(lambda: run(i), ends.p_good, ends.p_bad, 0.95, 60)
        steps.append(t)
        return t.status

    r = bs.bisect_linear(N, judge)
    assert r.first_bad == FIRST_BAD
    confs = [t.decision_confidence for t in steps]
    assert all(c is not None and c >= 0.95 for c in confs)
    overall = bs.overall_confidence(confs)
    assert 0.95 ** len(steps) <= overall < 1
    runs_per_step = [t.runs for t in steps]
    if rate_good == 0.95:
        assert max(runs_per_step) <= 8 and sum(runs_per_step) / len(steps) <= 4 and len(ends.good) <= 6
    else:
        assert sum(runs_per_step) / len(steps) > 3 and len(ends.good) >= 15


def test_simulated_bisections_sprt_against_the_fixed_majority():
    """Many seeded bisections: on a clean 95 %/5 % history both are right nearly always;
    on a flaky 70 %/30 % one the fixed majority of 3 is wrong most of the time and the
    SPRT is right far more often, stating a confidence near how often it is."""

    def score(rate_good: float, rate_bad: float, **kw) -> tuple[float, float, float]:
        rng = random.Random(2026)
        right = runs = 0
        stated: list[float] = []
        answered = 0
        for _ in range(300):
            fb = rng.randrange(1, N)
            s = bs.simulate(N, fb, rate_good, rate_bad, rng, **kw)
            runs += s.runs
            if s.answer is not None:
                answered += 1
                right += s.answer == fb
                if s.confidence is not None:
                    stated.append(s.confidence)
        return right / 300, runs / 300, (sum(stated) / len(stated) if stated else 0.0)

    maj_right, maj_runs, _ = score(0.95, 0.05, repeat=3)
    seq_right, seq_runs, seq_conf = score(0.95, 0.05, confidence=0.95, max_runs=30)
    assert maj_right > 0.9 and seq_right > 0.97 and seq_runs < 3 * maj_runs
    assert seq_conf > 0.85
    maj_right, _, _ = score(0.7, 0.3, repeat=3)
    seq_right, _, seq_conf = score(0.7, 0.3, confidence=0.95, max_runs=60)
    assert maj_right < 0.4 and seq_right > 0.65
    assert abs(seq_conf - seq_right) < 0.15
