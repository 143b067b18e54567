"""A bisection that knows when it is sure: each commit judged by Wald's sequential
probability ratio test (SPRT) on its pass rate, against the rates measured at both ends.

``lab bisect --confidence C [--max-runs N]`` uses this module; without --confidence
lab bisect judges each commit by a fixed majority (lab.bisect, lab.runner.majority).
Everything here is pure (runs come in through a callable), so the statistics are
unit-tested and benchmarked against simulated histories (tests/unit/test_bisect_seq.py,
bench/bench_bisect_sim.py) without a VM.

The ends (``estimate_ends``)
    A scenario that is flaky passes on a good kernel at some rate p_good < 1 and on a bad
    one at p_bad > 0.  Both ends are run, interleaved (good, bad, good, bad, ...: host
    noise hits both), until their rates are told apart: the two-sided Wilson score
    intervals at level C of the good end's and the bad end's pass rates no longer
    overlap.  Then the SPRT's hypotheses are each rate's one-sigma bound on the side of
    the other end: the good end's Wilson lower bound and the bad end's upper bound at
    z = 1 (68.3 %), never 0 or 1, and apart because the wider intervals at C are.
    Stopping when the ends look apart picks runs where they look further apart than
    they are, so the point estimates made the steps overconfident (a by-hand run of the
    simulation below, not kept, showed it).  With the one-sigma bounds, at rates 70 % /
    30 %, confidence 0.95 and --max-runs 30, the answered bisections were right 82 % of
    the time against a stated 86 % (case sprt-0.95 in
    bench/results/bench_bisect_sim-20261125-223214.json).  When the intervals separate the
    wrong way (the good end fails more often than the bad one), or after N runs per end
    the good end still fails at least as often as the bad one, the bisection is refused
    with both rates;
    when N runs per end cannot tell two rates apart it is refused too ("cannot tell the
    ends apart"), since no step could then be decided either.

A step (``Sprt``)
    At a commit, H_bad: p = p_bad against H_good: p = p_good, one run at a time.  The
    log-likelihood ratio ``llr`` = sum over runs of log(P(run | H_bad) / P(run | H_good))
    (a pass adds log(p_bad / p_good), a fail log((1 - p_bad) / (1 - p_good))).  Wald's
    bounds with both error rates 1 - C: FAIL (bad, git's 1) once llr >= log(C / (1 - C)),
    PASS (good, 0) once llr <= -log(C / (1 - C)).  A step still between the bounds after
    N runs is UNDECIDED: skipped (git's 125), with its runs and both ends' rates.  A run
    that is not a PASS or a FAIL (ERROR, INCONCLUSIVE, SKIP) ends the step as that, a
    skip, as lab bisect's majority does.

A decision's confidence
    With even prior odds between the two hypotheses the posterior odds are the likelihood
    ratio, so the decision's confidence is ``e^|llr| / (1 + e^|llr|)``, at least C at a
    bound (more when the last run overshoots it).

The first bad commit's confidence (``overall_confidence``)
    In a linear history every decision matters: a bad commit judged good moves the search
    past the first bad commit, a good one judged bad moves it before, so the answer is
    right exactly when every step's decision is (skipped steps decide nothing).  Runs are
    independent, so the answer's confidence is the product of the steps' confidences.
    What this rests on: each commit's pass rate is one of the two ends' (the regression is
    one commit, and nothing else in the range changes the rate), the end rates are their
    estimates, and runs are independent.  A commit with a rate between the two, or ends
    estimated from few runs of a flaky scenario, make the figure optimistic; the
    simulation (bench/bench_bisect_sim.py) compares it with how often the answer was right.

``bisect_linear`` drives a bisection over a linear history as git bisect does (midpoint
of what is left; a skipped commit moves to the next untested one; skips that hide the
answer give the candidates): the simulation's driver and the tests'.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from .errors import UserError

JUDGED = ("PASS", "FAIL")
UNDECIDED = "UNDECIDED"
DEFAULT_MAX_RUNS = 30


def check_confidence(c: float) -> float:
    """--confidence: a probability strictly between 1/2 and 1."""
    if not (isinstance(c, (int, float)) and math.isfinite(c) and 0.5 < c < 1.0):
        raise UserError(f"--confidence {c}: give a probability above 0.5 and below 1 (e.g. 0.95)")
    return float(c)


def wilson(passed: int, runs: int, confidence: float) -> tuple[float, float]:
    """The two-sided Wilson score interval of a pass rate at level *confidence*."""
    if runs == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = passed / runs
    den = 1 + z * z / runs
    mid = (p + z * z / (2 * runs)) / den
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


ONE_SIGMA = 2 * NormalDist().cdf(1.0) - 1  # 0.6827: the level whose z is 1


def rate_text(passed: int, runs: int) -> str:
    return f"{passed}/{runs} passed ({100.0 * passed / runs:.0f}%)" if runs else "no runs"


# --- the ends ------------------------------------------------------------------------------


@dataclass
class Ends:
    """Both ends' runs and what they say: ``state`` is "measuring" while the rates are not
    yet told apart, "ready" when they are (``p_good``, ``p_bad``: the SPRT's hypotheses),
    "refused" when they cannot bisect (``why``)."""

    confidence: float
    max_runs: int
    good: list[str] = field(default_factory=list)  # each run's status, in order
    bad: list[str] = field(default_factory=list)
    state: str = "measuring"
    why: str = ""
    unjudged: bool = False  # refused because a run could not be judged (an ERROR), not for the rates

    @staticmethod
    def _count(statuses: Sequence[str]) -> tuple[int, int]:
        judged = [s for s in statuses if s in JUDGED]
        return sum(s == "PASS" for s in judged), len(judged)

    @property
    def good_rate(self) -> tuple[int, int]:
        return self._count(self.good)

    @property
    def bad_rate(self) -> tuple[int, int]:
        return self._count(self.bad)

    @property
    def p_good(self) -> float:
        """H_good's pass rate: the good end's one-sigma lower bound."""
        return wilson(*self.good_rate, ONE_SIGMA)[0]

    @property
    def p_bad(self) -> float:
        """H_bad's pass rate: the bad end's one-sigma upper bound."""
        return wilson(*self.bad_rate, ONE_SIGMA)[1]

    def rates(self) -> str:
        return f"good end {rate_text(*self.good_rate)}, bad end {rate_text(*self.bad_rate)}"

    def add(self, role: str, status: str) -> str:
        """One more run of the good or bad end; returns the state after it."""
        (self.good if role == "good" else self.bad).append(status)
        if status not in JUDGED:
            self.state, self.unjudged = "refused", True
            self.why = f"the {role} end cannot be judged: a run was {status}"
            return self.state
        gp, gn = self.good_rate
        bp, bn = self.bad_rate
        if gn != bn:  # decide on pairs: both ends equally measured
            return self.state
        g_lo, g_hi = wilson(gp, gn, self.confidence)
        b_lo, b_hi = wilson(bp, bn, self.confidence)
        if g_lo > b_hi:
            self.state = "ready"
        elif g_hi < b_lo or (gn >= self.max_runs and gp <= bp):
            self.state = "refused"
            how = "more often than" if gp < bp else "as often as"
            self.why = f"the good end fails {how} the bad end ({self.rates()}): nothing to bisect"
        elif gn >= self.max_runs:
            self.state = "refused"
            self.why = (f"cannot tell the ends apart in {gn} runs each ({self.rates()}) at confidence "
                        f"{self.confidence:g}: no step could be decided; raise --max-runs")  # fmt: skip
        return self.state

    def to_dict(self) -> dict[str, Any]:
        (gp, gn), (bp, bn) = self.good_rate, self.bad_rate
        return {"good": {"passed": gp, "runs": gn, "p": round(self.p_good, 4)},
                "bad": {"passed": bp, "runs": bn, "p": round(self.p_bad, 4)},
                "confidence": self.confidence, "max_runs": self.max_runs, "state": self.state}  # fmt: skip


def estimate_ends(run_good: Callable[[], str], run_bad: Callable[[], str], confidence: float, max_runs: int) -> Ends:
    """Run both ends, interleaved, until their rates are told apart or cannot be (see
    the module's docstring).  The caller refuses the bisection when ``state`` is not "ready"."""
    ends = Ends(confidence, max_runs)
    while ends.state == "measuring":
        if ends.add("good", run_good()) != "measuring":
            break
        ends.add("bad", run_bad())
    return ends


# --- one step --------------------------------------------------------------------------------


@dataclass
class Sprt:
    """Wald's SPRT of one commit: is its pass rate the bad end's or the good end's?"""

    p_good: float
    p_bad: float
    confidence: float
    max_runs: int
    passed: int = 0
    failed: int = 0
    llr: float = 0.0
    status: str = ""  # "" while undecided; PASS, FAIL, UNDECIDED, or the run status that ended it

    def __post_init__(self) -> None:
        if not 0.0 < self.p_bad < self.p_good < 1.0:
            raise ValueError(f"SPRT needs 0 < p_bad < p_good < 1, got p_good={self.p_good}, p_bad={self.p_bad}")

    @property
    def bound(self) -> float:
        return math.log(self.confidence / (1 - self.confidence))

    @property
    def runs(self) -> int:
        return self.passed + self.failed

    @property
    def decided(self) -> bool:
        return bool(self.status)

    def add(self, status: str) -> str:
        """One more run's status; returns the step's status ("" while undecided)."""
        if self.decided:
            raise ValueError("the step is already decided")
        if status not in JUDGED:
            self.status = status
            return status
        if status == "PASS":
            self.passed += 1
            self.llr += math.log(self.p_bad / self.p_good)
        else:
            self.failed += 1
            self.llr += math.log((1 - self.p_bad) / (1 - self.p_good))
        if self.llr >= self.bound:
            self.status = "FAIL"
        elif self.llr <= -self.bound:
            self.status = "PASS"
        elif self.runs >= self.max_runs:
            self.status = UNDECIDED
        return self.status

    @property
    def decision_confidence(self) -> float | None:
        """The posterior probability of the decision with even prior odds; None unless decided PASS or FAIL."""
        if self.status not in JUDGED:
            return None
        a = abs(self.llr)
        return 1.0 / (1.0 + math.exp(-a))

    def reason(self) -> str:
        if self.status == UNDECIDED:
            return (f"undecided after {self.runs} runs ({rate_text(self.passed, self.runs)}; the good end passes "
                    f"{100 * self.p_good:.0f}%, the bad end {100 * self.p_bad:.0f}%)")  # fmt: skip
        return ""

    def to_dict(self) -> dict[str, Any]:
        c = self.decision_confidence
        return {"method": "sprt", "llr": round(self.llr, 4), "bound": round(self.bound, 4),
                "p_good": round(self.p_good, 4), "p_bad": round(self.p_bad, 4),
                "max_runs": self.max_runs, "confidence": None if c is None else round(c, 6)}  # fmt: skip


def judge_step(run: Callable[[], str], p_good: float, p_bad: float, confidence: float, max_runs: int) -> Sprt:
    """Run one commit until the SPRT decides, a run is not judged, or *max_runs*."""
    t = Sprt(p_good, p_bad, confidence, max_runs)
    while not t.decided:
        t.add(run())
    return t


def overall_confidence(confidences: Sequence[float | None]) -> float:
    """The first bad commit's confidence: the product of the decided steps' confidences
    (None: a step that decided nothing)."""
    out = 1.0
    for c in confidences:
        if c is not None:
            out *= c
    return out


# --- a linear history, bisected as git does -------------------------------------------------


@dataclass
class LinearResult:
    first_bad: int | None  # index in the history; None when skips hide it
    candidates: list[int]
    steps: list[tuple[int, str]]  # (commit index, status) in the order judged


def bisect_linear(n: int, judge: Callable[[int], str]) -> LinearResult:
    """Bisect commits 0..n-1, 0 known good and n-1 known bad: *judge(i)* says "PASS"
    (good), "FAIL" (bad) or anything else (skip).  The midpoint of what is left is
    judged; a skipped one gives way to the untested commit nearest the middle."""
    good, bad = 0, n - 1
    skipped: set[int] = set()
    steps: list[tuple[int, str]] = []
    while bad - good > 1:
        left = [i for i in range(good + 1, bad) if i not in skipped]
        if not left:
            return LinearResult(None, [i for i in range(good + 1, bad + 1)], steps)
        mid = (good + bad) / 2
        i = min(left, key=lambda x: (abs(x - mid), x))
        st = judge(i)
        steps.append((i, st))
        if st == "PASS":
            good = i
        elif st == "FAIL":
            bad = i
        else:
            skipped.add(i)
    return LinearResult(bad, [bad], steps)


# --- simulation: a fake runner over a linear history ---------------------------------------


@dataclass
class Simulated:
    """One simulated bisection: the answer (None: refused or hidden by skips), runs used,
    and for SPRT the stated confidence."""

    answer: int | None
    runs: int
    confidence: float | None = None
    refused: str = ""
    skipped: int = 0


def simulate(n: int, first_bad: int, rate_good: float, rate_bad: float, rng: Any, *,
             confidence: float | None = None, max_runs: int = DEFAULT_MAX_RUNS, repeat: int = 3) -> Simulated:  # fmt: skip
    """Bisect a linear history of *n* commits (0 good, n-1 bad) whose commits before
    *first_bad* pass at *rate_good* and the rest at *rate_bad*, each run drawn from *rng*
    (random.Random).  With *confidence*: the ends measured and each step judged by the
    SPRT; without: lab bisect's fixed majority of up to *repeat* runs, ends included."""
    used = 0

    def run(i: int) -> str:
        nonlocal used
        used += 1
        return "PASS" if rng.random() < (rate_good if i < first_bad else rate_bad) else "FAIL"

    if confidence is None:
        def majority(i: int) -> str:
            p = f = 0
            need = repeat // 2 + 1
            while p < need and f < need:
                if run(i) == "PASS":
                    p += 1
                else:
                    f += 1
            return "PASS" if p >= need else "FAIL"

        if majority(0) != "PASS" or majority(n - 1) != "FAIL":
            return Simulated(None, used, refused="an end judged the wrong way")
        r = bisect_linear(n, majority)
        return Simulated(r.first_bad, used)

    ends = estimate_ends(lambda: run(0), lambda: run(n - 1), confidence, max_runs)
    if ends.state != "ready":
        return Simulated(None, used, refused=ends.why)
    confs: list[float | None] = []

    def sprt(i: int) -> str:
        t = judge_step(lambda: run(i), ends.p_good, ends.p_bad, confidence, max_runs)
        confs.append(t.decision_confidence)
        return t.status

    r = bisect_linear(n, sprt)
    return Simulated(r.first_bad, used, overall_confidence(confs), skipped=sum(c is None for c in confs))
