"""The guest workloads, built for real and run briefly on the host (they are static)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lab.errors import InfraError, UserError
from lab.image import workloads
from lab.image.tools import read_elf

NAMES = ("memprobe", "pingpong", "stream")
HOST_IS_X86 = os.uname().machine == "x86_64"

pytestmark = pytest.mark.skipif(
    not HOST_IS_X86 or not shutil.which("gcc"),
    reason="needs an x86_64 host with gcc (Debian packages gcc libc6-dev) to build and run",
)


@pytest.fixture(scope="module")
def bins(tmp_path_factory) -> dict[str, Path]:
    return workloads.build("x86_64", tmp_path_factory.mktemp("wl"))


def run(binary: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def ok(binary: Path, *args: str) -> dict:
    cp = run(binary, *args)
    assert cp.returncode == 0, cp.stderr
    out = workloads.parse_output(cp.stdout)
    assert out["workload"] == binary.name
    return out


def allowed_cpus() -> set[int]:
    return os.sched_getaffinity(0)


def hist_cpus(hist: dict[str, int]) -> set[int]:
    assert hist and all(v > 0 for v in hist.values())
    return {int(c) for c in hist}


# --- build ---------------------------------------------------------------------


def test_build_makes_one_static_binary_per_source(bins):
    assert sorted(bins) == sorted(p.stem for p in workloads.sources())
    assert set(NAMES) <= set(bins)
    for path in bins.values():
        elf = read_elf(path)
        assert elf.machine == 62
        assert elf.interp is None and elf.needed == ()  # static: runs in a bare initramfs
        assert os.access(path, os.X_OK)


def test_inputs_hash_is_stable_and_follows_sources(tmp_path, monkeypatch):
    h = workloads.inputs_hash("x86_64")
    assert h == workloads.inputs_hash("x86_64")
    if shutil.which("aarch64-linux-gnu-gcc"):
        assert workloads.inputs_hash("arm64") != h
    src = tmp_path / "src"
    shutil.copytree(workloads.SOURCES, src)
    monkeypatch.setattr(workloads, "SOURCES", src)
    assert workloads.inputs_hash("x86_64") == h
    (src / "common.h").write_text((src / "common.h").read_text() + "\n/* changed */\n")
    assert workloads.inputs_hash("x86_64") != h


def test_compile_error_is_infra_error_with_compiler_message(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "broken.c").write_text("int main(void) { return undeclared_thing; }\n")
    monkeypatch.setattr(workloads, "SOURCES", src)
    out = tmp_path / "out"
    with pytest.raises(InfraError, match="broken.c.*undeclared_thing"):
        workloads.build("x86_64", out)
    assert list(out.iterdir()) == []  # no half-written binary left behind


def test_missing_compiler_names_the_debian_packages(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="gcc-aarch64-linux-gnu and libc6-dev-arm64-cross"):
        workloads.build("arm64", tmp_path / "out")
    with pytest.raises(UserError, match="install the Debian package.*gcc"):
        workloads.inputs_hash("x86_64")


def test_unknown_arch():
    with pytest.raises(UserError, match="unknown workload arch 'riscv64'"):
        workloads.build("riscv64", Path("/nonexistent"))


@pytest.mark.skipif(
    not shutil.which("aarch64-linux-gnu-gcc"),
    reason="no aarch64-linux-gnu-gcc: install gcc-aarch64-linux-gnu and libc6-dev-arm64-cross",
)
def test_arm64_cross_build(tmp_path):
    built = workloads.build("arm64", tmp_path)
    assert set(NAMES) <= set(built)
    for path in built.values():
        elf = read_elf(path)
        assert elf.machine == 183  # EM_AARCH64
        assert elf.interp is None and elf.needed == ()


# --- the common contract ----------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_help(bins, name):
    cp = run(bins[name], "--help")
    assert cp.returncode == 0
    assert cp.stdout.startswith(f"usage: {name} ")
    assert cp.stderr == ""


@pytest.mark.parametrize(
    "name,args,message",
    [
        ("stream", ["-t", "0"], "-t needs an integer in [1, 4096], got '0'"),
        ("stream", ["-t", "x"], "-t needs an integer"),
        ("stream", ["-s", "-1"], "-s needs a positive number of seconds, got '-1'"),
        ("stream", ["-s", "abc"], "-s needs a positive number of seconds"),
        ("stream", ["--bogus"], "unknown option '--bogus'"),
        ("stream", ["-x"], "unknown option '-x'"),
        ("stream", ["-t"], "option '-t' needs a value"),
        ("stream", ["extra"], "unexpected argument 'extra'"),
        ("stream", ["--pin-main", "1023"], "--pin-main 1023 is not in the allowed CPUs"),
        ("pingpong", ["--cpus", "3-1"], "--cpus needs a cpulist like 0-3,8, got '3-1'"),
        ("pingpong", ["--cpus", "0,"], "--cpus needs a cpulist"),
        ("pingpong", ["--cpus", "a"], "--cpus needs a cpulist"),
        ("pingpong", ["--cpus", "5000"], "--cpus needs a cpulist"),
        ("pingpong", ["-p", "0"], "-p needs an integer"),
        ("pingpong", ["-n", "-3"], "-n needs an integer"),
        ("pingpong", ["--cpus"], "option '--cpus' needs a value"),
        ("pingpong", ["-p", "2", "--start", "0:0"], "--start names 1 pair(s), -p says 2"),
        ("pingpong", ["--start", "0:0,0:0"], "--start names more pairs than -p 1"),
        ("pingpong", ["--start", "x"], "--start needs W:E per pair, e.g. 0:4,5:1, got 'x'"),
        ("pingpong", ["--start", "0:5000"], "--start needs W:E per pair"),
        ("pingpong", ["--settle", "0"], "--settle needs an integer"),
        ("memprobe", ["-m", "0"], "-m needs an integer"),
        ("memprobe", ["--node", "-1"], "--node needs an integer"),
        ("memprobe", ["-l", "1.5"], "-l needs an integer"),
        ("memprobe", ["--balancing", "-l", "1"], "--balancing needs --node"),
        ("memprobe", ["--start-cpus", "x"], "--start-cpus needs a cpulist like 0-3,8, got 'x'"),
    ],
)
def test_bad_arguments_one_line_exit_2(bins, name, args, message):
    cp = run(bins[name], *args)
    assert cp.returncode == 2
    assert cp.stdout == ""
    lines = cp.stderr.splitlines()
    assert len(lines) == 1, cp.stderr
    assert lines[0].startswith(f"{name}: ")
    assert message in lines[0]
    assert lines[0].endswith(f"(see {name} --help)")


def test_parse_output():
    assert workloads.parse_output(b'noise\n{"a": 1}\n') == {"a": 1}
    with pytest.raises(InfraError, match="no result line"):
        workloads.parse_output("nothing here\n")
    with pytest.raises(InfraError, match="malformed"):
        workloads.parse_output('{"a": \n')


# --- stream -------------------------------------------------------------------------


def test_stream(bins):
    out = ok(bins["stream"], "-t", "3", "-s", "0.1", "-m", "1")
    assert out["threads"] == 3 and out["mib_per_array"] == 1
    threads = out["per_thread"]
    assert [t["thread"] for t in threads] == [0, 1, 2]
    assert len({t["tid"] for t in threads} | {out["pid"]}) == 4
    for t in threads:
        assert t["iterations"] > 0 and t["mbps"] > 0
        assert t["seconds"] >= 0.1
        assert t["allowed"] == len(allowed_cpus())
        assert {t["cpu_start"], t["cpu_end"]} <= allowed_cpus()
        assert sum(t["cpus"].values()) == t["iterations"]
    assert out["total_mbps"] == pytest.approx(sum(t["mbps"] for t in threads), abs=0.5)


def test_stream_obeys_the_callers_pinning(bins):
    cpu = min(allowed_cpus())
    if not shutil.which("taskset"):
        pytest.skip("no taskset (Debian package util-linux)")
    cp = subprocess.run(
        ["taskset", "-c", str(cpu), bins["stream"], "-t", "2", "-s", "0.05", "-m", "1"],
        capture_output=True,
        text=True,
        check=True,
    )
    for t in workloads.parse_output(cp.stdout)["per_thread"]:
        assert t["allowed"] == 1
        assert t["cpu_start"] == t["cpu_end"] == cpu
        assert hist_cpus(t["cpus"]) == {cpu}


def test_stream_pin_main_does_not_narrow_the_workers(bins):
    cpus = sorted(allowed_cpus())
    out = ok(bins["stream"], "-t", "2", "-s", "0.05", "-m", "1", "--pin-main", str(cpus[-1]))
    for t in out["per_thread"]:
        assert t["cpu_create"] == cpus[-1]  # the main thread forked from there
        assert t["allowed"] == len(cpus)  # but the workers kept the process's mask


def test_stream_main_works_is_thread_0_and_forks_the_others(bins):
    """--main-works: the main thread is thread 0 (as an OpenMP master): N threads, N-1
    created, none left only forking and waiting on a CPU of the pinned set."""
    out = ok(bins["stream"], "-t", "3", "-s", "0.05", "-m", "1", "--main-works")
    assert out["main_works"] is True and out["threads"] == 3
    threads = out["per_thread"]
    assert [t["thread"] for t in threads] == [0, 1, 2]
    assert threads[0]["tid"] == out["pid"] and threads[0]["cpu_create"] == -1
    assert len({t["tid"] for t in threads}) == 3 and all(t["iterations"] > 0 for t in threads)
    assert ok(bins["stream"], "-t", "1", "-s", "0.01", "-m", "1")["main_works"] is False


@pytest.mark.parametrize("extra", [["--main-works"], []])
def test_stream_gate_holds_the_workers_until_the_last_fork(bins, extra):
    """--gate: the workers spin (runnable) until the last pthread_create(), then allocate
    and run as without it (llc-spread-pinned, version 3)."""
    out = ok(bins["stream"], "-t", "4", "-s", "0.05", "-m", "1", "--gate", *extra)
    assert out["gate"] is True and out["threads"] == 4
    assert all(t["iterations"] > 0 and t["seconds"] >= 0.05 for t in out["per_thread"])
    assert ok(bins["stream"], "-t", "1", "-s", "0.01", "-m", "1")["gate"] is False


# --- pingpong ------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [[], ["--unix"], ["--fork"], ["--unix", "--fork"]])
def test_pingpong_rounds(bins, extra):
    out = ok(bins["pingpong"], "-p", "2", "-n", "500", "-k", "10", *extra)
    assert out["transport"] == ("unix" if "--unix" in extra else "pipe")
    assert out["mode"] == ("fork" if "--fork" in extra else "threads")
    assert out["pairs"] == 2 and out["total_rounds"] == 1000
    for p in out["per_pair"]:
        assert p["rounds"] == 500 and p["rtt_per_s"] > 0 and p["rtt_us"] > 0
        assert p["waker_tid"] != p["wakee_tid"]
        # one sample at round 1, then every 10th
        assert sum(p["waker_cpus"].values()) == sum(p["wakee_cpus"].values()) == 51
        assert hist_cpus(p["waker_cpus"]) | hist_cpus(p["wakee_cpus"]) <= allowed_cpus()


def test_pingpong_fork_reaps_every_pair(bins):
    # Regression: the pids lived in the MAP_SHARED results, where a child's
    # "pid = fork()" (= 0) could overwrite the parent's copy; 4 in 20 runs failed.
    for _ in range(10):
        out = ok(bins["pingpong"], "--fork", "-p", "8", "-n", "20")
        assert out["total_rounds"] == 160


def test_pingpong_seconds_and_cpus(bins):
    cpu = min(allowed_cpus())
    out = ok(bins["pingpong"], "-p", "1", "-s", "0.2", "--cpus", str(cpu))
    (p,) = out["per_pair"]
    assert 0.2 <= p["seconds"] < 2
    assert p["rounds"] > 0
    assert hist_cpus(p["waker_cpus"]) == hist_cpus(p["wakee_cpus"]) == {cpu}


def test_pingpong_start_pins_each_side_then_lets_go(bins):
    """--start W:E: the waker starts on W, the wakee on E, pinned for --settle round
    trips (the first samples: -k 1 samples every round), then free on every allowed CPU."""
    cpus = sorted(allowed_cpus())
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    w, e = cpus[0], cpus[1]
    out = ok(bins["pingpong"], "-p", "1", "-n", "400", "-k", "1", "--start", f"{w}:{e}", "--settle", "200")
    (p,) = out["per_pair"]
    assert p["start"] == [w, e] and p["rounds"] == 400
    assert p["waker_cpus"].get(str(w), 0) >= 199 and p["wakee_cpus"].get(str(e), 0) >= 199
    out = ok(bins["pingpong"], "-p", "1", "-n", "50", "-k", "1", "--start", f"{w}:{e}", "--settle", "1000")
    (p,) = out["per_pair"]
    assert hist_cpus(p["waker_cpus"]) == {w} and hist_cpus(p["wakee_cpus"]) == {e}  # never let go
    assert ok(bins["pingpong"], "-p", "1", "-n", "5")["per_pair"][0]["start"] == [-1, -1]


def test_pingpong_cpus_outside_the_machine_is_a_runtime_error(bins):
    cp = run(bins["pingpong"], "--cpus", "1000", "-n", "1")
    assert cp.returncode == 1
    assert cp.stderr.startswith("pingpong: cannot restrict to CPUs 1000: ")


# --- memprobe ------------------------------------------------------------------------

HAS_NODE0 = Path("/sys/devices/system/node/node0").exists()


def test_memprobe_loops(bins):
    out = ok(bins["memprobe"], "-m", "2", "-l", "3", "-k", "1000")
    assert out["loops"] == 3 and out["mib"] == 2 and out["node"] == -1
    assert out["total_s"] > 0 and out["ns_per_load"] > 0
    assert out["loop_min_s"] <= out["loop_s"] <= out["loop_max_s"]
    assert out["loop_s"] == pytest.approx(out["total_s"] / 3, rel=1e-3)
    assert hist_cpus(out["cpus"]) <= allowed_cpus()
    assert out["mem_pages_sampled"] == 512  # 2 MiB of 4 KiB pages


@pytest.mark.skipif(not HAS_NODE0, reason="host kernel without NUMA (no /sys/.../node0)")
def test_memprobe_binds_to_node(bins):
    out = ok(bins["memprobe"], "-m", "4", "--node", "0", "-s", "0.1")
    assert out["node"] == 0 and out["loops"] >= 1 and out["total_s"] >= 0.1
    assert out["mem_nodes"] == {"0": out["mem_pages_sampled"]}


@pytest.mark.skipif(not HAS_NODE0, reason="host kernel without NUMA (no /sys/.../node0)")
def test_memprobe_balancing_start_cpus_and_numa_samples(bins):
    """--balancing binds with MPOL_F_NUMA_BALANCING (the pages stay on the node), --start-cpus
    only chooses where the setup runs, and each loop samples /proc/self/sched."""
    first = min(allowed_cpus())
    out = ok(
        bins["memprobe"],
        "-m",
        "2",
        "--node",
        "0",
        "--balancing",
        "--start-cpus",
        str(first),
        "-l",
        "3",
    )
    # Where the setup ran (before the affinity is given back); cpu_start is read after it,
    # so on a loaded host the loop may already start elsewhere (CI once saw it).
    assert out["balancing"] is True and out["cpu_setup"] == first and out["cpu_start"] in allowed_cpus()
    assert out["mem_nodes"] == {"0": out["mem_pages_sampled"]}
    assert len(out["numa"]) == 3
    for t, cpu, pnid, faults in out["numa"]:
        assert t >= 0 and cpu in allowed_cpus()  # seconds since the start: a fast first loop may round to 0
        sched = Path("/proc/self/sched").exists()
        assert (pnid >= -1 and faults >= 0) if sched else (pnid, faults) == (-1, -1)
    assert [s[0] for s in out["numa"]] == sorted(s[0] for s in out["numa"])


def test_memprobe_missing_node_is_a_clear_error(bins):
    cp = run(bins["memprobe"], "-m", "1", "--node", "1000", "-l", "1")
    assert cp.returncode == 1
    assert cp.stdout == ""
    assert cp.stderr.splitlines() == [
        "memprobe: mbind of 1 MiB to node 1000 failed: Invalid argument "
        "(no such node: see /sys/devices/system/node)"
    ]


# --- tracedump (raw ring-buffer pages for trace.dat) ------------------------------


def test_tracedump_copies_every_cpus_pages(bins, tmp_path):
    """A stand-in tracefs of regular files (the real trace_pipe_raw is read the same way,
    until it says it is empty): every cpuN copied whole, the page size recorded."""
    fs = tmp_path / "tracing"
    pages = {0: bytes(range(256)) * 32, 3: b"\x01" * 4096 * 2, 10: b""}
    for cpu, data in pages.items():
        (fs / "per_cpu" / f"cpu{cpu}").mkdir(parents=True)
        (fs / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw").write_bytes(data)
    (fs / "per_cpu" / "cpux").mkdir()  # not a CPU: left alone
    out = tmp_path / "raw"
    out.mkdir()
    res = ok(bins["tracedump"], str(fs), str(out))
    assert res == {"workload": "tracedump", "cpus": 3, "bytes": sum(map(len, pages.values())), "page_size": os.sysconf("SC_PAGE_SIZE")}
    for cpu, data in pages.items():
        assert (out / f"cpu{cpu}").read_bytes() == data
    assert (out / "page_size").read_text().strip() == str(os.sysconf("SC_PAGE_SIZE"))


def test_tracedump_contract(bins, tmp_path):
    cp = run(bins["tracedump"], "--help")
    assert cp.returncode == 0 and cp.stdout.startswith("usage: tracedump ") and cp.stderr == ""
    cp = run(bins["tracedump"], "only-one")
    assert cp.returncode == 2 and cp.stderr.strip().endswith("(see tracedump --help)") and cp.stdout == ""
    cp = run(bins["tracedump"], str(tmp_path / "nope"), str(tmp_path))
    assert cp.returncode == 1 and cp.stderr.startswith("tracedump: cannot open ") and cp.stdout == ""
