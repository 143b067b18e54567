"""A run's report as text for a mail (at most 80 columns), markdown, or one
self-contained HTML page (inline CSS and SVG, no script, nothing fetched).

Pure functions of a ``document.RunDoc``: no files, no processes (golden-file tests in
tests/unit/test_report_render.py; ``LAB_REGEN=1`` rewrites them)."""

from __future__ import annotations

import math
import re
import textwrap
from html import escape
from typing import Any

from .. import levels
from ..topology import Topology
from . import verdicts
from .compare import num, p_text, pct
from .compare import text as compare_text_of
from .document import MIGRATION_CLASSES, CompareDoc, RunDoc, Timeline
from .verdicts import ascii_table, figures

WIDTH = 80  # a mail's line
FORMATS = ("text", "markdown", "html")


def render(doc: RunDoc | CompareDoc, fmt: str) -> str:
    if isinstance(doc, CompareDoc):
        return {"text": compare_text, "markdown": compare_markdown, "html": compare_html}[fmt](doc)
    return {"text": text, "markdown": markdown, "html": html}[fmt](doc)


# ---- shared words ------------------------------------------------------------------------------


def _level_counts(t: Topology, smallest: str) -> list[str]:
    """"2 sockets", "4 nodes", ... for each level the machine has, large to small, down to
    *smallest* (lab.levels' words)."""
    out = []
    for x in reversed(levels.GROUPED):
        if x.name in t.levels:
            out.append(f"{len(t.groups(x.name))} {x.plural}")
        if x.name == smallest:
            break
    return out


def machine_line(t: Topology) -> str:
    """The machine in one line: name, CPU, and the count at each level."""
    fam = f" family {t.family:#x}" if t.family is not None else ""
    parts = _level_counts(t, "core")
    parts += [f"{t.n_cpus} CPUs" + (f" (SMT{t.threads_per_core})" if t.smt else "")]
    return f"{t.name} ({t.vendor}{fam}, {t.arch}): " + ", ".join(parts)


def machine_counts(t: Topology) -> str:
    """The machine in one line of a mail: its name and the count at each level."""
    parts = [t.name, *_level_counts(t, "cluster")]
    parts.append(f"{t.n_cpus} CPUs" + (f" (SMT{t.threads_per_core})" if t.smt else ""))
    return ", ".join(parts)


def cpu_line(t: Topology) -> str:
    fam = f" family {t.family:#x}" if t.family is not None else ""
    return f"{t.vendor}{fam}, {t.arch}" + (f" ({t.model})" if t.model else "")


def kernel_line(k: dict[str, Any]) -> str:
    out = f"{k.get('name', '?')} {k.get('release', '?')}"
    if k.get("id") and k.get("id") != k.get("name"):
        out += f" (id {str(k['id'])[:24]})"
    if k.get("git_describe"):
        out += f", tree at {k['git_describe']}, uncommitted diff {k.get('diff_sha256', '?')}"
    return out


def verdict_line(doc: RunDoc) -> str:
    exps = doc.expectations
    failed = sum(e.get("status") == "FAIL" for e in exps)
    note = f" [{doc.verdict_note}]" if doc.verdict_note else ""
    if doc.status in ("PASS", "FAIL"):
        return f"{doc.status} ({failed} of {len(exps)} expectations failed){note}"
    return (f"{doc.status}: {doc.message}" if doc.message else doc.status) + note


def _migration_rows(doc: RunDoc) -> list[tuple[str, str]]:
    m = doc.migrations
    return [(k, str(m.get(k, 0))) for k in (*MIGRATION_CLASSES, "total")]


# ---- text -------------------------------------------------------------------------------------


def _field(label: str, value: str) -> list[str]:
    """'Label:  value', wrapped at WIDTH with the value's column kept."""
    pad = " " * 9
    return textwrap.wrap(value, WIDTH, initial_indent=f"{label + ':':<9}", subsequent_indent=pad,
                         break_long_words=True, break_on_hyphens=False) or [label + ":"]  # fmt: skip


def _command(cmd: str) -> list[str]:
    """The command as shell lines of at most WIDTH, continued with a backslash."""
    words = cmd.split(" ")
    lines, cur = [], "  "
    for w in words:
        if len(cur) + len(w) + 3 > WIDTH and cur.strip():
            lines.append(cur.rstrip() + " \\")
            cur = "      "
        cur += w + " "
    lines.append(cur.rstrip())
    return [ln[:WIDTH] for ln in lines]


def text(doc: RunDoc) -> str:
    out = [f"lab run {doc.scenario} on {doc.topology.name}: {doc.status}", ""]
    if doc.fidelity is not None:
        out += [*doc.fidelity.text(WIDTH), ""]
    out += _field("Machine", machine_counts(doc.topology))
    out += _field("CPU", cpu_line(doc.topology))
    out += _field("Kernel", kernel_line(doc.kernel))
    out += _field("QEMU", f"{doc.qemu_version}, {doc.accel}" + (f" ({doc.accel_reason})" if doc.accel_reason else ""))
    out += _field("Verdict", verdict_line(doc))
    out += ["Command:", *_command(doc.command or "?"), ""]
    if doc.expectations:
        out += verdicts.text(doc.expectations, WIDTH)
        out.append("")
    if doc.migrations:
        out += ["Migrations (sched_migrate_task, every task), by the level the CPUs share:"]
        out += ascii_table(["class", "count"], [list(r) for r in _migration_rows(doc)], [12, 8], right=(1,))
        out.append("")
    for n in doc.notes:
        out += textwrap.wrap(f"note: {n}", WIDTH, subsequent_indent="  ")
    return "\n".join(ln.rstrip() for ln in out).rstrip() + "\n"


# ---- markdown ---------------------------------------------------------------------------------


def _md(s: str) -> str:
    """Text for a markdown line or table cell: a run's own strings (expectation names,
    notes, a guest's bytes) never become HTML, a table column or a heading."""
    return escape(s, quote=False).replace("|", "\\|").replace("\n", " ")


def _fence(lines: list[str]) -> list[str]:
    """*lines* in a code fence longer than any run of backticks in them."""

    longest = max((len(m) for ln in lines for m in re.findall(r"`+", ln)), default=0)
    f = "`" * max(3, longest + 1)
    return [f, *lines, f]


def markdown(doc: RunDoc) -> str:
    out = [
        f"## lab run `{doc.scenario}` on `{doc.topology.name}`: **{doc.status}**", "",
        *([f"- **Fidelity, {k}**: {_md(v)}" for k, v in doc.fidelity.fields()] + [""] if doc.fidelity is not None else []),
        f"- **Machine**: {_md(machine_line(doc.topology))}",
        f"- **Kernel**: {_md(kernel_line(doc.kernel))}",
        f"- **QEMU**: {doc.qemu_version}, {doc.accel}" + (f" ({_md(doc.accel_reason)})" if doc.accel_reason else ""),
        f"- **Verdict**: {_md(verdict_line(doc))}", "",
        *_fence([doc.command or "?"]), "",
    ]  # fmt: skip
    if doc.expectations:
        out += ["| expectation | result | figures |", "|---|---|---|"]
        out += [f"| {_md(str(e.get('name', '')))} | {e.get('status', '')} | {_md(figures(e))} |" for e in doc.expectations]
        out.append("")
        for e in doc.expectations:
            if e.get("status") in ("FAIL", "INCONCLUSIVE"):
                why = e.get("inconclusive") or e.get("note")
                out.append(f"**{e.get('status')}** {_md(str(e.get('name')))}" + (f": {_md(str(why))}" if why else ""))
                ev = [str(x) for x in e.get("evidence") or []][:12]
                if ev:
                    out += ["", *_fence(ev)]
                out.append("")
    if doc.migrations:
        out += ["| migrations | count |", "|---|---:|", *(f"| {k} | {v} |" for k, v in _migration_rows(doc)), ""]
    out += [f"> note: {_md(n)}" for n in doc.notes]
    return "\n".join(out).rstrip() + "\n"


# ---- HTML -------------------------------------------------------------------------------------

# One colour per task (Okabe-Ito, then Tableau's), grey for the rest.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00",
           "#f0e442", "#8c564b", "#7f7f7f", "#bcbd22", "#17becf", "#9467bd")  # fmt: skip
OTHER = "#c8c8c8"
CLASS_COLOUR = {"same core": "#2ca02c", "same LLC": "#1f77b4", "same node": "#ff7f0e", "cross-node": "#d62728"}
# lstopo's colours for each kind of box, and its names (lab.levels' hwloc types).
BOX_COLOUR = {"machine": "#ffffff", "socket": "#dedede", "node": "#efdfde", "llc": "#ffffff", "cluster": "#e8e8f0", "core": "#bebebe"}
BOX = {x.name: (BOX_COLOUR.get(x.name, "#ffffff"), x.hwloc) for x in levels.LEVELS}
PU = (42, 22)  # a CPU's box
PAD, HEAD, GAP = 5, 16, 5

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:18px 28px}
header h1{margin:0;font-size:20px;font-weight:600}
header .sub{color:#aeb7c7;margin-top:4px;font-size:13px}
.badge{display:inline-block;padding:2px 10px;border-radius:4px;font-weight:700;margin-left:10px;font-size:14px}
.PASS{background:#1a7f37;color:#fff}.FAIL{background:#cf222e;color:#fff}.ERROR,.SKIP,.RUNNING,.INCONCLUSIVE{background:#9a6700;color:#fff}
main{padding:18px 28px;max-width:1500px}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:14px 18px;margin-bottom:18px}
h2{font-size:16px;margin:0 0 10px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;margin:0}
dt{color:#57606a}dd{margin:0}
code,pre{font:12.5px/1.4 "DejaVu Sans Mono",Menlo,Consolas,monospace}
pre{background:#f2f4f7;padding:8px 10px;border-radius:4px;overflow-x:auto;margin:6px 0}
table{border-collapse:collapse}
th,td{border-bottom:1px solid #e3e6ea;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f2f4f7;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.PASS{color:#1a7f37;font-weight:700;background:none}td.FAIL{color:#cf222e;font-weight:700;background:none}td.INCONCLUSIVE{color:#9a6700;font-weight:700;background:none}
.row{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;margin:6px 0;font-size:12.5px}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-2px;margin-right:5px}
.note{color:#57606a;font-size:12.5px}
svg text{font-family:"DejaVu Sans",system-ui,sans-serif}
"""


def _children_key(t: Topology) -> list[str]:
    """The box levels from the largest to the core, as they nest on this machine."""
    return [lv for lv in reversed(t.levels) if lv != "machine"]


def _tree(t: Topology, cpus: list, order: list[str]) -> list[tuple[str, int, Any]]:
    """cpus grouped at order[0], recursively: (level, group id, children or cpus)."""
    if not order:
        return [("cpu", c.id, None) for c in sorted(cpus, key=lambda c: c.index)]
    lv = order[0]
    groups: dict[int, list] = {}
    for c in sorted(cpus, key=lambda c: c.index):
        groups.setdefault(levels.group_key(lv, c), []).append(c)
    return [(lv, gid, _tree(t, cs, order[1:])) for gid, cs in groups.items()]


def _layout(node: tuple[str, int, Any]) -> tuple[float, float, list]:
    """Size of a box and its children's offsets: children in the grid whose shape is
    closest to 2:1 landscape (as lstopo keeps a machine readable)."""
    level, _, kids = node
    if level == "cpu":
        return PU[0], PU[1], []
    sizes = [_layout(k) for k in kids]
    n = len(sizes)
    best = None
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        colw = [max((sizes[i][0] for i in range(c, n, cols)), default=0) for c in range(cols)]
        rowh = [max(sizes[i][1] for i in range(r * cols, min(n, (r + 1) * cols))) for r in range(rows)]
        w = sum(colw) + GAP * (cols - 1) + 2 * PAD
        h = sum(rowh) + GAP * (rows - 1) + 2 * PAD + HEAD
        score = abs(math.log((w / h) / 2.2)) if level != "core" else (0 if rows == 1 else 1)
        if best is None or score < best[0] - 1e-9:
            offs = []
            for i in range(n):
                r, c = divmod(i, cols)
                offs.append((PAD + sum(colw[:c]) + GAP * c, HEAD + PAD + sum(rowh[:r]) + GAP * r))
            best = (score, w, h, list(zip(offs, sizes, strict=True)))
    assert best is not None
    return best[1], best[2], best[3]


def _draw(node, x: float, y: float, out: list[str], t: Topology) -> None:
    level, gid, kids = node
    w, h, placed = _layout(node)
    if level == "cpu":
        c = t.cpu(gid)
        out.append(f'<rect class="cpu" data-cpu="{gid}" x="{x:.0f}" y="{y:.0f}" width="{w}" height="{h}" rx="2" '
                   f'fill="#fff" stroke="#555"><title>CPU {gid}: core {c.core}, LLC {c.llc}, node {c.node}, '
                   f'socket {c.socket}</title></rect>'
                   f'<text x="{x + w / 2:.0f}" y="{y + 15:.0f}" font-size="11" text-anchor="middle">P#{gid}</text>')  # fmt: skip
        return
    fill, label = BOX[level]
    if level == "node":
        i = t.node_ids.index(gid)
        label = f"{label} P#{gid} ({t.memory_mb[i] // 1024 if t.memory_mb[i] >= 1024 else t.memory_mb[i]}" \
                f"{'GB' if t.memory_mb[i] >= 1024 else 'MB'})"  # fmt: skip
    elif level in ("socket",):
        label = f"{label} P#{gid}"
    elif level == "llc":
        label = f"L3 (LLC #{gid})"
    elif level == "core":
        label = f"Core {gid}"
    else:  # a cluster, or any other level of lab.levels: its hwloc name and number
        label = f"{label} #{gid}"
    out.append(f'<g class="{level}"><rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="3" fill="{fill}" '
               f'stroke="#777"/><text x="{x + 4:.0f}" y="{y + 12:.0f}" font-size="{9 if level == "core" else 11}">{escape(label)}</text>')  # fmt: skip
    for kid, ((dx, dy), _size) in zip(kids, placed, strict=True):
        _draw(kid, x + dx, y + dy, out, t)
    out.append("</g>")


def topology_svg(t: Topology) -> str:
    """The machine drawn as lstopo draws one: Machine > Package > NUMANode > L3 >
    (Cluster >) Core > PU, one box per CPU (class "cpu")."""
    root = ("machine", 0, _tree(t, list(t.cpus), _children_key(t)))
    w, h, _ = _layout(root)
    out: list[str] = []
    _draw_machine(root, out, t)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="topology" width="{w:.0f}" height="{h:.0f}" '
            f'viewBox="0 0 {w:.0f} {h:.0f}" role="img" aria-label="topology of {escape(t.name)}">' + "".join(out) + "</svg>")  # fmt: skip


def _draw_machine(root, out: list[str], t: Topology) -> None:
    _, _, kids = root
    w, h, placed = _layout(root)
    out.append(f'<rect x="0" y="0" width="{w:.0f}" height="{h:.0f}" fill="#fff" stroke="#333"/>'
               f'<text x="5" y="12" font-size="11">Machine ({escape(t.name)}, {t.n_cpus} CPUs)</text>')  # fmt: skip
    for kid, ((dx, dy), _size) in zip(kids, placed, strict=True):
        _draw(kid, dx, dy, out, t)


def distances_html(t: Topology) -> str:
    head = "".join(f"<th>{n}</th>" for n in t.node_ids)
    rows = []
    for i, n in enumerate(t.node_ids):
        cells = "".join(
            f'<td class="n" style="background:{_heat(d, t)}">{d}</td>' for d in t.distances[i]
        )
        rows.append(f"<tr><th>{n}</th>{cells}</tr>")
    return f'<table class="distances"><tr><th>node</th>{head}</tr>{"".join(rows)}</table>'


def _heat(d: int, t: Topology) -> str:
    lo = min(min(r) for r in t.distances)
    hi = max(max(r) for r in t.distances)
    f = 0 if hi == lo else (d - lo) / (hi - lo)
    return f"rgba(214,39,40,{0.05 + 0.35 * f:.2f})"


def timeline_svg(t: Topology, tl: Timeline) -> str:
    """One row per CPU in topology order (LLCs and nodes separated), time across, a
    box per stretch a task ran (or was placed) there, a mark per migration by class."""
    order = sorted(t.cpus, key=lambda c: c.index)
    n = len(order)
    rowh = max(5.0, min(20.0, 640.0 / n))
    left, top, plot_w = 150.0, 22.0, 1000.0
    gaps: list[float] = []  # extra space before each row
    y_of: dict[int, float] = {}
    y = top
    prev = None
    seps: list[tuple[float, str, str]] = []  # (y, level, label)
    for c in order:
        if prev is not None and (c.node != prev.node or c.socket != prev.socket):
            y += 8
            seps.append((y - 4, "node", ""))
        elif prev is not None and c.llc != prev.llc:
            y += 3
            seps.append((y - 1.5, "llc", ""))
        y_of[c.id] = y
        gaps.append(y)
        y += rowh
        prev = c
    height = y + 30
    span = max(tl.end - tl.start, 1e-9)

    def X(ts: float) -> float:
        return left + (ts - tl.start) / span * plot_w

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{left + plot_w + 20:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {left + plot_w + 20:.0f} {height:.0f}">']  # fmt: skip
    out.append(f'<rect x="{left}" y="{top - 2}" width="{plot_w}" height="{y - top + 4:.0f}" fill="#fbfbfc" stroke="#d0d4da"/>')
    # Group labels: node and LLC beside the rows they hold.
    for level in ("node", "llc"):
        groups: dict[int, list[float]] = {}
        for c in order:
            groups.setdefault(getattr(c, level), []).append(y_of[c.id])
        for gid, ys in groups.items():
            lx = 4 if level == "node" else 62
            out.append(f'<text x="{lx}" y="{(min(ys) + max(ys) + rowh) / 2 + 4:.1f}" font-size="11" fill="#444">'
                       f'{"node" if level == "node" else "LLC"} {gid}</text>')  # fmt: skip
            out.append(f'<line x1="{lx + 50 if level == "node" else lx + 42}" y1="{min(ys) + 1:.1f}" '
                       f'x2="{lx + 50 if level == "node" else lx + 42}" y2="{max(ys) + rowh - 1:.1f}" stroke="#999"/>')  # fmt: skip
    if rowh >= 9:
        for c in order:
            out.append(f'<text x="{left - 6}" y="{y_of[c.id] + rowh - 2.5:.1f}" font-size="{min(10, rowh - 1):.0f}" '
                       f'text-anchor="end" fill="#666">{c.id}</text>')  # fmt: skip
    for sy, level, _ in seps:
        colour, width = ("#8a93a0", 1.2) if level == "node" else ("#e0e3e8", 0.8)
        out.append(f'<line x1="{left}" y1="{sy:.1f}" x2="{left + plot_w}" y2="{sy:.1f}" stroke="{colour}" stroke-width="{width}"/>')
    names = dict(enumerate(tl.tasks))
    for s in tl.segments:
        if s.cpu not in y_of:
            continue
        colour = PALETTE[s.task % len(PALETTE)] if s.task >= 0 else OTHER
        x0, x1 = X(s.start), X(s.end)
        who = f"{names[s.task][1]}-{names[s.task][0]}" if s.task >= 0 else "other task"
        out.append(f'<rect class="seg" x="{x0:.1f}" y="{y_of[s.cpu] + 1:.1f}" width="{max(x1 - x0, 0.6):.1f}" '
                   f'height="{rowh - 2:.1f}" fill="{colour}"><title>{escape(who)} on CPU {s.cpu}: '
                   f'{s.start - tl.start:.6f}-{s.end - tl.start:.6f} s</title></rect>')  # fmt: skip
    for m in tl.marks:
        if m.src not in y_of or m.dst not in y_of:
            continue
        colour = CLASS_COLOUR[m.klass]
        x = X(m.ts)
        y0, y1 = y_of[m.src] + rowh / 2, y_of[m.dst] + rowh / 2
        who = f"{names[m.task][1]}-{names[m.task][0]}" if m.task >= 0 else "a task"
        out.append(f'<g class="mig" data-class="{m.klass}"><title>{escape(who)}: CPU {m.src} -&gt; {m.dst} ({m.klass}) at '
                   f'{m.ts - tl.start:.6f} s</title><line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" '
                   f'stroke="{colour}" stroke-width="2" stroke-dasharray="4 2"/>'
                   f'<circle cx="{x:.1f}" cy="{y0:.1f}" r="2.5" fill="{colour}"/>'
                   f'<path d="M{x - 7:.1f},{y1 - 7 if y1 >= y0 else y1 + 7:.1f} L{x + 7:.1f},{y1 - 7 if y1 >= y0 else y1 + 7:.1f} '
                   f'L{x:.1f},{y1:.1f} Z" fill="{colour}" stroke="#fff" stroke-width="0.8"/></g>')  # fmt: skip
    # Time axis.
    step = _nice_step(span / 8)
    k = 0
    while k * step <= span + 1e-12:
        x = X(tl.start + k * step)
        out.append(f'<line x1="{x:.1f}" y1="{y + 2:.1f}" x2="{x:.1f}" y2="{y + 7:.1f}" stroke="#666"/>'
                   f'<text x="{x:.1f}" y="{y + 19:.1f}" font-size="11" text-anchor="middle" fill="#444">{_secs(k * step)}</text>')  # fmt: skip
        k += 1
    out.append("</svg>")
    return "".join(out)


def _nice_step(x: float) -> float:
    if x <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * e >= x:
            return m * e
    return 10 * e


def _secs(s: float) -> str:
    if s == 0:
        return "0"
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def _dl(items: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _page(title: str, extra_css: str, body: str) -> str:
    """One self-contained page: inline CSS, and a Content-Security-Policy that lets the
    browser load nothing else (no script, no network)."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>{escape(title)}</title><style>{CSS}{extra_css}</style></head>
<body>{body}</body></html>
"""


def html(doc: RunDoc) -> str:
    t = doc.topology
    info = _dl([
        ("Machine", escape(machine_line(t))),
        ("Kernel", escape(kernel_line(doc.kernel))),
        ("QEMU", escape(f"{doc.qemu_version}, {doc.accel}") + (f' <span class="note">({escape(doc.accel_reason)})</span>' if doc.accel_reason else "")),
        ("Verdict", escape(verdict_line(doc))),
        ("Command", f"<pre>{escape(doc.command or '?')}</pre>"),
    ])  # fmt: skip
    exp_rows = []
    for e in doc.expectations:
        st = str(e.get("status", ""))
        detail = ""
        if st in ("FAIL", "INCONCLUSIVE"):
            ev = [str(x) for x in e.get("evidence") or []][:12]
            why = ("cause: " + str(e["inconclusive"])) if e.get("inconclusive") else ("why: " + str(e["note"])) if e.get("note") else ""
            note = f'<div class="note">{escape(why)}</div>' if why else ""
            detail = note + (f"<pre>{escape(chr(10).join(ev))}</pre>" if ev else "")
        exp_rows.append(f'<tr><td>{escape(str(e.get("name", "")))}{detail}</td><td class="{escape(st)}">{escape(st)}</td>'
                        f"<td><code>{escape(figures(e))}</code></td></tr>")  # fmt: skip
    exps = (
        f'<table class="expectations"><tr><th>expectation</th><th>result</th><th>figures</th></tr>{"".join(exp_rows)}</table>'
        if exp_rows else f'<p>{escape(doc.message or "no expectations were judged")}</p>'
    )  # fmt: skip
    migr = ""
    if doc.migrations:
        rows = "".join(
            f'<tr><td><span class="sw" style="background:{CLASS_COLOUR.get(k, "#fff")}"></span>{escape(k)}</td><td class="n">{v}</td></tr>'
            for k, v in _migration_rows(doc)
        )
        migr = f'<table class="migrations"><tr><th>migration class</th><th>count</th></tr>{rows}</table>'
    tl = doc.timeline
    if tl is not None and tl.segments:
        legend = "".join(
            f'<span><span class="sw" style="background:{PALETTE[i % len(PALETTE)]}"></span>{escape(comm)}-{pid}</span>'
            for i, (pid, comm) in enumerate(tl.tasks)
        )
        if any(s.task < 0 for s in tl.segments):
            legend += f'<span><span class="sw" style="background:{OTHER}"></span>other tasks</span>'
        classes = "".join(f'<span><span class="sw" style="background:{c}"></span>{escape(k)} migration</span>' for k, c in CLASS_COLOUR.items())
        what = ("who ran on each CPU (sched_switch)" if tl.source == "sched_switch"
                else "where each task was placed: its sched_wakeup_new target, then each sched_migrate_task")  # fmt: skip
        dropped = f"; {tl.dropped} stretches under a pixel merged or left out" if tl.dropped else ""
        timeline = (f'<p class="note">{escape(what)}; {_secs(tl.end - tl.start)} of trace{dropped}. '
                    "Hover a box or a mark for its task and times.</p>"
                    f'<div class="legend">{legend}</div><div class="legend">{classes}</div>{timeline_svg(t, tl)}')  # fmt: skip
    else:
        timeline = '<p class="note">the run has no trace events to draw</p>'
    notes = "".join(f'<p class="note">note: {escape(n)}</p>' for n in doc.notes)
    fid = f'<section class="fidelity"><h2>Fidelity</h2>{_dl([(k.capitalize(), escape(v)) for k, v in doc.fidelity.fields()])}</section>\n' if doc.fidelity is not None else ""
    title = f"lab run {doc.scenario} on {t.name}: {doc.status}"
    return _page(title, "", f"""<header><h1>lab run {escape(doc.scenario)} on {escape(t.name)}<span class="badge {escape(doc.status)}">{escape(doc.status)}</span></h1>
<div class="sub">{escape(kernel_line(doc.kernel))} &middot; {escape(doc.accel)} &middot; {escape(doc.source)}</div></header>
<main>
{fid}<section><h2>Run</h2>{info}</section>
<section><h2>Verdict</h2>{exps}{notes}</section>
<section><h2>Placement timeline</h2>{timeline}</section>
<section><h2>Migrations</h2><div class="row">{migr or '<p class="note">no migrations traced</p>'}</div></section>
<section><h2>Topology</h2><p class="note">{escape(t.summary())}</p><div class="row"><div>{topology_svg(t)}</div>
<div><h2>Node distances</h2>{distances_html(t)}</div></div></section>
</main>""")


# ---- replay -------------------------------------------------------------------------------------


def replay_table(before: dict[str, Any], after: dict[str, Any], notes: list[str], where: str) -> str:
    """The bundle's verdict and figures next to the replay's, within WIDTH columns."""
    b_exp = {str(e.get("name")): e for e in before.get("expectations") or [] if isinstance(e, dict)}
    a_exp = {str(e.get("name")): e for e in after.get("expectations") or [] if isinstance(e, dict)}
    names = list(b_exp) + [n for n in a_exp if n not in b_exp]
    rows = []
    for n in names:
        b, a = b_exp.get(n, {}), a_exp.get(n, {})
        rows.append([n, f"{b.get('status', '-')} {figures(b)}".strip(), f"{a.get('status', '-')} {figures(a)}".strip()])
    same = before.get("status") == after.get("status")
    out = [f"replay of {before.get('scenario')} on {before.get('topology')}: bundle {before.get('status')}, "
           f"now {after.get('status')} ({'same verdict' if same else 'the verdict differs'})"]  # fmt: skip
    out = [x for line in out for x in textwrap.wrap(line, WIDTH)]
    out += _field("Bundle", f"kernel {before.get('kernel')}, run {before.get('run_dir')}")
    out += _field("Now", f"kernel {after.get('kernel')}, run {after.get('run_dir')}")
    if after.get("status") in ("ERROR", "SKIP") and after.get("message"):
        out += _field("Error", str(after["message"]))
    if rows:
        out += ["", *ascii_table(["expectation", "bundle", "now"], rows, [26, 25, 25])]
    for n in notes:
        out += textwrap.wrap(f"note: {n}", WIDTH, subsequent_indent="  ")
    out += textwrap.wrap(f"bundle opened in {where}", WIDTH)
    return "\n".join(ln.rstrip() for ln in out) + "\n"


# ---- comparisons (lab compare --json) ---------------------------------------------------------


def compare_text(c: CompareDoc) -> str:
    """lab compare's own mail text (lab.report.compare)."""
    return compare_text_of(c.doc)


def _stats(st: dict[str, Any]) -> str:
    if not st or st.get("n", 0) == 0:
        return "-"
    sd = f" ± {num(st['stddev'])}" if st.get("stddev") is not None else ""
    return f"{num(st.get('mean'))}{sd} ({num(st.get('min'))}-{num(st.get('max'))}, n={st.get('n')})"


def _rates(c: CompareDoc) -> list[tuple[str, str, str, str]]:
    d = c.doc
    rows = [("verdict", d["verdict"])] + [(str(e.get("name")), e) for e in d["expectations"]]
    return [(n, f"{r['a']['passed']}/{r['a']['runs']}", f"{r['b']['passed']}/{r['b']['runs']}", p_text(r["test"])) for n, r in rows]


def _figure_rows(c: CompareDoc) -> list[tuple[str, str, str, str, str]]:
    return [
        (f"{f['expectation']}: {f['figure']}", _stats(f["a"]), _stats(f["b"]), pct(f.get("change_pct")), p_text(f["test"]))
        for f in c.doc["figures"]
    ]


def compare_markdown(c: CompareDoc) -> str:
    d = c.doc
    a, b = d["sides"]["a"], d["sides"]["b"]
    out = [f"## lab compare `{d['scenario']}` on `{d['topology']}`", ""]
    if c.topology is not None:
        out.append(f"- **Machine**: {_md(machine_line(c.topology))}")
    for s in (a, b):
        out.append(f"- **{s['label']}**: {_md(str(s['kernel']))}: {s['runs']} runs, {s['passed']} PASS, {s['failed']} FAIL"
                   + (f", {s['not_judged']} not judged" if s.get("not_judged") else ""))  # fmt: skip
    out += ["", f"p: Fisher's exact test (pass rates), Welch's t-test (figures); * = significant at {d.get('alpha', 0.05):g}"
            + (" (figures: after Holm's correction)" if (d.get("correction") or {}).get("tests") else ""), ""]
    out += ["| pass rate | A | B | p |", "|---|---:|---:|---|", *(f"| {_md(n)} | {x} | {y} | {p} |" for n, x, y, p in _rates(c)), ""]
    if d["figures"]:
        out += ["| figure | A mean ± sd (min-max, n) | B mean ± sd (min-max, n) | change | p |", "|---|---|---|---:|---|"]
        out += [f"| {_md(n)} | {x} | {y} | {ch} | {p} |" for n, x, y, ch, p in _figure_rows(c)]
    return "\n".join(out).rstrip() + "\n"


def _side_html(r: RunDoc | None, label: str, kernel: str) -> str:
    head = f"<h2>{escape(label)}: {escape(kernel)}</h2>"
    if r is None:
        return f'<div class="side">{head}<p class="note">no run directory of this side is here to draw</p></div>'
    tl = r.timeline
    body = timeline_svg(r.topology, tl) if tl is not None and tl.segments else '<p class="note">no trace events to draw</p>'
    rows = "".join(f'<tr><td>{escape(k)}</td><td class="n">{v}</td></tr>' for k, v in _migration_rows(r))
    return (f'<div class="side">{head}<p class="note">{escape(r.status)}: one run, {escape(r.source)}</p>'
            f'<div class="scroll">{body}</div><table class="migrations"><tr><th>migration class</th><th>count</th></tr>{rows}</table></div>')  # fmt: skip


def compare_html(c: CompareDoc) -> str:
    d = c.doc
    a, b = d["sides"]["a"], d["sides"]["b"]
    title = f"lab compare {d['scenario']} on {d['topology']}"
    cards = "".join(
        f'<div class="card"><div class="lbl">{escape(s["label"])}</div><div class="k">{escape(str(s["kernel"]))}</div>'
        f'<div>{s["passed"]} PASS, {s["failed"]} FAIL of {s["runs"]} runs</div></div>'
        for s in (a, b)
    )
    rates = "".join(f"<tr><td>{escape(n)}</td><td class=\"n\">{x}</td><td class=\"n\">{y}</td><td>{escape(p)}</td></tr>" for n, x, y, p in _rates(c))
    figs = "".join(
        f"<tr><td>{escape(n)}</td><td>{escape(x)}</td><td>{escape(y)}</td><td class=\"n\">{escape(ch)}</td><td>{escape(p)}</td></tr>"
        for n, x, y, ch, p in _figure_rows(c)
    )
    machine = ""
    if c.topology is not None:
        machine = (f'<section><h2>Topology</h2><p class="note">{escape(machine_line(c.topology))}</p><div class="row">'
                   f"<div>{topology_svg(c.topology)}</div><div><h2>Node distances</h2>{distances_html(c.topology)}</div></div></section>")  # fmt: skip
    sides = _side_html(c.runs[0], "A", str(a["kernel"])) + _side_html(c.runs[1], "B", str(b["kernel"]))
    legend = "".join(f'<span><span class="sw" style="background:{col}"></span>{escape(k)} migration</span>' for k, col in CLASS_COLOUR.items())
    extra = (".sides{display:grid;grid-template-columns:1fr 1fr;gap:18px}.side{min-width:0}.scroll{overflow-x:auto}"
             ".side svg.timeline{width:100%;height:auto}.cards{display:flex;gap:18px}.card{border:1px solid #dde1e7;border-radius:6px;"
             "padding:10px 14px;min-width:260px}.card .lbl{font-weight:700;font-size:18px}.card .k{font-family:monospace}")  # fmt: skip
    return _page(title, extra, f"""<header><h1>{escape(title)}</h1><div class="sub">{escape(str(a["kernel"]))} (A) against {escape(str(b["kernel"]))} (B) &middot; {escape(c.source)}</div></header>
<main>
<section><div class="cards">{cards}</div><p class="note">p: Fisher's exact test (pass rates), Welch's t-test (figures); * = significant at {d.get("alpha", 0.05):g};
change = B against A{"; runs interleaved A B A B" if d.get("interleaved") else ""}</p></section>
<section><h2>Pass rates</h2><table><tr><th>pass rate</th><th>A</th><th>B</th><th>p</th></tr>{rates}</table></section>
<section><h2>Figures</h2><table><tr><th>figure</th><th>A mean ± sd (min-max, n)</th><th>B mean ± sd (min-max, n)</th><th>change</th><th>p</th></tr>{figs}</table></section>
<section><h2>Placement, side by side</h2><div class="legend">{legend}</div><div class="sides">{sides}</div></section>
{machine}
</main>""")
