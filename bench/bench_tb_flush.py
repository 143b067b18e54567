"""Where a Debian-kernel boot's time goes as vCPUs grow: QEMU's jump-cache flush (issue 32 item 6).

    .venv/bin/python bench/bench_tb_flush.py [--topologies jacobsville-24c-mini,numa4-96-micro,zen3-2s-mini]
        [--kernels debian,lab-6.1] [--rounds 2] [--hotplug zen3-2s-mini] [--perf zen3-2s-mini]

Each round boots every topology with every kernel, one at a time (`lab boot T --kernel K
--append loglevel=7 -- true`), and reads two phases from the console's timestamps:

- *alternatives*: from "x86/fpu: Enabled xstate features" to "Freeing SMP alternatives
  memory" (CPU 0 patching the kernel's text before the other CPUs start);
- *free_initmem*: from "Freeing unused decrypted memory" to "Freeing unused kernel image
  (initmem)" (the kernel poisons its __init text and data before freeing it).

Both write over code the guest has already run.  QEMU then invalidates every translation
block on those pages, and for x86 (position-independent TBs) each invalidation clears the
whole jump cache of every vCPU QEMU created (accel/tcg: tb_jmp_cache_inval_tb ->
tcg_flush_jmp_cache, for CPU_FOREACH): a cost per written block times the vCPU count,
whether those CPUs are online or not.  The phases are divided by vCPUs to show the
proportion.  --hotplug TOPOLOGY boots it once more a round with Debian's kernel and
`--bringup hotplug` (only CPU 0's package online at boot, every vCPU created): if the
cost is per created vCPU, onlining the rest later does not shrink it.  With --perf TOPOLOGY, one more boot of it with Debian's kernel runs under
`perf record` and the shares of QEMU's top symbols are kept (tcg_flush_jmp_cache's among
them).  Writes bench/results/bench_tb_flush-<time>.json with host load, date and commit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from provenance import stamp  # noqa: E402

STAMP = re.compile(r"\[\s*(\d+\.\d+)\]\s?(.*)")
MARKS = {
    "fpu": "x86/fpu: Enabled xstate features",
    "alternatives": "Freeing SMP alternatives memory",
    "decrypted": "Freeing unused decrypted memory",
    "initmem": "Freeing unused kernel image (initmem)",
    "init": "Run /init as init process",
}


def phases(console: str) -> dict[str, float | None]:
    at: dict[str, float] = {}
    for m in map(STAMP.match, console.splitlines()):
        if not m:
            continue
        for k, text in MARKS.items():
            if k not in at and m.group(2).startswith(text):
                at[k] = float(m.group(1))

    def span(a: str, b: str) -> float | None:
        return round(at[b] - at[a], 3) if a in at and b in at else None

    return {"alternatives_s": span("fpu", "alternatives"), "free_initmem_s": span("decrypted", "initmem"), "run_init_at_s": at.get("init")}


def vcpus(lab: str, topology: str) -> int:
    p = subprocess.run([lab, "boot", topology, "--dry-run", "--", "true"], capture_output=True, text=True, check=True)
    line = next(ln for ln in p.stdout.splitlines() + p.stderr.splitlines() if "qemu-system" in ln.split(" ", 1)[0])
    return int(re.search(r"-smp (\d+)", line).group(1))  # type: ignore[union-attr]


def boot(lab: str, topology: str, kernel: str, prefix: list[str] | None = None, more: tuple[str, ...] = ()) -> tuple[dict, Path, tempfile.TemporaryDirectory]:
    tmp = tempfile.TemporaryDirectory(prefix="lab-tbflush-")
    argv = [*(prefix or []), lab, "boot", topology, "--kernel", kernel, *more, "--append", "loglevel=7", "--", "true"]
    t0 = time.monotonic()
    cp = subprocess.run(argv, env={**os.environ, "LAB_RUNS": tmp.name}, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (run,) = Path(tmp.name).iterdir()
    b = json.loads((run / "boot.json").read_text())
    row = {"topology": topology, "kernel": kernel, "options": " ".join(more), "online_at_boot": b.get("bringup"), "rc": cp.returncode, "lab_wall_s": round(wall, 2), "guest_ready_uptime": b.get("guest_ready_uptime"),
           **phases((run / "console.log").read_text(errors="replace"))}  # fmt: skip
    return row, run, tmp


def perf_shares(lab: str, topology: str, top: int = 12) -> dict:
    perf = shutil.which("perf")
    if not perf:
        return {"error": "perf not found on the host"}
    with tempfile.TemporaryDirectory(prefix="lab-tbflush-perf-") as d:
        data = str(Path(d) / "perf.data")
        row, _run, tmp = boot(lab, topology, "debian", [perf, "record", "-F", "2000", "-o", data, "--"])
        tmp.cleanup()
        rep = subprocess.run([perf, "report", "-i", data, "--no-children", "--sort", "comm,dso,symbol", "--stdio", "-g", "none"],
                             capture_output=True, text=True)  # fmt: skip
    rows = []
    for ln in rep.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+(\S+)\s+\[[.k]\]\s+(\S+)", ln)
        if m:
            rows.append({"share_pct": float(m.group(1)), "comm": m.group(2), "dso": m.group(3), "symbol": m.group(4)})
    flush = sum(r["share_pct"] for r in rows if r["symbol"] == "tcg_flush_jmp_cache")
    return {"boot": row, "tcg_flush_jmp_cache_pct": round(flush, 2), "top": rows[:top]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topologies", default="jacobsville-24c-mini,numa4-96-micro,zen3-2s-mini")
    ap.add_argument("--kernels", default="debian,lab-6.1")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--hotplug", default="zen3-2s-mini",
                    help="topology also booted with Debian's kernel and --bringup hotplug (fewer CPUs online at boot, all created) ('' for none)")
    ap.add_argument("--perf", default="zen3-2s-mini", help="topology profiled once with perf record ('' for none)")
    a = ap.parse_args()
    lab = str(Path(sys.executable).parent / "lab")
    load0 = os.getloadavg()
    topos = [t for t in a.topologies.split(",") if t]
    n = {t: vcpus(lab, t) for t in topos}
    rows = []
    cases = [(t, k, ()) for t in topos for k in a.kernels.split(",")]
    if a.hotplug:
        n.setdefault(a.hotplug, vcpus(lab, a.hotplug))
        cases.append((a.hotplug, "debian", ("--bringup", "hotplug", "--tcg-threads", "single")))
    for r in range(a.rounds):
        for t, k, more in cases:
            row, _run, tmp = boot(lab, t, k, more=more)
            tmp.cleanup()
            row.update(round=r + 1, vcpus=n[t])
            for key in ("alternatives_s", "free_initmem_s"):
                if row[key] is not None:
                    row[key.replace("_s", "_ms_per_vcpu")] = round(1000 * row[key] / n[t], 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    prof = perf_shares(lab, a.perf) if a.perf else None
    doc = {"bench": "tb_flush", **stamp(), "loadavg_before": list(load0), "vcpus": n, "rows": rows, "perf": prof, "loadavg_after": list(os.getloadavg())}
    out = HERE / "results" / f"bench_tb_flush-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
