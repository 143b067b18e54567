"""A comparison document (lab.compare) as text that pastes into a mail: plain ASCII,
at most 80 columns, laid out like the A/B tables of the seed posts (001: one block of
Min / Max / Avg / StdDev per kernel, the second with %Change; 002: baseline against
patched with the change in brackets).  A pure function: no files, no terminal."""

from __future__ import annotations

import textwrap
from typing import Any

WIDTH = 80
_NAME = 22  # the figure column
_NUM = 9  # each number column


def num(v: float | None) -> str:
    """A figure in at most 8 columns, so a column of 9 always keeps a space before it:
    whole numbers (and anything from 10^4 up, rounded) as integers, else 4 significant
    digits, fewer when that is too wide.  (A mean of 111793.4 printed as '1.118e+05'
    ran into the maximum before it.)"""
    if v is None:
        return "-"
    if abs(v) < 1e8 and (float(v).is_integer() or abs(v) >= 1e4):
        return str(round(v))
    s = ""
    for f in (".4g", ".3g", ".2g", ".1e", ".0e"):
        s = f"{v:{f}}"
        if len(s) < _NUM:
            break
    return s


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def pct_col(v: float | None) -> str:
    """pct() in at most 8 columns, for the text table, as num(): a stable_after_s of
    0.0016 s against 0.599 s (+37350.0%) ran into the standard deviation before it."""
    if v is None:
        return "-"
    for f in (".1f", ".0f", ".0e"):
        s = f"{v:+{f}}%"
        if len(s) < _NUM:
            break
    return s


def p_text(test: dict[str, Any]) -> str:
    """The p column: the p-value and a mark, or why there is none."""
    res = test.get("result")
    p = test.get("p")
    if res == "too few runs":
        return "too few"
    if res == "identical":
        return "same"
    if p is None:
        return "-"
    return f"{p:.2g}" + (" *" if res == "significant" else "")


def _ascii(s: str) -> str:
    return s.encode("ascii", "replace").decode("ascii")


def _wrap(s: str, indent: str = "", width: int = WIDTH) -> list[str]:
    return textwrap.wrap(_ascii(s), width=width, initial_indent=indent, subsequent_indent=indent + "  ") or [indent]


def _clip(s: str, n: int) -> str:
    s = _ascii(s)
    return s if len(s) <= n else s[: n - 1] + "~"


def _who(side: dict[str, Any]) -> str:
    """A side's kernel, and its sched_ext scheduler when the side names one."""
    return side["kernel"] + (f" under {side['scheduler']}" if side.get("scheduler") else "")


def text(doc: dict[str, Any]) -> str:
    """The whole comparison: header, pass rates, then each kernel's figures."""
    a, b = doc["sides"]["a"], doc["sides"]["b"]
    alpha = doc.get("alpha", 0.05)
    out: list[str] = []
    out += _wrap(f"lab compare {doc['scenario']} --topology {doc['topology']}")
    for s in (a, b):
        out += _wrap(f"{s['label']}: {_who(s)} ({s['runs']} runs: {s['passed']} PASS, {s['failed']} FAIL"
                     + (f", {s['not_judged']} not judged)" if s["not_judged"] else ")"))  # fmt: skip
    order = "runs interleaved A B A B ...; " if doc.get("interleaved") else ""
    out += _wrap(f"{order}p: Fisher's exact test (pass rates), Welch's t-test (figures); "
                 f"* = significant at {alpha:g}; change = B against A")  # fmt: skip
    out.append("")

    # Pass rates: expectation names are long, so they get the width and wrap.
    name_w = WIDTH - 3 * 8 - 10
    out.append(f"{'pass rate':<{name_w}}{'A':>8}{'B':>8}  {'p':<8}")

    def rate_row(name: str, r: dict[str, Any]) -> None:
        lines = textwrap.wrap(_ascii(name), width=name_w - 1, subsequent_indent="  ") or [""]
        ra, rb = r["a"], r["b"]
        cells = f"{ra['passed']}/{ra['runs']}".rjust(8) + f"{rb['passed']}/{rb['runs']}".rjust(8)
        out.append(f"{lines[0]:<{name_w}}{cells}  {p_text(r['test'])}")
        out.extend(lines[1:])

    rate_row("verdict", doc["verdict"])
    for e in doc["expectations"]:
        rate_row(e["name"], e)
    out.append("")

    for side, label in (("a", a), ("b", b)):
        out += _wrap(f"{label['label']}: {_who(label)}")
        head = f"{'figure':<{_NAME}}" + "".join(f"{h:>{_NUM}}" for h in ("Min", "Max", "Avg", "StdDev"))
        if side == "b":
            head += f"{'%Change':>{_NUM}}  p"
        out.append(head)
        exp = None
        for f in doc["figures"]:
            st = f[side]
            if f["expectation"] != exp:
                exp = f["expectation"]
                out += _wrap(exp)
            row = f"  {_clip(f['figure'], _NAME - 3):<{_NAME - 2}}" + "".join(
                f"{num(st[k]):>{_NUM}}" for k in ("min", "max", "mean", "stddev")
            )
            if side == "b":
                row += f"{pct_col(f['change_pct']):>{_NUM}}  {p_text(f['test'])}"
            out.append(row.rstrip())
        out.append("")

    corr = doc.get("correction") if isinstance(doc.get("correction"), dict) else None
    if corr and corr.get("tests"):
        out += _wrap(f"* significant at {doc.get('alpha', 0.05):g} after Holm's correction over the {corr['tests']} "
                     "figures tested (p shown uncorrected)")  # fmt: skip
    few = sorted({t["why"] for t in _tests(doc) if t.get("result") == "too few runs"})
    if few:
        out.append("too few runs to tell:")
        for w in few:
            out += _wrap(w, "  ")
    got = doc.get("verdicts")
    verdicts: dict[str, Any] = got if isinstance(got, dict) else {}
    if verdicts.get("changed"):
        out.append("verdicts re-judged by the current scenario, differing from the stored ones:")
        for r in verdicts["changed"]:
            out += _wrap(f"{r['side'].upper()} stored {r['stored']}, now {r['now']} ({r['run_dir']})", "  ")
    stored = [s for s in verdicts.get("source", []) if s.startswith("stored")]
    if stored:
        out += _wrap("verdicts as stored, not re-judged: " + "; ".join(stored))
    if doc.get("not_judged"):
        if any(r["status"] == "INCONCLUSIVE" for r in doc["not_judged"]):  # its figures are in the tables
            out.append("not judged (in no pass rate; an INCONCLUSIVE run's figures are in the tables):")
        else:
            out.append("not judged (counted on no side):")
        for r in doc["not_judged"]:
            out += _wrap(f"{r['side'].upper()} {r['status']}: {r['message']} ({r['run_dir']})", "  ")
    while out and not out[-1]:
        out.pop()
    return "\n".join(line.rstrip() for line in out) + "\n"


def _tests(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [doc["verdict"]["test"], *(e["test"] for e in doc["expectations"]), *(f["test"] for f in doc["figures"])]
