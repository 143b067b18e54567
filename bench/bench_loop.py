"""Edit-to-verdict: the developer's loop, timed.

    .venv/bin/python bench/bench_loop.py [--rounds 2] [--scenario llc-spread-pinned] [--topology zen3-2s-mini]

A kernel tree outside lab (hard links to lab's unpacked linux-source-6.1) is built
once with `lab run --kernel-tree` (untimed warm-up); then each round edits
kernel/sched/fair.c (a new comment line, written as a new file so the hard link to
the pristine source is kept), and times `lab run SCENARIO --kernel-tree TREE` from
the edit to the verdict: mirror, config check, incremental make with ccache, boot,
workload, trace analysis.  Target (issue 32, 2 cores, TCG): <= 25 s (goal 20).
--jobs 1,2 alternates one run at a time with two side by side (issue 32 item 7).
Writes bench/results/bench_loop-<time>.json.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import stamp  # noqa: E402

from lab.kernel import source  # noqa: E402


def run(tree: Path, scenario: str, topo: str, env: dict, jobs: str = "auto") -> tuple[float, int, str]:
    lab = str(Path(sys.executable).parent / "lab")
    t0 = time.monotonic()
    more = [] if jobs == "auto" else ["--jobs", jobs]
    p = subprocess.run([lab, "run", scenario, "--topology", topo, "--kernel-tree", str(tree), *more], env=env, capture_output=True, text=True)
    return time.monotonic() - t0, p.returncode, p.stdout + p.stderr


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).resolve().parent).stdout.strip()


def edit(tree: Path, n: int) -> None:
    fair = tree / "kernel" / "sched" / "fair.c"
    text = fair.read_text()
    new = fair.with_suffix(".lab-edit")
    new.write_text(text + f"/* lab bench edit {n} */\n")
    os.replace(new, fair)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scenario", default="llc-spread-pinned")
    ap.add_argument("--topology", default="zen3-2s-mini")
    ap.add_argument("--jobs", default="auto", help="comma-separated `lab run --jobs` values, alternating by round (auto: lab's choice)")
    args = ap.parse_args()
    src = source.resolve("debian:6.1")
    rows = []
    with tempfile.TemporaryDirectory(prefix="lab-loop-") as tmp:
        tree = Path(tmp) / "linux"
        subprocess.run(["cp", "-al", str(src.tree), str(tree)], check=True)
        env = {**os.environ, "LAB_RUNS": str(Path(tmp) / "runs")}
        wall, rc, out = run(tree, args.scenario, args.topology, env)
        print(f"warm-up (first build of this tree): {wall:.1f}s, exit {rc}", flush=True)
        rows.append({"round": "warm-up", "wall_s": round(wall, 1), "rc": rc})
        jobs = args.jobs.split(",")
        for i in range(args.rounds):
            t0 = time.monotonic()
            edit(tree, i)
            j = jobs[i % len(jobs)]
            wall, rc, out = run(tree, args.scenario, args.topology, env, j)
            total = time.monotonic() - t0
            build = next((ln for ln in out.splitlines() if ln.startswith("judged ")), "")
            runs = sum(ln.startswith(("PASS ", "FAIL ", "ERROR ", "INCONCLUSIVE ")) for ln in out.splitlines())
            side = "side by side" in out
            print(f"round {i + 1} (--jobs {j}): edit to verdict {total:.1f}s, exit {rc}, {runs} run(s){', side by side' if side else ''}  [{build}]", flush=True)
            rows.append({"round": i + 1, "jobs": j, "wall_s": round(total, 1), "rc": rc, "line": build, "runs": runs, "side_by_side": side})
        from lab import iterate

        iterate.forget_tree(tree, "x86_64")
    best = min(r["wall_s"] for r in rows if r["round"] != "warm-up")
    by_jobs = {j: sorted(r["wall_s"] for r in rows if r.get("jobs") == j) for j in jobs}
    print(f"edit-to-verdict for {args.scenario} on {args.topology}: best {best:.1f}s (target 25s)")
    d = Path(__file__).resolve().parent / "results"
    d.mkdir(exist_ok=True)
    p = d / f"bench_loop-{time.strftime('%Y%m%d-%H%M%S')}.json"
    p.write_text(json.dumps({**stamp(), "bench": "loop", "rows": rows, "best_s": best, "by_jobs": by_jobs, "loadavg": os.getloadavg(),
                             "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "commit": _commit(), "host": os.uname().nodename}, indent=1))
    print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
