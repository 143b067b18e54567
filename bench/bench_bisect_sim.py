"""Sequential (SPRT) against fixed-majority bisection, simulated: no VM, no kernel.

    .venv/bin/python bench/bench_bisect_sim.py [--bisects 2000] [--commits 20] [--seed 37]

A linear history of --commits commits has one planted bad commit (uniform over commits
1..n-1, drawn from the seeded RNG); a run passes at the good rate before it and at the
bad rate from it on.  Each method bisects the same histories with the same seed:
``lab bisect --confidence C`` (lab.bisect_seq: both ends measured, each step an SPRT,
--max-runs per commit) and the fixed majority of ``--repeat N`` (lab bisect's default
rule, ends judged by the same majority).  For each pair of rates it reports how often
each method named the planted commit, how often it refused (ends judged the wrong way or
not told apart) or gave no single answer, the runs used (mean, max), and for SPRT the
confidence it stated against how often it was right.  Writes
bench/results/bench_bisect_sim-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from provenance import stamp as provenance  # noqa: E402

sys.path.insert(0, str(HERE.parent))

from lab.bisect_seq import simulate  # noqa: E402

RATES = [(0.95, 0.05), (0.7, 0.3)]  # the planted-revert-like scenario and a deliberately flaky one
METHODS = [
    ("majority-3", {"repeat": 3}),
    ("majority-5", {"repeat": 5}),
    ("sprt-0.95", {"confidence": 0.95, "max_runs": 30}),
    ("sprt-0.95-max60", {"confidence": 0.95, "max_runs": 60}),
    ("sprt-0.99", {"confidence": 0.99, "max_runs": 30}),
]


def measure(n: int, rate_good: float, rate_bad: float, kw: dict, bisects: int, seed: int) -> dict:
    rng = random.Random(seed)
    right = refused = hidden = 0
    runs: list[int] = []
    stated: list[float] = []
    for _ in range(bisects):
        first_bad = rng.randrange(1, n)
        s = simulate(n, first_bad, rate_good, rate_bad, rng, **kw)
        runs.append(s.runs)
        if s.refused:
            refused += 1
        elif s.answer is None:
            hidden += 1
        else:
            right += s.answer == first_bad
            if s.confidence is not None:
                stated.append(s.confidence)
    answered = bisects - refused - hidden
    out = {
        "bisects": bisects,
        "right": right,
        "right_pct": round(100.0 * right / bisects, 1),
        "right_of_answered_pct": round(100.0 * right / answered, 1) if answered else None,
        "refused": refused,
        "no_single_answer": hidden,
        "runs_mean": round(statistics.fmean(runs), 1),
        "runs_max": max(runs),
    }
    if stated:
        out["stated_confidence_mean"] = round(statistics.fmean(stated), 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bisects", type=int, default=2000)
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--seed", type=int, default=37)
    a = ap.parse_args()
    t0 = time.time()
    load0 = os.getloadavg()
    cases = []
    for rg, rb in RATES:
        for name, kw in METHODS:
            r = measure(a.commits, rg, rb, kw, a.bisects, a.seed)
            cases.append({"rate_good": rg, "rate_bad": rb, "method": name, **kw, **r})
            conf = f"  stated {r['stated_confidence_mean']:.3f}" if "stated_confidence_mean" in r else ""
            print(f"{rg:.2f}/{rb:.2f} {name:16s} right {r['right_pct']:5.1f}% (of answered "
                  f"{r['right_of_answered_pct']}%) refused {r['refused']:4d} no-answer {r['no_single_answer']:4d} "
                  f"runs mean {r['runs_mean']:6.1f} max {r['runs_max']:4d}{conf}")  # fmt: skip
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(t0))
    doc = {
        "bench": "bench_bisect_sim",
        **provenance(),  # commit, dirty, date, host, load (bench/provenance.py)
        "loadavg": list(os.getloadavg()),
        "loadavg_before": list(load0),
        "wall_s": round(time.time() - t0, 1),
        "commits": a.commits,
        "seed": a.seed,
        "bisects_per_case": a.bisects,
        "cases": cases,
    }
    out = HERE / "results" / f"bench_bisect_sim-{stamp}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
