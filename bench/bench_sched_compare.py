"""A seed scenario on the kernel's own scheduler against a BPF scheduler (issue 35 item 6):
`lab compare SCENARIO --scheduler eevdf --scheduler scx_simple` on one kernel, REPEAT
runs a side interleaved.  The BPF side's claims about the kernel's own scheduler are
INCONCLUSIVE; its placement figures are compared beside the kernel's.

    .venv/bin/python bench/bench_sched_compare.py [--scenario llc-spread-pinned]
        [--topology zen3-2s-mini] [--kernel lab-6.12-scx] [--scheduler scx_simple] [--repeat 5]

Writes bench/results/bench_sched_compare-<scenario>-<time>.json: the comparison document
(lab.compare) with the commit, host and load; the run directories stay in LAB_RUNS."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))  # bench/provenance.py


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="llc-spread-pinned")
    ap.add_argument("--topology", default="zen3-2s-mini")
    ap.add_argument("--kernel", default="lab-6.12-scx")
    ap.add_argument("--scheduler", default="scx_simple")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from provenance import stamp

    measured = stamp()  # the commit measured: taken before the runs
    argv = ["compare", args.scenario, "--topology", args.topology, "--kernel", args.kernel,
            "--scheduler", "eevdf", "--scheduler", args.scheduler, "--repeat", str(args.repeat), "--json"]  # fmt: skip
    load0 = os.getloadavg()
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "lab", *argv], capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode not in (0, 3):
        raise SystemExit(f"lab {' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()[-2000:]}")
    doc = json.loads(p.stdout)
    for side in doc["sides"].values():
        side.pop("kernel_info", None)  # the kernel's build record, once per run: not the figures
    out = REPO / "bench" / "results" / f"bench_sched_compare-{args.scenario}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({**measured, "command": ["lab", *argv], "exit": p.returncode, "wall_s": round(wall, 1),
                               "loadavg_before": list(load0), "loadavg_after": list(os.getloadavg()),
                               "comparison": doc}, indent=1) + "\n")  # fmt: skip
    print(p.stderr.strip()[-1500:])
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
