"""The same cell through every backend: `lab verify` and one llc-spread-pinned run on
zen3-2s-mini with Debian's kernel, through QEMU, libvirt (qemu:///system) and virtme-ng,
in turn; the wall time of each, its verdict, and the host's load.

    .venv/bin/python bench/bench_backends.py [--rounds 1] [--backends qemu,libvirt,vng]
        [--cells verify,llc-spread-pinned] [--tcg-threads single,multi]

--tcg-threads runs each cell once per value in every round (interleaved, so host noise
hits each alike) and records the value in each row: what libvirt's thread=single buys.

Same verdicts expected (verify PASS; one llc-spread-pinned run on Debian's kernel goes
either way, through any backend: README, "Backends"); what differs is the time to it.  libvirtd must be running.  Writes
bench/results/bench_backends-<time>.json.
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
TOPO = "zen3-2s-mini"
CELLS = {
    "verify": ["verify", TOPO, "--json"],
    "llc-spread-pinned": ["run", "llc-spread-pinned", "--topology", TOPO, "--runs-per-verdict", "1", "--json"],
}


def one(cell: str, backend: str, runs: str, tcg: str = "") -> dict:
    argv = [LAB, *CELLS[cell], "--backend", backend, *(["--tcg-threads", tcg] if tcg else [])]
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "LAB_RUNS": runs})
    wall = time.monotonic() - t0
    verdict = {0: "PASS", 1: "FAIL"}.get(p.returncode, f"ERROR (exit {p.returncode})")
    row = {"cell": cell, "backend": backend, "tcg_threads": tcg or "auto", "wall_s": round(wall, 1), "verdict": verdict, "load1_before": round(load, 1)}
    try:
        doc = json.loads(p.stdout)
        timing = doc["timing"] if "timing" in doc else doc["runs"][-1]["timing"]
        row["boot_to_agent_s"] = timing.get("boot_to_agent_s")
    except (ValueError, KeyError, IndexError):
        row["stderr"] = p.stderr[-500:]
    print(f"{cell:>18} {backend:>8} {tcg or 'auto':>6}: {row['wall_s']:6.1f}s {verdict:<5} boot to agent {row.get('boot_to_agent_s')}s "
          f"(load {load:.1f})", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--backends", default="qemu,libvirt,vng")
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--tcg-threads", default="", help="comma-separated: auto, single, multi")
    args = ap.parse_args()
    cells = args.cells.split(",")
    bad = [c for c in cells if c not in CELLS]
    if bad:
        ap.error(f"--cells: unknown {', '.join(bad)} (known: {', '.join(CELLS)})")
    tcgs = [v for v in args.tcg_threads.split(",") if v] or [""]
    rows = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-backends-") as runs:
        for _ in range(args.rounds):
            for cell in cells:
                for b in args.backends.split(","):
                    for tcg in tcgs:
                        rows.append(one(cell, b, runs, tcg))
    d = HERE / "results"
    d.mkdir(exist_ok=True)
    out = d / f"bench_backends-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({**stamp(), "bench": "backends", "topology": TOPO, "kernel": "debian", "rows": rows}, indent=1))
    print(f"wrote {out}")
    same = {c: {r["verdict"] for r in rows if r["cell"] == c} for c in cells}
    return 0 if all(len(v) == 1 for v in same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
