"""`lab domains`: the guest kernel's sched-domain tree, from a run's topology snapshot,
printed, and two of them diffed.

The snapshot is what lab's agent wrote in the guest before the workload (``guest/`` in a
run directory; ``out/guest/`` in older ones): for every CPU and domain level the
domain's name and flags (debugfs ``sched/domains/cpuN/domainM/{name,flags}``) and its
span (/proc/schedstat's ``domainM`` cpumask), plus any other per-domain parameter file of
that directory it holds (``imbalance_pct``, ``busy_factor``, ``cache_nice_tries``,
``min_interval``, ``max_interval``: printed when present).  CPU ids are translated to
the topology's numbering when the run's plan.json says how (as every CPU id lab prints);
names and flags are the guest kernel's own words (6.9 renamed SD_SHARE_PKG_RESOURCES to
SD_SHARE_LLC, 6.7 the DIE level to PKG: a diff across them shows it).

A tree is printed level by level: at each level the CPUs that have the same name, flags
and parameters form one group, shown with its distinct spans.  A diff compares two trees
level by level: names, flags and parameters CPU by CPU (grouped by what differs), and
each level's set of spans.  Both are pure functions of the snapshots (``render``,
``diff``), ASCII within 80 columns.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from . import cpulist, rundir, sysfs
from .errors import UserError
from .limits import MAX_TABLE_BYTES, read_file
from .plan import VmPlan
from .rundir import RunDir

PARAMS = ("imbalance_pct", "busy_factor", "cache_nice_tries", "min_interval", "max_interval")
_PARAM_RE = re.compile(r"^/?sys/kernel/debug/sched/domains/cpu([0-9]+)/domain([0-9]+)/(" + "|".join(PARAMS) + r"):(.*)$")


@dataclass(frozen=True)
class Dom:
    """One CPU's domain at one level."""

    name: str
    span: tuple[int, ...]
    flags: frozenset[str]
    params: tuple[tuple[str, str], ...] = ()


@dataclass
class Tree:
    source: str  # the run directory
    label: str  # "zen3-2s-mini, kernel lab-6.1 (6.1.192)"
    numbering: str  # which CPU ids the tree uses
    cpus: dict[int, list[Dom]] = field(default_factory=dict)  # CPU -> its domains, level 0 up

    @property
    def has_params(self) -> bool:
        return any(d.params for doms in self.cpus.values() for d in doms)

    @property
    def depth(self) -> int:
        return max((len(d) for d in self.cpus.values()), default=0)


def snapshot_dir(run_dir: Path) -> Path:
    """The run's guest snapshot directory, or a UserError naming the run directory."""
    if not run_dir.is_dir():
        what = "not a directory (give a run directory)" if os.path.lexists(run_dir) else "no such run directory"
        raise UserError(f"{run_dir}: {what}")
    snap = RunDir(run_dir).snapshot()
    if snap is not None:
        return snap
    raise UserError(f"{run_dir}: no guest topology snapshot (guest/sysfs.txt): not a run directory, or a run that lost it")


def read(run_dir: Path) -> Tree:
    """The sched-domain tree of the run in *run_dir*, in the topology's numbering when
    plan.json says how."""

    snap = snapshot_dir(run_dir)
    view = sysfs.read_snapshot(snap)
    params = _params(snap)
    label, numbering = "", "CPU ids as the guest numbered them (no plan.json)"
    g2s: tuple[int, ...] = ()
    if (run_dir / rundir.PLAN).exists():
        plan = VmPlan.read(run_dir)
        g2s = plan.guest_to_spec
        kernel = plan.kernel.name if plan.kernel else "?"
        label = f"{plan.topo.name}, kernel {kernel}"
        numbering = f"CPU ids as {plan.topo.name} numbers them"
    if view.release:
        label = f"{label} ({view.release})" if label else f"kernel {view.release}"
    def cpu(g: int) -> int:  # guest id -> the topology's (expect.translate's map; the flags stay the kernel's words)
        return g2s[g] if g < len(g2s) else g

    tree = Tree(str(run_dir), label or "?", numbering)
    for g, cv in view.cpus.items():
        doms = sorted(cv.domains, key=lambda d: d.level)
        if doms:
            tree.cpus[cpu(g)] = [
                Dom(d.name, tuple(sorted(cpu(x) for x in d.span)), frozenset(d.flags),
                    tuple(sorted(params.get((g, d.level), {}).items())))  # fmt: skip
                for d in doms
            ]
    tree.cpus = dict(sorted(tree.cpus.items()))
    if not tree.cpus:
        raise UserError(f"{snap}: the snapshot has no sched domains (debugfs was not readable in the guest)")
    return tree


def _params(snap: Path) -> dict[tuple[int, int], dict[str, str]]:
    """The per-domain parameter files the snapshot holds: {(guest CPU, level): {name: value}}."""
    text = read_file(snap / rundir.SNAPSHOT, MAX_TABLE_BYTES, "a guest snapshot file", follow_symlinks=False).decode(errors="replace")
    out: dict[tuple[int, int], dict[str, str]] = {}
    for line in text.splitlines():
        m = _PARAM_RE.match(line)
        if m:
            out.setdefault((int(m[1]), int(m[2])), {})[m[3]] = m[4].strip()[:40]
    return out


# --- printing ------------------------------------------------------------------------------


def _wrap(text: str, indent: str = "", sub: str = "") -> list[str]:
    text = text.encode("ascii", "replace").decode()
    return textwrap.wrap(text, 80, initial_indent=indent, subsequent_indent=sub or indent + "  ",
                         break_on_hyphens=False, break_long_words=False) or [indent]  # fmt: skip


def _spans(spans: list[tuple[int, ...]]) -> str:
    return " ".join(cpulist.format(s) for s in spans)


def _sizes(spans: list[tuple[int, ...]]) -> str:
    sizes = sorted({len(s) for s in spans})
    n = f"{len(spans)} span{'s' if len(spans) != 1 else ''}"
    return f"{n} of {sizes[0]} CPUs" if len(sizes) == 1 else f"{n} of {sizes[0]}-{sizes[-1]} CPUs"


def _level(tree: Tree, lvl: int) -> dict[int, Dom]:
    return {c: doms[lvl] for c, doms in tree.cpus.items() if lvl < len(doms)}


def _flags(flags: frozenset[str]) -> str:
    return " ".join(sorted(flags, key=_flag_order)) or "(none)"


# The kernel's own order (include/linux/sched/sd_flags.h), so flags read as debugfs lists them.
_SD_ORDER = ("SD_BALANCE_NEWIDLE", "SD_BALANCE_EXEC", "SD_BALANCE_FORK", "SD_BALANCE_WAKE", "SD_WAKE_AFFINE",
             "SD_ASYM_CPUCAPACITY", "SD_ASYM_CPUCAPACITY_FULL", "SD_SHARE_CPUCAPACITY", "SD_CLUSTER",
             "SD_SHARE_PKG_RESOURCES", "SD_SHARE_LLC", "SD_SERIALIZE", "SD_ASYM_PACKING", "SD_PREFER_SIBLING",
             "SD_OVERLAP", "SD_NUMA")  # fmt: skip


def _flag_order(f: str) -> tuple[int, str]:
    return (_SD_ORDER.index(f) if f in _SD_ORDER else len(_SD_ORDER), f)


def render(tree: Tree) -> str:
    """*tree* as text: each level's groups of CPUs with one name, flags and parameters."""
    out = _wrap(f"sched domains of {tree.source}")
    out += _wrap(f"{tree.label}; {len(tree.cpus)} CPUs with domains; {tree.numbering}")
    all_cpus = set(tree.cpus)
    for lvl in range(tree.depth):
        level = _level(tree, lvl)
        groups: dict[tuple[str, frozenset[str], tuple[tuple[str, str], ...]], list[int]] = {}
        for c, d in sorted(level.items()):
            groups.setdefault((d.name, d.flags, d.params), []).append(c)
        for (name, flags, params), cpus in groups.items():
            spans = sorted({level[c].span for c in cpus})
            where = "" if set(cpus) == all_cpus else f" on CPU {cpus[0]}" if len(cpus) == 1 else f" on CPUs {cpulist.format(cpus)}"
            out.append("")
            out += _wrap(f"domain{lvl} {name}{where}: {_sizes(spans)}")
            out += _wrap(f"spans: {_spans(spans)}", "  ", "         ")
            out += _wrap(f"flags: {_flags(flags)}", "  ", "         ")
            if params:
                out += _wrap("  ".join(f"{k}={v}" for k, v in params), "  ")
    return "\n".join(line.rstrip() for line in out) + "\n"


def diff(a: Tree, b: Tree) -> tuple[str, int]:
    """What differs between *a* and *b*, level by level: (the text, how many differences).
    Names, flags and parameters are compared CPU by CPU (CPUs that differ the same way
    grouped), spans as each level's set of distinct spans."""
    out = _wrap(f"A: {a.source}", "", "   ") + _wrap(f"   {a.label}; {a.numbering}", "", "     ")
    out += _wrap(f"B: {b.source}", "", "   ") + _wrap(f"   {b.label}; {b.numbering}", "", "     ")
    if a.numbering != b.numbering:
        out += _wrap("note: the two trees number CPUs differently; CPU ids are compared as they are")
    pa, pb = a.has_params, b.has_params
    if pa != pb:
        out += _wrap(f"note: {'B' if pa else 'A'}'s snapshot holds no per-domain parameters (taken before lab "
                     "recorded them): parameters not compared")  # fmt: skip
    count = 0
    for lvl in range(max(a.depth, b.depth)):
        la, lb = _level(a, lvl), _level(b, lvl)
        lines: list[str] = []
        names = {d.name for d in la.values()} | {d.name for d in lb.values()}
        for what, val in (("name", lambda d: d.name if d else "(none)"),
                          ("flags", None),
                          ("params", lambda d: "  ".join(f"{k}={v}" for k, v in d.params) or "(none)" if d else "(none)")):  # fmt: skip
            if what == "params" and not (pa and pb):
                continue
            by: dict[tuple[str, str], list[int]] = {}
            for c in sorted(set(la) | set(lb)):
                da, db = la.get(c), lb.get(c)
                if what == "flags":
                    if da is None or db is None:
                        continue  # the level itself is missing: the name says so
                    only_a, only_b = da.flags - db.flags, db.flags - da.flags
                    if not only_a and not only_b:
                        continue
                    key = (_flags(frozenset(only_a)) if only_a else "", _flags(frozenset(only_b)) if only_b else "")
                else:
                    assert val is not None
                    va, vb = val(da), val(db)
                    if va == vb:
                        continue
                    key = (va, vb)
                by.setdefault(key, []).append(c)
            for (va, vb), cpus in by.items():
                count += 1
                on = f"CPUs {cpulist.format(cpus)}" if len(cpus) > 1 else f"CPU {cpus[0]}"
                if what == "flags":
                    parts = ([f"only A {va}"] if va else []) + ([f"only B {vb}"] if vb else [])
                    lines += _wrap(f"flags on {on}: {'; '.join(parts)}", "  ")
                else:
                    lines += _wrap(f"{what} on {on}: A {va}, B {vb}", "  ")
        sa, sb = sorted({d.span for d in la.values()}), sorted({d.span for d in lb.values()})
        if sa != sb and la and lb:
            count += 1
            lines += _wrap(f"spans: A {_sizes(sa)}, B {_sizes(sb)}", "  ")
            lines += _wrap(f"A: {_spans(sa)}", "    ", "       ")
            lines += _wrap(f"B: {_spans(sb)}", "    ", "       ")
        title = f"domain{lvl} {'/'.join(sorted(names))}"
        out.append("")
        if lines:
            out += _wrap(f"{title}:")
            out += lines
        else:
            out += _wrap(f"{title}: the same ({_sizes(sa)})")
    out.append("")
    out.append(f"{count} difference(s)" if count else "no differences")
    return "\n".join(line.rstrip() for line in out) + "\n", count
