"""What this host can do: QEMU binaries and versions, KVM, dtc, the CPU vendor.

Probed once per process (cached) and passed around as a frozen ``Host``: nothing
else asks the host, so the renderers stay pure functions of (Topology, Host,
options) and a golden argv does not depend on the machine that made it.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import arch as arch_mod
from . import emulators, proc
from .emulators import Emulator
from .errors import UserError

KVM_CREATE_VM = 0xAE01  # _IO(KVMIO, 0x01)


@dataclass(frozen=True)
class Host:
    arch: str  # "x86_64" | "arm64"
    cpus: int
    qemu: dict[str, tuple[int, int, int] | None] = field(default_factory=dict)  # arch -> version
    kvm: bool = False
    kvm_reason: str = ""
    dtc: bool = True  # device-tree-compiler on PATH (arm64 guests get cache nodes through it)
    cpu_vendor: str = "intel"  # the host CPU's vendor: what -cpu host gives a KVM guest
    built: tuple[Emulator, ...] = ()  # lab's own QEMUs (lab qemu fetch, lab qemu build), newest first
    tsc_khz: int = 0  # the host's TSC rate, which a TCG guest's TSC runs at (0: unknown): see tsc_khz()

    def emulators(self, arch: str) -> list[Emulator]:
        """The QEMUs for *arch*: the system's first, then lab's."""
        v = self.qemu.get(arch)
        system = [Emulator(arch, arch_mod.get(arch).qemu, v, "system")] if v else []
        return system + [e for e in self.built if e.arch == arch]

    def qemu_version(self, arch: str) -> tuple[int, int, int]:
        v = self.qemu.get(arch)
        if v is None:
            binary = arch_mod.get(arch).qemu
            raise UserError(f"{binary} not found ({proc.hint_package(binary)})")
        return v

    def accel(self, requested: str, guest_arch: str) -> tuple[str, str]:
        """Resolve --accel auto|kvm|tcg into ('kvm'|'tcg', why)."""
        if requested not in ("auto", "kvm", "tcg"):
            raise UserError(f"--accel must be auto, kvm or tcg, not {requested!r}")
        same_arch = guest_arch == self.arch
        if requested == "tcg":
            return "tcg", "asked for"
        if requested == "kvm":
            if not same_arch:
                raise UserError(f"--accel kvm: a {guest_arch} guest cannot use KVM on this {self.arch} host")
            if not self.kvm:
                raise UserError(f"--accel kvm: KVM is not usable here: {self.kvm_reason}")
            return "kvm", "asked for"
        if not same_arch:
            return "tcg", f"{guest_arch} guest on a {self.arch} host"
        if self.kvm:
            return "kvm", "KVM usable"
        return "tcg", f"KVM not usable: {self.kvm_reason}"

    def describe(self) -> dict:
        return {
            "arch": self.arch,
            "cpus": self.cpus,
            "qemu": {a: (".".join(map(str, v)) if v else None) for a, v in self.qemu.items()},
            "kvm": self.kvm,
            "kvm_reason": self.kvm_reason,
            "dtc": self.dtc,
            "cpu_vendor": self.cpu_vendor,
            "built_qemu": [e.describe() for e in self.built],
            "tsc_khz": self.tsc_khz,
        }


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def _cpu_vendor(cpuinfo: str) -> str:
    return "amd" if "AuthenticAMD" in cpuinfo[:4096] else "intel"


def tsc_khz(cpuinfo: str, cpufreq: bool) -> int:
    """The host's TSC rate in kHz where /proc/cpuinfo says it, else 0.  A TCG guest's TSC
    runs at the host's (QEMU reads the host's TSC), so this is what the guest's boot CPU
    calibrates (seen: host 2596.148 MHz, guest "tsc: Detected 2596.141 MHz").  Without a
    cpufreq driver (*cpufreq* False: a VM, a fixed clock) "cpu MHz" is the kernel's own
    cpu_khz, the TSC's; with one it is the current clock, so only an Intel model name's
    nominal "@ 2.60GHz" (the TSC's rate on those parts) is taken."""
    if "constant_tsc" not in next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), ""):
        return 0
    if not cpufreq:
        m = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", cpuinfo, re.M)
        if m and float(m[1]) > 0:
            return round(float(m[1]) * 1000)
    m = re.search(r"^model name\s*:.*@\s*([0-9.]+)\s*GHz", cpuinfo, re.M)
    return round(float(m[1]) * 1e6) if m else 0


def kvm_usable(arch: str | None = None, cpuinfo: str | None = None, dev: str = "/dev/kvm") -> tuple[bool, str]:
    """Whether a KVM guest would actually run, and why not.

    /dev/kvm opening and KVM_CREATE_VM succeeding is not enough: inside a VM
    whose hypervisor exposes /dev/kvm but not the VMX/SVM extensions (nested
    virtualisation switched off) KVM_CREATE_VM succeeds and the guest then hangs
    at boot.  So on x86 the CPU must also advertise vmx or svm.
    """
    arch = arch or arch_mod.host_name()
    if not os.path.exists(dev):
        return False, f"{dev} does not exist (no KVM module, or not a VM host)"
    try:
        fd = os.open(dev, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return False, f"cannot open {dev}: {e.strerror} (add yourself to the kvm group)"
    try:
        try:
            vm = fcntl.ioctl(fd, KVM_CREATE_VM, 0)
        except OSError as e:
            return False, f"KVM_CREATE_VM failed: {e.strerror}"
        os.close(vm)
    finally:
        os.close(fd)
    if arch == "x86_64":
        if cpuinfo is None:
            cpuinfo = _cpuinfo()
        flags = set()
        for line in cpuinfo.splitlines():
            if line.startswith("flags"):
                flags.update(line.split(":", 1)[1].split())
                break
        if not flags & {"vmx", "svm"}:
            return False, (
                f"{dev} answers but the CPU has no vmx/svm flag (nested virtualisation "
                "without VMX/SVM: guests hang at boot)"
            )
    return True, "ok"


@lru_cache(maxsize=1)
def probe() -> Host:
    arch = arch_mod.host_name()

    qemu = {a.name: emulators.binary_version(a.qemu) for a in arch_mod.ARCHES.values()}
    cpuinfo = _cpuinfo()
    ok, why = kvm_usable(arch, cpuinfo)
    return Host(
        arch=arch, cpus=os.cpu_count() or 1, qemu=qemu, kvm=ok, kvm_reason=why,
        dtc=shutil.which("dtc") is not None, cpu_vendor=_cpu_vendor(cpuinfo), built=tuple(emulators.built()),
        tsc_khz=tsc_khz(cpuinfo, os.path.isdir("/sys/devices/system/cpu/cpu0/cpufreq")) if arch == "x86_64" else 0,
    )  # fmt: skip


MIN_SHARE = 0.25  # a timeout never stretches beyond 4x its wall time


def _host_ticks(stat: str) -> tuple[int, int]:
    """(busy, total) clock ticks of all the host's CPUs from /proc/stat's first line;
    time stolen by the hypervisor counts as busy (it was not ours to use)."""
    f = [int(x) for x in stat.split("\n", 1)[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = (f + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def load_sample(read_stat=None, read_loadavg=None) -> dict[str, float] | None:
    """The host now: its 1-minute load average and /proc/stat's busy, steal and total
    ticks (all CPUs), or None where /proc cannot be read."""
    try:
        stat = (read_stat or (lambda: Path("/proc/stat").read_text()))()
        load = (read_loadavg or (lambda: Path("/proc/loadavg").read_text()))()
        f = [int(x) for x in stat.split("\n", 1)[0].split()[1:9]]
        busy, total = _host_ticks(stat)
        return {"load": float(load.split()[0]), "busy": busy, "total": total, "steal": (f + [0] * 8)[7]}
    except (OSError, ValueError, IndexError):
        return None


def run_conditions(before: dict[str, float] | None, after: dict[str, float] | None, cpus: int) -> dict[str, float]:
    """What results.json's timing keeps of the host during a run (lab.report.fidelity reads
    it): its cores, load average at start and end, and the share of its CPU time stolen by
    the hypervisor and busy in all (percent).  Keys are left out where not measured."""
    out: dict[str, float] = {"host_cpus": cpus}
    if before is not None:
        out["host_load_start"] = round(before["load"], 2)
    if after is not None:
        out["host_load_end"] = round(after["load"], 2)
    if before is not None and after is not None and after["total"] > before["total"]:
        span = after["total"] - before["total"]
        out["host_steal_pct"] = round(100 * (after["steal"] - before["steal"]) / span, 1)
        out["host_busy_pct"] = round(100 * (after["busy"] - before["busy"]) / span, 1)
    return out


def _proc_ticks(pid: int) -> int:
    """utime + stime of a process (all its threads), in clock ticks (proc(5) fields 14, 15)."""
    f = proc.pid_stat(pid)
    return int(f[11]) + int(f[12])


class HostClock:
    """Seconds of host time a process has had: wall time, each interval scaled by the
    share of the host's CPUs that other work did not take (other processes, other
    guests, the hypervisor's steal).  On a quiet host it runs with the wall clock; when
    other guests keep the host's cores busy it runs slower, so a guest's deadlines
    follow the capacity it really got instead of failing a slow-but-sane boot.  The
    share never drops below MIN_SHARE, so a deadline always comes.  With *pid* None (a
    guest on another host) it is the wall clock."""

    def __init__(self, pid: int | None, *, read_stat=None, read_proc=None, clock=None) -> None:
        self.pid = pid
        self._read_stat = read_stat or (lambda: Path("/proc/stat").read_text())
        self._read_proc = read_proc or _proc_ticks
        self._clock = clock or time.monotonic
        self.t0 = self._clock()
        self._last_t = self.t0
        self._last = self._sample()
        self.host_s = 0.0

    def _sample(self) -> tuple[int, int, int] | None:
        if self.pid is None:
            return None
        try:
            busy, total = _host_ticks(self._read_stat())
            return busy, total, self._read_proc(self.pid)
        except (OSError, ValueError, IndexError):
            return None

    @property
    def wall_s(self) -> float:
        return self._clock() - self.t0

    def share(self, before, after) -> float:
        if before is None or after is None or after[1] <= before[1]:
            return 1.0
        others = (after[0] - before[0]) - (after[2] - before[2])
        return min(1.0, max(MIN_SHARE, 1.0 - others / (after[1] - before[1])))

    def tick(self) -> float:
        """Host seconds so far (call it every second or so: /proc/stat counts in ticks)."""
        now = self._clock()
        cur = self._sample()
        self.host_s += (now - self._last_t) * self.share(self._last, cur)
        self._last_t, self._last = now, cur
        return self.host_s

    def describe(self) -> str:
        """' (N s wall: other work took the host's CPUs part of the time)' when the two
        clocks differ, else ''."""
        wall = self.wall_s
        if wall - self.host_s < 1.0:
            return ""
        return f" of host time ({wall:.0f}s wall: other work held the host's CPUs {1 - self.host_s / wall:.0%} of the time)"
