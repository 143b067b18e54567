"""lab's boot against a plain QEMU boot of the same shape (issue 32 item 6).

    .venv/bin/python bench/bench_ratio.py [--topology zen3-2s-mini] [--rounds 5] [--kernel debian]
        [--lab-kernel lab-6.1]

Each round, interleaved: `lab boot TOPOLOGY -- true` (the whole command: Python, plan,
cached initramfs, boot to lab's agent, the command, QEMU's exit), and a plain boot of the
same machine: the same QEMU binary with the same -machine, -smp, -m and -numa arguments
and lab's -accel and -cpu (taken from lab's own dry run; --qemu-defaults leaves the
last two at QEMU's), Debian's compressed kernel (vmlinuz) as
shipped, no kernel command line beyond the console, and an initramfs of the host's static
busybox whose /init powers off at once.  The ratio is median(lab) / median(plain): what
lab's boot choices (PVH vmlinux, the command line of the "Boot speed" table, lab's agent)
leave of a plain boot.  Target: <= 0.30.  --lab-kernel K adds, interleaved, lab's boot with
kernel K (lab's own config, one of the "Boot speed" choices) against the same plain boot of
Debian's kernel, reported as its own ratio ("lab-K"), never as "lab".  Writes bench/results/bench_ratio-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.image import cpio  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provenance import stamp  # noqa: E402

# The machine's shape; lab's -accel (TCG threading) and -cpu are kept too unless
# --qemu-defaults leaves them at QEMU's (MTTCG, qemu64: 32 vCPUs then take ~70 s).
SHAPE = ("-machine", "-smp", "-m", "-object", "-numa")


def lab_cmd() -> str:
    return str(Path(sys.executable).parent / "lab")


def plain_argv(topology: str, kernel: str, initrd: Path, console: Path, same_cpu: bool = False) -> tuple[list[str], str]:
    """The plain boot: lab's dry-run argv reduced to the machine's shape."""
    p = subprocess.run([lab_cmd(), "boot", topology, "--kernel", kernel, "--dry-run", "--", "true"],
                       capture_output=True, text=True, check=True)  # fmt: skip
    line = next(ln for ln in p.stdout.splitlines() + p.stderr.splitlines() if ln.startswith("qemu-system"))
    lab_argv = shlex.split(line)
    out = [lab_argv[0], "-nodefaults", "-no-user-config", "-nographic", "-no-reboot"]
    i = 1
    while i < len(lab_argv):
        if lab_argv[i] in SHAPE or (same_cpu and lab_argv[i] in ("-accel", "-cpu")):
            out += lab_argv[i : i + 2]
            i += 2
        else:
            i += 1
    kdir = Path.home() / ".cache" / "lab" / "kernels"
    want = {"debian": "debian-6.1.0-", "debian-6.12": "debian-6.12."}.get(kernel, kernel)
    vmlinuz = next(d / "vmlinuz" for d in sorted(kdir.iterdir()) if d.name.startswith(want) and d.name.endswith("amd64"))
    out += ["-kernel", str(vmlinuz), "-initrd", str(initrd), "-append", "console=ttyS0 panic=-1",
            "-serial", f"file:{console}"]  # fmt: skip
    return out, str(vmlinuz)


def busybox_initrd(path: Path) -> None:
    bb = Path(shutil.which("busybox") or "/bin/busybox")
    init = b"#!/bin/busybox sh\n/bin/busybox poweroff -f\n"
    cpio.write(path, [cpio.directory("bin"), cpio.file("bin/busybox", bb, mode=0o755),
                      cpio.file("init", data=init, mode=0o755)])  # fmt: skip


def timed(argv: list[str]) -> tuple[float, int]:
    t0 = time.monotonic()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topology", default="zen3-2s-mini")
    ap.add_argument("--kernel", default="debian")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--qemu-defaults", action="store_true", help="the plain boot leaves -accel and -cpu at QEMU's defaults")
    ap.add_argument("--before", action="store_true",
                    help="also time lab's boot with --append lpj=0 (the boot before the preset lpj=, issue 32 item 6), interleaved")
    ap.add_argument("--lab-kernel", default=None,
                    help="also time lab's boot with this kernel (e.g. lab-6.1), interleaved, as its own ratio")
    args = ap.parse_args()
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="lab-ratio-") as tmp:
        initrd, console = Path(tmp) / "plain.cpio", Path(tmp) / "console.log"
        busybox_initrd(initrd)
        plain, vmlinuz = plain_argv(args.topology, args.kernel, initrd, console, not args.qemu_defaults)
        labv = [lab_cmd(), "boot", args.topology, "--kernel", args.kernel, "--runs", str(Path(tmp) / "runs"), "--", "true"]
        timed(labv)  # warm-up: lab's cached layers and the extracted vmlinux exist before the first timed round
        variants = [("lab", labv), ("plain", plain)]
        if args.before:
            variants.insert(1, ("lab-lpj0", labv[:-2] + ["--append", "lpj=0", "--", "true"]))
        if args.lab_kernel:
            labk = [lab_cmd(), "boot", args.topology, "--kernel", args.lab_kernel, "--runs", str(Path(tmp) / "runs"), "--", "true"]
            timed(labk)  # warm-up for that kernel's layers too
            variants.insert(1, (f"lab-{args.lab_kernel}", labk))
        for r in range(args.rounds):
            order = variants if r % 2 == 0 else variants[::-1]
            for name, argv in order:
                wall, rc = timed(argv)
                if name == "plain" and "reboot: Power down" not in console.read_text(errors="replace"):
                    rc = rc or 99  # the plain guest never reached its /init
                rows.append({"round": r + 1, "what": name, "wall_s": round(wall, 2), "rc": rc})
                print(f"round {r + 1} {name}: {wall:.2f}s rc={rc}", flush=True)
    ok = {w: [x["wall_s"] for x in rows if x["what"] == w and x["rc"] == 0] for w, _ in variants}
    med = {w: statistics.median(v) if v else None for w, v in ok.items()}
    ratios = {w: round(m / med["plain"], 3) for w, m in med.items() if w != "plain" and m and med["plain"]}
    ratio = ratios.get("lab")
    print(f"{args.topology}, kernel {args.kernel}: medians {med}, ratios to plain {ratios} (target for lab <= 0.30)")
    doc = {**stamp(), "bench": "ratio", "topology": args.topology, "kernel": args.kernel, "lab_kernel": args.lab_kernel, "vmlinuz": vmlinuz, "plain_argv": plain[:-6], "same_cpu": not args.qemu_defaults,
           "rows": rows, "median_s": med, "ratio": ratio, "ratios": ratios, "target": 0.30,
           "loadavg_before": load0,
           "loadavg_after": os.getloadavg()}  # fmt: skip
    d = Path(__file__).resolve().parent / "results"
    d.mkdir(exist_ok=True)
    p = d / f"bench_ratio-{time.strftime('%Y%m%d-%H%M%S')}.json"
    p.write_text(json.dumps(doc, indent=1))
    print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
