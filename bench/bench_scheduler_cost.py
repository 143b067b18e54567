"""What `--scheduler` costs a run (issue 35 item 7): the same run with the kernel's own
scheduler and with each BPF scheduler, interleaved round by round.

    .venv/bin/python bench/bench_scheduler_cost.py [--scenario scheduler-survives]
        [--topology zen3-2s-mini] [--kernel lab-6.12-scx] [--schedulers scx_simple,scx_bpfland] [--rounds 3]

Each round runs `lab run SCENARIO --topology T --kernel K --runs-per-verdict 1 --json`
once with no `--scheduler` (the kernel's own) and once per scheduler, and keeps the
command's wall time, the verdict, and from the guest's agent.log the scheduler's own
share: from `scheduler start` to `scheduler enabled` (the loader, the verifier and the
JIT under TCG) and from the end of the job to `done` (stopping it).  The cost of a
scheduler is the median wall time with it minus the median without.  Writes
bench/results/bench_scheduler_cost-<time>.json with host load, date and commit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from provenance import lab_run_json, stamp, write_result  # noqa: E402

UPTIME = re.compile(r"^lab: (.*?) uptime=([\d.]+)$")


def agent_times(run_dir: Path) -> dict[str, float | None]:
    """The scheduler's part of the guest's time, from agent.log's uptimes."""
    at: dict[str, float] = {}
    for ln in (run_dir / "agent.log").read_text(errors="replace").splitlines():
        m = UPTIME.match(ln.strip())
        if not m:
            continue
        what = m.group(1).split()
        key = " ".join(what[:2]) if what[0] in ("scheduler", "job") else what[0]
        at.setdefault(key, float(m.group(2)))

    def span(a: str, b: str) -> float | None:
        return round(at[b] - at[a], 2) if a in at and b in at else None

    return {"to_enabled_s": span("scheduler start", "scheduler enabled"), "stop_s": span("scheduler stopped", "done"),
            "ready_to_done_s": span("ready", "done")}  # fmt: skip


def one(lab: str, a: argparse.Namespace, scheduler: str | None, runs: Path) -> dict:
    argv = [
        lab,
        "run",
        a.scenario,
        "--topology",
        a.topology,
        "--kernel",
        a.kernel,
        "--runs-per-verdict",
        "1",
        "--json",
    ]
    if scheduler:
        argv += ["--scheduler", scheduler]
    wall, rc, run, last = lab_run_json(argv, runs)
    row: dict = {"scheduler": scheduler or "eevdf", "rc": rc, "wall_s": wall}
    if run is None:
        row["error"] = last
        return row
    row["status"] = run["status"]
    if run.get("run_dir"):
        row.update(agent_times(Path(run["run_dir"])))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="scheduler-survives")
    ap.add_argument("--topology", default="zen3-2s-mini")
    ap.add_argument("--kernel", default="lab-6.12-scx")
    ap.add_argument("--schedulers", default="scx_simple,scx_bpfland")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    lab = str(Path(sys.executable).parent / "lab")
    load0 = os.getloadavg()
    scheds: list[str | None] = [None, *[s for s in a.schedulers.split(",") if s]]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-sched-cost-") as tmp:
        for r in range(a.rounds):
            for s in scheds:
                row = one(lab, a, s, Path(tmp))
                row["round"] = r + 1
                rows.append(row)
                print(json.dumps(row), flush=True)
    med: dict[str, float] = {}
    for s in scheds:
        name = s or "eevdf"
        walls = [x["wall_s"] for x in rows if x["scheduler"] == name and x.get("status")]
        if walls:
            med[name] = round(statistics.median(walls), 2)
    cost = {
        k: round(v - med["eevdf"], 2) for k, v in med.items() if k != "eevdf" and "eevdf" in med
    }
    doc = {"bench": "scheduler_cost", **stamp(), "loadavg_before": list(load0), "args": vars(a), "rows": rows,
           "median_wall_s": med, "cost_s": cost}  # fmt: skip
    out = write_result("bench_scheduler_cost", doc)
    print(f"medians {med}; cost over the kernel's own scheduler {cost}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
