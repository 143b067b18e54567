"""numa-balancing's recorded runs, read again: how long numa01's placement stayed converged
each time it converged (the trace's placement_timeline(), seconds after the first worker's
placement), which of those stretches it left again, the watcher's decisions where the run
had one (numa01.watch), the phase lengths, and numa02's cumulative local share of hinting
faults sample by sample.  The figures behind the scenario's HOLD_MIN and its keeping
numa02 at 60 s (issue 39).

    .venv/bin/python bench/bench_numa_holds.py RUN_DIR... | --glob 'bench/results/bench_verdicts-*-runs/*numa-balancing*'

Reads run directories only (no VM).  Writes bench/results/bench_numa_holds-<time>.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))  # bench/provenance.py
sys.path.insert(0, str(REPO))


def read_run(d: Path) -> dict:
    from lab import scenario as sc
    from lab.plan import VmPlan

    s = sc.load("numa-balancing")
    mod = sys.modules[type(s).__module__]
    plan = VmPlan.read(d)
    r = sc.Result(s, plan.topo, plan, plan.kernel, d / "out")
    paths = r.task_paths(mod.PHASE)
    forks = [(e.parent_pid, e.child_pid) for e in r.events(mod.PHASE, only=["sched_process_fork"])]
    procs = mod.worker_procs(paths, forks)
    threads, _ = mod.thread_nodes(paths, r.topo, procs=procs)
    tpp = mod.threads_per_proc(r, threads)
    need = max(1, math.ceil(tpp / min(len(r.topo.node_cpus(n)) for n in r.topo.node_ids)))
    t0, end, changes = mod.placement_timeline(paths, r.topo, need, procs)
    stretches = []
    for (ts, ok), nxt in zip(changes, [*(c[0] for c in changes[1:]), end], strict=True):
        if ok:
            stretches.append([round(ts - t0, 1), round(nxt - ts, 1)])
    left = stretches[:-1] if changes and changes[-1][1] else stretches  # the last one too, if it ended unconverged
    out = r.out

    def phase_s(p: str) -> float | None:
        try:
            return round(float((out / f"phase.{p}.end").read_text()) - float((out / f"phase.{p}.start").read_text()), 1)
        except (OSError, ValueError):
            return None

    numa02 = []
    samples = mod.vmstat_samples((out / f"vmstat.{mod.PHASE2}.samples").read_text()) if (out / f"vmstat.{mod.PHASE2}.samples").is_file() else []
    before = mod.vmstat_samples("t 0\n" + (out / f"vmstat.{mod.PHASE2}.before").read_text()) if samples else []
    if samples and before:
        f0, l0 = before[0][1]["numa_hint_faults"], before[0][1]["numa_hint_faults_local"]
        for t, c in samples:
            f = c["numa_hint_faults"] - f0
            loc = c["numa_hint_faults_local"] - l0
            numa02.append([round(t - samples[0][0], 1), f, round(loc / f, 3) if f else None])
    watch = out / f"{mod.PHASE}.watch"
    wtext = watch.read_text() if watch.is_file() else ""
    samples_taken = [int(n) for n in re.findall(r"\((\d+) samples\)", wtext)]
    return {
        "run": d.name,
        "topology": r.topo.name,
        "numa_balancing": "off" if mod.balancing_off(r) else "on",
        "threads": len(threads),
        "numa01_phase_s": phase_s(mod.PHASE),
        "numa02_phase_s": phase_s(mod.PHASE2),
        "numa01_run_s": round(end - t0, 1),
        "converged_stretches": stretches,  # [start s, length s]
        "left_stretches_max_s": max((s[1] for s in left), default=None),
        "watch": {**mod.watch_figures(wtext), "samples": samples_taken[-1] if samples_taken else None} if wtext else None,
        "watch_lines": wtext.splitlines()[1:],
        "numa02_cumulative_local_share": numa02,  # [s after the first sample, faults, local share]
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--glob", action="append", default=[], help="run directories by pattern")
    args = ap.parse_args()
    dirs = [*args.runs, *(Path(p) for g in args.glob for p in sorted(glob.glob(g)))]
    if not dirs:
        ap.error("no run directories given")
    from provenance import stamp

    rows = []
    for d in dirs:
        try:
            rows.append(read_run(d))
        except Exception as e:  # a run that cannot be read is named, not fatal
            rows.append({"run": d.name, "error": f"{type(e).__name__}: {e}"[:300]})
        print(json.dumps(rows[-1])[:300], flush=True)
    when = time.strftime("%Y%m%d-%H%M%S")
    doc = {"when": when, **{k: v for k, v in stamp().items() if k in ("commit", "dirty", "date")},
           "host": {"cpus": os.cpu_count(), "loadavg": list(os.getloadavg())}, "rows": rows}  # fmt: skip
    path = REPO / "bench" / "results" / f"bench_numa_holds-{when}.json"
    path.write_text(json.dumps(doc, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
