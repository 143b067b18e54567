"""`lab topo diff`: what a guest sees against the capture of the real machine it models.

``compare()`` is the whole comparison, without a VM: the capture's view (the real
machine, its own CPU and node ids) against the guest's snapshot, translated into the
capture's numbering by the plan that booted it.  Every aspect is one row: the nodes'
CPUs and distances, the SMT / package / cluster / LLC groups, per-CPU capacities and
the sched-domain tree where the capture has one.  A row that differs where the
importer already names a deviation (expect.deviations(): what QEMU cannot build) is
*known*, listed apart; any other difference is one the user must hear about.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import cpulist, expect
from .plan import VmPlan
from .sysfs import CpuView, MachineView
from .topology import Topology

# Which rows each deviation expect.deviations() names can make differ.
_KNOWN_FOR = {
    "clusters": ("L2 per thread",),
    "LLC groups": ("LLC crossing nodes", "LLC groups"),
    "sched-domain tree": ("LLC groups", "guest limits"),
    "sched-domain flags": ("vendor effect", "CPU vendor", "LLC groups", "guest limits"),
    "CPU capacities": ("capacities",),
}


@dataclass(frozen=True)
class Row:
    what: str
    capture: str
    guest: str
    status: str  # "same" | "differs" | "known"
    why: str = ""  # a known row: the deviation that explains it; a differing one: where

    def to_dict(self) -> dict:
        d = {"what": self.what, "capture": self.capture, "guest": self.guest, "status": self.status}
        if self.why:
            d["why"] = self.why
        return d


@dataclass
class Diff:
    rows: list[Row] = field(default_factory=list)
    deviations: list[tuple[str, str]] = field(default_factory=list)  # (name, why): the importer's

    @property
    def differences(self) -> list[Row]:
        return [r for r in self.rows if r.status == "differs"]

    @property
    def known(self) -> list[Row]:
        return [r for r in self.rows if r.status == "known"]

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict:
        return {
            "identical": self.ok,
            "rows": [r.to_dict() for r in self.rows],
            "differences": [r.what for r in self.differences],
            "known_deviations": [{"name": n, "why": w} for n, w in self.deviations],
        }


def _fmt(cpus) -> str:
    return cpulist.format(cpus) if cpus else "none"


def _summary(groups: list[tuple[int, ...]]) -> str:
    if len(groups) <= 4:
        return " | ".join(_fmt(g) for g in groups)
    return f"{len(groups)} groups: {_fmt(groups[0])} | {_fmt(groups[1])} | ... | {_fmt(groups[-1])}"


def _groups(of: Callable[[int], tuple[int, ...] | None], cpus: tuple[int, ...]) -> list[tuple[int, ...]]:
    seen: dict[tuple[int, ...], None] = {}
    for c in cpus:
        g = of(c)
        if g is not None:
            seen.setdefault(g, None)
    return sorted(seen, key=lambda g: g[0] if g else -1)


def _by_id(view: MachineView, cpus: tuple[int, ...], attr: str) -> Callable[[int], tuple[int, ...] | None]:
    """A CPU's group of CPUs with the same *attr* id (physical_package_id, ...)."""
    ids = {c: getattr(view.cpus[c], attr) for c in cpus if c in view.cpus}

    def of(c: int) -> tuple[int, ...] | None:
        if ids.get(c) is None:
            return None
        return tuple(o for o in cpus if ids.get(o) == ids[c])

    return of


def _lists(view: MachineView, cpus: tuple[int, ...], pick: Callable[[CpuView], tuple[int, ...] | None]):
    keep = set(cpus)

    def of(c: int) -> tuple[int, ...] | None:
        cv = view.cpus.get(c)
        got = pick(cv) if cv is not None else None
        return None if got is None else tuple(sorted(x for x in got if x in keep))

    return of


def _group_row(what: str, cpus: tuple[int, ...], cap, guest) -> Row:
    bad = [c for c in cpus if cap(c) != guest(c)]
    capture, seen = _summary(_groups(cap, cpus)), _summary(_groups(guest, cpus))
    if not bad:
        return Row(what, capture, "same", "same")
    c = bad[0]
    g, w = guest(c), cap(c)
    where = f"CPU {c}: capture {'missing' if w is None else _fmt(w)}, guest {'missing' if g is None else _fmt(g)}; {len(bad)} CPUs differ"
    return Row(what, capture, seen, "differs", where)


def _llc_of(view: MachineView, cpus: tuple[int, ...]):
    level = view.llc_level

    def pick(cv: CpuView) -> tuple[int, ...] | None:
        cache = cv.cache(level) if level is not None else None
        return cache.shared if cache else None

    return level, _lists(view, cpus, pick)


_NAMES = {"PKG": "DIE"}  # 6.7 renamed DIE to PKG (expect.PKG_RENAMED): the same level


def _tree(view: MachineView, cpus: tuple[int, ...], c: int) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    cv = view.cpus.get(c)
    if cv is None or not cv.domains:
        return None
    keep = set(cpus)
    return tuple((_NAMES.get(d.name, d.name), tuple(sorted(x for x in d.span if x in keep))) for d in sorted(cv.domains, key=lambda d: d.level))


def _flags(view: MachineView, c: int) -> tuple[tuple[str, ...], ...] | None:
    cv = view.cpus.get(c)
    if cv is None or not cv.domains:
        return None
    return tuple(
        tuple(sorted({expect.FLAG_ALIASES.get(f, f) for f in d.flags} & set(expect.KEY_FLAGS)))
        for d in sorted(cv.domains, key=lambda d: d.level)
    )


def _tree_text(tree) -> str:
    if tree is None:
        return "none"
    return " > ".join(f"{n} {_fmt(span)}" for n, span in tree)


def _flags_text(tree, flags) -> str:
    if tree is None or flags is None:
        return "none"
    return "; ".join(f"{n}: {' '.join(f.removeprefix('SD_') for f in fl) or '-'}" for (n, _), fl in zip(tree, flags, strict=False))



def _per_cpu_row(what: str, cpus: Sequence[int], pairs: dict, text: Callable[[int, int], str]) -> Row:
    """One row for a per-CPU property: *pairs* maps each CPU to (capture's, guest's);
    *text*(cpu, 0 or 1) words one side.  Same on every CPU, or the first that differs."""
    cap = f"CPU {cpus[0]}: {text(cpus[0], 0)}"
    bad = [c for c in cpus if pairs[c][0] != pairs[c][1]]
    if not bad:
        return Row(what, cap, "same on every CPU", "same")
    b = bad[0]
    return Row(what, cap, f"CPU {b}: {text(b, 1)}", "differs", f"CPU {b}: capture {text(b, 0)}; {len(bad)} CPUs differ")

def compare(
    capture: MachineView, topo: Topology, plan: VmPlan, guest: MachineView, *, cluster_level: bool = True
) -> Diff:
    """The capture (*capture*: the real machine's view, imported as *topo*) against the
    *guest*'s snapshot (its own numbering) of a boot of *plan*, in the capture's
    numbering.  Only the CPUs the spec holds count (an offline CPU of the capture is
    not in the guest; the importer says so)."""
    deviations = expect.deviations(topo, plan)
    _, _, limits = expect.guest_limits(topo, plan, cluster_level)
    if limits:
        deviations.append(("guest limits", "; ".join(limits)))
    if topo.arch != "arm64" and len({cv.capacity for c, cv in capture.cpus.items() if c in topo.cpu_ids}) > 1:
        deviations.append(("capacities", "QEMU cannot give x86 CPUs different capacities: the guest's CPUs are alike"))
    g = expect.translate(guest, plan)
    cpus = topo.cpu_ids
    rows: list[Row] = []
    rows.append(Row("CPUs", _fmt(cpus), "same" if tuple(g.online) == cpus else _fmt(g.online),
                    "same" if tuple(g.online) == cpus else "differs"))  # fmt: skip
    keep = set(cpus)
    all_nodes = sorted(capture.distances) or sorted(capture.nodes)
    for n in topo.node_ids:
        want = tuple(sorted(c for c in capture.nodes.get(n, ()) if c in keep))
        got = g.nodes.get(n)
        rows.append(Row(f"node {n} CPUs", _fmt(want), "same" if got == want else ("missing" if got is None else _fmt(got)),
                        "same" if got == want else "differs"))  # fmt: skip
    extra = sorted(set(n for n, cs in g.nodes.items() if cs) - set(topo.node_ids))
    if extra:
        rows.append(Row("nodes", " ".join(map(str, topo.node_ids)), " ".join(map(str, sorted(g.nodes))), "differs",
                        f"the guest has nodes {', '.join(map(str, extra))} the capture has not"))  # fmt: skip
    for n in topo.node_ids:
        row = capture.distances.get(n, ())
        want_d = tuple(row[all_nodes.index(m)] for m in topo.node_ids if m in all_nodes and all_nodes.index(m) < len(row))
        got_d = g.distances.get(n)
        same = got_d is not None and tuple(got_d) == want_d
        rows.append(Row(f"node {n} distances", " ".join(map(str, want_d)), "same" if same else (" ".join(map(str, got_d)) if got_d else "missing"),
                        "same" if same else "differs"))  # fmt: skip
    rows.append(_group_row("SMT siblings", cpus, _lists(capture, cpus, lambda cv: cv.siblings("core")),
                           _lists(g, cpus, lambda cv: cv.siblings("core"))))  # fmt: skip
    rows.append(_group_row("packages", cpus, _by_id(capture, cpus, "package"), _by_id(g, cpus, "package")))
    if any(capture.cpus[c].siblings("cluster") for c in cpus if c in capture.cpus):
        rows.append(_group_row("clusters", cpus, _lists(capture, cpus, lambda cv: cv.siblings("cluster")),
                               _lists(g, cpus, lambda cv: cv.siblings("cluster"))))  # fmt: skip
    level, cap_llc = _llc_of(capture, cpus)
    if level is not None:
        rows.append(_group_row(f"LLC groups (L{level})", cpus, cap_llc, _llc_of(g, cpus)[1]))
    caps = {c: capture.cpus[c].capacity for c in cpus if c in capture.cpus}
    if len(set(caps.values())) > 1:
        by_cap: dict[int | None, list[int]] = {}
        for c, v in caps.items():
            by_cap.setdefault(v, []).append(c)
        want_t = " | ".join(f"{_fmt(cs)}: {v}" for v, cs in sorted(by_cap.items(), key=lambda kv: min(kv[1])))
        bad = [c for c in cpus if caps.get(c) != (g.cpus[c].capacity if c in g.cpus else None)]
        got_t = "same" if not bad else f"CPU {bad[0]}: {g.cpus[bad[0]].capacity if bad[0] in g.cpus else None}; {len(bad)} CPUs differ"
        rows.append(Row("CPU capacities", want_t, got_t, "differs" if bad else "same"))
    if any(capture.cpus[c].domains for c in cpus if c in capture.cpus):
        trees = {c: (_tree(capture, cpus, c), _tree(g, cpus, c)) for c in cpus}
        fl = {c: (_flags(capture, c), _flags(g, c)) for c in cpus}
        rows.append(_per_cpu_row("sched-domain tree", cpus, trees, lambda c, side: _tree_text(trees[c][side])))
        rows.append(_per_cpu_row(
            "sched-domain flags", cpus, fl, lambda c, side: _flags_text(trees[c][side], fl[c][side])
        ))  # fmt: skip
    else:
        rows.append(Row("sched-domain tree", "not in the capture (no sched debugfs, no schedstat)", "not compared", "same"))
    named = dict(deviations)
    out = []
    for r in rows:
        key = r.what.split(" (")[0]
        reasons = [named[n] for n in _KNOWN_FOR.get(key, ()) if n in named]
        if r.status == "differs" and reasons:
            r = Row(r.what, r.capture, r.guest, "known", "; ".join(reasons))
        out.append(r)
    return Diff(out, deviations)


def render_text(d: Diff, title: str) -> list[str]:
    """The diff as plain lines, side by side (capture | guest), then the known
    deviations and each difference named."""
    w0 = max(len("what"), *(len(r.what) for r in d.rows))
    w1 = min(52, max(len("capture"), *(len(r.capture) for r in d.rows)))
    lines = [title, f"{'what':<{w0}}  {'capture':<{w1}}  guest"]
    cut = []
    for r in d.rows:
        mark = {"same": "", "differs": "  DIFFERS", "known": "  known"}[r.status]
        cap = r.capture if len(r.capture) <= w1 else r.capture[: w1 - 3] + "..."
        if cap != r.capture:
            cut.append(r)
        lines.append(f"{r.what:<{w0}}  {cap:<{w1}}  {r.guest}{mark}")
    lines += [f"{r.what}, the capture in full: {r.capture}" for r in cut]
    if d.deviations:
        lines.append("known deviations (the importer names these; QEMU cannot build them):")
        lines += [f"  {n}: {w}" for n, w in d.deviations]
    if d.known:
        lines.append("rows that differ only as a known deviation: " + ", ".join(r.what for r in d.known))
    if d.differences:
        lines.append(f"{len(d.differences)} difference{'s' if len(d.differences) > 1 else ''}:")
        lines += [f"  {r.what}: {r.why or f'capture {r.capture}, guest {r.guest}'}" for r in d.differences]
    else:
        lines.append("identical: the guest sees the captured machine" + (" (but for the known deviations)" if d.known else ""))
    return lines
