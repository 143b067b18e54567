"""What a lab command pays when its modules have no bytecode (issue 32 items 6 and 7).

    .venv/bin/python bench/bench_bytecode.py [--rounds 7] [--topology zen3-2s-mini]

An editable install (`pip install -e .`, what scripts/setup.sh does) writes no bytecode
for lab's own modules; Python writes it on first import, unless PYTHONDONTWRITEBYTECODE is
set in the environment (it is in this machine's shells), and then every lab command
compiles its ~140 modules again.  scripts/setup.sh therefore compiles them once
(`python -m compileall lab`).  This bench exports this commit twice (git archive), compiles
one copy's lab/ and not the other's, and times `python -m lab boot TOPOLOGY --dry-run --
true` (the whole plan of a boot, no guest) from each, alternating, with
PYTHONDONTWRITEBYTECODE=1 so the uncompiled copy stays so.  Writes
bench/results/bench_bytecode-<time>.json (medians, rows, host load, date, commit).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from provenance import stamp  # noqa: E402


def export(dest: Path) -> None:
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def timed(tree: Path, topology: str) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "lab", "boot", topology, "--dry-run", "--", "true"], capture_output=True, env=env, cwd=tree)
    return time.perf_counter() - t0, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--topology", default="zen3-2s-mini")
    a = ap.parse_args()
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="lab-bytecode-") as tmp:
        trees = {"source only": Path(tmp) / "plain", "compiled": Path(tmp) / "compiled"}
        for t in trees.values():
            export(t)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(trees["compiled"] / "lab")], check=True, stdout=subprocess.DEVNULL)
        for r in range(a.rounds):
            order = list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]
            for name, tree in order:
                wall, rc = timed(tree, a.topology)
                rows.append({"round": r + 1, "what": name, "wall_s": round(wall, 3), "rc": rc})
                print(f"round {r + 1} {name}: {wall:.3f}s rc={rc}", flush=True)
    med = {w: statistics.median(x["wall_s"] for x in rows if x["what"] == w and x["rc"] == 0) for w in ("source only", "compiled")}
    doc = {"bench": "bytecode", **stamp(), "topology": a.topology, "command": "python -m lab boot TOPOLOGY --dry-run -- true",
           "rows": rows, "median_s": med, "saved_s": round(med["source only"] - med["compiled"], 3),
           "loadavg_before": list(load0), "loadavg_after": list(os.getloadavg())}  # fmt: skip
    out = HERE / "results" / f"bench_bytecode-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"medians {med}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
