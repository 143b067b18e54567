"""Every lab benchmark in one command: a table on the terminal, JSON in bench/results/.

    .venv/bin/python bench/bench_all.py [--quick]

1. boot to lab's guest agent against vCPU count: x86 8..255 with lab-6.1 and Debian's
   kernel, arm64 8..128 (Debian's and lab-6.1-arm64), and `lab verify` wall times;
2. edit-to-verdict for llc-spread-pinned on zen3-2s-mini after an edit to fair.c;
3. lab against virtme-ng on the same kernel and topology;
4. trace parser throughput (events/s on 1M events).
--quick stops at 32 vCPUs and skips 255/128.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def step(title: str, argv: list[str]) -> int:
    print(f"\n== {title}\n$ {' '.join(argv)}", flush=True)
    return subprocess.run(argv).returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    py = sys.executable
    x86 = "8,16,32" if a.quick else "8,16,32,64,128,255"
    arm = "8,16,32" if a.quick else "8,16,32,64,128"
    rc = 0
    rc |= step("boot, x86_64", [py, str(HERE / "bench_boot.py"), "--kernel", "lab-6.1,debian", "--vcpus", x86])
    rc |= step("boot, arm64", [py, str(HERE / "bench_boot.py"), "--arch", "arm64", "--kernel", "lab-6.1-arm64,debian", "--vcpus", arm, "--verify", "kunpeng920-2s-mini"])
    rc |= step("edit to verdict", [py, str(HERE / "bench_loop.py")])
    rc |= step("lab vs virtme-ng", [py, str(HERE / "bench_vng.py")])
    rc |= step("trace parser", [py, str(HERE / "bench_parser.py"), "--events", "1000000"])
    return rc


if __name__ == "__main__":
    sys.exit(main())
