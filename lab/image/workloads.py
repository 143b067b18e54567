"""Build lab's guest workloads (images/workloads/*.c) into static binaries.

Each ``NAME.c`` becomes one static binary ``NAME``; ``*.h`` files are shared
headers.  The binaries print one JSON object on one line (see images/README.md);
:func:`parse_output` reads it back on the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from .. import arch as archs
from .. import paths
from ..errors import InfraError, UserError
from ..proc import run

SOURCES = paths.IMAGES / "workloads"

# -static: the initramfs has no libc of its own.  -pthread for stream/pingpong.
CFLAGS = ("-static", "-O2", "-pthread", "-std=gnu11", "-Wall", "-Wextra", "-Werror")



def compiler(arch: str) -> str:
    """The C compiler that targets *arch* on this host (path); UserError if absent."""
    a = archs.ARCHES.get(arch)
    if a is None:
        raise UserError(f"unknown workload arch '{arch}' (known: {', '.join(archs.NAMES)})")
    if a.is_host():
        cc, packages = "gcc", "gcc and libc6-dev"
    else:
        cc, packages = f"{a.cross_compile}gcc", a.cross_gcc_packages
    found = shutil.which(cc)
    if not found:
        raise UserError(
            f"no C compiler for {arch} workloads: {cc} not found; "
            f"install the Debian package(s) {packages}"
        )
    return found


def sources() -> list[Path]:
    """The workload sources, sorted (one binary per ``*.c``)."""
    srcs = sorted(SOURCES.glob("*.c"))
    if not srcs:
        raise InfraError(f"no workload sources in {SOURCES}")
    return srcs


def _compiler_id(cc: str) -> str:
    version = run([cc, "--version"]).stdout.decode(errors="replace").splitlines()[0]
    machine = run([cc, "-dumpmachine"]).stdout.decode(errors="replace").strip()
    return f"{version}\n{machine}"


def inputs_hash(arch: str) -> str:
    """sha256 over the sources and headers, the compiler's version and target, and the flags.

    The image builder rebuilds the workloads only when this changes.
    """
    cc = compiler(arch)
    h = hashlib.sha256()
    h.update(f"arch={arch}\nflags={' '.join(CFLAGS)}\n".encode())
    h.update(_compiler_id(cc).encode())
    for src in sorted([*SOURCES.glob("*.c"), *SOURCES.glob("*.h")]):
        h.update(f"\n--- {src.name}\n".encode())
        h.update(src.read_bytes())
    return h.hexdigest()


def build(arch: str, out_dir: Path) -> dict[str, Path]:
    """Compile every workload for *arch* into *out_dir*; return ``{name: binary}``.

    UserError if the compiler (or its static C library) is missing; InfraError
    with the compiler's messages if a source does not compile.
    """
    cc = compiler(arch)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    built: dict[str, Path] = {}
    for src in sources():
        dest = out_dir / src.stem
        # Compile next to the destination, then rename: a failed or interrupted
        # build never leaves a half-written binary where a cache would trust it.
        fd, tmp = tempfile.mkstemp(prefix=f".{src.stem}.", dir=out_dir)
        os.close(fd)
        try:
            cp = run([cc, *CFLAGS, "-o", tmp, src], cwd=SOURCES, check=False)
            if cp.returncode != 0:
                _raise_compile_error(arch, cc, src, cp.stderr.decode(errors="replace"))
            os.chmod(tmp, 0o755)
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        built[src.stem] = dest
    return built


def _raise_compile_error(arch: str, cc: str, src: Path, stderr: str) -> None:
    # A missing static libc looks like a compile error but is the user's to fix.
    if "cannot find -lc" in stderr or "stdio.h: No such file" in stderr:
        a = archs.get(arch)
        pkg = "libc6-dev" if a.is_host() else a.cross_packages[1]
        raise UserError(
            f"{cc} cannot build static {arch} binaries (no C library): "
            f"install the Debian package {pkg}"
        )
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln] or lines
    raise InfraError(f"{Path(cc).name} failed on {src.name} for {arch}: " + " | ".join(errors[:5]))


def parse_output(stdout: str | bytes) -> dict:
    """The result object a workload printed: the last JSON line on its stdout."""
    if isinstance(stdout, bytes):
        stdout = stdout.decode(errors="replace")
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError as e:
                raise InfraError(
                    f"workload printed a malformed result line: {e}: {line[:200]}"
                ) from e
    raise InfraError(f"workload printed no result line; stdout ends: {stdout[-200:]!r}")
