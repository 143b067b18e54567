"""lab against virtme-ng, side by side: same kernel (Debian's 6.1), same topology,
from the command to the guest's output, and whether the guest sees the topology.

    .venv/bin/python bench/bench_vng.py [--repeat 3]

virtme-ng is installed into its own virtualenv under lab's cache on first use
(`pip install virtme-ng`), so it never enters lab's dependencies.  Target (issue 6,
2 cores, TCG): lab at least 5x faster than virtme-ng, with the right topology.
Writes bench/results/bench_vng-<time>.json.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import stamp  # noqa: E402

from lab.kernel import resolve  # noqa: E402
from lab.paths import cache_dir  # noqa: E402

SPEC = """
name = "bench-2s16"
arch = "x86_64"
[cpu]
vendor = "intel"
[topology]
sockets = 2
cores_per_cluster = 4
threads_per_core = 2
[numa]
distances = [[10, 21], [21, 10]]
memory_mb = 512
"""
PROBE = (
    "cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list "
    "/sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list /sys/devices/system/node/node1/cpulist; nproc"
)
# What the spec says the guest must answer: cpu0's SMT siblings, cpu0's L3, node 1, CPUs.
EXPECTED = ["0-1", "0-7", "8-15", "16"]


def vng_bin() -> Path:
    venv = cache_dir() / "vng-venv"
    vng = venv / "bin" / "vng"
    if not vng.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "virtme-ng"], check=True)
    return vng


def timed(argv: list[str], env: dict | None = None, cwd: str | None = None) -> tuple[float, int, str]:
    t0 = time.monotonic()
    # Own session: virtme-ng signals its process group on the way out.
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, start_new_session=True, timeout=1800)
    return time.monotonic() - t0, p.returncode, p.stdout + p.stderr


def answers(out: str) -> list[str]:
    lines = [ln.strip() for ln in out.replace("\r", "").splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("[") and not ln.startswith("virtme")]
    keep = [ln for ln in lines if all(ch.isdigit() or ch in ",-" for ch in ln)]
    return keep[-4:]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="rounds (best of N: this host runs guests beside other load)")
    args = ap.parse_args()
    kernel = resolve("debian", "x86_64")
    vng = vng_bin()
    rows = []
    with tempfile.TemporaryDirectory(prefix="lab-vng-") as tmp:
        spec = Path(tmp) / "bench-2s16.toml"
        spec.write_text(SPEC)
        env = {**os.environ, "LAB_RUNS": str(Path(tmp) / "runs")}
        lab = [str(Path(sys.executable).parent / "lab"), "boot", str(spec), "--kernel", "debian", "--", "sh", "-c", PROBE]
        venv_env = {**os.environ, "PATH": f"{vng.parent}:{os.environ['PATH']}"}
        vng_argv = [
            # --verbose: without it this kernel's script output is lost (virtme-ng finds no
            # virtio-serial script port and falls back to the console, which it silences).
            str(vng), "--verbose", "--run", str(kernel.image), "--disable-kvm",
            "--cpus", "16,sockets=2,cores=4,threads=2",
            "--numa", "512M,cpus=0-7", "--numa", "512M,cpus=8-15", "--numa-distance", "0,1=21",
            "--", PROBE,
        ]  # fmt: skip
        for i in range(args.repeat):
            for tool, argv, e in (("lab", lab, env), ("virtme-ng", vng_argv, venv_env)):
                wall, rc, out = timed(argv, e, cwd=tmp)
                got = answers(out)
                rows.append({"tool": tool, "run": i, "wall_s": round(wall, 1), "rc": rc, "guest": got, "topology_right": got == EXPECTED})
                print(f"{tool:>10}: {wall:6.1f}s rc={rc} guest answers {got} ({'right' if got == EXPECTED else 'WRONG'}; want {EXPECTED})", flush=True)
    # A run counts only if its guest answered all four questions: a tool that dies
    # before the guest speaks is not fast, it is broken (virtme-ng once exited in 13.8 s
    # with no guest output at all).
    def walls(tool: str) -> list[float]:
        return sorted(r["wall_s"] for r in rows if r["tool"] == tool and len(r["guest"]) == len(EXPECTED))

    lab_w, vng_w = walls("lab"), walls("virtme-ng")
    if not lab_w or not vng_w:
        print(f"no comparison: guest answered in {len(lab_w)} lab and {len(vng_w)} virtme-ng runs")
        speedup = median_speedup = None
    else:
        speedup = round(vng_w[0] / lab_w[0], 2)
        median_speedup = round(statistics.median(vng_w) / statistics.median(lab_w), 2)
        print(
            f"lab is {speedup:.1f}x faster than virtme-ng (best of {len(lab_w)} vs {len(vng_w)} answered runs; "
            f"medians {statistics.median(lab_w):.1f} s vs {statistics.median(vng_w):.1f} s: {median_speedup:.1f}x)"
        )
    d = Path(__file__).resolve().parent / "results"
    d.mkdir(exist_ok=True)
    p = d / f"bench_vng-{time.strftime('%Y%m%d-%H%M%S')}.json"
    p.write_text(json.dumps({**stamp(), "bench": "vng", "kernel": kernel.id, "rows": rows, "speedup": speedup, "median_speedup": median_speedup, "loadavg": os.getloadavg()}, indent=1))
    print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
