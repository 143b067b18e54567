"""Staging host tools into an initramfs root, checked against ldd and by running them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab.errors import UserError
from lab.image import tools

HOST = tools.host_arch()
PRESENT = [t for t in tools.DEFAULT_TOOLS if shutil.which(t)]

needs_tools = pytest.mark.skipif(
    HOST != "x86_64" or not PRESENT,
    reason="needs an x86_64 host with at least one of perf, hackbench, stress-ng, numactl "
    "(Debian packages linux-perf, rt-tests, stress-ng, numactl)",
)


def ldd(path: str) -> tuple[dict[str, str], str | None]:
    """{soname: realpath} and the interpreter path, as the host's ld.so sees them."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    libs, interp = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+) \(0x", line)
        if m:
            libs[m.group(1)] = os.path.realpath(m.group(2))
            continue
        m = re.match(r"\s*(/\S+) \(0x", line)
        if m:
            interp = m.group(1)
    return libs, interp


@needs_tools
@pytest.mark.parametrize("tool", PRESENT)
def test_plan_matches_ldd(tool):
    entries = {e.guest: e for e in tools.pack_entries(HOST, [tool])}
    exe = os.path.realpath(shutil.which(tool))
    libs, interp = ldd(exe)

    assert interp is not None and interp in entries  # at its exact path
    assert entries[interp].source == Path(os.path.realpath(interp))

    staged = {}
    for guest, e in entries.items():
        target = e.source
        if e.link is not None:
            target = entries[os.path.normpath(os.path.join(os.path.dirname(guest), e.link))].source
        staged.setdefault(os.path.basename(guest), set()).add(str(target))
    for soname, real in libs.items():
        assert soname in staged, f"{tool}: ldd lists {soname}, not staged"
        assert real in staged[soname], f"{tool}: {soname} staged from {staged[soname]}, ldd {real}"
    extra = set(staged) - set(libs) - {os.path.basename(exe), os.path.basename(interp)}
    assert extra <= {"libgcc_s.so.1", os.path.basename(shutil.which(tool))}


@needs_tools
def test_stage_and_run_in_a_chroot(tmp_path):
    root = tmp_path / "root"
    # merged-/usr style root, as an image builder may make it: staging follows the links
    (root / "usr" / "lib").mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")
    staged = tools.stage_tools(root, HOST, PRESENT)
    assert staged == sorted(staged) and len(staged) == len(set(staged))
    assert "/lib64/ld-linux-x86-64.so.2" in staged
    assert (root / "lib").is_symlink()
    assert (root / "usr/lib/x86_64-linux-gnu/libc.so.6").is_file()
    for guest in staged:
        assert os.path.lexists(root / guest.lstrip("/")), guest
    for tool in PRESENT:
        assert os.access(root / shutil.which(tool).lstrip("/"), os.X_OK)

    if os.geteuid() != 0 or not shutil.which("chroot"):
        pytest.skip("running the staged tools needs root (chroot)")
    probes = {
        "perf": ["perf", "--version"],
        "hackbench": ["hackbench", "--help"],
        "stress-ng": ["stress-ng", "--version"],
        "numactl": ["numactl", "--help"],
    }
    for tool in PRESENT:
        argv = probes[tool]
        cp = subprocess.run(
            [shutil.which("chroot"), str(root), shutil.which(tool), *argv[1:]],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )
        # The root has nothing but the staged files: a missing library would be
        # "error while loading shared libraries" and exit 127.
        assert cp.returncode != 127, cp.stderr
        assert "error while loading shared libraries" not in cp.stderr
        assert "usage" in (cp.stdout + cp.stderr).lower() or "version" in cp.stdout.lower()


@needs_tools
def test_tools_hash():
    h = tools.tools_hash(HOST, PRESENT)
    assert h == tools.tools_hash(HOST, PRESENT)
    assert h != tools.tools_hash(HOST, PRESENT[:1] if len(PRESENT) > 1 else [])


def test_unknown_arch():
    with pytest.raises(UserError, match="unknown arch 'mips'"):
        tools.pack_entries("mips", ["perf"])


def test_missing_tool_names_the_package(monkeypatch):
    monkeypatch.setitem(tools.PACKAGES, "lab-no-such-tool", "lab-no-such-package")
    with pytest.raises(UserError, match="'lab-no-such-tool' not found.*lab-no-such-package"):
        tools.pack_entries(HOST, ["lab-no-such-tool"])
    with pytest.raises(UserError, match="'lab-unknown' not found.*on PATH"):
        tools.pack_entries(HOST, ["lab-unknown"])


@needs_tools
def test_debian_perf_wrapper_stages_the_real_binary(tmp_path, monkeypatch):
    # Older Debian linux-perf ships /usr/bin/perf as a script exec'ing perf_<ver>;
    # this host has the plain binary, so build that layout from real ELF files.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "perf").write_text('#!/bin/sh\nexec "perf_$(uname -r)" "$@"\n')
    (bindir / "perf").chmod(0o755)
    elf = shutil.which(PRESENT[0])
    for version in ("5.10", "6.1", "6.12"):
        shutil.copy(elf, bindir / f"perf_{version}")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    entries = {e.guest: e for e in tools.pack_entries(HOST, ["perf"])}
    assert entries[f"{bindir}/perf"].link == "perf_6.12"
    assert entries[f"{bindir}/perf_6.12"].source == bindir / "perf_6.12"
    assert f"{bindir}/perf_6.1" not in entries

    root = tmp_path / "root"
    tools.stage_tools(root, HOST, ["perf"])
    staged = root / str(bindir).lstrip("/") / "perf"
    assert staged.is_symlink() and os.readlink(staged) == "perf_6.12"
    assert staged.resolve().read_bytes() == Path(elf).read_bytes()


def test_script_without_binary_is_a_user_error(tmp_path, monkeypatch):
    (tmp_path / "numactl").write_text("#!/bin/sh\n")
    (tmp_path / "numactl").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="is a script.*numactl"):
        tools.pack_entries(HOST, ["numactl"])


def test_read_elf_of_a_dynamic_binary():
    elf = tools.read_elf(Path(os.path.realpath("/bin/sh")))
    assert elf.elfclass == 2
    assert elf.interp and elf.interp.startswith("/lib")
    assert "libc.so.6" in elf.needed


def test_read_elf_rejects_non_elf(tmp_path):
    (tmp_path / "x").write_bytes(b"hello world")
    with pytest.raises(tools.NotElf):
        tools.read_elf(tmp_path / "x")
