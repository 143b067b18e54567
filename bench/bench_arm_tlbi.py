"""scheduler-survives on kunpeng920-2s-mini, two runs at once, by arm64 CPU model.

    .venv/bin/python bench/bench_arm_tlbi.py [--rounds 3] [--kernel debian]
        [--variants before,kpti0,now]

Why: under single-threaded TCG every broadcast TLB invalidation (TLBI ...IS) ends the
issuing vCPU's turn, and the kernel flushes a range below 512 pages with one TLBI per
page (twice with KPTI) in a loop where a voluntary-preemption kernel does not
reschedule; a task woken onto that vCPU waits until the loop ends (render.qemu's
ARM_MODEL).  Each round runs every variant, in turn, as two `lab run scheduler-survives`
at once (the load of a -j2 matrix, where the FAILs were seen):

* before: lab's arm64 CPU before the change, cortex-a72 with KPTI (forced on by KASLR:
  `--append kpti=1` puts it back over lab's kpti=0);
* kpti0: cortex-a72 with lab's kpti=0 (no TLBI range: one TLBI per page);
* now: lab's default, QEMU's max CPU (TLBI range, no KPTI).

Each run's verdict, its longest runnable wait (the claim "no runnable task waited longer
than 10 s"), who waited, and its VM time.  Writes bench/results/bench_arm_tlbi-<time>.json
with the host's load, date and commit.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import stamp, write_result  # noqa: E402

VARIANTS = {
    "before": ["--cpu-model", "cortex-a72", "--append", "kpti=1"],
    "kpti0": ["--cpu-model", "cortex-a72"],
    "now": [],
}
WAIT = "no runnable task waited longer than"
LAB = str(Path(sys.executable).parent / "lab")


def one(runs: Path) -> dict:
    """The run under *runs*: its verdict, longest wait and who waited, VM time, CPU model."""
    res = next(iter(sorted(runs.glob("*/results.json"))), None)
    if res is None:
        return {"verdict": "NONE", "cpu_model": None}
    r = json.loads(res.read_text())
    wait = next((e for e in r.get("expectations", []) if e["name"].startswith(WAIT)), {})
    plan = res.parent / "plan.json"
    return {
        "verdict": r.get("status"),
        "longest_wait_s": (wait.get("figures") or {}).get("longest_wait_s"),
        "who": (wait.get("evidence") or [""])[0][:120],
        "vm_s": (r.get("timing") or {}).get("vm_s"),
        "cpu_model": json.loads(plan.read_text()).get("cpu_model") if plan.is_file() else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernel", default="debian")
    ap.add_argument("--variants", default="before,kpti0,now")
    a = ap.parse_args()
    names = [v for v in a.variants.split(",") if v]
    bad = [v for v in names if v not in VARIANTS]
    if bad:
        print(f"bench_arm_tlbi: unknown variant {bad[0]!r}; known: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench_arm_tlbi-") as tmp:
        for rnd in range(1, a.rounds + 1):
            for v in names:
                procs = []
                for k in ("a", "b"):
                    runs = Path(tmp) / f"{v}-{rnd}-{k}"
                    argv = [LAB, "run", "scheduler-survives", "-t", "kunpeng920-2s-mini", "--kernel", a.kernel,
                            "--runs", str(runs), *VARIANTS[v]]  # fmt: skip
                    procs.append((k, runs, subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
                t0 = time.monotonic()
                for k, runs, p in procs:
                    row = {"round": rnd, "variant": v, "which": k, "rc": p.wait(), **one(runs)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                print(f"# round {rnd} {v}: {time.monotonic() - t0:.0f} s, load {os.getloadavg()[0]:.1f}", flush=True)
    summary = {}
    for v in names:
        mine = [r for r in rows if r["variant"] == v]
        waits = [r["longest_wait_s"] for r in mine if r["longest_wait_s"] is not None]
        summary[v] = {
            "runs": len(mine),
            "verdicts": {s: sum(r["verdict"] == s for r in mine) for s in sorted({r["verdict"] for r in mine})},
            "longest_wait_s": [min(waits), max(waits)] if waits else None,
            "vm_s": sorted(r["vm_s"] for r in mine if r["vm_s"] is not None),
        }
    out = {
        **stamp(),
        "bench": "arm_tlbi",
        "kernel": a.kernel,
        "rounds": a.rounds,
        "variants": {v: VARIANTS[v] for v in names},
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "summary": summary,
        "rows": rows,
    }
    print(json.dumps(summary, indent=1))
    print(write_result("bench_arm_tlbi", out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
