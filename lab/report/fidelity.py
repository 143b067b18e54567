"""The fidelity stamp of a run: how close its machine is to the real one, under which
emulation conditions it ran, and whether those conditions could explain its result.

Shown at the top of `lab report render` (lab.report.render), kept in a bundle's manifest
(lab.report.bundle) and checked by `lab report replay` (replay_differences()).  Pure
functions of a run's records: the topology spec (its [provenance]), plan.json (as a
dict), results.json's status, expectations and timing (host_* keys written by
lab.runner from lab.host.run_conditions(); runs recorded before them say 'not
recorded'), and lab.expect.deviations() of the plan."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..topology import Topology

CAPTURE_SOURCE = "lab topo capture:"  # lab.importer's [provenance] source of a captured machine
NEAREST = "differs from the capture: "  # lab.importer's note of a nearest buildable machine
STEAL_PCT = (
    10.0  # the hypervisor took at least this share of the host: a guest's timing is not its own
)
# A figure whose name says it measures time or what time decides (a balancer's migrations).
TIMING_FIGURE = re.compile(r"(_s|_ms|_us|_ns|latency|time|migrat|wait|runtime|rate|stable)", re.I)


@dataclass(frozen=True)
class Stamp:
    machine: str  # "exact: ...", "in shape: ...", "deviations: ...", "described: ..."
    run: str  # the emulation conditions
    judgement: str  # whether they could explain the result

    def fields(self) -> list[tuple[str, str]]:
        return [("machine", self.machine), ("run", self.run), ("judged", self.judgement)]

    def text(self, width: int = 80) -> list[str]:
        """'Fidelity:' and its three fields, wrapped at *width* with the value's column kept."""

        out = ["Fidelity:"]
        for k, v in self.fields():
            out += textwrap.wrap(v, width, initial_indent=f"  {k + ':':<9}", subsequent_indent=" " * 11,
                                 break_long_words=True, break_on_hyphens=False)  # fmt: skip
        return out

    def to_dict(self) -> dict[str, str]:
        return {"machine": self.machine, "run": self.run, "judgement": self.judgement}


def machine(topo: Topology, deviations: Sequence[tuple[str, str]] = ()) -> str:
    """The machine against its capture: exact, in shape (a smaller machine of the same
    levels), deviations (the nearest buildable one), or described (no capture: written
    from its sources); then what the guest will not reproduce, by name."""
    prov = topo.provenance
    if NEAREST in prov.notes:
        out = f"deviations: the nearest buildable machine to the capture ({prov.notes.split(NEAREST, 1)[1]})"
    elif prov.derived_from:
        out = f"in shape: a smaller {prov.derived_from} (its levels, distances and SMT kept, fewer CPUs)"
    elif any(s.startswith(CAPTURE_SOURCE) for s in prov.sources):
        src = next(s for s in prov.sources if s.startswith(CAPTURE_SOURCE))[
            len(CAPTURE_SOURCE) :
        ].strip()
        out = f"exact: imported from a capture ({src})"
    else:
        out = "described: written from its sources, no capture to compare with"
    if deviations:
        out += "; the guest does not reproduce: " + ", ".join(n for n, _ in deviations)
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def conditions(topo: Topology, plan: dict[str, Any], timing: dict[str, Any]) -> str:
    """Accelerator, QEMU version and CPU model (its vendor against the spec's), and the
    host's cores, load and steal during the run."""
    qv = plan.get("qemu_version")
    qemu = ".".join(map(str, qv)) if isinstance(qv, list) and qv else "?"
    model = str(plan.get("cpu_model") or "?").split(",")[0]
    vendor = str(plan.get("cpu_vendor") or "")
    cpu = f"CPU model {model}" + (f" ({vendor})" if vendor else "")
    if vendor and topo.arch == "x86_64" and vendor != topo.vendor:
        cpu += (
            f" for an {topo.vendor} machine"
            if topo.vendor[:1] in "aeiou"
            else f" for a {topo.vendor} machine"
        )
    return f"{plan.get('accel') or '?'}, QEMU {qemu}, {cpu}; {host_line(timing)}"


def host_line(timing: dict[str, Any]) -> str:
    cpus = _num(timing.get("host_cpus"))
    a, b = _num(timing.get("host_load_start")), _num(timing.get("host_load_end"))
    steal = _num(timing.get("host_steal_pct"))
    if cpus is None and a is None and b is None:
        return "host load and steal not recorded"
    out = f"host {cpus:g} cores" if cpus is not None else "host cores not recorded"
    if a is not None or b is not None:
        out += f", load {'?' if a is None else f'{a:g}'} at start, {'?' if b is None else f'{b:g}'} at end"
    out += f", steal {steal:g} %" if steal is not None else ", steal not recorded"
    return out


def _timing_failures(expectations: list[dict[str, Any]]) -> list[str]:
    """Failed expectations whose figures measure time or what time decides."""
    out = []
    for e in expectations:
        if e.get("status") in ("FAIL", "INCONCLUSIVE"):
            figs = f if isinstance(f := e.get("figures"), dict) else {}
            if any(TIMING_FIGURE.search(str(k)) for k in figs):
                out.append(str(e.get("name")))
    return out


def judge(
    topo: Topology,
    plan: dict[str, Any],
    timing: dict[str, Any],
    status: str,
    expectations: list[dict[str, Any]],
) -> str:
    """Whether the conditions could explain the result: TCG with a timing-sensitive
    failure on a host loaded above its cores; steal of STEAL_PCT or more; an Intel model
    for an AMD machine (or the reverse) whose node_reclaim_distance differs from the real
    one where a node distance lies between the two (the vendor effect: the NUMA domains
    at that distance fork-balance on one and not the other)."""
    could: list[str] = []
    unknown: list[str] = []
    fail = status in ("FAIL", "INCONCLUSIVE")
    timed = _timing_failures(expectations) if fail else []
    cpus = _num(timing.get("host_cpus"))
    loads = [
        x
        for x in (_num(timing.get("host_load_start")), _num(timing.get("host_load_end")))
        if x is not None
    ]
    if timed and plan.get("accel") == "tcg":
        what = f"TCG and a timing-sensitive failure ({'; '.join(timed[:2])}{', ...' if len(timed) > 2 else ''})"
        if not loads or cpus is None:
            unknown.append(f"{what}, host load not recorded")
        elif max(loads) > cpus:
            could.append(f"{what} with the host's load {max(loads):g} above its {cpus:g} cores")
    steal = _num(timing.get("host_steal_pct"))
    if fail and steal is not None and steal >= STEAL_PCT:
        could.append(f"the hypervisor stole {steal:g} % of the host's CPU time")
    vendor = str(plan.get("cpu_vendor") or "")
    if topo.arch == "x86_64" and vendor and vendor != topo.vendor:
        guest = _num(plan.get("guest_node_reclaim_distance"))
        real = topo.node_reclaim_distance
        ds = sorted({d for row in topo.distances for d in row if d > 10})
        if guest is not None and guest != real:
            lo, hi = min(guest, real), max(guest, real)
            between = [d for d in ds if lo < d <= hi]
            if between:
                could.append(f"the vendor effect: the guest's {vendor} model sets node_reclaim_distance={guest:g}, the real "
                             f"{topo.vendor} machine {real}, so domains at distance {'/'.join(map(str, between))} "
                             "balance forks on one and not the other")  # fmt: skip
    word = status if status in ("PASS", "FAIL", "INCONCLUSIVE") else "result"
    if could:
        return f"conditions could explain the {word}: " + "; ".join(could)
    if unknown:
        return "cannot rule out the conditions: " + "; ".join(unknown)
    return f"conditions unlikely to explain the {word}"


def stamp(
    topo: Topology,
    plan: dict[str, Any],
    results: dict[str, Any],
    deviations: Sequence[tuple[str, str]] = (),
) -> Stamp:
    timing = t if isinstance(t := results.get("timing"), dict) else {}
    exps = [e for e in results.get("expectations") or [] if isinstance(e, dict)]
    return Stamp(
        machine(topo, list(deviations)),
        conditions(topo, plan, timing),
        judge(topo, plan, timing, str(results.get("status") or "?"), exps),
    )


def replay_differences(
    before_plan: dict[str, Any], before_cpus: Any, now_plan: dict[str, Any], now_cpus: int
) -> list[str]:
    """Where the replaying host's conditions differ from the bundle's: accelerator, QEMU
    version, CPU model, host cores; one line either way."""

    def q(p: dict[str, Any]) -> str:
        v = p.get("qemu_version")
        return ".".join(map(str, v)) if isinstance(v, (list, tuple)) and v else "?"

    def m(p: dict[str, Any]) -> str:
        return str(p.get("cpu_model") or "?").split(",")[0]

    pairs = [
        ("accelerator", str(before_plan.get("accel") or "?"), str(now_plan.get("accel") or "?")),
        ("QEMU", q(before_plan), q(now_plan)),
        ("CPU model", m(before_plan), m(now_plan)),
        (
            "host cores",
            "not recorded" if _num(before_cpus) is None else f"{_num(before_cpus):g}",
            str(now_cpus),
        ),
    ]
    diff = [f"{k} {a} -> {b}" for k, a, b in pairs if a != b]
    if diff:
        return ["fidelity: the conditions differ from the bundle's: " + "; ".join(diff)]
    return [
        f"fidelity: the same conditions as the bundle's ({pairs[0][1]}, QEMU {pairs[1][1]}, CPU model {pairs[2][1]}, {now_cpus} host cores)"
    ]
