"""A user's scheduler's build time (issue 35 item 2c): `lab scheduler build PATH` on a copy
of tests/fixtures/schedulers/scx_llcnode with content the store has not seen (cold: its
make and static link in the kernel's tools/sched_ext tree, whose libbpf and bpftool an
earlier build left), then again unchanged (cached: a lookup by content), ROUNDS times.

    .venv/bin/python bench/bench_user_scheduler.py [--rounds 3] [--kernel lab-6.12-scx]

Writes bench/results/bench_user_scheduler-<time>.json.  Each round adds one small entry
(about 2 MB) to the scheduler store."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))  # bench/provenance.py
FIXTURE = REPO / "tests" / "fixtures" / "schedulers" / "scx_llcnode"


def build(path: Path, kernel: str) -> tuple[float, str, dict]:
    lab = str(Path(sys.executable).parent / "lab")
    t0 = time.monotonic()
    p = subprocess.run([lab, "scheduler", "build", str(path), "--kernel", kernel], capture_output=True, text=True)
    took = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"lab scheduler build {path}: exit {p.returncode}: {p.stderr.strip()}")
    sid = p.stdout.strip()
    show = subprocess.run([lab, "scheduler", "show", sid], capture_output=True, text=True, check=True)
    return took, sid, json.loads(show.stdout)["metadata"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernel", default="lab-6.12-scx")
    args = ap.parse_args()
    from provenance import stamp

    measured = stamp()  # the commit measured: taken before the builds
    rows = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-usersched-") as tmp:
        for i in range(args.rounds):
            d = Path(tmp) / f"round{i}"
            shutil.copytree(FIXTURE, d)
            c = d / "scx_llcnode.c"
            c.write_text(c.read_text() + f"/* bench round {i} {time.time_ns()} */\n")  # content the store has not seen
            load0 = os.getloadavg()
            cold, sid, meta = build(d, args.kernel)
            cached, sid2, _ = build(d, args.kernel)
            assert sid2 == sid
            rows.append({"round": i + 1, "cold_s": round(cold, 2), "lab_timings": meta.get("timings"), "cached_s": round(cached, 2),
                         "id": sid, "binary_size": meta.get("binary_size"), "loadavg_before": load0})  # fmt: skip
            print(f"round {i + 1}: cold {cold:.1f}s (lab: {meta.get('timings')}), cached {cached:.1f}s", flush=True)
    out = REPO / "bench" / "results" / f"bench_user_scheduler-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({**measured, "kernel": args.kernel, "fixture": str(FIXTURE.relative_to(REPO)), "rows": rows}, indent=1) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
