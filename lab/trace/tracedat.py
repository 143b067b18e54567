"""A run's raw trace as ``trace.dat`` (trace-cmd's file format, version 6), which
trace-cmd, KernelShark, LISA and Perfetto open.

The guest copies its ring buffers out as raw pages (images/workloads/tracedump.c) with
the event formats and saved_cmdlines (lib.sh's lab_trace_raw), into
``out/trace.PHASE.raw/``; this module wraps them in trace.dat's header here on the host.
The pages go in byte for byte, so what a tool reads is what the kernel wrote: nothing
is re-encoded from the text trace (which prints fewer fields than the events carry).

Why not trace-cmd in the guest: guests get host tools only for the host's arch (an
arm64 guest would have none), and trace-cmd brings libtracecmd, libtraceevent,
libtracefs and zstd into every initramfs; the pages are all it would add.

Layout written (trace-cmd.dat.v6(5)): magic, "6", endianness, long size, page size;
header_page and header_event (the kernel's own descriptions of the page and event
headers); no ftrace (function tracer) formats; the event formats by system; no kallsyms
or printk formats; the cmdlines; the CPU count; "flyrecord" with each CPU's offset and
size; then each CPU's pages, page-aligned.
"""

from __future__ import annotations

import struct
from pathlib import Path

from .. import atomic, rundir
from ..errors import UserError
from ..limits import read_file

MAGIC = b"\x17\x08\x44tracing"
VERSION = b"6\x00"
MAX_META_BYTES = 16 << 20  # one format or header file, the cmdlines
MAX_CPU_BYTES = 1 << 30  # one CPU's pages (lab's buffer_kb is at most a few MiB per CPU)


def raw_dirs(out_dir: Path) -> dict[str, Path]:
    """phase -> its raw dump, for the phases the guest dumped."""
    out = {}
    for d in sorted(out_dir.glob("trace.*.raw")) if out_dir.is_dir() else []:
        if d.is_dir() and not d.is_symlink() and (d / "page_size").is_file():
            out[d.name[len("trace.") : -len(".raw")]] = d
    return out


def dat_name(phase: str) -> str:
    """trace.dat for the main phase, trace.PHASE.dat for the others (lab.rundir)."""
    return rundir.trace_name(phase)


def _read(p: Path) -> bytes:
    return read_file(p, MAX_META_BYTES, "a raw trace file", follow_symlinks=False)


def _cpu_files(raw: Path) -> dict[int, Path]:
    cpus = {}
    for p in raw.glob("cpu*"):
        n = p.name[3:]
        if n.isascii() and n.isdigit() and p.is_file() and not p.is_symlink():
            cpus[int(n)] = p
    return cpus


def assemble(raw: Path, dest: Path, *, arch_long: int = 8, little_endian: bool = True) -> Path:
    """Write the trace.dat of the raw dump *raw* to *dest* (atomically)."""
    try:
        page = int(_read(raw / "page_size").decode().strip())
    except ValueError:
        raise UserError(f"{raw}/page_size: not a number") from None
    if page not in (4096, 16384, 65536):
        raise UserError(f"{raw}/page_size: {page} is not a page size lab knows")
    e = "<" if little_endian else ">"
    events: dict[str, list[bytes]] = {}
    ev_root = raw / "events"
    for sysdir in sorted(ev_root.iterdir()) if ev_root.is_dir() else []:
        if sysdir.is_dir() and not sysdir.is_symlink():
            texts = [_read(p) for p in sorted(sysdir.iterdir()) if p.is_file() and not p.is_symlink()]
            fmts = [t for t in texts if t.strip()]
            if fmts:
                events[sysdir.name] = fmts
    if not events:
        raise UserError(f"{raw}: no event formats; trace.dat needs them")
    cpus = _cpu_files(raw)
    ncpus = max(cpus) + 1 if cpus else 0
    head = bytearray(MAGIC + VERSION)
    head += struct.pack(e + "BBI", 0 if little_endian else 1, arch_long, page)
    for name in ("header_page", "header_event"):
        data = _read(raw / name)
        head += name.encode() + b"\x00" + struct.pack(e + "Q", len(data)) + data
    head += struct.pack(e + "I", 0)  # ftrace (function tracer) event formats: none traced
    head += struct.pack(e + "I", len(events))
    for system, fmts in events.items():
        head += system.encode() + b"\x00" + struct.pack(e + "I", len(fmts))
        for fmt in fmts:
            head += struct.pack(e + "Q", len(fmt)) + fmt
    head += struct.pack(e + "I", 0)  # kallsyms: none (the events lab traces print no addresses)
    head += struct.pack(e + "I", 0)  # printk formats: none
    cmdlines = _read(raw / "cmdlines") if (raw / "cmdlines").is_file() else b""
    head += struct.pack(e + "Q", len(cmdlines)) + cmdlines
    head += struct.pack(e + "I", ncpus)
    head += b"flyrecord\x00"
    sizes = []
    for cpu in range(ncpus):
        p = cpus.get(cpu)
        n = p.stat().st_size if p is not None else 0
        if n > MAX_CPU_BYTES:
            raise UserError(f"{p}: more than {MAX_CPU_BYTES >> 20} MiB of trace pages")
        sizes.append(n - n % page)  # whole pages only
    offset = len(head) + 16 * ncpus
    offsets = []
    for n in sizes:
        offset = -(-offset // page) * page
        offsets.append(offset)
        offset += n
    for off, n in zip(offsets, sizes, strict=True):
        head += struct.pack(e + "QQ", off, n)
    with atomic.atomic_file(dest, what="the trace.dat") as tmp, open(tmp, "wb") as f:
        f.write(head)
        for cpu, (off, n) in enumerate(zip(offsets, sizes, strict=True)):
            if not n:
                continue
            f.write(bytes(off - f.tell()))
            with open(cpus[cpu], "rb") as src:
                left = n
                while left:
                    chunk = src.read(min(left, 1 << 20))
                    if not chunk:
                        raise UserError(f"{cpus[cpu]}: shorter than it was a moment ago")
                    f.write(chunk)
                    left -= len(chunk)
    return dest


def assemble_run(run_dir: Path) -> list[Path]:
    """trace.dat (and trace.PHASE.dat) of every phase the guest dumped raw (both of
    lab's guest arches are little-endian and 64-bit)."""
    return [assemble(raw, run_dir / dat_name(phase)) for phase, raw in raw_dirs(run_dir / rundir.OUT).items()]
