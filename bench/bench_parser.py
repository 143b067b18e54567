"""Parser throughput on a generated ftrace text trace.

    .venv/bin/python bench/bench_parser.py [--events N] [--repeat R] [--python]

Generates a trace shaped like a scheduler run (mostly sched_switch and
wakeups, some migrations, a few NUMA and fork/exit events, odd comms, a LOST
marker), writes it to a temporary file, parses it R times with
``lab.trace.parse_file`` and prints the best events/s.  The figures also go to
bench/results/bench_parser-<time>.json (gitignored).  The parser's C fast path
(lab/trace/_scan.c) is used when it is built; --python measures the pure-Python path.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import stamp  # noqa: E402

from lab.trace import parse_file, parser  # noqa: E402

COMMS = ["stream", "kworker/0:1-events", "perf-exec", "hackbench", "sh", "rcu_sched", "my prog"]


def generate(path: Path, n_events: int, n_cpus: int = 16, seed: int = 1) -> None:
    """Write a trace of *n_events* event lines (plus a header and one LOST marker)."""
    rng = random.Random(seed)
    ts = 100.0
    pids = list(range(1000, 1064))
    with open(path, "w") as f:
        f.write("# tracer: nop\n#\n")
        f.write(f"# entries-in-buffer/entries-written: {n_events}/{n_events}   #P:{n_cpus}\n#\n")
        for i in range(n_events):
            ts += rng.random() * 2e-5
            cpu = rng.randrange(n_cpus)
            comm = COMMS[i % len(COMMS)]
            pid = pids[i % len(pids)]
            head = f"{comm:>16}-{pid:<7} [{cpu:03d}] d..2. {ts:12.6f}: "
            r = rng.random()
            other = pids[(i * 7) % len(pids)]
            if r < 0.5:
                body = (
                    f"sched_switch: prev_comm={comm} prev_pid={pid} prev_prio=120 prev_state=S ==> "
                    f"next_comm=stream next_pid={other} next_prio=120"
                )
            elif r < 0.8:
                body = f"sched_wakeup: comm=stream pid={other} prio=120 target_cpu={rng.randrange(n_cpus):03d}"
            elif r < 0.85:
                body = f"sched_wakeup_new: comm=stream pid={other} prio=120 target_cpu={rng.randrange(n_cpus):03d}"
            elif r < 0.95:
                body = (
                    f"sched_migrate_task: comm=stream pid={other} prio=120 orig_cpu={cpu} "
                    f"dest_cpu={rng.randrange(n_cpus)}"
                )
            elif r < 0.97:
                body = (
                    f"sched_move_numa: pid={other} tgid={other} ngid=0 src_cpu={cpu} src_nid=0 "
                    f"dst_cpu={rng.randrange(n_cpus)} dst_nid=1"
                )
            elif r < 0.98:
                body = (
                    f"sched_swap_numa: src_pid={pid} src_tgid={pid} src_ngid=0 src_cpu={cpu} src_nid=0 "
                    f"dst_pid={other} dst_tgid={other} dst_ngid=0 dst_cpu=3 dst_nid=1"
                )
            elif r < 0.99:
                body = (
                    f"sched_process_fork: comm={comm} pid={pid} child_comm={comm} child_pid={other}"
                )
            else:
                body = f"sched_process_exit: comm={comm} pid={pid} prio=120"
            f.write(head + body + "\n")
            if i == n_events // 2:
                f.write("CPU:3 [LOST 17 EVENTS]\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="also keep the generated trace here")
    ap.add_argument("--python", action="store_true", help="the pure-Python path, without the C fast path")
    args = ap.parse_args(argv)
    if args.python:
        parser._fast = None
    path_used = "python" if parser._fast is None else "c"

    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "trace.txt"
        t0 = time.perf_counter()
        generate(path, args.events)
        gen_s = time.perf_counter() - t0
        size = path.stat().st_size

        runs = []
        cpu_runs = []
        stats = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            c0 = time.process_time()
            reader = parse_file(path)
            n = 0
            for _ev in reader:
                n += 1
            # CPU time as well as wall time: on a shared 2-core box other jobs
            # (a TCG guest) steal the core, and wall time then measures them.
            cpu_runs.append(time.process_time() - c0)
            runs.append(time.perf_counter() - t0)
            stats = reader.stats
        assert stats is not None
        if n != args.events or stats.lost_events != 17 or stats.unparsed_lines or stats.mismatched:
            print(f"bench: parser disagreed with the generator: {stats.to_dict()}", file=sys.stderr)
            return 1

    best = min(runs)
    best_cpu = min(cpu_runs)
    result = {
        "benchmark": "parser",
        "path": path_used,
        "events": n,
        "bytes": size,
        "repeat": args.repeat,
        "seconds": runs,
        "best_seconds": best,
        "events_per_second": n / best,
        "cpu_seconds": cpu_runs,
        "events_per_cpu_second": n / best_cpu,
        "load_average": os.getloadavg(),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "mb_per_second": size / best / 1e6,
        "generate_seconds": gen_s,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    print(
        f"{path_used} path: parsed {n} events ({size / 1e6:.1f} MB) in {best:.2f} s: {n / best:,.0f} events/s "
        f"({n / best_cpu:,.0f} per CPU-second; load average {os.getloadavg()[0]:.2f}; "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB for a {size / 1e6:.0f} MB trace)"
    )
    out_dir = Path(__file__).resolve().parent / "results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"bench_parser-{time.strftime('%Y%m%d-%H%M%S')}.json"
    result = {**stamp(), **result}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
