"""Would fewer vCPUs created at boot, the rest added by QEMU's CPU hotplug, make a
Debian-kernel boot faster?  (issue 32 item 6: the route bench_tb_flush.py's finding names)

    .venv/bin/python bench/bench_created_vcpus.py [--topology zen3-2s-mini] [--first 2] [--rounds 3]

bench_tb_flush.py found the cost that keeps Debian's kernel above the 0.30 ratio: each
translation block the guest overwrites (alternatives, free_initmem) clears the jump cache
of every vCPU QEMU *created*.  This bench takes lab's own QEMU command line for TOPOLOGY
(from one `lab boot`, whose initramfs carries the guest command below) and runs it three
ways each round, in rotating order:

- *all*: as lab plans it, every vCPU created at start;
- *first-only*: `-smp FIRST,maxcpus=N`: only FIRST vCPUs created; the time to lab's agent
  being ready is read, then QEMU is stopped (a lower bound: the machine is not whole);
- *hotplug*: the same start, then, once the agent is ready, QMP `device_add` of every
  missing vCPU in socket/die/core/thread order (so the guest numbers them as at boot), and
  the guest command onlines each as it appears.

The guest command waits until every CPU is present, onlines the offline ones, and prints
its uptime and a digest of every CPU's topology files and node, so *hotplug* is checked
to give the guest the same machine as *all*.  Writes bench/results/bench_created_vcpus-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from provenance import stamp, write_result  # noqa: E402

from lab.backends.monitor import Monitor  # noqa: E402

LAB = HERE.parent / ".venv" / "bin" / "lab"

GUEST = (
    "t0=$(cut -d' ' -f1 /proc/uptime); n=0; "
    'while [ "$(cat /sys/devices/system/cpu/present)" != "$(cat /sys/devices/system/cpu/possible)" ] && [ $n -lt 1500 ]; '
    "do n=$((n+1)); sleep 0.02; done; t1=$(cut -d' ' -f1 /proc/uptime); "
    'for c in /sys/devices/system/cpu/cpu[0-9]*/online; do [ "$(cat $c)" = 1 ] || echo 1 > $c; done; '
    "t2=$(cut -d' ' -f1 /proc/uptime); "
    "d=$(for c in /sys/devices/system/cpu/cpu[0-9]*; do echo ${c##*/} $(cat $c/topology/physical_package_id $c/topology/die_id "
    "$c/topology/core_cpus_list $c/topology/die_cpus_list $c/cache/index3/shared_cpu_list) $(ls -d $c/node* | sed 's/.*node//'); "
    "done | sort -V | md5sum | cut -c1-12); "
    'echo "bench: start=$t0 present=$t1 online=$t2 cpus=$(cat /sys/devices/system/cpu/online) digest=$d"'
)


def make_run(topology: str, tmp: Path) -> Path:
    runs = tmp / "runs"
    r = subprocess.run([str(LAB), "boot", topology, "--runs", str(runs), "--", "sh", "-c", GUEST], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"lab boot failed: {r.stderr.strip().splitlines()[-1:]}")
    return next(runs.iterdir())


def one(run: Path, work: Path, mode: str, first: int, vcpus: int) -> dict:
    for f in ("agent.log", "console.log", "results.tar", "qmp.sock"):
        (work / f).unlink(missing_ok=True)
    argv = shlex.split((run / "qemu.argv").read_text().replace("\0", " "))
    i = argv.index("-smp")
    if mode != "all":
        argv[i + 1] = re.sub(r"^\d+", f"{first},maxcpus={vcpus}", argv[i + 1])
    agent = work / "agent.log"
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: dict = {"mode": mode}
    try:
        if mode != "all":
            while not (work / "qmp.sock").exists():
                time.sleep(0.01)
            mon = Monitor(work / "qmp.sock")
            while not (agent.exists() and "ready" in agent.read_text()):
                if p.poll() is not None or time.monotonic() - t0 > 120:
                    raise RuntimeError("guest never ready")
                time.sleep(0.01)
            out["ready_s"] = round(time.monotonic() - t0, 2)
            if mode == "first-only":
                p.kill()
                p.wait()
                out["uptime_ready"] = float(re.search(r"ready uptime=([\d.]+)", agent.read_text())[1])
                return out
            (hot,) = (r["return"] for r in mon.commands([{"execute": "query-hotpluggable-cpus"}]))
            todo = sorted(
                (h for h in hot if "qom-path" not in h),
                key=lambda h: tuple(h["props"].get(k, 0) for k in ("socket-id", "die-id", "core-id", "thread-id")),
            )
            adds = [{"execute": "device_add", "arguments": {"driver": h["type"], **h["props"]}} for h in todo]
            for r in mon.commands(adds, timeout=60):
                if "error" in r:
                    raise RuntimeError(f"device_add: {r['error']}")
            out["added"] = len(todo)
            out["added_s"] = round(time.monotonic() - t0, 2)
        p.wait(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    out["wall_s"] = round(time.monotonic() - t0, 2)
    out["uptime_ready"] = float(re.search(r"ready uptime=([\d.]+)", agent.read_text())[1])
    out["uptime_done"] = float(re.search(r"done rc=\d+ uptime=([\d.]+)", agent.read_text())[1])
    with tarfile.open(work / "results.tar") as t:
        text = "".join(
            t.extractfile(m).read().decode(errors="replace") for m in t.getmembers() if m.isfile()  # type: ignore[union-attr]
        )
    m = re.search(r"bench: start=([\d.]+) present=([\d.]+) online=([\d.]+) cpus=(\S+) digest=(\w+)", text)
    if not m:
        raise RuntimeError("the guest command's line is missing")
    out.update(job_start=float(m[1]), all_present=float(m[2]), all_online=float(m[3]), online=m[4], digest=m[5])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topology", default="zen3-2s-mini")
    ap.add_argument("--first", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-created-"))
    try:
        run = make_run(a.topology, tmp)
        vcpus = int(re.search(r"-smp (\d+)", (run / "qemu.argv").read_text().replace("\0", " "))[1])
        work = tmp / "work"
        work.mkdir()
        for f in ("initrd.cpio",):
            shutil.copy(run / f, work / f)
        modes = ["all", "first-only", "hotplug"]
        rows = []
        for r in range(a.rounds):
            for mode in modes[r % 3 :] + modes[: r % 3]:
                row = {"round": r + 1, **one(run, work, mode, a.first, vcpus)}
                print(json.dumps(row), flush=True)
                rows.append(row)

        def med(mode: str, key: str):
            v = sorted(x[key] for x in rows if x["mode"] == mode and key in x)
            return v[len(v) // 2] if v else None

        summary = {m: {k: med(m, k) for k in ("wall_s", "uptime_ready", "uptime_done", "ready_s")} for m in modes}
        same = {x["digest"] for x in rows if "digest" in x}
        print(json.dumps(summary), "topology digests:", same)
        path = write_result(
            "bench_created_vcpus",
            {**stamp(), "bench": "created_vcpus", "topology": a.topology, "vcpus": vcpus, "first": a.first, "qemu_argv": (run / "qemu.argv").read_text(),
             "rows": rows, "medians": summary, "same_topology": len(same) == 1},
        )  # fmt: skip
        print(f"wrote {path}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
