"""A/B evidence: two sets of runs of one scenario on one topology, compared.

``compare(a, b)`` is a pure function from run records (``results.json`` as
``RunOutcome.to_dict()`` writes it) to a comparison document; ``load_run()`` reads one
run directory's record.  ``lab compare`` prints the document (``lab.report.compare``) or
writes it as JSON (``--json``); ``lab report render`` reads that JSON back.

Statistics (``ALPHA`` = 0.05, two-sided):

* each numeric figure of each expectation: n, min, max, mean and the *sample* standard
  deviation (n - 1) per side; the change of B's mean against A's in percent,
  ``(mean_b - mean_a) / |mean_a| * 100`` (None when A's mean is 0 and B's is not);
  Welch's t-test (unequal variances).  With fewer than 2 runs on a side the test cannot
  be done ("too few runs").  When neither side varies at all the t-test is undefined:
  equal values are "identical", different ones get the exact permutation test's p, which
  for two constant groups is (2 if n_a == n_b else 1) / C(n_a + n_b, n_a).
* the figures' tests are one family: Holm's step-down correction keeps the chance of
  any false "significant" among them at ALPHA (each test's ``p_holm``; ``correction``
  says over how many).
* pass rates (the verdict, and each expectation): Fisher's exact test on
  [[passed_a, failed_a], [passed_b, failed_b]].  When even the most extreme split the
  run counts allow (all pass against all fail) could not reach ALPHA, the result is
  "too few runs", with how many runs per side could.

Runs that were not judged (ERROR, SKIP, or not finished) count on no side of any test:
they are listed under ``not_judged`` with their reason, never read as a failure.  An
INCONCLUSIVE run (complete data, an outcome that is not the kernel's to judge: the
emulation's, or a claim about the kernel's own scheduler under a BPF scheduler) is listed
there too and counts in no pass rate, but its figures are measured and count as any
run's (``MEASURED``): ``lab compare S --scheduler eevdf --scheduler scx_simple`` shows
both sides' placement figures.  An expectation's pass rate counts its PASS and FAIL only.

The JSON document (``SCHEMA`` = "lab.compare", ``VERSION`` = 1)::

    {
      "schema": "lab.compare", "version": 1,
      "scenario": str, "topology": str, "alpha": 0.05,
      "interleaved": bool,               # A B A B ... order (lab compare SCENARIO)
      "sides": {"a": SIDE, "b": SIDE},
      "verdict": RATE,                   # PASS rate of whole runs
      "expectations": [RATE + {"name": str}],
      "figures": [FIGURE],
      "not_judged": [{"side": "a"|"b", "run_dir": str|null, "status": str, "message": str}],
      "correction": {"method": "holm", "over": "figures", "tests": int},
      "verdicts": {"source": [str],       # "re-judged" (the current scenario on the run's
                                          # data), "stored (...)" (results.json as written)
                   "changed": [{"side", "run_dir", "stored": str, "now": str}]}
    }
    SIDE   = {"label": "A"|"B", "kernel": str,   # kernel names joined with "+"
              "scheduler": str,                  # only when the runs name a sched_ext scheduler
                                                 # (lab compare --scheduler A --scheduler B)
              "kernel_ids": [str], "runs": int, "passed": int, "failed": int,
              "not_judged": int, "run_dirs": [str|null], "kernel_info": [dict]}
    RATE   = {"a": {"passed": int, "runs": int}, "b": {...}, "test": TEST}
    FIGURE = {"expectation": str, "figure": str,
              "a": STATS, "b": STATS, "change_pct": float|null, "test": TEST}
    STATS  = {"n": int, "min": float|null, "max": float|null,
              "mean": float|null, "stddev": float|null}
    TEST   = {"method": "welch"|"fisher"|"permutation"|null, "p": float|null,
              "statistic": float|null,
              "result": "significant"|"not significant"|"identical"|"too few runs",
              "why": str}

A later version may add fields; a reader checks ``schema`` and that ``version`` is not
newer than the one it knows.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import integrity, rundir, runner
from . import scenario as sc
from .errors import UserError
from .stats import summary  # re-exported: lab compare's spread is the one definition

SCHEMA = "lab.compare"
VERSION = 1
ALPHA = 0.05

SIGNIFICANT = "significant"
NOT_SIGNIFICANT = "not significant"
IDENTICAL = "identical"
TOO_FEW = "too few runs"

JUDGED = ("PASS", "FAIL")  # what a pass rate counts: INCONCLUSIVE runs are neither
MEASURED = (*JUDGED, "INCONCLUSIVE")  # complete data: whose figures (and judged expectations) count


# --- reading runs ------------------------------------------------------------------------


def load_run(run_dir: Path, *, stored: bool = False) -> dict[str, Any]:
    """*run_dir*'s record (results.json), with ``run_dir`` set to where it was read,
    re-judged by the current scenario as ``lab recheck`` does (rejudge()) unless *stored*:
    a stored verdict is what an older lab or scenario said, not what this one says.  A run
    that did not finish comes back as an ERROR saying why (it is then not judged); a
    directory that is no run at all is the user's error."""

    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run directory")
    record, why = integrity.read_record(run_dir)
    if record is None:
        if not (run_dir / rundir.RESULTS).exists():
            raise UserError(f"{run_dir}: not a run directory (no {rundir.RESULTS})")
        rec = {"status": "ERROR", "message": why}
        raw = _raw(run_dir / rundir.RESULTS)  # what it says of itself, names only
        for k in ("scenario", "topology"):
            if isinstance(raw.get(k), str):
                rec[k] = raw[k]
    else:
        rec = dict(record)
    if not rec.get("scenario") or not rec.get("topology"):
        plan = _plan_names(run_dir)
        rec.setdefault("scenario", plan.get("scenario"))
        rec.setdefault("topology", plan.get("topology"))
    if not rec.get("scenario") or not rec.get("topology"):
        raise UserError(f"{run_dir}: results.json names no scenario or topology: not a lab run")
    sched = _raw(run_dir / rundir.PLAN).get("scheduler")
    if isinstance(sched, dict) and isinstance(sched.get("name"), str):
        rec.setdefault("scheduler", sched["name"])
    late = integrity.unfinished(rec)
    if late:
        rec["status"], rec["message"] = "ERROR", late
    elif not stored and record is not None:
        rec = rejudge(run_dir, rec)
    elif stored:
        rec["verdict_source"] = "stored (--stored)"
    rec["run_dir"] = str(run_dir)
    return rec


def rejudge(run_dir: Path, rec: dict[str, Any], topo: Any = None) -> dict[str, Any]:
    """*rec* (a finished run's results.json) as the current scenario judges the run's data
    (runner.recheck), with ``verdict_source`` saying which it is and ``stored_status`` the
    stored verdict when it differs.  A scenario this lab does not have by that name leaves
    the stored verdict, labelled so."""

    name = rec.get("scenario")
    data = sc.recorded_in(run_dir)
    is_data = isinstance(data, dict) and data.get("kind") == "data" and data.get("name") == name
    if not isinstance(name, str) or (name not in sc.names() and not is_data):
        return {**rec, "verdict_source": f"stored (lab has no scenario {str(name)[:60]!r} to re-judge it)"}
    o = runner.recheck(run_dir, topo=topo)
    new = {k: v for k, v in o.to_dict().items() if k != "run_dir"}
    new = {**rec, **new, "verdict_source": "re-judged"}
    if o.status != rec.get("status"):
        new["stored_status"] = rec.get("status")
    return new


def _raw(p: Path) -> dict[str, Any]:
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def _plan_names(run_dir: Path) -> dict[str, Any]:
    topo = _raw(run_dir / rundir.PLAN).get("topology")
    return {"topology": topo.get("name") if isinstance(topo, dict) else None}


# --- statistics --------------------------------------------------------------------------


def change_pct(mean_a: float | None, mean_b: float | None) -> float | None:
    """B's mean against A's, in percent of |A|; None when it has no meaning."""
    if mean_a is None or mean_b is None:
        return None
    if mean_a == 0:
        return 0.0 if mean_b == 0 else None
    return (mean_b - mean_a) / abs(mean_a) * 100.0


def _test(method: str | None, p: float | None, statistic: float | None, result: str, why: str) -> dict[str, Any]:
    return {"method": method, "p": p, "statistic": statistic, "result": result, "why": why}


def welch(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA) -> dict[str, Any]:
    """Welch's two-sided t-test of *a* against *b* (see the module's docstring for the
    cases where it is undefined)."""
    if len(a) < 2 or len(b) < 2:
        return _test(None, None, None, TOO_FEW, f"Welch's t-test needs 2 runs per side, has {len(a)} and {len(b)}")
    if len(set(a)) == 1 and len(set(b)) == 1:
        if a[0] == b[0]:
            return _test(None, 1.0, None, IDENTICAL, "every run gave the same value")
        p = (2 if len(a) == len(b) else 1) / math.comb(len(a) + len(b), len(a))
        res = SIGNIFICANT if p < alpha else TOO_FEW
        why = "each side gave one value in every run: exact permutation test"
        if res == TOO_FEW:
            why += f" (p={p:.3g} is the smallest {len(a)} and {len(b)} runs can give)"
        return _test("permutation", p, None, res, why)

    # deferred: heavy (scipy)
    from scipy import stats

    with warnings.catch_warnings():  # one constant side: scipy warns of precision, the test stands
        warnings.simplefilter("ignore", RuntimeWarning)
        r = stats.ttest_ind(list(a), list(b), equal_var=False)
    p, t = float(r.pvalue), float(r.statistic)
    return _test("welch", p, t, SIGNIFICANT if p < alpha else NOT_SIGNIFICANT, "Welch's t-test")


def fisher(passed_a: int, runs_a: int, passed_b: int, runs_b: int, alpha: float = ALPHA) -> dict[str, Any]:
    """Fisher's exact test (two-sided) of two pass rates."""
    # deferred: heavy (scipy)
    from scipy import stats

    if runs_a == 0 or runs_b == 0:
        return _test(None, None, None, TOO_FEW, f"no judged runs on side {'A' if runs_a == 0 else 'B'}")
    best = _fisher_p(runs_a, 0, 0, runs_b)
    r = stats.fisher_exact([[passed_a, runs_a - passed_a], [passed_b, runs_b - passed_b]])
    p = float(r.pvalue)
    if best >= alpha:
        need = runs_needed(alpha)
        return _test("fisher", p, None, TOO_FEW,
                     f"even {runs_a}/{runs_a} against 0/{runs_b} would give p={best:.2g}; "
                     f"{need} runs per side can show a difference at {alpha:g}")  # fmt: skip
    if p < alpha:
        return _test("fisher", p, None, SIGNIFICANT, "Fisher's exact test")
    return _test("fisher", p, None, IDENTICAL if passed_a * runs_b == passed_b * runs_a else NOT_SIGNIFICANT,
                 "Fisher's exact test")  # fmt: skip


def holm(tests: Sequence[dict[str, Any]], alpha: float = ALPHA) -> int:
    """Holm's step-down correction over *tests* (each a TEST with a p): each gets
    ``p_holm``, and one that was significant alone but is not after the correction says so
    (result "not significant").  Returns the family's size."""
    fam = [t for t in tests if t.get("p") is not None and t.get("result") in (SIGNIFICANT, NOT_SIGNIFICANT)]
    m = len(fam)
    running = 0.0
    for i, t in enumerate(sorted(fam, key=lambda t: t["p"])):
        running = max(running, min(1.0, (m - i) * t["p"]))
        t["p_holm"] = running
        if t["result"] == SIGNIFICANT and running >= alpha:
            t["result"] = NOT_SIGNIFICANT
            t["why"] += f" (p={t['p']:.2g} alone; {running:.2g} after Holm's correction over {m} figures)"
    return m


def _fisher_p(a: int, b: int, c: int, d: int) -> float:
    # deferred: heavy (scipy)
    from scipy import stats

    return float(stats.fisher_exact([[a, b], [c, d]]).pvalue)


def runs_needed(alpha: float = ALPHA) -> int:
    """The fewest runs per side for which all-pass against all-fail is significant."""
    n = 1
    while _fisher_p(n, 0, 0, n) >= alpha:
        n += 1
    return n


# --- the document ------------------------------------------------------------------------


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _side(label: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    kernels: list[str] = []
    ids: list[str] = []
    for r in runs:
        k = str(r.get("kernel") or "?")
        if k not in kernels:
            kernels.append(k)
        kid = (r.get("kernel_info") or {}).get("id")
        if kid and kid not in ids:
            ids.append(str(kid))
    scheds: list[str] = []
    for r in runs:
        sch = r.get("scheduler")
        if isinstance(sch, str) and sch and sch not in scheds:
            scheds.append(sch)
    side: dict[str, Any] = {
        "label": label,
        "kernel": "+".join(kernels) or "?",
        "kernel_ids": ids,
        "runs": len(runs),
        "passed": sum(r.get("status") == "PASS" for r in runs),
        "failed": sum(r.get("status") == "FAIL" for r in runs),
        "not_judged": sum(r.get("status") not in JUDGED for r in runs),
        # complete data the emulation decided (runner.JUDGED): no pass or fail to count
        "inconclusive": sum(r.get("status") == "INCONCLUSIVE" for r in runs),
        "run_dirs": [r.get("run_dir") for r in runs],
        "kernel_info": [dict(r.get("kernel_info") or {}) for r in runs],
    }
    if scheds:  # only runs that name one (lab compare --scheduler, a plan with a scheduler)
        side["scheduler"] = "+".join(scheds)
    return side


def _same(runs_a: Sequence[Mapping[str, Any]], runs_b: Sequence[Mapping[str, Any]], field: str, fields: str) -> str:
    """The one *field* value (scenario, topology) all runs share; refused naming two
    runs that differ."""
    first: Mapping[str, Any] | None = None
    for r in [*runs_a, *runs_b]:
        if first is None:
            first = r
        elif r.get(field) != first.get(field):
            def where(x: Mapping[str, Any]) -> str:
                return f"{x.get('run_dir') or 'a run'} is {x.get(field)}"

            raise UserError(f"cannot compare runs of different {fields}: {where(first)}, {where(r)}")
    return str(first.get(field)) if first else "?"


def compare(
    runs_a: Sequence[Mapping[str, Any]],
    runs_b: Sequence[Mapping[str, Any]],
    *,
    interleaved: bool = False,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """The comparison document of *runs_a* (A) against *runs_b* (B); see the module's
    docstring.  Runs of different scenarios or topologies are refused, naming both."""
    if not runs_a or not runs_b:
        raise UserError("lab compare needs runs on both sides (A -- B)")
    dirs_a = {str(r.get("run_dir")) for r in runs_a if r.get("run_dir")}
    both = sorted(dirs_a & {str(r.get("run_dir")) for r in runs_b if r.get("run_dir")})
    if both:
        raise UserError(f"run {both[0]} is on both sides of the comparison; a run counts for A or for B, not both")
    scenario = _same(runs_a, runs_b, "scenario", "scenarios")
    topology = _same(runs_a, runs_b, "topology", "topologies")
    judged = {"a": [r for r in runs_a if r.get("status") in JUDGED], "b": [r for r in runs_b if r.get("status") in JUDGED]}
    measured = {"a": [r for r in runs_a if r.get("status") in MEASURED], "b": [r for r in runs_b if r.get("status") in MEASURED]}

    def rate(passed: dict[str, int], runs: dict[str, int]) -> dict[str, Any]:
        return {
            "a": {"passed": passed["a"], "runs": runs["a"]},
            "b": {"passed": passed["b"], "runs": runs["b"]},
            "test": fisher(passed["a"], runs["a"], passed["b"], runs["b"], alpha),
        }

    verdict = rate(
        {s: sum(r.get("status") == "PASS" for r in judged[s]) for s in "ab"}, {s: len(judged[s]) for s in "ab"}
    )

    # Expectations and figures in the order the runs list them (A's first, then B's own).
    exp_names: list[str] = []
    fig_keys: list[tuple[str, str]] = []
    ok: dict[str, dict[str, list[bool]]] = {}
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    for side in "ab":
        for r in measured[side]:
            for e in r.get("expectations") or []:
                name = str(e.get("name"))
                if name not in ok:
                    exp_names.append(name)
                    ok[name] = {"a": [], "b": []}
                if e.get("status") in JUDGED:  # an INCONCLUSIVE expectation is neither
                    ok[name][side].append(e.get("status") == "PASS")
                for k, v in (e.get("figures") or {}).items():
                    if not _numeric(v):
                        continue
                    key = (name, str(k))
                    if key not in values:
                        fig_keys.append(key)
                        values[key] = {"a": [], "b": []}
                    values[key][side].append(float(v))
    expectations = [
        {"name": n, **rate({s: sum(ok[n][s]) for s in "ab"}, {s: len(ok[n][s]) for s in "ab"})} for n in exp_names
    ]
    figures: list[dict[str, Any]] = []
    for name, fig in fig_keys:
        va, vb = values[(name, fig)]["a"], values[(name, fig)]["b"]
        sa, sb = summary(va), summary(vb)
        figures.append({
            "expectation": name, "figure": fig, "a": sa, "b": sb,
            "change_pct": change_pct(sa["mean"], sb["mean"]), "test": welch(va, vb, alpha),
        })  # fmt: skip
    family = holm([f["test"] for f in figures if isinstance(f["test"], dict)], alpha)
    rejudged = [
        {"side": side, "run_dir": r.get("run_dir"), "stored": str(r["stored_status"]), "now": str(r.get("status"))}
        for side, runs in (("a", runs_a), ("b", runs_b))
        for r in runs
        if r.get("stored_status") is not None
    ]
    # "judged": a live run's verdict (lab compare SCENARIO) is today's by construction.
    sources = sorted({str(r.get("verdict_source") or "judged") for r in [*runs_a, *runs_b]})
    not_judged = [
        {"side": side, "run_dir": r.get("run_dir"), "status": str(r.get("status")), "message": str(r.get("message") or "")}
        for side, runs in (("a", runs_a), ("b", runs_b))
        for r in runs
        if r.get("status") not in JUDGED
    ]
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "scenario": scenario,
        "topology": topology,
        "alpha": alpha,
        "interleaved": interleaved,
        "sides": {"a": _side("A", runs_a), "b": _side("B", runs_b)},
        "verdict": verdict,
        "expectations": expectations,
        "figures": figures,
        "not_judged": not_judged,
        "verdicts": {"source": sources, "changed": rejudged},
        "correction": {"method": "holm", "over": "figures", "tests": family},
    }


def check_document(doc: Any, where: str = "the comparison") -> dict[str, Any]:
    """*doc* is a comparison document this lab can read, or a UserError says why (for
    readers of ``lab compare --json``'s output)."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise UserError(f"{where}: not a lab compare document (no \"schema\": \"{SCHEMA}\")")
    v = doc.get("version")
    if not isinstance(v, int) or v < 1:
        raise UserError(f"{where}: field 'version' must be a positive integer, got {v!r}")
    if v > VERSION:
        raise UserError(f"{where}: written by a newer lab (compare version {v}; this lab reads up to {VERSION})")
    return doc
