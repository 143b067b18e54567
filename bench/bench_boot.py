"""Boot time against vCPU count, and the wall time of `lab verify`.

    .venv/bin/python bench/bench_boot.py [--arch x86_64] [--vcpus 8,16,32,64,128]
                                         [--kernel debian[,lab-6.1]] [--verify zen3-2s-mini[,...]]
                                         [--verify-at 255]
                                         [--bringup auto[,boot,hotplug]] [--tcg-threads auto[,single,multi]]
                                         [--qemu auto[,system,lab]] [--cpu-model auto[,MODEL[:APPEND]]]
                                         [--repeat N]

For each kernel and vCPU count: a 2-socket machine (2 LLCs per socket, SMT2 on x86;
clusters of 4 on arm64) is booted to lab's guest agent, which snapshots the topology
and ends the VM.  Prints a table and writes bench/results/bench_boot-<time>.json.
--bringup and --tcg-threads take lists, to measure lab's choices against the others
(each combination is a row); --qemu likewise, to compare the system's QEMU with a
lab-built one, the QEMUs alternating within each round of --repeat; --cpu-model likewise
(MODEL:APPEND also appends APPEND to the kernel command line, e.g. cortex-a72:kpti=1 for
lab's arm64 CPU before QEMU's max).  Targets (issue 6, here: 2 cores, TCG): 32-vCPU zen3-2s-mini to the agent <= 6 s with
lab-6.1.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import stamp  # noqa: E402

from lab import host as host_mod  # noqa: E402
from lab import session, topology  # noqa: E402
from lab.backends import qemu as backend  # noqa: E402
from lab.errors import LabError  # noqa: E402
from lab.kernel import resolve  # noqa: E402
from lab.plan import VmOptions  # noqa: E402
from lab.render import qemu as render  # noqa: E402


def machine_spec(arch: str, n: int) -> dict:
    """The bench machine with *n* vCPUs, as a spec (what a topologies/*.toml holds)."""
    if arch == "x86_64" and n > 128:
        # Without x2APIC (TCG, QEMU < 9.0) APIC IDs stop at 254: one flat socket.
        shape = {"sockets": 1, "cores_per_cluster": n, "threads_per_core": 1}
        return {"name": f"bench-{arch}-{n}", "arch": arch, "cpu": {"vendor": "intel"}, "topology": shape, "numa": {"memory_mb": 1024}}
    if arch == "x86_64":
        cores = max(1, n // 8)
        shape = {"sockets": 2, "llcs_per_node": 2, "cores_per_cluster": cores, "threads_per_core": 2}
        cpu = {"vendor": "intel"}
    else:
        clusters = max(1, n // 8)
        shape = {"sockets": 2, "clusters_per_llc": clusters, "cores_per_cluster": 4, "threads_per_core": 1}
        cpu = {"vendor": "arm"}
    return {"name": f"bench-{arch}-{n}", "arch": arch, "cpu": cpu, "topology": shape, "numa": {"distances": [[10, 20], [20, 10]], "memory_mb": 256}}


def machine(arch: str, n: int) -> topology.Topology:
    t = topology.from_dict(machine_spec(arch, n))
    assert t.n_cpus == n, (t.n_cpus, n)
    return t


def _toml_value(v) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return str(v)


def spec_toml(spec: dict) -> str:
    """*spec* as TOML, for `lab verify FILE` (scalars first, then one table per section)."""
    out = [f"{k} = {_toml_value(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    for k, v in spec.items():
        if isinstance(v, dict):
            out += ["", f"[{k}]", *(f"{kk} = {_toml_value(vv)}" for kk, vv in v.items())]
    return "\n".join(out) + "\n"


def verify_row(target: str, kname: str, exit_code: int, stdout: str, wall: float) -> dict:
    """The row of one `lab verify --json`, from its stdout alone: stderr's notes are not
    JSON (a note line before the JSON once made every verify row record "0 checks")."""
    doc = json.loads(stdout) if stdout.lstrip().startswith("{") else {}
    name = Path(target).stem if target.endswith(".toml") else target
    checks = doc.get("checks") or []
    return {"topology": name, "kernel": kname, "exit": exit_code, "wall_s": round(wall, 2), "timing": doc.get("timing"),
            "checks": len(checks), "failed": [c["name"] for c in checks if not c["ok"] and not c.get("known_deviation")],
            "known_deviations": [c["name"] for c in checks if not c["ok"] and c.get("known_deviation")]}  # fmt: skip


def verify_once(target: str, kname: str, runs: Path) -> dict:
    """Wall time and outcome of `lab verify TARGET --kernel K` (a catalog name or a spec file)."""
    from click.testing import CliRunner

    from lab.cli import main as cli

    os.environ["LAB_RUNS"] = str(runs)
    t0 = time.monotonic()
    res = CliRunner().invoke(cli, ["verify", target, "--kernel", kname, "--json"])
    wall = time.monotonic() - t0
    v = verify_row(target, kname, res.exit_code, res.stdout, wall)
    if res.exit_code != 0:
        v["error"] = " ".join(res.output.split())[-400:]
    dev = f", known deviations: {', '.join(v['known_deviations'])}" if v["known_deviations"] else ""
    print(f"lab verify {v['topology']} --kernel {kname}: exit {res.exit_code}, {v['checks']} checks, {wall:.1f}s wall{dev}", flush=True)
    return v


def boot_once(
    t: topology.Topology, kernel, run_dir: Path, bringup: str = "auto", tcg: str = "auto", qemu: str = "auto", cpu: str = "auto"
) -> dict:
    model, _, append = cpu.partition(":")
    opts = VmOptions(kernel=kernel.id, bringup=bringup, tcg_threads=tcg, qemu=qemu, cpu_model=model, append=append)
    plan = render.plan(t, host_mod.probe(), opts, kernel_features=session.features(kernel), kernel=kernel.ref())
    t0 = time.monotonic()
    res = backend.boot(plan, kernel, run_dir, timeout=1800)
    return {
        "ready_s": round(res.ready_s or 0, 2), "vm_s": round(res.wall_s, 2), "wall_s": round(time.monotonic() - t0, 2),
        "accel": res.accel, "bringup": plan.bringup, "boot_cpus": plan.boot_cpus, "online_s": res.online_s,
        "tcg_threads": plan.tcg_threads, "qemu": plan.qemu, "qemu_version": ".".join(map(str, plan.qemu_version)),
        "cpu": cpu, "cpu_model": plan.cpu_model, "loadavg1": round(os.getloadavg()[0], 2),
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="x86_64", choices=["x86_64", "arm64"])
    ap.add_argument("--vcpus", default="8,16,32,64,128")
    ap.add_argument("--kernel", default="debian", help="comma-separated kernels")
    ap.add_argument("--bringup", default="auto", help="comma-separated: auto, boot, hotplug")
    ap.add_argument("--tcg-threads", default="auto", help="comma-separated: auto, single, multi")
    ap.add_argument("--verify", default="zen3-2s-mini", help="also time `lab verify` of these topologies, comma-separated ('' to skip)")
    ap.add_argument("--verify-at", default="", help="also verify the bench machine at these vCPU counts (first kernel only)")
    ap.add_argument("--qemu", default="auto", help="comma-separated: auto, system, lab, PATH")
    ap.add_argument("--cpu-model", default="auto", help="comma-separated: auto, MODEL, MODEL:APPEND")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every combination")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-") as tmp:
        for kname in args.kernel.split(","):
            kernel = resolve(kname, args.arch)
            for n in (int(x) for x in args.vcpus.split(",") if x):  # --vcpus '': verify only
                t = machine(args.arch, n)
                for rnd in range(args.repeat):
                    for bringup in args.bringup.split(","):
                        for tcg in args.tcg_threads.split(","):
                            for q, cpu in itertools.product(args.qemu.split(","), args.cpu_model.split(",")):
                                tag = f"{kname}-{n}-{bringup}-{tcg}-{len(rows)}"
                                try:
                                    r = boot_once(t, kernel, Path(tmp) / tag, bringup, tcg, q, cpu)
                                except LabError as e:
                                    rows.append({"kernel": kname, "release": kernel.release, "vcpus": n, "round": rnd, "bringup": bringup,
                                                 "tcg_threads": tcg, "qemu": q, "cpu": cpu, "error": str(e)})  # fmt: skip
                                    print(f"{kname:>10} {n:>4} vCPUs {bringup}/{tcg} {q} {cpu}: FAILED: {' '.join(str(e).split())}", flush=True)
                                    continue
                                rows.append({"kernel": kname, "release": kernel.release, "vcpus": n, "round": rnd, **r})
                                online = f" (online {r['online_s']}s after {r['boot_cpus']} at boot)" if r["bringup"] == "hotplug" else ""
                                print(
                                    f"{kname:>10} {n:>4} vCPUs {r['bringup']:>7}/{r['tcg_threads']:<6} QEMU {r['qemu_version']:<8} {cpu}: "
                                    f"boot to agent {r['ready_s']:6.2f}s  VM {r['vm_s']:6.1f}s  load {r['loadavg1']}{online}",
                                    flush=True,
                                )
        for kname in args.kernel.split(","):
            for target in filter(None, args.verify.split(",")):
                rows.append({"verify": verify_once(target, kname, Path(tmp) / "runs")})
        # The largest machines: verify with the first kernel only (each boot is minutes).
        for n in filter(None, args.verify_at.split(",")):
            spec = machine_spec(args.arch, int(n))
            f = Path(tmp) / f"{spec['name']}.toml"
            f.write_text(spec_toml(spec))
            rows.append({"verify": verify_once(str(f), args.kernel.split(",")[0], Path(tmp) / "runs")})
    out = {
        "bench": "boot",
        "host": {**host_mod.probe().describe(), "machine": platform.node(), "loadavg": os.getloadavg()},
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "rows": rows,
    }
    d = Path(__file__).resolve().parent / "results"
    d.mkdir(exist_ok=True)
    p = d / f"bench_boot-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out = {**stamp(), **out}  # the bench's own "host" (its probe) stays
    p.write_text(json.dumps(out, indent=1))
    print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
