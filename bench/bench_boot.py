"""Boot time against vCPU count, and the wall time of `lab verify`.

    .venv/bin/python bench/bench_boot.py [--arch x86_64] [--vcpus 8,16,32,64,128]
                                         [--kernel debian[,lab-6.1]] [--verify zen3-2s-mini]
                                         [--bringup auto[,boot,hotplug]] [--tcg-threads auto[,single,multi]]

For each kernel and vCPU count: a 2-socket machine (2 LLCs per socket, SMT2 on x86;
clusters of 4 on arm64) is booted to lab's guest agent, which snapshots the topology
and ends the VM.  Prints a table and writes bench/results/bench_boot-<time>.json.
--bringup and --tcg-threads take lists, to measure lab's choices against the others
(each combination is a row).  Targets (issue 6, here: 2 cores, TCG): 32-vCPU zen3-2s-mini to the agent <= 6 s with
lab-6.1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab import host as host_mod  # noqa: E402
from lab import session, topology  # noqa: E402
from lab.backends import qemu as backend  # noqa: E402
from lab.errors import LabError  # noqa: E402
from lab.kernel import resolve  # noqa: E402
from lab.render import qemu as render  # noqa: E402


def machine(arch: str, n: int) -> topology.Topology:
    if arch == "x86_64" and n > 128:
        # Without x2APIC (TCG, QEMU < 9.0) APIC IDs stop at 254: one flat socket.
        shape = {"sockets": 1, "cores_per_cluster": n, "threads_per_core": 1}
        t = topology.from_dict({"name": f"bench-{arch}-{n}", "arch": arch, "cpu": {"vendor": "intel"}, "topology": shape, "numa": {"memory_mb": 1024}})
        return t
    if arch == "x86_64":
        cores = max(1, n // 8)
        shape = {"sockets": 2, "llcs_per_node": 2, "cores_per_cluster": cores, "threads_per_core": 2}
        cpu = {"vendor": "intel"}
    else:
        clusters = max(1, n // 8)
        shape = {"sockets": 2, "clusters_per_llc": clusters, "cores_per_cluster": 4, "threads_per_core": 1}
        cpu = {"vendor": "arm"}
    t = topology.from_dict(
        {"name": f"bench-{arch}-{n}", "arch": arch, "cpu": cpu, "topology": shape, "numa": {"distances": [[10, 20], [20, 10]], "memory_mb": 256}}
    )
    assert t.n_cpus == n, (t.n_cpus, n)
    return t


def boot_once(t: topology.Topology, kernel, run_dir: Path, bringup: str = "auto", tcg: str = "auto") -> dict:
    plan = render.plan(t, host_mod.probe(), kernel_features=session.features(kernel), bringup=bringup, tcg=tcg)
    t0 = time.monotonic()
    res = backend.boot(plan, kernel, run_dir, job=None, timeout=1800)
    return {
        "ready_s": round(res.ready_s or 0, 2), "vm_s": round(res.wall_s, 2), "wall_s": round(time.monotonic() - t0, 2),
        "accel": res.accel, "bringup": plan.bringup, "boot_cpus": plan.boot_cpus, "online_s": res.online_s,
        "tcg_threads": plan.tcg_threads,
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="x86_64", choices=["x86_64", "arm64"])
    ap.add_argument("--vcpus", default="8,16,32,64,128")
    ap.add_argument("--kernel", default="debian", help="comma-separated kernels")
    ap.add_argument("--bringup", default="auto", help="comma-separated: auto, boot, hotplug")
    ap.add_argument("--tcg-threads", default="auto", help="comma-separated: auto, single, multi")
    ap.add_argument("--verify", default="zen3-2s-mini", help="also time `lab verify` of this topology ('' to skip)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-") as tmp:
        for kname in args.kernel.split(","):
            kernel = resolve(kname, args.arch)
            for n in (int(x) for x in args.vcpus.split(",")):
                t = machine(args.arch, n)
                for bringup in args.bringup.split(","):
                    for tcg in args.tcg_threads.split(","):
                        tag = f"{kname}-{n}-{bringup}-{tcg}"
                        try:
                            r = boot_once(t, kernel, Path(tmp) / tag, bringup, tcg)
                        except LabError as e:
                            rows.append({"kernel": kname, "release": kernel.release, "vcpus": n, "bringup": bringup,
                                         "tcg_threads": tcg, "error": str(e)})  # fmt: skip
                            print(f"{kname:>10} {n:>4} vCPUs {bringup}/{tcg}: FAILED: {' '.join(str(e).split())}", flush=True)
                            continue
                        rows.append({"kernel": kname, "release": kernel.release, "vcpus": n, **r})
                        online = f" (online {r['online_s']}s after {r['boot_cpus']} at boot)" if r["bringup"] == "hotplug" else ""
                        print(
                            f"{kname:>10} {n:>4} vCPUs {r['bringup']:>7}/{r['tcg_threads']:<6}: boot to agent "
                            f"{r['ready_s']:6.1f}s  VM {r['vm_s']:6.1f}s{online}",
                            flush=True,
                        )
        verify = None
        if args.verify:
            from click.testing import CliRunner

            from lab.cli import main as cli

            os.environ["LAB_RUNS"] = str(Path(tmp) / "runs")
            for kname in args.kernel.split(","):
                t0 = time.monotonic()
                res = CliRunner().invoke(cli, ["verify", args.verify, "--kernel", kname, "--json"])
                wall = time.monotonic() - t0
                doc = json.loads(res.output) if res.output.startswith("{") else {}
                verify = {"topology": args.verify, "kernel": kname, "exit": res.exit_code, "wall_s": round(wall, 2), "timing": doc.get("timing")}
                rows.append({"verify": verify})
                print(f"lab verify {args.verify} --kernel {kname}: exit {res.exit_code}, {wall:.1f}s wall", flush=True)
    out = {
        "bench": "boot",
        "host": {**host_mod.probe().describe(), "machine": platform.node(), "loadavg": os.getloadavg()},
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "rows": rows,
    }
    d = Path(__file__).resolve().parent / "results"
    d.mkdir(exist_ok=True)
    p = d / f"bench_boot-{time.strftime('%Y%m%d-%H%M%S')}.json"
    p.write_text(json.dumps(out, indent=1))
    print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
