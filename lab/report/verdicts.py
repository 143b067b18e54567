"""A run's expectations and their verdicts as one table, then what each one that did
not pass says (its cause, why, its evidence): drawn the same way by ``lab run`` (on the
terminal, through rich) and ``lab report render text`` (plain ASCII for a mail), from
the expectations as lab.scenario.Expectation objects or their results.json dicts.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

HEADERS = ["expectation", "result", "figures"]
MAX_EVIDENCE = 12  # evidence lines shown under an expectation; the rest are in results.json
SHOWN = ("FAIL", "INCONCLUSIVE")  # the statuses whose reasons follow the table


def _dict(e: Any) -> Mapping[str, Any]:
    return e.to_dict() if hasattr(e, "to_dict") else e


def fig(v: Any) -> str:
    """A figure in a table cell: 4 significant digits."""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return str(v)


def figures(e: Any) -> str:
    f = _dict(e).get("figures") or {}
    return "  ".join(f"{k}={fig(v)}" for k, v in f.items()) if isinstance(f, Mapping) else ""


def rows(expectations: Iterable[Any]) -> list[list[str]]:
    """[name, status, figures] for each expectation."""
    return [[str(d.get("name", "")), str(d.get("status", "")), figures(d)] for d in map(_dict, expectations)]


def details(expectations: Iterable[Any]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """For each expectation that did not pass: (status, name, [(kind, text)]) where kind is
    "cause" (the emulation decided it), "why", "evidence" or "more" (evidence not shown)."""
    out = []
    for d in map(_dict, expectations):
        if d.get("status") not in SHOWN:
            continue
        lines: list[tuple[str, str]] = []
        if d.get("inconclusive"):
            lines.append(("cause", f"cause: {d['inconclusive']}"))
        elif d.get("note"):
            lines.append(("why", f"why: {d['note']}"))
        ev = [str(x) for x in d.get("evidence") or []]
        lines += [("evidence", x) for x in ev[:MAX_EVIDENCE]]
        if len(ev) > MAX_EVIDENCE:
            lines.append(("more", f"... {len(ev) - MAX_EVIDENCE} more in results.json"))
        out.append((str(d.get("status", "")), str(d.get("name", "")), lines))
    return out


# ---- plain text -----------------------------------------------------------------------------------


def ascii_table(headers: list[str], rows: list[list[str]], widths: list[int], right: tuple[int, ...] = ()) -> list[str]:
    """A plain ASCII table whose columns are *widths* wide (cells wrap inside them)."""
    def line(cells: list[str]) -> list[str]:
        wrapped = [textwrap.wrap(c, w, break_on_hyphens=False) or [""] for c, w in zip(cells, widths, strict=True)]
        out = []
        for i in range(max(map(len, wrapped))):
            parts = []
            for j, (col, w) in enumerate(zip(wrapped, widths, strict=True)):
                cell = col[i] if i < len(col) else ""
                parts.append(cell.rjust(w) if j in right else cell.ljust(w))
            out.append("  ".join(parts).rstrip())
        return out

    return [*line(headers), "  ".join("-" * w for w in widths), *(x for r in rows for x in line(r))]


def text(expectations: Iterable[Any], width: int = 80) -> list[str]:
    """The table and the reasons as lines of at most *width* columns."""
    exps = [_dict(e) for e in expectations]
    wide = any(e.get("status") == "INCONCLUSIVE" for e in exps)
    out = ascii_table(HEADERS, rows(exps), [32, 12, 32] if wide else [36, 6, 34])
    for status, name, lines in details(exps):
        out += ["", *textwrap.wrap(f"{status} {name}", width)]
        for kind, x in lines:
            if kind == "more":
                out.append(f"  {x}")
            else:
                out += textwrap.wrap(x, width, initial_indent="  ", subsequent_indent="    ") or [""]
    return out


# ---- the terminal ---------------------------------------------------------------------------------


def mark(status: str) -> str:
    """*status* in rich markup: green PASS, yellow INCONCLUSIVE, red otherwise."""
    return f"[{ {'PASS': 'green', 'INCONCLUSIVE': 'yellow'}.get(status, 'red') }]{status}[/]"


def show(console: Any, expectations: Iterable[Any], title: str) -> None:
    """The table and the reasons on a rich *console* (lab run, lab recheck)."""
    # rich is imported here, not at the top: the plain-text report (a mail, a CI log)
    # never loads it.
    # deferred: CLI start (rich)
    from rich.markup import escape
    from rich.table import Table

    expectations = list(expectations)
    t = Table(title=title, title_justify="left")
    for h in HEADERS:
        t.add_column(h)
    for name, status, figs in rows(expectations):
        t.add_row(escape(name), mark(status), escape(figs))
    console.print(t)
    for status, name, lines in details(expectations):
        console.print(f"{mark(status)} {escape(name)}")
        for kind, x in lines:
            if kind == "evidence":
                console.print(f"  {x}", markup=False, highlight=False)
            else:
                console.print(f"  {escape(x)}")
