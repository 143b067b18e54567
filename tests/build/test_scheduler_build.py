"""Real builds for sched_ext (issue 35): lab-6.12-scx (a 6.12 kernel with debug info and
BTF: about an hour cold on this 2-core host, kernels/README.md), then tools/sched_ext's
scx_simple and scx_qmap against its BTF.  Hand-run (`pytest -m handrun
tests/build/test_scheduler_build.py`); on the shared cache (LAB_CACHE or ~/.cache/lab)
so what it builds is what tests/vm/test_sched_ext_vm.py boots."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.build, pytest.mark.handrun]


@pytest.fixture(scope="module")
def scx_kernel():
    if not Path("/usr/src/linux-source-6.12.tar.xz").is_file():
        pytest.skip("apt-get install linux-source-6.12")
    from lab.kernel import build, recipe

    return build.build(recipe.load("lab-6.12-scx"), jobs=2)


def test_kernel_has_sched_ext_and_kept_its_btf(scx_kernel):
    from lab import scheduler as sm

    assert sm.skip_reason(scx_kernel) is None
    btf = scx_kernel.image.parent / sm.BTF_FILE
    assert btf.read_bytes()[:2] == b"\x9f\xeb"
    assert scx_kernel.metadata["btf"] == sm.BTF_FILE
    if shutil.which("bpftool"):  # Debian's, only to read the BTF back
        out = subprocess.run(["bpftool", "btf", "dump", "file", str(btf), "format", "c"], capture_output=True, check=True).stdout
        assert b"struct sched_ext_ops {" in out


@pytest.mark.parametrize("name", ["scx_simple", "scx_qmap"])
def test_scheduler_builds_static_and_is_cached(scx_kernel, name):
    from lab import scheduler as sm

    s = sm.build(name, scx_kernel)
    assert s.metadata["static"] is True, s.metadata
    assert "statically linked" in subprocess.run(["file", "-L", str(s.binary)], capture_output=True, text=True).stdout
    assert s.metadata["kernel"]["id"] == scx_kernel.id
    t0 = time.monotonic()
    again = sm.build(name, scx_kernel)  # a lookup by content, no make
    assert again.id == s.id and time.monotonic() - t0 < 10
    assert sm.find_built(name, scx_kernel) == s


def test_scx_bpfland_from_crates_io_builds_once(tmp_path, monkeypatch):
    """`lab scheduler build scx_bpfland` for real: cargo install --locked of the pinned
    1.0.20 from crates.io, BPF by bookworm's clang-16, into an empty cache (not the
    shared store, which keeps its entry), then a store hit.  672 s cold here (an empty
    target dir, the crates in cargo's registry cache; a kernel build alongside, load
    6-9 on 2 cores: bench/results/bench_scx_crate-20261126-142919.json).  Needs cargo
    (rustup) and network access to crates.io's index."""
    from lab import scheduler as sm

    if sm.cargo_path() is None:
        pytest.skip("cargo not found (rustup.rs)")
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    s = sm.build_crate("scx_bpfland")
    assert s.metadata["origin"] == "crates.io" and s.metadata["crate"]["version"] == sm.CRATES["scx_bpfland"].version
    assert s.metadata["toolchain"]["clang"].startswith("Debian clang version 16.")
    assert sm.elf_arch(s.binary.read_bytes()) == "x86_64" and s.metadata["libraries"]
    assert s.metadata["timings"]["build_s"] > 10
    assert not [p for p in (tmp_path / "cache" / "work").iterdir() if p.name.startswith("crate-")]
    t0 = time.monotonic()
    assert sm.build_crate("scx_bpfland").id == s.id and time.monotonic() - t0 < 10  # a store hit, no cargo
