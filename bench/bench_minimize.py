"""lab minimize on a real failing run: boots VMs (one at a time).

    .venv/bin/python bench/bench_minimize.py [--scenario llc-spread-pinned]
        [--topology zen3-2s-mini] [--kernel lab-6.1-no-affinity-imbalance]
        [--runs 1] [--budget 20m] [--tries 3]

Runs ``lab run SCENARIO --runs-per-verdict 1`` until one run FAILs (at most --tries), then
``lab minimize RUN_DIR --runs N --budget T`` on it, both with LAB_RUNS under
bench/results/bench_minimize-runs/ (gitignored), and writes the search's summary
(minimize.json: the smallest machine, the chain with each step's rates, what was tried,
skipped and why, the budget spent) with the host's load, date and commit to
bench/results/bench_minimize-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from provenance import stamp as provenance  # noqa: E402

ROOT = HERE.parent


def lab(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, env=env, cwd=ROOT)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="llc-spread-pinned")
    ap.add_argument("--topology", default="zen3-2s-mini")
    ap.add_argument("--kernel", default="lab-6.1-no-affinity-imbalance")
    ap.add_argument("--runs", default="1")
    ap.add_argument("--budget", default="20m")
    ap.add_argument("--tries", type=int, default=3)
    a = ap.parse_args()
    t0 = time.time()
    load0 = os.getloadavg()
    runs = HERE / "results" / "bench_minimize-runs"
    runs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LAB_RUNS": str(runs), "PYTHONPATH": str(ROOT)}
    failing, tries = None, []
    for _ in range(a.tries):
        cp = lab(["run", a.scenario, "--topology", a.topology, "--kernel", a.kernel, "--runs-per-verdict", "1", "--json"], env)
        try:
            rec = json.loads(cp.stdout)["runs"][0]
        except (ValueError, KeyError, IndexError):
            print(cp.stderr, file=sys.stderr)
            return 3
        tries.append({"status": rec["status"], "run_dir": rec["run_dir"]})
        if rec["status"] == "FAIL":
            failing = rec["run_dir"]
            break
    if failing is None:
        print(f"no FAIL in {a.tries} runs: {tries}", file=sys.stderr)
        return 1
    t1 = time.time()
    cp = lab(["minimize", failing, "--runs", a.runs, "--budget", a.budget], env)
    print(cp.stdout)
    m = re.search(r"^saved in (.+)$", cp.stdout, re.M)
    if cp.returncode != 0 or not m:
        print(cp.stderr, file=sys.stderr)
        return 3
    doc_min = json.loads((Path(m[1]) / "minimize.json").read_text())
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(t0))
    doc = {
        "bench": "bench_minimize",
        **provenance(),  # commit, dirty, date, host, load (bench/provenance.py)
        "loadavg_before": list(load0),
        "loadavg": list(os.getloadavg()),
        "scenario": a.scenario, "topology": a.topology, "kernel": a.kernel,
        "runs_per_candidate": int(a.runs), "budget": a.budget,
        "failing_run_tries": [t["status"] for t in tries],
        "minimize_wall_s": round(time.time() - t1, 1),
        "smallest": doc_min["smallest"], "smallest_cpus": doc_min["smallest_cpus"],
        "original": doc_min["original"], "original_cpus": doc_min["original_cpus"],
        "chain": [{k: s.get(k) for k in ("step", "change", "cpus", "passed", "failed", "runs", "fisher_p")} for s in doc_min["chain"]],
        "tried": [{k: t.get(k) for k in ("change", "cpus", "passed", "failed", "kept")} for t in doc_min["tried"]],
        "skipped": doc_min["skipped"],
        "stopped": doc_min["stopped"],
        "budget_spent": doc_min["budget"],
    }  # fmt: skip
    out = HERE / "results" / f"bench_minimize-{stamp}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
