"""The full mini matrix's wall time: every catalog mini x every scenario that fits, on
one kernel, at each -j given (default 1 and 2), every cell run afresh (--rerun).

    .venv/bin/python bench/bench_matrix.py [--jobs 1,2] [--kernels debian]
    .venv/bin/python bench/bench_matrix.py --jobs 2 --kernels lab-6.12-scx --scenarios scheduler-survives \
        --schedulers eevdf,scx_simple,scx_qmap --topologies zen3-2s-mini,numa4-96-mini,epyc7551-8n-mini,xeon-2s22c-mini

Writes bench/results/bench_matrix-<time>.json: per -j the wall time, the host's load
average before and after (the host is shared: say it with the figure), and each cell's
status, wall time and message (a SKIP's or ERROR's reason, a FAIL's failed expectation).
The cells run one after another per -j, never two -j at once.  `--output DIR` keeps each
-j's matrix directory (DIR/j<N>: the cells' run directories, their evidence) instead of
a temporary one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import stamp  # noqa: E402

HERE = Path(__file__).resolve().parent
LAB = str(Path(sys.executable).parent / "lab")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="1,2", help="the -j values, in order")
    ap.add_argument("--kernels", default="debian")
    ap.add_argument("--topologies", default="all-minis")
    ap.add_argument("--scenarios", default="", help="the matrix's --scenarios (default: all)")
    ap.add_argument("--schedulers", default="", help="the matrix's --schedulers axis (default: none)")
    ap.add_argument("--output", default="", help="keep each -j's matrix directory as OUTPUT/j<N> (default: a temporary one)")
    a = ap.parse_args()
    rows = []
    for j in [int(x) for x in a.jobs.split(",")]:
        with tempfile.TemporaryDirectory(prefix="bench-matrix-") as tmp:
            out = Path(a.output) / f"j{j}" if a.output else Path(tmp) / "m"
            load0 = os.getloadavg()
            t0 = time.monotonic()
            argv = [LAB, "matrix", "--topologies", a.topologies, "--kernels", a.kernels, "-j", str(j), "--rerun", "-o", str(out)]
            argv += ["--scenarios", a.scenarios] if a.scenarios else []
            argv += ["--schedulers", a.schedulers] if a.schedulers else []
            print("$", " ".join(argv), flush=True)
            rc = subprocess.run(argv).returncode
            wall = time.monotonic() - t0
            doc = json.loads((out / "matrix.json").read_text())
            rows.append({
                "jobs": j, "rc": rc, "wall_s": round(wall, 1), "load_before": load0, "load_after": os.getloadavg(),
                "counts": doc["counts"],
                "cells": {c["id"]: {"status": c["status"], "wall_s": c["wall_s"], "message": c.get("message", "")} for c in doc["cells"]},
            })  # fmt: skip
            print(f"-j {j}: {wall:.0f}s, {doc['counts']}, load {load0[0]:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    path = res / f"bench_matrix-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({**stamp(), "host_cores": os.cpu_count(), "kernels": a.kernels, "topologies": a.topologies,
                                "scenarios": a.scenarios or "all", "schedulers": a.schedulers or None, "runs": rows}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
