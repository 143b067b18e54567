"""numa-locality's runs re-judged by the current scenario, with when the workers ran.

    .venv/bin/python bench/bench_locality_start.py LABEL RUN_DIR...

Per run: the stored verdict (the scenario version that ran) and the current check()'s
(runner.recheck, no VM), its INCONCLUSIVE cause or note, and the figures that say whether
the workers ran together (fork span, last fork to first exit) and where they ran (local
share, NUMA balancing's moves, swaps, sticks, hinting faults).  The run directories are
large and gitignored; this keeps what the docstring and README quote.  Writes
bench/results/bench_locality_start-LABEL-<time>.json.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))  # bench/provenance.py

from provenance import stamp  # noqa: E402

from lab import runner  # noqa: E402

RAN = ("workers", "together_s", "fork_span_s")
CLAIM = ("local_share", "workers_mostly_home", "window_s", "sched_move_numa", "sched_swap_numa", "sched_stick_numa", "numa_hint_faults",
         "workers_with_preferred_node", "workers_without_hinting_fault", "hint_faults_per_worker_per_scan_period")


MOVE = re.compile(r"sched_move_numa: pid=(\d+) .*src_nid=(\d+) dst_cpu=-?\d+ dst_nid=(\d+)")
SWAP = re.compile(r"sched_swap_numa: src_pid=(\d+) .*src_nid=(\d+) dst_pid=(\d+) .*dst_nid=(\d+)")


def numa_moves(out: Path) -> dict:
    """Where NUMA balancing sent the workers (guest node numbers, as the trace has them): its
    moves to the worker's memory's node, off it, or between two other nodes; its swaps by how
    many of the two tasks they put on their memory's node."""
    home = {}
    for ln in (out / "workers").read_text().splitlines():
        parts = ln.split()
        if len(parts) == 4 and parts[0].isdigit() and parts[1].isdigit():
            home[int(parts[0])] = int(parts[1])
    moves = {"to_home": 0, "off_home": 0, "elsewhere": 0}
    swaps = {"both_home": 0, "one_home": 0, "none_home": 0}
    with open(out / "trace.main.txt", errors="replace") as f:
        for ln in f:
            if m := MOVE.search(ln):
                pid, src, dst = map(int, m.groups())
                if pid in home:
                    moves["to_home" if dst == home[pid] else "off_home" if src == home[pid] else "elsewhere"] += 1
            elif m := SWAP.search(ln):
                a, src, b, dst = map(int, m.groups())
                n = (home.get(a) == dst) + (home.get(b) == src)
                swaps[("none_home", "one_home", "both_home")[n]] += 1
    return {"numa_moves": moves, "numa_swaps": swaps}


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    label, dirs = sys.argv[1], [Path(d) for d in sys.argv[2:]]
    runs = []
    for d in sorted(dirs):
        try:
            stored = json.loads((d / "results.json").read_text())
            cmd = (d / "command").read_text().strip()
        except (OSError, ValueError) as e:
            print(f"{d}: skipped ({e})", file=sys.stderr)
            continue
        o = runner.recheck(d)
        exps = {e.name: e for e in o.expectations}
        ran = next((e for n, e in exps.items() if n.startswith("the workers ran")), None)
        claim = next((e for e in o.expectations if e.claim), None)
        runs.append({
            "run": d.name, "command": cmd, "topology": o.topology, "stored_version": stored.get("scenario_version"),
            "stored_status": stored.get("status"), "status": o.status,
            "cause": (claim.inconclusive or claim.note) if claim else o.message,
            **{k: (ran.figures.get(k) if ran else None) for k in RAN},
            **{k: (claim.figures.get(k) if claim else None) for k in CLAIM},
            **(numa_moves(d / "out") if (d / "out" / "trace.main.txt").is_file() else {}),
        })  # fmt: skip
    doc = {"bench": "locality_start", "label": label, **{k: v for k, v in stamp().items() if k in ("commit", "dirty", "date")},
           "host": os.uname().nodename, "loadavg": os.getloadavg(), "runs": runs}  # fmt: skip
    out = REPO / "bench" / "results" / f"bench_locality_start-{label}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=1, default=str))
    for r in runs:
        print(f"{r['run']}: {r['stored_status']} -> {r['status']}; together {r['together_s']} s, forks over {r['fork_span_s']} s, local {r['local_share']}, preferred node {r['workers_with_preferred_node']}, no fault {r['workers_without_hinting_fault']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
