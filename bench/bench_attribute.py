"""lab attribute for real: boots VMs (one at a time).

    .venv/bin/python bench/bench_attribute.py [--scenario llc-spread-pinned]
        [--topology zen3-2s-mini] [--kernel lab-6.1-no-affinity-imbalance] [--runs N]

Runs ``lab attribute SCENARIO --topology T --kernel K --json`` with LAB_RUNS under
bench/results/bench_attribute-runs/ (gitignored) and writes its table (each property
changed, the verdicts' pass rates and the figures moved, with Fisher/Welch and Holm's
correction) with the host's load, date and commit to
bench/results/bench_attribute-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from provenance import stamp as provenance  # noqa: E402

ROOT = HERE.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="llc-spread-pinned")
    ap.add_argument("--topology", default="zen3-2s-mini")
    ap.add_argument("--kernel", default="lab-6.1-no-affinity-imbalance")
    ap.add_argument("--runs", default=None, help="runs per machine (default: the scenario's verdict_runs)")
    a = ap.parse_args()
    t0 = time.time()
    load0 = os.getloadavg()
    runs = HERE / "results" / "bench_attribute-runs"
    runs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LAB_RUNS": str(runs), "PYTHONPATH": str(ROOT)}
    argv = ["attribute", a.scenario, "--topology", a.topology, "--kernel", a.kernel, "--json"]
    if a.runs:
        argv += ["--runs", a.runs]
    cp = subprocess.run([sys.executable, "-m", "lab", *argv], capture_output=True, text=True, env=env, cwd=ROOT)
    try:
        table = json.loads(cp.stdout)
    except ValueError:
        print(cp.stdout[-2000:], cp.stderr[-3000:], file=sys.stderr)
        return 3
    doc = {"bench": "attribute", **provenance(), "loadavg_before": list(load0), "scenario": a.scenario,
           "topology": a.topology, "kernel": a.kernel, "runs": a.runs, "exit": cp.returncode,
           "wall_s": round(time.time() - t0, 1), "attribute": table}  # fmt: skip
    out = HERE / "results" / f"bench_attribute-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
