"""What `python -m lab --help` costs at start (issue 33 item 7): moving function-local
imports to module level must not slow it noticeably.

    .venv/bin/python bench/bench_cli_start.py [--runs N] [--lab LABEL=DIR ...]

Runs `python -X importtime -m lab --help` N times with PYTHONPATH=DIR for each --lab
(default: this checkout; give an exported older tree too to compare, the trees taking
turns so host load hits both alike) and writes, per tree, the median and best of: the
wall time, the import time of all lab modules together (their own time, from -X
importtime) and of everything imported, and which lab modules were loaded.
bench/results/bench_cli_start-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import stamp  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def once(lab: Path) -> tuple[float, int, int, list[str]]:
    env = dict(os.environ, PYTHONPATH=str(lab))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "lab", "--help"], capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - t0
    rows = []
    for line in r.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            self_us, _cum, name = line[len("import time:"):].split("|")
            rows.append((name.strip(), int(self_us)))
    lab_mods = sorted({n for n, _ in rows if n == "lab" or n.startswith("lab.")})
    return wall, sum(us for n, us in rows if n in lab_mods), sum(us for _, us in rows), lab_mods


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--lab", action="append", default=[], metavar="LABEL=DIR", help="a tree to measure (repeatable)")
    a = ap.parse_args()
    trees = [(lbl, Path(d)) for lbl, _, d in (x.partition("=") for x in a.lab)] or [("this checkout", REPO)]
    got: dict[str, list] = {lbl: [] for lbl, _ in trees}
    for _ in range(a.runs):
        for lbl, d in trees:
            got[lbl].append(once(d))
    doc: dict = {**stamp(), "bench": "cli_start", "runs": a.runs, "trees": {}}
    for lbl, d in trees:
        walls, labs, alls = ([r[i] for r in got[lbl]] for i in range(3))
        t = {
            "lab": str(d),
            "wall_s": {"median": round(statistics.median(walls), 4), "best": round(min(walls), 4)},
            "lab_import_ms": {"median": round(statistics.median(labs) / 1000, 2), "best": round(min(labs) / 1000, 2)},
            "all_import_ms": {"median": round(statistics.median(alls) / 1000, 2), "best": round(min(alls) / 1000, 2)},
            "lab_modules_loaded": got[lbl][-1][3],
        }  # fmt: skip
        doc["trees"][lbl] = t
        print(f"{lbl}: wall {t['wall_s']}, lab imports {t['lab_import_ms']} ms, "
              f"all imports {t['all_import_ms']} ms, {len(t['lab_modules_loaded'])} lab modules")  # fmt: skip
    dest = REPO / "bench" / "results" / f"bench_cli_start-{time.strftime('%Y%m%d-%H%M%S')}.json"
    dest.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
