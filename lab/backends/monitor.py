"""Ask a lost guest's QEMU where its vCPUs are, before lab kills it.

Every boot gets a QMP socket.  When the guest stops talking (never ready, or the
job overruns), lab asks QEMU for every vCPU's registers and saves them in the run
dir.  The answer separates the cases a user must tell apart: QEMU itself stuck (the
monitor does not answer), the guest idle (every vCPU halted: it is waiting for
something that will not come), or the guest busy (which vCPUs run, and where).
"""

from __future__ import annotations

import bisect
import json
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from .. import cpulist, rundir


class Monitor:
    """The QMP socket QEMU made at *path* (render.qemu.BootFiles.monitor, in the run dir)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def close(self) -> None:
        self.path.unlink(missing_ok=True)

    def _connect(self, s: socket.socket) -> None:
        # A run dir's path can exceed the 108 bytes a unix socket path may have: reach
        # the socket through a descriptor of its directory, whose /proc path is short.
        fd = os.open(self.path.parent, os.O_PATH | os.O_CLOEXEC)
        try:
            s.connect(f"/proc/self/fd/{fd}/{self.path.name}")
        finally:
            os.close(fd)

    def commands(self, cmds: list[dict], timeout: float = 5.0) -> list[dict]:
        """Send *cmds* (QMP {"execute": ..., "arguments": ...}) after the greeting and
        qmp_capabilities, one connection: their replies in order, events skipped."""
        deadline = time.monotonic() + timeout
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            self._connect(s)
            f = s.makefile("rwb")
            _reply(f, deadline)  # the greeting
            out = []
            for cmd in ({"execute": "qmp_capabilities"}, *cmds):
                f.write(json.dumps(cmd).encode() + b"\n")
                f.flush()
                out.append(_reply(f, deadline))
            return out[1:]

    def registers(self, timeout: float = 5.0) -> str | None:
        """`info registers -a`, or None if QEMU does not answer within *timeout*."""
        try:
            (r,) = self.commands([{"execute": "human-monitor-command", "arguments": {"command-line": "info registers -a"}}], timeout)
        except (OSError, ValueError, TimeoutError):
            return None
        return r.get("return") if isinstance(r.get("return"), str) else None


def _reply(f, deadline: float) -> dict:
    """The next reply, skipping asynchronous events."""
    while time.monotonic() < deadline:
        line = f.readline()
        if not line:
            raise OSError("monitor closed")
        msg = json.loads(line)
        if "event" not in msg:
            return msg
    raise TimeoutError


@dataclass
class VcpuState:
    cpu: int
    halted: bool | None  # None: the architecture's registers do not say (arm64)
    pc: str  # RIP (x86) or PC (arm64), hex


_CPU_RE = re.compile(r"^CPU#(\d+)", re.M)


def parse_registers(text: str) -> list[VcpuState]:
    """Per-vCPU halted flag and program counter from `info registers -a`."""
    out = []
    starts = [(m.start(), int(m.group(1))) for m in _CPU_RE.finditer(text)]
    for i, (pos, cpu) in enumerate(starts):
        block = text[pos : starts[i + 1][0] if i + 1 < len(starts) else len(text)]
        pc = re.search(r"\b(?:RIP|EIP|PC)=([0-9a-fA-F]+)", block)
        hlt = re.search(r"\bHLT=([01])\b", block)
        out.append(VcpuState(cpu, None if hlt is None else hlt.group(1) == "1", pc.group(1).lower() if pc else "?"))
    return out


class Symbols:
    """Address to function+offset from a System.map."""

    def __init__(self, system_map: Path | None) -> None:
        self.addrs: list[int] = []
        self.names: list[str] = []
        if system_map is None:
            return
        pairs = []
        with open(system_map, errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[1] in "tTwW":
                    try:
                        pairs.append((int(parts[0], 16), parts[2]))
                    except ValueError:
                        continue
        pairs.sort()
        self.addrs = [a for a, _ in pairs]
        self.names = [n for _, n in pairs]

    def __call__(self, pc: str) -> str:
        try:
            addr = int(pc, 16)
        except ValueError:
            return pc
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0 or addr - self.addrs[i] > 0x100000:
            return pc
        return f"{pc} ({self.names[i]}+{addr - self.addrs[i]:#x})"


def summary(states: list[VcpuState], most: int = 3, symbol=str) -> str:
    """One phrase: how many vCPUs are halted, and where the others are (grouped by PC)."""
    if not states:
        return "QEMU gave no vCPU state"

    running = [s for s in states if not s.halted]
    if not running:
        return f"all {len(states)} vCPUs halted (the guest is idle, waiting)"
    by_pc: dict[str, list[int]] = {}
    for s in running:
        by_pc.setdefault(s.pc, []).append(s.cpu)
    groups = sorted(by_pc.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    where = "; ".join(f"CPU {cpulist.format(cpus)} at {symbol(pc)}" for pc, cpus in groups[:most])
    more = f"; {len(groups) - most} more places" if len(groups) > most else ""
    known = all(s.halted is not None for s in states)
    head = f"{len(running)} of {len(states)} vCPUs running" if known else f"{len(states)} vCPUs"
    return f"{head}: {where}{more}"


def diagnose(mon: Monitor, run_dir: Path, system_map: Path | None = None) -> str:
    """Ask QEMU, save the registers in *run_dir*, and say what was found in a phrase
    (functions named when the kernel's System.map is usable)."""
    text = mon.registers()
    if text is None:
        return "QEMU did not answer its monitor within 5 s (the emulator is stuck, not only the guest)"
    dest = run_dir / rundir.LOST_REGISTERS
    dest.write_text(text)
    return f"{summary(parse_registers(text), symbol=Symbols(system_map))} (registers: {dest})"
