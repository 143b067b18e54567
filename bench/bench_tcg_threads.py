"""One TCG thread for all vCPUs against one per vCPU, for a scenario's whole run (issue 39
item 3: what the kunpeng cells' time points to).

    .venv/bin/python bench/bench_tcg_threads.py
        [--cases cpuset-isolation@kunpeng920-2s-mini,cpuset-isolation@zen3-2s-mini] [--rounds 1]

lab's `--tcg-threads auto` picks one thread (round-robin) for more than 2 vCPUs per host
core with bring-up at boot, from boot measurements (the README's "Boot speed" table).  A
scenario whose workload keeps many vCPUs busy runs after the boot, where the round-robin
thread gives each busy vCPU its turn and every wakeup of another vCPU waits for it.
Each round runs every case as `lab run SCENARIO --topology T --tcg-threads single|multi
--runs-per-verdict 1 --json`, the two one after the other, and keeps the verdict, the
command's wall time, the boot to lab's agent and the host load at the start.  Writes
bench/results/bench_tcg_threads-<time>.json with host load, date and commit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from provenance import lab_run_json, stamp, write_result  # noqa: E402


def one(lab: str, scenario: str, topology: str, threads: str, runs: Path) -> dict:
    argv = [
        lab,
        "run",
        scenario,
        "--topology",
        topology,
        "--tcg-threads",
        threads,
        "--runs-per-verdict",
        "1",
        "--json",
    ]
    wall, rc, run, last = lab_run_json(argv, runs)
    row: dict = {
        "scenario": scenario,
        "topology": topology,
        "tcg_threads": threads,
        "rc": rc,
        "wall_s": wall,
    }
    if run is None:
        row["error"] = last
        return row
    t = run.get("timing") or {}
    row.update(status=run["status"], boot_to_agent_s=t.get("boot_to_agent_s"), vm_s=t.get("vm_s"),
               host_load_start=t.get("host_load_start"), host_busy_pct=t.get("host_busy_pct"))  # fmt: skip
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--cases", default="cpuset-isolation@kunpeng920-2s-mini,cpuset-isolation@zen3-2s-mini"
    )
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    lab = str(Path(sys.executable).parent / "lab")
    load0 = os.getloadavg()
    cases = [c.split("@", 1) for c in a.cases.split(",") if c]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-tcg-threads-") as tmp:
        for r in range(a.rounds):
            for scenario, topology in cases:
                for threads in ("single", "multi"):
                    row = one(lab, scenario, topology, threads, Path(tmp))
                    row["round"] = r + 1
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    doc = {
        "bench": "tcg_threads",
        **stamp(),
        "loadavg_before": list(load0),
        "args": vars(a),
        "rows": rows,
    }
    out = write_result("bench_tcg_threads", doc)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
