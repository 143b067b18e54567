"""The trace volume the per-run checks' events make, per vCPU-second (issue 36 item 1's
bounded cost): for each given run directory, each phase's trace (out/trace.PHASE.txt, as
the guest's ftrace wrote it): events by type, bytes, the phase's traced span, vCPUs, and
events and bytes per vCPU-second; then the time lab's per-run checks take over it (one
pass of lab.analysis.checks.trace_checks, the parser included) as microseconds per event.

    .venv/bin/python bench/bench_trace_volume.py RUN_DIR [RUN_DIR ...]

Writes bench/results/bench_trace_volume-<time>.json.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import stamp  # noqa: E402

HERE = Path(__file__).resolve().parent
LINE = re.compile(r"\s(\d+\.\d+): (\w+):")


def phase(run: Path, trace: Path) -> dict:
    from lab import topology
    from lab.analysis import checks as ck

    plan = json.loads((run / "plan.json").read_text())
    vcpus = len(plan["guest_to_spec"])
    kinds: Counter[str] = Counter()
    first = last = None
    with trace.open(errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if not m:
                continue
            ts = float(m.group(1))
            first = ts if first is None else first
            last = ts
            kinds[m.group(2)] += 1
    span = (last - first) if first is not None and last is not None else 0.0
    n = sum(kinds.values())
    size = trace.stat().st_size
    topo = topology.load(plan["topology_file"]) if plan.get("topology_file") and Path(plan["topology_file"]).is_file() else topology.load(plan["topology"])
    g2s = plan["guest_to_spec"]
    t0 = time.perf_counter()
    ck.trace_checks(trace, topo, lambda c: g2s[c] if c < len(g2s) else c, ck.Traced.of(["sched:" + k for k in kinds]), None, "")
    checks_s = time.perf_counter() - t0
    return {
        "run": run.name, "phase": trace.stem.split(".", 1)[1], "vcpus": vcpus, "events": n, "by_event": dict(kinds),
        "bytes": size, "span_s": round(span, 3),
        "events_per_vcpu_s": round(n / (vcpus * span), 1) if span else None,
        "bytes_per_vcpu_s": round(size / (vcpus * span)) if span else None,
        "checks_s": round(checks_s, 3), "checks_us_per_event": round(checks_s * 1e6 / n, 2) if n else None,
    }  # fmt: skip


def main() -> int:
    runs = [Path(a) for a in sys.argv[1:]]
    if not runs:
        print(__doc__)
        return 2
    rows = []
    for run in runs:
        for trace in sorted((run / "out").glob("trace.*.txt")):
            r = phase(run, trace)
            rows.append(r)
            print(f"{r['run']} {r['phase']}: {r['events']} events in {r['span_s']} s on {r['vcpus']} vCPUs: "
                  f"{r['events_per_vcpu_s']} events and {r['bytes_per_vcpu_s']} bytes per vCPU-second; "
                  f"checks {r['checks_us_per_event']} us/event", flush=True)  # fmt: skip
    out = HERE / "results" / f"bench_trace_volume-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({**stamp(), "bench": "bench_trace_volume", "phases": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
