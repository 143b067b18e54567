"""Where a lab boot's guest time goes (issue 32 item 6): boots VMs, one at a time.

    .venv/bin/python bench/bench_boot_gaps.py [--topology zen3-2s-mini] [--kernel debian]
        [--rounds 3] [--top 8]

Each round: `lab boot TOPOLOGY --append loglevel=7 -- true` (the console then carries the
kernel's timestamped messages), and the largest gaps between consecutive messages, with
the messages on both sides, the guest's uptime when lab's agent was ready, and lab's and
QEMU's wall times.  Written with the host's load, date and commit to
bench/results/bench_boot_gaps-<time>.json.  Gaps are where the boot waited; which kernel
work they were is read from the messages, not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from provenance import stamp as provenance  # noqa: E402

STAMP = re.compile(r"\[\s*(\d+\.\d+)\]\s?(.*)")


def gaps(console: str, top: int) -> tuple[list[dict], float | None]:
    msgs = [(float(m.group(1)), m.group(2)) for m in map(STAMP.match, console.splitlines()) if m]
    rows = sorted(
        ({"gap_s": round(b[0] - a[0], 3), "at_s": a[0], "after": a[1][:100], "before": b[1][:100]} for a, b in zip(msgs, msgs[1:], strict=False)),
        key=lambda r: -r["gap_s"],
    )
    return rows[:top], (msgs[-1][0] if msgs else None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", default="zen3-2s-mini")
    ap.add_argument("--kernel", default="debian")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    load0 = os.getloadavg()
    lab = str(Path(sys.executable).parent / "lab")
    rounds = []
    for i in range(a.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            cp = subprocess.run([lab, "boot", a.topology, "--kernel", a.kernel, "--append", "loglevel=7", "--", "true"],
                                env={**os.environ, "LAB_RUNS": tmp}, capture_output=True, text=True)  # fmt: skip
            wall = time.monotonic() - t0
            (run,) = Path(tmp).iterdir()
            boot = json.loads((run / "boot.json").read_text())
            top, last = gaps((run / "console.log").read_text(errors="replace"), a.top)
            rounds.append({"round": i + 1, "rc": cp.returncode, "lab_wall_s": round(wall, 2), "qemu_wall_s": boot.get("wall_s"),
                           "guest_ready_uptime": boot.get("guest_ready_uptime"), "last_message_s": last, "gaps": top})  # fmt: skip
            print(f"round {i + 1}: lab {wall:.2f}s, ready at uptime {boot.get('guest_ready_uptime')}, "
                  f"largest gap {top[0]['gap_s'] if top else '-'}s after {top[0]['after'][:50] if top else '-'!r}", flush=True)  # fmt: skip
    doc = {"bench": "boot_gaps", **provenance(), "loadavg_before": list(load0), "topology": a.topology, "kernel": a.kernel,
           "append": "loglevel=7", "rounds": rounds}  # fmt: skip
    out = HERE / "results" / f"bench_boot_gaps-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
