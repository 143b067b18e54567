"""Each run's expectations and figures from run directories, as a small committed file.

    .venv/bin/python bench/figures_from_runs.py LABEL RUN_DIR... [--where 'TEXT']

A README table quotes figures of a series of runs; the run directories are large and
gitignored, so this keeps what the table quotes: per run its command, status, load,
and each expectation's ok and figures, and per figure its min and max over the runs.
--where keeps only runs whose command contains TEXT (e.g. a knob of one variant).
Writes bench/results/figures-LABEL-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("run_dirs", nargs="+", type=Path)
    ap.add_argument("--where", default="", help="keep runs whose command contains this text")
    ap.add_argument("--not-where", default="", help="drop runs whose command contains this text")
    args = ap.parse_args()
    runs, ranges = [], {}
    for d in sorted(args.run_dirs):
        try:
            r = json.loads((d / "results.json").read_text())
            cmd = (d / "command").read_text().strip()
        except (OSError, ValueError) as e:
            print(f"{d}: skipped ({e})", file=sys.stderr)
            continue
        if args.where and args.where not in cmd or args.not_where and args.not_where in cmd:
            continue
        exps = {e["name"]: {"ok": e.get("ok"), "figures": e.get("figures", {})} for e in r.get("expectations", [])}
        runs.append({"run": d.name, "command": cmd, "status": r.get("status"), "kernel": r.get("kernel"),
                     "started": (r.get("integrity") or {}).get("started"), "expectations": exps})  # fmt: skip
        for name, e in exps.items():
            for k, v in e["figures"].items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    lo, hi = ranges.get(f"{name}: {k}", (v, v))
                    ranges[f"{name}: {k}"] = (min(lo, v), max(hi, v))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent).stdout.strip()  # fmt: skip
    doc = {"bench": "figures_from_runs", "label": args.label, "where": args.where, "not_where": args.not_where,
           "statuses": {s: sum(x["status"] == s for x in runs) for s in sorted({x["status"] for x in runs})},
           "ranges": {k: list(v) for k, v in sorted(ranges.items())}, "runs": runs, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "commit": commit, "host": os.uname().nodename, "loadavg": os.getloadavg()}  # fmt: skip
    out = Path(__file__).resolve().parent / "results" / f"figures-{args.label}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=1, default=str))
    print(f"{len(runs)} runs {doc['statuses']}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
