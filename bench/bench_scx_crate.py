"""One of the scx project's Rust schedulers built from crates.io (issue 35 item 2b):
`cargo install --locked --root ROOT CRATE --version V`, with zig's clang as the BPF
compiler, and the wall time it took.

Bookworm's clang is 16 and scx_utils' build script wants 18 or later for BPF
(`-mcpu=v4`).  PyPI's `ziglang` wheel ships clang 22 as `zig cc`
(`pip download --no-deps ziglang`, unpack, pass its directory as --zig), but zig takes
only its own target triples, so this writes a `clang` wrapper that translates clang's
(`-target bpf` -> `-target bpfel-freestanding`; `--version --target=<rust triple>`,
which scx_cargo's ClangInfo runs, -> `zig cc --version`) and hands it to the build as
BPF_CLANG (scx_cargo's clang_info.rs and libbpf-cargo both take it from there).
bindgen (the schedulers' interface headers) uses Debian's libclang-16
(LIBCLANG_PATH=/usr/lib/llvm-16/lib), and scx_cargo hands it the BPF compile's flags,
whose `-mcpu=v4` clang 16 refuses ("unknown target CPU 'v4'"): so BPF_BASE_CFLAGS is
scx_cargo's own base flags without `-mcpu=v4` and its `-mllvm` options, and the wrapper
adds those back to every BPF compile (bindgen never runs the wrapper), with
`-fno-unwind-tables -fno-asynchronous-unwind-tables`: zig cc emits .eh_frame for BPF,
whose relocations libbpf's linker refuses.

    .venv/bin/python bench/bench_scx_crate.py --zig DIR [--crate scx_bpfland]
        [--version 1.1.4] [--root ~/.cache/lab/scx-crates/root] [--target-dir DIR] [-j 2]

A --target-dir that does not exist yet makes it a cold build (the crates themselves
come from cargo's registry cache when an earlier attempt downloaded them; the file says
how many were there).  Writes bench/results/bench_scx_crate-<time>.json, also when the
build fails (then with the error's tail).

--guest TOPOLOGY (with --kernel, default lab-6.12-scx) then runs the installed binary
as lab's `--scheduler PATH` (a dynamic binary: lab packs its libraries): one `lab boot
TOPOLOGY -- cat /sys/kernel/sched_ext/state /sys/kernel/sched_ext/root/ops` and one
`lab run scheduler-survives --runs-per-verdict 1 --json`, and records what each said.
--no-build skips the build and uses what --root holds.  --lab builds with lab instead
(`lab scheduler build CRATE@VERSION`, whose cargo argv and environment this script's own
build also takes from lab.scheduler) and records the store entry; its --guest runs
`--scheduler CRATE@VERSION`.  --clang CLANG builds with that
clang as BPF_CLANG as it is (no wrapper, no BPF_BASE_CFLAGS: the crate's own flags),
e.g. Debian's clang-16 for a version whose scx_cargo takes it (1.0.x asks for 16 and
-mcpu=v3; 1.1.x for 18 and -mcpu=v4)."""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))  # bench/provenance.py
sys.path.insert(0, str(REPO))  # lab: its cargo invocation (lab.scheduler.cargo_argv, cargo_env, cargo_install)

from lab import scheduler as sm  # noqa: E402

SCRATCH = Path(os.environ.get("LAB_CACHE", Path.home() / ".cache" / "lab")) / "scx-crates"

# The wrapper scx's build runs as clang: zig cc with clang's target names translated.
WRAPPER = r"""#!/bin/bash
# clang for the scx schedulers' BPF build, backed by zig cc (clang 22): zig takes its
# own target triples only (bpfel-freestanding), and a host triple of rust's spelling
# (x86_64-unknown-linux-gnu) not at all, so translate (bench/bench_scx_crate.py).
ZIG=__ZIG__
for a in "$@"; do
  [ "$a" = "--version" ] && exec "$ZIG" cc --version   # ClangInfo: version and host arch
done
out=()
prev=""
bpf=
for a in "$@"; do
  if [ "$prev" = "-target" ]; then
    case "$a" in
      bpf|bpfel) a=bpfel-freestanding ;;
      bpfeb) a=bpfeb-freestanding ;;
    esac
    out+=("$a"); prev=""; bpf=1; continue
  fi
  case "$a" in
    --target=bpf|--target=bpfel) out+=(-target bpfel-freestanding); bpf=1 ;;
    --target=bpfeb) out+=(-target bpfeb-freestanding); bpf=1 ;;
    *) out+=("$a") ;;
  esac
  prev="$a"
done
# scx_cargo's BPF flags that bindgen's libclang-16 refuses, so not in BPF_BASE_CFLAGS;
# and no unwind tables, which zig cc asks for (-funwind-tables=2) and clang does not for
# BPF: their .eh_frame relocates against .text's section symbol, which libbpf's linker
# refuses ("relocation against STT_SECTION in non-exec section is not supported!").
[ -n "$bpf" ] && out+=(__BPF_ONLY__ -fno-unwind-tables -fno-asynchronous-unwind-tables)
exec "$ZIG" cc "${out[@]}"
"""


# scx_cargo 1.1.4's determine_base_cflags() for clang 22 on x86: its flags, the ones
# bindgen cannot take split off (BPF_ONLY, which the wrapper adds to BPF compiles).
BASE_CFLAGS = ["-g", "-O2", "-Wall", "-Wno-compare-distinct-pointer-types", "-D__TARGET_ARCH_x86", "-mlittle-endian"]
BPF_ONLY = ["-mcpu=v4", "-mllvm", "-disable-ldsx", "-mllvm", "-disable-gotox"]


def system_includes(clang: Path) -> list[str]:
    """`clang -v -E -`'s <...> search list as -idirafter flags (as scx_cargo makes them)."""
    p = subprocess.run([str(clang), "-v", "-E", "-"], input="", capture_output=True, text=True)
    out, on = [], False
    for line in p.stderr.splitlines():
        if line == "#include <...> search starts here:":
            on = True
        elif line == "End of search list.":
            break
        elif on:
            out += ["-idirafter", line.strip()]
    return out


def first_line(argv: list[str], env: dict | None = None) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    except OSError as e:
        return f"unavailable: {e}"
    return (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr).strip() else ""


def locked_versions(crate: str, version: str, names: tuple[str, ...]) -> dict[str, list[str]]:
    """The versions the crate's published Cargo.lock pins (what --locked builds)."""
    out: dict[str, list[str]] = {}
    for lock in glob.glob(str(Path.home() / ".cargo" / "registry" / "src" / "*" / f"{crate}-{version}" / "Cargo.lock")):
        name = None
        for line in Path(lock).read_text().splitlines():
            if line.startswith("name = "):
                name = line.split('"')[1]
            elif line.startswith("version = ") and name in names:
                out.setdefault(name, []).append(line.split('"')[1])
        break
    return out


def build(args, result: dict) -> int:
    """cargo install the crate; what it took into *result*; cargo's exit status."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    zig = Path(args.zig).resolve() / "zig"
    if args.clang:
        found = shutil.which(args.clang)
        if not found:
            raise SystemExit(f"--clang {args.clang}: not found")
        wrapper, base = Path(found), None
    else:
        if not args.zig or not zig.is_file():
            raise SystemExit(f"--zig {args.zig!r}: no zig binary in it (or give --clang)")
        wrapper = SCRATCH / "clang"
        wrapper.write_text(WRAPPER.replace("__ZIG__", str(zig)).replace("__BPF_ONLY__", " ".join(BPF_ONLY)))
        wrapper.chmod(0o755)
        base = " ".join(BASE_CFLAGS + system_includes(wrapper))
    target = Path(args.target_dir) if args.target_dir else SCRATCH / f"target-{args.crate}-{args.version}-{time.strftime('%Y%m%d-%H%M%S')}"
    cold = not target.exists()
    # lab's own cargo invocation and environment (lab.scheduler, `lab scheduler build`),
    # with this script's BPF compiler and base flags.
    cargo = sm.cargo_path()
    if cargo is None:
        raise SystemExit("cargo not found (on PATH or in ~/.cargo/bin)")
    cenv = sm.cargo_env(cargo, str(wrapper), target, base)
    env = dict(os.environ, **cenv)
    argv = sm.cargo_argv(cargo, args.crate, args.version, Path(args.root), args.jobs, force=True)
    cached = len(glob.glob(str(Path.home() / ".cargo" / "registry" / "cache" / "*" / "*.crate")))
    log = SCRATCH / f"build-{args.crate}-{args.version}.log"
    load0 = os.getloadavg()
    rc, took = sm.cargo_install(argv, cenv, log)
    lines = log.read_text(errors="replace").splitlines()
    binary = Path(args.root) / "bin" / args.crate
    result.update({
        "argv": argv,
        "env": {k: env[k] for k in ("BPF_CLANG", "BPF_BASE_CFLAGS", "LIBCLANG_PATH", "CARGO_TARGET_DIR") if k in env},
        "cold_target_dir": cold,
        "crates_in_registry_cache_before": cached,
        "crate": args.crate,
        "version": args.version,
        "locked": locked_versions(args.crate, args.version, ("scx_utils", "scx_cargo", "libbpf-rs", "libbpf-cargo", "libbpf-sys", "bindgen")),
        "toolchain": {
            "bpf_clang": first_line([str(wrapper), "--version"]),
            "zig": first_line([str(zig), "version"]) if not args.clang else None,
            "rustc": first_line(["rustc", "--version"], env),
            "cargo": first_line([cargo, "--version"], env),
            "libclang_for_bindgen": sorted(Path(p).name for p in glob.glob("/usr/lib/llvm-16/lib/libclang*.so*")),
        },
        "wrapper": None if args.clang else WRAPPER.replace("__ZIG__", "<zig>").replace("__BPF_ONLY__", " ".join(BPF_ONLY)),
        "exit": rc,
        "wall_s": round(took, 1),
        "loadavg_before": list(load0),
        "loadavg_after": list(os.getloadavg()),
        "log": str(log),
    })
    if rc != 0 or not binary.is_file():
        result["log_tail"] = lines[-40:]
        # The cause is often above a backtrace that fills the tail: keep the error lines too.
        result["log_errors"] = [ln for ln in lines if "error" in ln.lower() and "Compiling" not in ln][:20]
    return rc


def lab_build(args, result: dict) -> int:
    """`lab scheduler build CRATE@VERSION` (lab's own build, bookworm's clang-16; a store
    hit when built before): its exit, wall time and the stored entry's metadata (the
    build's own seconds, toolchain, command); lab's exit status."""
    lab = [sys.executable, "-m", "lab"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    argv = [*lab, "scheduler", "build", f"{args.crate}@{args.version}", "-j", str(args.jobs)]
    load0 = os.getloadavg()
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    rec: dict = {"argv": argv[2:], "exit": p.returncode, "wall_s": round(time.monotonic() - t0, 1),
                 "loadavg_before": list(load0), "loadavg_after": list(os.getloadavg()),
                 "stderr_tail": p.stderr.splitlines()[-6:]}  # fmt: skip
    if p.returncode == 0:
        entry = sm.get(p.stdout.strip())
        if entry is not None:
            m = entry.metadata
            rec["entry"] = {"id": entry.id, "binary": str(entry.binary), "store_hit": rec["wall_s"] < m.get("timings", {}).get("build_s", 0),
                            **{k: m.get(k) for k in ("version", "timings", "toolchain", "build_command", "build_env", "built_at", "key",
                                                     "binary_sha256", "binary_size", "libraries")}}  # fmt: skip
    result["lab_build"] = rec
    return p.returncode


def guest(binary: Path | str, topology: str, kernel: str) -> dict:
    """The scheduler (a binary as lab's --scheduler PATH, or a name lab resolves) on
    *topology*: a boot that prints sched_ext's state and root/ops, and one
    scheduler-survives run."""
    lab = [sys.executable, "-m", "lab"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out: dict = {"topology": topology, "kernel": kernel}
    boot = [*lab, "boot", topology, "--kernel", kernel, "--scheduler", str(binary), "--",
            "cat", "/sys/kernel/sched_ext/state", "/sys/kernel/sched_ext/root/ops"]  # fmt: skip
    t0 = time.monotonic()
    p = subprocess.run(boot, capture_output=True, text=True, env=env)
    out["boot"] = {"argv": boot[2:], "exit": p.returncode, "wall_s": round(time.monotonic() - t0, 1),
                   "stdout": p.stdout.splitlines(), "stderr_tail": p.stderr.splitlines()[-8:]}  # fmt: skip
    run = [*lab, "run", "scheduler-survives", "--topology", topology, "--kernel", kernel, "--scheduler", str(binary),
           "--runs-per-verdict", "1", "--json"]  # fmt: skip
    t0 = time.monotonic()
    p = subprocess.run(run, capture_output=True, text=True, env=env)
    rec: dict = {"argv": run[2:], "exit": p.returncode, "wall_s": round(time.monotonic() - t0, 1)}
    try:
        doc = json.loads(p.stdout)
        r0 = doc["runs"][0]
        rec.update({"verdict": r0.get("status"),
                    "message": r0.get("message"), "integrity": r0.get("integrity"),
                    "expectations": [(e.get("name"), e.get("status")) for e in r0.get("expectations", [])],
                    "run_dir": r0.get("run_dir") or doc.get("run_dir")})  # fmt: skip
        rd = rec["run_dir"]
        if rd:
            plan = json.loads((Path(rd) / "plan.json").read_text())
            rec["plan_scheduler"] = plan.get("scheduler")
            rec["plan_kernel"] = plan.get("kernel")
            sd = Path(rd) / "out" / "scheduler"
            rec["out_scheduler"] = {f.name: f.read_text(errors="replace")[-400:] for f in sorted(sd.iterdir()) if f.is_file()}
    except (ValueError, KeyError, IndexError, OSError, TypeError) as e:
        rec["unparsed"] = f"{type(e).__name__}: {e}"
        rec["stdout_tail"] = p.stdout.splitlines()[-10:]
        rec["stderr_tail"] = p.stderr.splitlines()[-10:]
    out["scheduler_survives"] = rec
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zig", default="", help="directory holding the zig binary (the ziglang wheel's ziglang/)")
    ap.add_argument("--clang", default="", help="a clang to use as BPF_CLANG as it is, instead of --zig's")
    ap.add_argument("--crate", default="scx_bpfland")
    ap.add_argument("--version", default="1.1.4")
    ap.add_argument("--root", default=str(SCRATCH / "root"))
    ap.add_argument("--target-dir", default=None)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--no-build", action="store_true", help="use the binary --root holds")
    ap.add_argument("--lab", action="store_true",
                    help="lab's own build instead: `lab scheduler build CRATE@VERSION` (clang-16), and --guest runs "
                         "--scheduler CRATE@VERSION")  # fmt: skip
    ap.add_argument("--guest", default="", help="a topology to run the binary on as lab's --scheduler PATH")
    ap.add_argument("--kernel", default="lab-6.12-scx")
    args = ap.parse_args()
    from provenance import stamp

    measured = stamp()
    result: dict = {"bench": "bench_scx_crate", **measured, "crate": args.crate, "version": args.version}
    binary = Path(args.root) / "bin" / args.crate
    rc = 0
    if args.lab:
        rc = lab_build(args, result)
        if args.guest and rc == 0:
            result["guest"] = guest(f"{args.crate}@{args.version}", args.guest, args.kernel)
        return _write(args, result, rc)
    if not args.no_build:
        rc = build(args, result)
    if binary.is_file():
        data = binary.read_bytes()
        result["binary"] = {
            "path": str(binary),
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "file": first_line(["file", "-b", str(binary)]),
        }
    if args.guest and rc == 0 and binary.is_file():
        result["guest"] = guest(binary, args.guest, args.kernel)
    return _write(args, result, rc)


def _write(args, result: dict, rc: int) -> int:
    out = REPO / "bench" / "results" / f"bench_scx_crate-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{args.crate} {args.version}: exit {rc}; {out}")
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
