"""Where a matrix's cell-seconds go: each kept run's wall time split into what the host and
the guest measured (issue 39 item 3: "anything else the measurements point to").

    bench/bench_run_breakdown.py DIR --source bench/results/bench_matrix-....json

DIR is a matrix directory kept by ``bench/bench_matrix.py --output`` (every run's
results.json, agent.log and out/ under it).  Per run, from lab's own records:

- boot: QEMU start to the agent's "ready" (results.json timing.boot_to_agent_s);
- snapshot: the guest's topology snapshot ("ready" to "snapshot" in agent.log);
- phases: the traced phases (out/phase.P.start to .end, guest uptime);
- job_rest: the rest of the job (setup, steps outside phases, the phases' ends: reading
  the trace out, the counters);
- results: after the job until the VM is gone (the results stream, the reboot), i.e.
  vm_s - boot - snapshot - job;
- host: wall_s - vm_s (prepare, the check, writing the run).

Writes bench/results/bench_run_breakdown-<time>.json: totals and per scenario (runs,
seconds per part), with the matrix result file the runs came from.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import stamp, write_result  # noqa: E402

from lab.integrity import seconds  # noqa: E402

PARTS = ("wall", "boot", "snapshot", "phases", "job_rest", "results", "host")


def _uptime(text: str, what: str) -> float | None:
    m = re.search(rf"^lab: {what} uptime=([\d.]+)", text, re.M)
    return float(m.group(1)) if m else None


def _seconds(p: Path) -> float | None:
    """A phase's start or end as the guest wrote it (lab.integrity.seconds), None if absent."""
    return seconds(p.read_text()) if p.is_file() else None


def run_parts(run: Path) -> dict | None:
    """One run directory's split (seconds, one decimal), or None where a record is missing
    (a run lab did not finish is not counted)."""
    try:
        doc = json.loads((run / "results.json").read_text())
        agent = (run / "agent.log").read_text()
        t = doc["timing"]
        wall, vm, boot = float(t["wall_s"]), float(t["vm_s"]), float(t["boot_to_agent_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    ready, snap = _uptime(agent, "ready"), _uptime(agent, "snapshot")
    start, done = _uptime(agent, "job start"), _uptime(agent, r"done rc=-?\d+")
    if None in (ready, snap, start, done):
        return None
    out = run / "out"
    phases = 0.0
    listed = (out / "lab.phases").read_text().split() if (out / "lab.phases").is_file() else []
    for p in listed:
        a, b = _seconds(out / f"phase.{p}.start"), _seconds(out / f"phase.{p}.end")
        if a is not None and b is not None:
            phases += b - a
    job = done - start
    return {
        "scenario": doc.get("scenario"),
        "topology": doc.get("topology"),
        "status": doc.get("status"),
        "wall": wall,
        "boot": boot,
        "snapshot": snap - ready,
        "phases": phases,
        "job_rest": job - phases,
        "results": vm - boot - (snap - ready) - job,
        "host": wall - vm,
    }


def breakdown(root: Path) -> dict:
    rows = [r for p in sorted(root.rglob("results.json")) if (r := run_parts(p.parent))]
    total = {k: round(sum(r[k] for r in rows), 1) for k in PARTS}
    per: dict[str, dict] = defaultdict(lambda: {"runs": 0, **{k: 0.0 for k in PARTS}})
    for r in rows:
        s = per[r["scenario"]]
        s["runs"] += 1
        for k in PARTS:
            s[k] += r[k]
    scen = {
        name: {"runs": s["runs"], **{k: round(s[k], 1) for k in PARTS}}
        for name, s in sorted(per.items(), key=lambda kv: -kv[1]["wall"])
    }
    share = {k: round(total[k] / total["wall"], 3) if total["wall"] else None for k in PARTS if k != "wall"}
    return {"runs": len(rows), "total_s": total, "share_of_wall": share, "scenarios": scen}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="a matrix directory kept by bench_matrix.py --output")
    ap.add_argument("--source", required=True, help="the bench_matrix result file the runs belong to")
    a = ap.parse_args(argv)
    if not a.dir.is_dir():
        print(f"bench_run_breakdown: {a.dir}: not a directory", file=sys.stderr)
        return 2
    doc = breakdown(a.dir)
    if not doc["runs"]:
        print(f"bench_run_breakdown: {a.dir}: no finished run under it", file=sys.stderr)
        return 2
    doc = {**stamp(), "source": a.source, "dir": str(a.dir), **doc}
    print(json.dumps({k: doc[k] for k in ("runs", "total_s", "share_of_wall")}, indent=1))
    print(write_result("bench_run_breakdown", doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
