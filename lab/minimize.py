"""The smallest machine that still fails, and which part of a machine a verdict hangs on.

Both questions change a topology spec (the TOML data lab loads into a ``Topology``) one
property at a time, run the scenario on each changed machine and judge the runs with
lab compare's statistics (``lab.compare.fisher``, ``welch``, ``holm``).  Everything here
is pure: runs come in through a callable, so the searches are unit-tested against a
fake runner whose pass rate depends on the spec (tests/unit/test_minimize.py); the CLI
(lab/cli/minimize.py) gives it one that boots VMs.

The changes (``variations``)
    On the shape form's counts (``[topology]``): fewer sockets, NUMA nodes per socket,
    LLCs per node, clusters per LLC, cores per cluster (per LLC when there are no
    clusters), SMT off (one thread per core); and, whatever the form: numbering made
    linear, remote distances flattened to 20 (Linux's REMOTE_DISTANCE), the vendor
    switched (amd <-> intel on x86; family 0x19 for AMD, 6 for Intel).  A count is removed
    (down to 1, or for ``lab minimize`` also to half and to one less) or, for ``lab
    attribute``, merged into the level above (the CPU count kept: 2 LLCs of 4 cores -> 1 LLC
    of 8).  Fewer nodes keep the distance matrix's first rows and columns.  Every changed
    spec goes through ``topology.from_dict`` (the model's own validation): one it refuses
    is a skipped change with the model's message, as is a count change of a spec that
    lists its CPU ids (explicit numbering: numbering linear comes first), a change of a
    groups-form spec's counts (an imported machine's cpulists), and a change that leaves
    the spec as it was.  The caller's ``check`` (the scenario's requirements) and the
    runner (QEMU's plan, which refuses what it cannot express) skip more, named.

A candidate's judgement (``judge``)
    N runs (default: the scenario's verdict_runs), stopped early once a majority passes.
    The candidate keeps the failure when more of its judged runs fail than pass *and*
    Fisher's exact test of its pass rate against the failing machine's (the baseline: the
    input run plus N - 1 more runs of its machine) is not significant at 0.05 with the
    candidate passing more often: a reduction that makes the failure significantly rarer
    changed the behaviour, even when it still fails more often than not.  Runs that are
    not judged (ERROR, INCONCLUSIVE) count on neither side; a candidate without one judged
    run is skipped with the first run's message.

The search (``minimize``)
    Greedy delta debugging: from the current machine every reduction is listed, biggest
    removal first (fewest CPUs left; the CPU-keeping simplifications, numbering, distances
    and vendor, after the removals), and the first that keeps the failure becomes the
    current machine; the search restarts from it and ends when no reduction keeps it (the
    result is 1-minimal over the reductions: no single one of them keeps the failure), or
    when the budget cannot pay for the next candidate.  A spec already judged is not run
    again, and a simplification once made is not offered again (no vendor back).  Budget: each candidate is estimated at N times the cost of one run of the
    input machine (its results.json's timing.wall_s; a smaller machine boots no slower
    than a bigger one under lab, so this is an upper bound), spent is what the runs
    report (their timing.wall_s), and a budget that cannot pay for one run is refused with
    the estimate.

The attribution (``attribute``)
    The scenario on the machine and on each one-property change of it (each level removed
    or merged, SMT off, distances flattened, numbering linear, vendor switched), N runs
    each; each row tests the change's pass rate against the machine's (Fisher) and every
    figure of the claim and the other expectations (Welch), and Holm's correction runs over
    every test of the table.  A level the scenario needs (its removal to 1 refused by the
    scenario's requirements: cluster-wakeup's clusters) is reduced instead to the fewest of
    half and one less that the scenario takes (clusters per LLC 3 -> 2), a row of its own
    with ``instead_of`` naming the refused removal: the table then says whether the level's
    size matters, and that its absence cannot be judged.  A row's flags: ``flips`` (the
    majority verdict differs from the machine's), ``rate`` (the pass rate moved
    significantly after the correction) and the figures that moved significantly.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import compare, topology
from .errors import UserError

SHAPE_COUNTS = ("sockets", "nodes_per_socket", "llcs_per_node", "clusters_per_llc", "cores_per_cluster", "threads_per_core")
LABELS = {
    "sockets": "sockets",
    "nodes_per_socket": "nodes per socket",
    "llcs_per_node": "LLCs per node",
    "clusters_per_llc": "clusters per LLC",
    "cores_per_cluster": "cores per cluster",
    "threads_per_core": "threads per core",
}
FLAT_DISTANCE = 20  # Linux's REMOTE_DISTANCE
JUDGED = compare.JUDGED
DEFAULT_RUN_COST_S = 300.0  # one run, when the input run did not say how long it took

# A run: (spec data, label) -> a run record (results.json as RunOutcome.to_dict() writes it:
# "status", "expectations" with "figures", "timing" with "wall_s", "run_dir").  It raises a
# UserError for a machine it cannot run (QEMU cannot express it): the candidate is skipped.
Runner = Callable[[dict[str, Any], str], dict[str, Any]]
# What the scenario says of a machine before it runs: why it cannot run there, or None.
Check = Callable[[topology.Topology], str | None]


@dataclass
class Change:
    """One changed machine: ``spec`` (None when ``skipped`` says why it cannot be made)."""

    name: str
    prop: str  # the SHAPE_COUNTS key, or "numbering", "distances", "vendor"
    kind: str  # "remove" | "merge" | "simplify"
    spec: dict[str, Any] | None
    skipped: str = ""
    cpus: int = 0  # the changed machine's CPU count (for ordering)
    instead_of: str = ""  # lab attribute: the removal to 1 the scenario refused, this one run in its place

    def to_dict(self) -> dict[str, Any]:
        return {"change": self.name, "property": self.prop, "kind": self.kind, **({"skipped": self.skipped} if self.skipped else {})}


def load_spec(path: str) -> dict[str, Any]:
    """A topology spec file as data (checked: it must load as a topology)."""

    topology.load(path)  # the model's own one-line errors for a bad spec
    return tomllib.loads(Path(path).read_text())


def model(spec: Mapping[str, Any], where: str = "<candidate>") -> topology.Topology:
    return topology.from_dict(spec, where=where, default_name=str(spec.get("name") or "candidate"))


def canonical(spec: Mapping[str, Any]) -> str:
    """The spec as one string, to know a machine already judged (its name aside)."""
    return json.dumps({k: v for k, v in spec.items() if k not in ("name", "description", "provenance")}, sort_keys=True)


def shape_text(spec: Mapping[str, Any]) -> str:
    """The machine in a line: its counts, numbering, distances and vendor."""
    try:
        t = model(spec)
    except UserError as e:
        return f"(invalid: {e})"
    d = sorted({v for row in t.distances for v in row if v != 10})
    dist = f", distances {'/'.join(map(str, d))}" if d else ""
    return f"{t.summary()}{dist}, {t.vendor}"


# --- the changes -------------------------------------------------------------------------


def _counts(t: Mapping[str, Any]) -> dict[str, int]:
    return {
        "sockets": int(t.get("sockets", 1)),
        "nodes_per_socket": int(t.get("nodes_per_socket", 1)),
        "llcs_per_node": int(t.get("llcs_per_node", 1)),
        "clusters_per_llc": int(t.get("clusters_per_llc", 1)),
        "cores_per_cluster": int(t.get("cores_per_cluster", 1)),
        "threads_per_core": int(t.get("threads_per_core", 1)),
    }


def _resize_numa(spec: dict[str, Any], old_nodes: int, new_nodes: int) -> None:
    """Keep the first *new_nodes* rows and columns of the distances and memory."""
    numa = spec.get("numa")
    if not isinstance(numa, dict) or new_nodes == old_nodes:
        return
    d = numa.get("distances")
    if isinstance(d, list):
        if new_nodes == 1:
            numa.pop("distances")
        elif new_nodes < len(d):
            numa["distances"] = [list(row[:new_nodes]) for row in d[:new_nodes]]
    m = numa.get("memory_mb")
    if isinstance(m, list) and new_nodes < len(m):
        numa["memory_mb"] = m[:new_nodes]


def _nodes(c: Mapping[str, int], spn: int) -> int:
    return c["sockets"] * c["nodes_per_socket"] // max(1, spn)


def _with_counts(spec: Mapping[str, Any], new: Mapping[str, int]) -> dict[str, Any]:
    out = copy.deepcopy(dict(spec))
    t = out["topology"]
    old = _counts(t)
    spn = int(t.get("sockets_per_node", 1))
    for k, v in new.items():
        if k == "clusters_per_llc" and v == 1 and "clusters_per_llc" in t:
            t.pop(k)
        elif k in ("nodes_per_socket", "llcs_per_node", "threads_per_core") and v == 1 and k in t:
            t.pop(k)
        else:
            t[k] = v
    if new.get("threads_per_core") == 1:
        caches = out.get("caches")
        if isinstance(caches, dict):
            caches.pop("per_thread", None)  # caches private to a thread need threads
            if not caches:
                out.pop("caches")
    _resize_numa(out, _nodes(old, spn), _nodes({**old, **new}, spn))
    return out


def _count_values(c: int, steps: bool) -> list[int]:
    """The smaller values a count of *c* is tried at: 1, and with *steps* half and one less."""
    vals = {1} | ({c // 2, c - 1} if steps else set())
    return sorted(v for v in vals if 1 <= v < c)


def variations(spec: Mapping[str, Any], *, steps: bool = False, merges: bool = False) -> list[Change]:
    """Every one-property change of *spec* (see the module's docstring): removals (with
    *steps*, also to half and one less), merges (with *merges*), then the simplifications.
    Each comes checked by the model; what cannot be made says why."""
    out: list[Change] = []
    raw = spec.get("topology")
    shape_form = isinstance(raw, Mapping)
    t: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    counts = _counts(t) if shape_form else {}
    explicit = shape_form and t.get("numbering") == "explicit"

    def add(name: str, prop: str, kind: str, make: Callable[[], dict[str, Any]] | None, why: str = "") -> None:
        if make is None:
            out.append(Change(name, prop, kind, None, why))
            return
        new = make()
        if canonical(new) == canonical(spec):
            out.append(Change(name, prop, kind, None, "the machine would not change"))
            return
        try:
            m = model(new)
        except UserError as e:
            out.append(Change(name, prop, kind, None, f"not a valid machine: {e}"))
            return
        out.append(Change(name, prop, kind, new, cpus=m.n_cpus))

    for k in SHAPE_COUNTS:
        label = LABELS[k]
        if not shape_form:
            if k in ("sockets", "threads_per_core"):
                add(f"fewer {label}" if k == "sockets" else "SMT off", k, "remove", None,
                    "the spec lists its CPUs (groups form, an imported machine): lab changes the counts of a [topology] shape")  # fmt: skip
            continue
        c = counts[k]
        if c <= 1:
            continue
        for v in _count_values(c, steps):
            name = "SMT off" if k == "threads_per_core" and v == 1 else f"{label} {c} -> {v}"
            if explicit:
                add(name, k, "remove", None, "numbering is explicit (a list of every CPU id): numbering linear comes first")
            else:
                add(name, k, "remove", functools.partial(_with_counts, spec, {k: v}))
        if merges and k not in ("threads_per_core", "cores_per_cluster"):
            into = {"sockets": "nodes_per_socket", "nodes_per_socket": "llcs_per_node",
                    "llcs_per_node": "clusters_per_llc" if counts["clusters_per_llc"] > 1 else "cores_per_cluster",
                    "clusters_per_llc": "cores_per_cluster"}[k]  # fmt: skip
            if k == "sockets" and int(t.get("sockets_per_node", 1)) > 1:
                into = "llcs_per_node"
            name = f"{label} merged ({c} -> 1, {LABELS[into]} x{c})"
            if explicit:
                add(name, k, "merge", None, "numbering is explicit (a list of every CPU id): numbering linear comes first")
            else:
                add(name, k, "merge", functools.partial(_merged, spec, k, c, into))

    # The simplifications: the CPU count stays.
    if shape_form:
        num = t.get("numbering", "linear")
        if num == "linear" or (num == "smt-last" and counts["threads_per_core"] == 1):
            add("numbering linear", "numbering", "simplify", None, "already linear")
        else:
            add("numbering linear", "numbering", "simplify", lambda: _linear(spec))
    else:
        add("numbering linear", "numbering", "simplify", None,
            "the spec lists its CPUs (groups form): its numbering is the capture's")  # fmt: skip
    numa = spec.get("numa") if isinstance(spec.get("numa"), Mapping) else {}
    d = numa.get("distances") if isinstance(numa, Mapping) else None
    if not isinstance(d, list) or len(d) < 2:
        add(f"distances {FLAT_DISTANCE}", "distances", "simplify", None, "one node: no distances")
    else:
        add(f"distances {FLAT_DISTANCE}", "distances", "simplify", lambda: _flat(spec))
    arch = spec.get("arch", "x86_64")
    vendor = str((spec.get("cpu") or {}).get("vendor", "")).lower()
    if arch == "x86_64" and vendor in ("amd", "intel"):
        other = "intel" if vendor == "amd" else "amd"
        add(f"vendor {other}", "vendor", "simplify", lambda: _vendor(spec, other))
    else:
        add("vendor switched", "vendor", "simplify", None,
            f"lab switches vendors on x86 only (amd <-> intel); this {arch} machine's {vendor or '?'} is kept")  # fmt: skip
    return out


def _merged(spec: Mapping[str, Any], k: str, c: int, into: str) -> dict[str, Any]:
    counts = _counts(spec["topology"])
    new = {k: 1, into: counts[into] * c}
    out = _with_counts(spec, new)
    if k == "llcs_per_node" and into == "clusters_per_llc":
        out["topology"]["clusters_per_llc"] = counts["clusters_per_llc"] * c
    return out


def _linear(spec: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(spec))
    out["topology"]["numbering"] = "linear"
    out["topology"].pop("cpus", None)
    return out


def _flat(spec: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(spec))
    d = out["numa"]["distances"]
    out["numa"]["distances"] = [[10 if i == j else FLAT_DISTANCE for j in range(len(d))] for i in range(len(d))]
    return out


def _vendor(spec: Mapping[str, Any], vendor: str) -> dict[str, Any]:
    out = copy.deepcopy(dict(spec))
    cpu = out.setdefault("cpu", {})
    cpu["vendor"] = vendor
    cpu["family"] = 0x19 if vendor == "amd" else 6
    cpu["model"] = ""
    return out


# --- judging runs --------------------------------------------------------------------------


@dataclass
class Judged:
    """A machine's runs and what they say."""

    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(r.get("status") == "PASS" for r in self.records)

    @property
    def failed(self) -> int:
        return sum(r.get("status") == "FAIL" for r in self.records)

    @property
    def judged(self) -> int:
        return self.passed + self.failed

    @property
    def verdict(self) -> str:
        if not self.judged:
            return "NONE"
        return "FAIL" if self.failed > self.passed else "PASS"

    def rate(self) -> str:
        return f"{self.failed}/{self.judged} failed" if self.judged else "no judged run"

    def first_message(self) -> str:
        for r in self.records:
            if r.get("status") not in JUDGED:
                return f"{r.get('status')}: {r.get('message') or 'no message'}"
        return "no run"

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "failed": self.failed, "runs": len(self.records),
                "run_dirs": [r.get("run_dir") for r in self.records]}  # fmt: skip


def wall_s(rec: Mapping[str, Any], default: float) -> float:
    w = (rec.get("timing") or {}).get("wall_s")
    return float(w) if isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0 else default


class Budget:
    """Seconds to spend (None: no limit), what is spent (the runs' own wall times) and
    what one run is estimated to cost."""

    def __init__(self, seconds: float | None, run_cost: float):
        self.seconds, self.run_cost, self.spent = seconds, run_cost, 0.0

    def affords(self, runs: int) -> bool:
        return self.seconds is None or self.spent + runs * self.run_cost <= self.seconds

    def add(self, rec: Mapping[str, Any]) -> None:
        self.spent += wall_s(rec, self.run_cost)

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "spent_s": round(self.spent, 1), "run_estimate_s": round(self.run_cost, 1)}


def run_n(run: Runner, spec: dict[str, Any], label: str, n: int, budget: Budget, *, stop_on_pass: bool) -> Judged:
    """Up to *n* runs of *spec* (fewer once a majority passes with *stop_on_pass*)."""
    j = Judged()
    for _ in range(n):
        rec = run(spec, label)
        j.records.append(rec)
        budget.add(rec)
        if stop_on_pass and j.passed > n // 2:
            break
    return j


def keeps_failure(base: Judged, cand: Judged) -> tuple[bool, dict[str, Any]]:
    """Does *cand* still fail as *base* does?  More failed than passed judged runs, and no
    significantly higher pass rate than *base*'s (Fisher)."""
    test = compare.fisher(base.passed, base.judged, cand.passed, cand.judged)
    if not cand.judged or cand.failed <= cand.passed:
        return False, test
    passes_more = cand.passed * max(base.judged, 1) > base.passed * cand.judged
    return not (test["result"] == compare.SIGNIFICANT and passes_more), test


# --- lab minimize ---------------------------------------------------------------------------


@dataclass
class Minimized:
    original: dict[str, Any]
    smallest: dict[str, Any]
    chain: list[dict[str, Any]]  # the accepted steps, the original first
    tried: list[dict[str, Any]]  # every candidate run, in order
    skipped: list[dict[str, Any]]  # changes not run, and why (one per name)
    budget: dict[str, Any]
    stopped: str  # why the search ended
    smallest_run: dict[str, Any] | None  # a failing run of the smallest machine

    def to_dict(self) -> dict[str, Any]:
        return {
            "original": shape_text(self.original), "smallest": shape_text(self.smallest),
            "smallest_cpus": model(self.smallest).n_cpus, "original_cpus": model(self.original).n_cpus,
            "chain": self.chain, "tried": self.tried, "skipped": self.skipped,
            "budget": self.budget, "stopped": self.stopped,
            "smallest_run": (self.smallest_run or {}).get("run_dir"),
        }  # fmt: skip


def refuse_input(rec: Mapping[str, Any], where: str) -> None:
    """Only a failing run has something to keep."""
    st = rec.get("status")
    if st == "PASS":
        raise UserError(f"{where}: the run passed: nothing to keep (lab minimize shrinks a machine a run FAILs on)")
    if st != "FAIL":
        raise UserError(f"{where}: the run's verdict is {st} ({rec.get('message') or 'no message'}): "
                        "lab minimize needs a run that FAILed")  # fmt: skip


def check_budget(seconds: float | None, run_cost: float, runs: int) -> None:
    if seconds is not None and seconds < run_cost:
        raise UserError(f"--budget {fmt_seconds(seconds)} is too small for one run: one run of this machine is "
                        f"estimated at {fmt_seconds(run_cost)} (a candidate at {fmt_seconds(runs * run_cost)}, {runs} runs)")  # fmt: skip


def minimize(spec: dict[str, Any], original_run: dict[str, Any], run: Runner, *, runs: int,
             budget_s: float | None = None, check: Check | None = None) -> Minimized:  # fmt: skip
    """Search the smallest machine that keeps *original_run*'s failure (see the module's
    docstring).  *original_run* is the failing run's record; *run* runs a spec once."""
    refuse_input(original_run, str(original_run.get("run_dir") or "the run"))
    if runs < 1:
        raise UserError(f"--runs {runs}: give at least 1")
    budget = Budget(budget_s, wall_s(original_run, DEFAULT_RUN_COST_S))
    check_budget(budget_s, budget.run_cost, runs)
    base = Judged([dict(original_run)])
    if runs > 1:
        if not budget.affords(runs - 1):
            raise UserError(f"--budget {fmt_seconds(budget_s or 0)} cannot pay for the {runs - 1} more runs of the failing "
                            f"machine that --runs {runs} needs (estimated {fmt_seconds((runs - 1) * budget.run_cost)})")  # fmt: skip
        more = run_n(run, spec, "original", runs - 1, budget, stop_on_pass=False)
        base.records += more.records
    if base.verdict != "FAIL":
        raise UserError(f"the failure does not reproduce: the failing machine {base.rate()} in {len(base.records)} runs "
                        "(a majority passes): nothing to keep")  # fmt: skip
    chain = [{"step": 0, "change": "the failing run's machine", "machine": shape_text(spec), "cpus": model(spec).n_cpus,
              **base.to_dict()}]  # fmt: skip
    tried: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    memo: dict[str, tuple[bool, Judged, dict[str, Any]]] = {canonical(spec): (True, base, {})}
    current = spec
    simplified: set[str] = set()
    smallest_run = next((r for r in base.records if r.get("status") == "FAIL"), None)
    stopped = ""
    while not stopped:
        cands = variations(current, steps=True)
        removals = sorted((c for c in cands if c.kind == "remove" and c.spec is not None), key=lambda c: c.cpus)
        # A simplification is made once: switching the vendor back is no simplification.
        simplify = [c for c in cands if c.kind == "simplify" and c.spec is not None and c.prop not in simplified]
        for c in cands:
            if c.spec is None:
                skipped.setdefault(c.name, c.skipped)
        accepted = None
        for c in [*removals, *simplify]:
            assert c.spec is not None
            key = canonical(c.spec)
            if key in memo:
                continue
            why = check(model(c.spec)) if check is not None else None
            if why:
                skipped.setdefault(c.name, f"the scenario cannot run there: {why}")
                continue
            if not budget.affords(runs):
                stopped = (f"budget: {fmt_seconds(budget.spent)} of {fmt_seconds(budget.seconds or 0)} spent, the next "
                           f"candidate ({c.name}) is estimated at {fmt_seconds(runs * budget.run_cost)}")  # fmt: skip
                break
            try:
                j = run_n(run, c.spec, c.name, runs, budget, stop_on_pass=True)
            except UserError as e:
                skipped.setdefault(c.name, str(e))
                memo[key] = (False, Judged(), {})
                continue
            if not j.judged:
                skipped.setdefault(c.name, f"no judged run ({j.first_message()})")
                memo[key] = (False, j, {})
                continue
            kept, test = keeps_failure(base, j)
            memo[key] = (kept, j, test)
            tried.append({"change": c.name, "from": shape_text(current), "machine": shape_text(c.spec), "cpus": c.cpus,
                          **j.to_dict(), "kept": kept, "fisher_p": test.get("p"), "test": test.get("result")})  # fmt: skip
            if kept:
                accepted = (c, j, test)
                break
        if stopped:
            break
        if accepted is None:
            stopped = "no single reduction keeps the failure (1-minimal)"
            break
        c, j, test = accepted
        assert c.spec is not None
        current = c.spec
        if c.kind == "simplify":
            simplified.add(c.prop)
        memo[canonical(current)] = (True, j, test)  # never back to a machine of the chain (vendor amd -> intel -> amd)
        smallest_run = next((r for r in j.records if r.get("status") == "FAIL"), smallest_run)
        chain.append({"step": len(chain), "change": c.name, "machine": shape_text(current), "cpus": c.cpus,
                      **j.to_dict(), "fisher_p": test.get("p"), "test": test.get("result")})  # fmt: skip
    return Minimized(spec, current, chain, tried, [{"change": k, "why": v} for k, v in skipped.items()],
                     budget.to_dict(), stopped, smallest_run)  # fmt: skip


def render_minimized(m: Minimized) -> str:
    lines = [f"smallest machine still failing: {shape_text(m.smallest)}",
             f"  (from {shape_text(m.original)})", "", "chain:"]  # fmt: skip
    for s in m.chain:
        p = f", Fisher p={s['fisher_p']:.3g} against the failing machine" if isinstance(s.get("fisher_p"), float) else ""
        lines.append(f"  {s['step']}. {s['change']}: {s['failed']}/{s['passed'] + s['failed']} failed{p}; {s['cpus']} CPUs")
    rejected = [t for t in m.tried if not t["kept"]]
    if rejected:
        lines += ["", "tried, the failure went away:"]
        for t in rejected:
            lines.append(f"  {t['change']} ({t['cpus']} CPUs left): {t['failed']}/{t['passed'] + t['failed']} failed")
    if m.skipped:
        lines += ["", "skipped:"]
        lines += [f"  {s['change']}: {s['why']}" for s in m.skipped]
    b = m.budget
    lines += ["", f"stopped: {m.stopped}",
              f"spent {fmt_seconds(b['spent_s'])}" + (f" of {fmt_seconds(b['seconds'])}" if b["seconds"] else "")]  # fmt: skip
    return "\n".join(lines) + "\n"


# --- lab attribute --------------------------------------------------------------------------


def _figures(records: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in records:
        if r.get("status") not in JUDGED:
            continue
        for e in r.get("expectations") or []:
            for k, v in (e.get("figures") or {}).items():
                if compare._numeric(v):
                    out.setdefault(f"{e.get('name')}: {k}", []).append(float(v))
    return out


def attribute(spec: dict[str, Any], run: Runner, *, runs: int, check: Check | None = None,
              budget_s: float | None = None, run_cost: float = DEFAULT_RUN_COST_S) -> dict[str, Any]:  # fmt: skip
    """The machine and each one-property change of it, *runs* runs each: the table (see
    the module's docstring)."""
    if runs < 1:
        raise UserError(f"--runs {runs}: give at least 1")
    budget = Budget(budget_s, run_cost)
    check_budget(budget_s, run_cost, runs)
    why = check(model(spec)) if check is not None else None
    if why:
        raise UserError(f"the scenario cannot run on the machine itself: {why}")
    base = run_n(run, spec, "machine", runs, budget, stop_on_pass=False)
    if not base.judged:
        raise UserError(f"no judged run on the machine itself ({base.first_message()}): nothing to attribute")
    base_figs = _figures(base.records)
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    tests: list[dict[str, Any]] = []
    queue = variations(spec, merges=True)
    names = {c.name for c in queue}
    # The smaller counts of a level (half, one less), for a level the scenario needs: its
    # removal to 1 refused, the level is reduced as far as the scenario takes instead.
    partial: dict[str, list[Change]] = {}
    for c in variations(spec, steps=True):
        if c.kind == "remove" and c.spec is not None and c.name not in names:
            partial.setdefault(c.prop, []).append(c)
    i = 0
    while i < len(queue):
        c = queue[i]
        i += 1
        if c.spec is None:
            skipped.append({"change": c.name, "why": c.skipped})
            continue
        why = check(model(c.spec)) if check is not None else None
        if why:
            taken = [a for a in (partial.pop(c.prop, []) if c.kind == "remove" else []) if a.spec and not (check and check(model(a.spec)))]
            instead = min(taken, key=lambda a: a.cpus) if taken else None
            skipped.append({"change": c.name, "why": f"the scenario cannot run there: {why}"
                            + (f"; {instead.name} is run in its place (the fewest the scenario takes)" if instead else "")})  # fmt: skip
            if instead is not None:
                queue.insert(i, dataclasses.replace(instead, instead_of=c.name))
            continue
        if not budget.affords(runs):
            skipped.append({"change": c.name, "why": f"budget: {fmt_seconds(budget.spent)} spent"})
            continue
        try:
            j = run_n(run, c.spec, c.name, runs, budget, stop_on_pass=False)
        except UserError as e:
            skipped.append({"change": c.name, "why": str(e)})
            continue
        if not j.judged:
            skipped.append({"change": c.name, "why": f"no judged run ({j.first_message()})"})
            continue
        rate = compare.fisher(base.passed, base.judged, j.passed, j.judged)
        tests.append(rate)
        figs = _figures(j.records)
        ftests = []
        for k in base_figs:
            if k in figs:
                t = compare.welch(base_figs[k], figs[k])
                s_a, s_b = compare.summary(base_figs[k]), compare.summary(figs[k])
                ftests.append({"figure": k, "machine_mean": s_a["mean"], "changed_mean": s_b["mean"],
                               "change_pct": compare.change_pct(s_a["mean"], s_b["mean"]), "test": t})  # fmt: skip
                tests.append(t)
        rows.append({"change": c.name, "property": c.prop, "kind": c.kind, "machine": shape_text(c.spec),
                     **({"instead_of": c.instead_of} if c.instead_of else {}),
                     **j.to_dict(), "verdict": j.verdict, "rate_test": rate, "figures": ftests})  # fmt: skip
    family = compare.holm(tests)
    for r in rows:
        r["flips"] = r["verdict"] != base.verdict
        r["rate_moves"] = r["rate_test"]["result"] == compare.SIGNIFICANT
        r["figures_moved"] = [f["figure"] for f in r["figures"] if f["test"]["result"] == compare.SIGNIFICANT]
    return {
        "machine": shape_text(spec), "runs": runs, "alpha": compare.ALPHA,
        "base": {**base.to_dict(), "verdict": base.verdict, "figures": {k: compare.summary(v) for k, v in base_figs.items()}},
        "rows": rows, "skipped": skipped,
        "correction": {"method": "holm", "over": "every test of the table (pass rates and figures)", "tests": family},
        "budget": budget.to_dict(),
    }  # fmt: skip


def flags(row: Mapping[str, Any]) -> str:
    out = []
    if row["flips"]:
        out.append("FLIPS")
    if row["rate_moves"]:
        out.append("rate*")
    out += [f"{f}*" for f in row["figures_moved"]]
    return ", ".join(out) or "-"


def render_attribution(doc: Mapping[str, Any]) -> str:
    b = doc["base"]
    lines = [f"machine: {doc['machine']}",
             f"  verdict {b['verdict']}: {b['failed']}/{b['passed'] + b['failed']} failed in {b['runs']} runs", ""]  # fmt: skip
    w = max([len("change"), *(len(r["change"]) for r in doc["rows"])])
    lines.append(f"{'change':<{w}}  {'failed':>7}  {'verdict':<7}  {'p(rate)':>8}  what moved (Holm over {doc['correction']['tests']} tests)")
    for r in doc["rows"]:
        p = r["rate_test"].get("p_holm", r["rate_test"].get("p"))
        ps = f"{p:.3g}" if isinstance(p, float) else "-"
        lines.append(f"{r['change']:<{w}}  {r['failed']:>3}/{r['passed'] + r['failed']:<3}  {r['verdict']:<7}  {ps:>8}  {flags(r)}")
    if doc["skipped"]:
        lines += ["", "skipped:"]
        lines += [f"  {s['change']}: {s['why']}" for s in doc["skipped"]]
    lines += ["", "FLIPS: the majority verdict differs from the machine's; rate*: the pass rate moved (Fisher); "
              "FIGURE*: the figure moved (Welch); both significant at 0.05 after Holm's correction"]  # fmt: skip
    return "\n".join(lines) + "\n"


# --- small helpers ------------------------------------------------------------------------

_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def parse_duration(text: str, what: str = "--budget") -> float:
    """'90', '90s', '20m', '1.5h' -> seconds; anything else a one-line error."""
    m = _DUR.match(str(text))
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"{what} {text!r}: give a duration like 1200, 20m or 1.5h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def fmt_seconds(s: float) -> str:
    s = float(s)
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.1f}m"
    return f"{s / 3600:.1f}h"


def to_toml(spec: Mapping[str, Any]) -> str:
    """A spec's data as TOML (the value kinds a topology spec has)."""

    def val(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, Mapping):
            return "{ " + ", ".join(f"{json.dumps(str(k))} = {val(x)}" for k, x in v.items()) + " }"
        raise TypeError(f"no TOML for {type(v).__name__}")

    lines = [f"{k} = {val(v)}" for k, v in spec.items() if not isinstance(v, Mapping)]
    for k, v in spec.items():
        if isinstance(v, Mapping):
            lines += ["", f"[{k}]"]
            lines += [f"{json.dumps(str(kk)) if not re.fullmatch(r'[A-Za-z0-9_-]+', str(kk)) else kk} = {val(x)}"
                      for kk, x in v.items()]  # fmt: skip
    return "\n".join(lines) + "\n"
