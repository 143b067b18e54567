"""How long `lab qemu fetch` takes from an empty cache: Debian bookworm-backports' QEMU 10
(apt-get update of the backports index, apt-get download of 5 packages, dpkg -x, ldd).

    .venv/bin/python bench/bench_qemu_fetch.py [--repeat 3] [--mirror URL]

Each round fetches into a fresh temporary cache (LAB_CACHE), so nothing is reused, and
times the whole fetch and lab's own steps.  Prints a line per round and writes
bench/results/bench_qemu_fetch-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab import emulators  # noqa: E402


def _provenance() -> dict:
    """The commit measured, as bench_verdicts records it (a result file names its code)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_verdicts import provenance

    return provenance()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mirror", default=emulators.MIRROR)
    a = ap.parse_args()
    rounds = []
    for i in range(a.repeat):
        with tempfile.TemporaryDirectory(prefix="lab-bench-fetch-") as d:
            os.environ["LAB_CACHE"] = d
            t0 = time.monotonic()
            ems, fetched = emulators.fetch(mirror=a.mirror)
            wall = time.monotonic() - t0
            meta = json.loads((emulators.store() / ems[0].entry / "metadata.json").read_text())
            size = sum(p["size"] for p in meta["packages"].values())
            rounds.append({"wall_s": round(wall, 2), "fetch_s": meta["fetch_s"], "downloaded_bytes": size, "fetched": fetched})
            print(f"round {i + 1}: {wall:.1f}s, {size / 1e6:.1f} MB of .debs, QEMU {ems[0].version_str} ({meta['debian_version']})")
    walls = [r["wall_s"] for r in rounds]
    out = {
        "bench": "qemu_fetch", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
        **_provenance(),
        "cpus": os.cpu_count(), "loadavg": os.getloadavg(), "mirror": a.mirror, "qemu": ems[0].version_str,
        "debian_version": meta["debian_version"], "packages": {n: p["version"] for n, p in meta["packages"].items()},
        "rounds": rounds, "median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
    }  # fmt: skip
    res = Path(__file__).resolve().parent / "results"
    res.mkdir(exist_ok=True)
    path = res / f"bench_qemu_fetch-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"median {out['median_s']:.1f}s (min {out['min_s']:.1f}, max {out['max_s']:.1f}); {path}")


if __name__ == "__main__":
    main()
