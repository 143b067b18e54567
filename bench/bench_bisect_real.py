"""lab bisect --confidence over a real history: builds kernels and boots VMs (one at a time).

    .venv/bin/python bench/bench_bisect_real.py [--confidence 0.95] [--max-runs 30]
        [--majority 3] [--timeout 3600] [--until UNIX_TIME]

The history is tests/build/test_bisect_build.py's: Debian's linux-source-6.1 as a git
tree (hard links, under bench/results/bench_bisect_real-runs/, gitignored) with four
commits on top, the second of which reverts seed 000's fix (the patch
kernels/lab-6.1-no-affinity-imbalance reverts).  It runs ``lab bisect llc-spread-pinned
--topology zen3-2s-mini --kernel-tree T --good BASE --bad HEAD --confidence C``, then
(with --majority N) the fixed majority of N runs over the same clone (its builds are
kept, so the second bisection rebuilds nothing new), each under --timeout seconds (its
process group killed past it, and the method recorded as timed out).  For each method:
the commit named and whether it is the planted revert, the stated confidence, the runs
used (ends included) and each commit's runs and verdict, builds and wall time.  Writes
bench/results/bench_bisect_real-<time>.json; lab's clone of the tree, its build work
directory and the tree itself are removed at the end (~2 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from provenance import stamp as provenance  # noqa: E402

ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from lab import bisect as lab_bisect  # noqa: E402
from lab import iterate, paths  # noqa: E402
from lab.kernel import source  # noqa: E402

FIX = ROOT / "kernels" / "patches" / "sched-fair-find-idlest-group-affinity.patch"
GIT = ["git", "-c", "user.name=lab bench", "-c", "user.email=lab@bench", "-c", "commit.gpgsign=false"]
REVERT = 'sched/fair: Revert "Consider CPU affinity when allowing NUMA imbalance"'


def git(tree: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(tree), *args], check=True, capture_output=True, text=True).stdout.strip()


def own(f: Path) -> None:
    """Break *f*'s hard link to the shared source before changing it."""
    tmp = f.with_name(f.name + ".lab-tmp")
    shutil.copy2(f, tmp)
    os.replace(tmp, f)


def history(tree: Path) -> dict[str, str]:
    """tests/build/test_bisect_build.py's history: base, a doc note, the revert, two more."""
    src = source.resolve("debian:6.1")
    tree.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(src.tree), str(tree)], check=True)
    git(tree, "init", "-q", "-b", "master")
    git(tree, "add", "-A", "--force")
    git(tree, "commit", "-qm", "Linux 6.1 as Debian ships it (linux-source-6.1)")
    shas = {"base": git(tree, "rev-parse", "HEAD")}

    def change(name: str, path: str, edit) -> None:
        f = tree / path
        own(f)
        edit(f)
        git(tree, "commit", "-qam", name)
        shas[name] = git(tree, "rev-parse", "HEAD")

    def append(text: str):
        return lambda f: f.write_text(f.read_text() + text)

    change("Documentation: sched: a note on NUMA imbalance", "Documentation/scheduler/sched-domains.rst",
           append("\n.. A note added by lab's bisect bench.\n"))  # fmt: skip
    change(REVERT, "kernel/sched/fair.c",
           lambda f: subprocess.run(["patch", "-R", "-p1", "-s", "-d", str(tree), "-i", str(FIX)], check=True))  # fmt: skip
    change("Documentation: sched: another note", "Documentation/scheduler/sched-domains.rst", append(".. Another.\n"))
    change("MAINTAINERS: a note", "MAINTAINERS", append("\n"))
    return shas


def bisect(label: str, extra: list[str], tree: Path, shas: dict[str, str], runs: Path, timeout: float) -> dict:
    env = {**os.environ, "LAB_RUNS": str(runs), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "lab", "bisect", "llc-spread-pinned", "--topology", "zen3-2s-mini",
            "--kernel-tree", str(tree), "--good", shas["base"], "--bad", "master", *extra]  # fmt: skip
    before = set(runs.glob("*-bisect-*"))
    t0 = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)  # lab bisect, git bisect run, its step, the build or the VM
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        timed_out = True
    wall = time.time() - t0
    new = sorted(set(runs.glob("*-bisect-*")) - before)
    d = new[-1] if new else None
    steps = []
    if d is not None and (d / "steps.jsonl").is_file():
        for line in (d / "steps.jsonl").read_text().splitlines():
            s = json.loads(line)
            steps.append({"sha": s["sha"][:12], "subject": s["subject"], "role": s.get("role", ""), "status": s["status"],
                          "passed": s["passed"], "failed": s["failed"], "runs": len(s.get("runs") or []),
                          "build_s": s.get("build_s"), "wall_s": s.get("wall_s"),
                          **({"confidence": s["seq"].get("confidence")} if isinstance(s.get("seq"), dict) else {})})  # fmt: skip
    res = json.loads((d / "result.json").read_text()) if d is not None and (d / "result.json").is_file() else {}
    first = res.get("first_bad")
    planted = shas[REVERT]
    return {
        "method": label, "argv": argv[3:], "exit": p.returncode, "timed_out": timed_out, "wall_s": round(wall, 1),
        "first_bad": first, "right": bool(first) and planted.startswith(str(first)[:12]),
        "confidence": res.get("confidence"), "sequential": res.get("sequential"),
        "runs_used": sum(s["runs"] for s in steps), "commits_judged": len(steps), "steps": steps,
        "stdout_tail": out[-1500:], "stderr_tail": "" if p.returncode == 0 else err[-1500:],
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--confidence", default="0.95")
    ap.add_argument("--max-runs", default="30")
    ap.add_argument("--majority", type=int, default=3, help="then the fixed majority of N runs (0: not run)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per bisection")
    ap.add_argument("--until", type=float, default=0.0, help="a Unix time by which every bisection is stopped (0: none)")
    a = ap.parse_args()
    t0 = time.time()
    load0 = os.getloadavg()
    runs = HERE / "results" / "bench_bisect_real-runs"
    runs.mkdir(parents=True, exist_ok=True)
    tree = runs / "tree" / "linux"
    if tree.exists():
        shutil.rmtree(tree.parent)
    def left() -> float:
        return min(a.timeout, a.until - time.time()) if a.until else a.timeout

    shas = history(tree)
    methods = []
    try:
        methods.append(bisect(f"sprt-{a.confidence}", ["--confidence", a.confidence, "--max-runs", a.max_runs], tree, shas, runs, left()))
        if a.majority and not methods[-1]["timed_out"] and left() > 300:
            methods.append(bisect(f"majority-{a.majority}", ["--repeat", str(a.majority)], tree, shas, runs, left()))
    finally:
        clone = paths.cache_dir() / "bisect" / lab_bisect.workspace_name(tree)
        if clone.is_dir():
            try:
                iterate.forget_tree(clone, "x86_64")  # its build work directory (~1.7 GB)
            finally:
                shutil.rmtree(clone, ignore_errors=True)
        shutil.rmtree(tree.parent, ignore_errors=True)
    doc = {
        "bench": "bench_bisect_real", **provenance(), "loadavg_before": list(load0), "loadavg": list(os.getloadavg()),
        "scenario": "llc-spread-pinned", "topology": "zen3-2s-mini",
        "history": {k: v[:12] for k, v in shas.items()}, "planted": shas[REVERT][:12],
        "wall_s": round(time.time() - t0, 1), "methods": methods,
    }  # fmt: skip
    out = HERE / "results" / f"bench_bisect_real-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(t0))}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
