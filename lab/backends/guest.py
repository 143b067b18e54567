"""The guest-agent protocol every backend shares: what the guest runs (GuestJob, its
initramfs layers, the kernel image a boot gives it), what its agent says and when
(AgentLog, Stages, watch), and what comes back once the VM has ended (collect,
BootResult, console_tail).

The guest agent (lab/guest/init.sh) says "ready" on the lab.log port, runs the job
and streams /tmp/out as a tar to the lab.out port, then ends the VM.  A guest that
never says ready, or never finishes, is lost (LostGuest, with the console tail).
Only starting and stopping the VM are a backend's own (backends.qemu, .libvirt, .vng).
"""

from __future__ import annotations

import contextlib
import logging
import lzma
import os
import re
import signal
import subprocess
import tarfile
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .. import atomic, cpulist, integrity, paths, proc, rundir
from .. import host as host_mod
from ..errors import InfraError, LostGuest
from ..image import initramfs
from ..kernel.artifact import KernelArtifact
from ..limits import sha256_file
from ..lock import cache_lock
from ..plan import VmPlan
from ..progress import Progress
from ..render import dtb as dtb_mod
from ..render import qemu as render
from ..rundir import RunDir

log = logging.getLogger(__name__)


@dataclass
class BootResult:
    run_dir: Path
    out_dir: Path
    argv: list[str]
    accel: str
    wall_s: float  # QEMU start to exit
    ready_s: float | None  # QEMU start to the agent's "ready"
    guest_ready_uptime: float | None
    rc: int | None  # the job's exit status
    online_s: float | None = None  # hotplug bring-up: guest seconds the agent spent onlining CPUs
    events: list[tuple[float, str]] = field(default_factory=list)
    stream: integrity.Stream | None = None  # the results stream, checked whole (integrity.check_stream)

    def read_bytes(self, name: str) -> bytes:
        p = self.out_dir / name
        return p.read_bytes() if p.exists() else b""

    def read(self, name: str) -> str:
        return self.read_bytes(name).decode(errors="replace")

    @property
    def stdout(self) -> bytes:
        """The job's stdout as the guest wrote it (not decoded: `lab boot` passes it on)."""
        return self.read_bytes("stdout")

    @property
    def stderr(self) -> bytes:
        return self.read_bytes("stderr")


def boot_timeout(plan: VmPlan) -> float:
    """How long to wait for "ready": SMP bring-up under TCG grows faster than the vCPUs
    (README, "Boot to agent against vCPUs")."""
    n = plan.topo.n_cpus
    if plan.accel == "kvm":
        return 60 + n * 0.2
    per = 1.0 if plan.arch == "x86_64" else 1.5
    return 90 + n * per + n * n / 250


def console_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_bytes().decode(errors="replace")
    except OSError:
        return ""
    # Drop the firmware's terminal escape sequences.
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")
    return "\n".join(text.splitlines()[-lines:])


PAYLOADS = (
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x1f\x8b\x08", "gzip"),
)


PVH_MAX_VCPUS = 64



def boot_image(kernel: KernelArtifact, vcpus: int = 1) -> Path:
    """What QEMU's -kernel gets.

    An x86 kernel built with CONFIG_PVH boots straight from its uncompressed ELF
    vmlinux through QEMU's PVH entry, skipping the bzImage's self-decompression,
    which is slow under TCG.  The vmlinux is extracted once per kernel into lab's cache.

    Only up to PVH_MAX_VCPUS: at 128 vCPUs the PVH-booted kernel was once much slower
    to bring up its CPUs than the bzImage.  That was measured before hotplug bring-up,
    when early-boot ticks on every vCPU made 128-vCPU boots vary by minutes (see
    render.qemu.bringup_mode()); most likely that variance, not PVH, but the limit
    stays until PVH at 128 is measured again.  Figures: README, "Boot speed".
    """
    image = Path(kernel.image)
    if kernel.arch != "x86_64":
        return image
    if vcpus > PVH_MAX_VCPUS:
        return image
    if kernel.config_value("PVH") != "y":
        return image

    # By the image's content, not the kernel's id alone: an image changed in place (a
    # damaged or replaced file) never boots a stale extracted vmlinux.
    out = paths.cache_dir() / "vmlinux" / f"{kernel.id}-{sha256_file(image)[:16]}.elf"
    if out.exists():
        return out
    # Two boots of a new kernel at once: one extracts, the other waits and reuses it.
    with cache_lock(f"vmlinux-{kernel.id}", f"extracting the vmlinux of {kernel.name}"):
        if out.exists():
            return out
        data = image.read_bytes()
        for magic, kind in PAYLOADS:
            at = data.find(magic)
            while at >= 0:
                try:
                    raw = _decompress(kind, data[at:])
                except Exception:  # noqa: BLE001 - a false match of the magic: keep looking
                    raw = b""
                if raw[:4] == b"\x7fELF":
                    try:
                        with atomic.atomic_file(out) as tmp:
                            tmp.write_bytes(raw)
                    except InfraError as e:  # a full disk: the bzImage boots anyway
                        log.warning("%s; booting %s instead", e, image)
                        return image
                    return out
                at = data.find(magic, at + 1)
    return image  # no payload we can unpack: the bzImage boots anyway


def _decompress(kind: str, blob: bytes) -> bytes:
    if kind == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(blob)
    return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(blob)


@dataclass(frozen=True)
class GuestJob:
    """What the guest runs: a shell *script* (None: only the topology snapshot), the
    agent's settings (*config*, e.g. LAB_SNAPSHOT=0) and extra initramfs *layers*
    (workloads, host tools)."""

    script: str | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    layers: tuple[Path, ...] = ()
    label: str = "workload"
    # Files of the job layer, path -> bytes (the scheduler's arguments: lab.scheduler.guest_files).
    files: Mapping[str, bytes] = field(default_factory=dict)  # what the script is, as a progress step ("command" for lab boot -- CMD)


def initrd_layers(dest: Path, plan: VmPlan, kernel: KernelArtifact, job: GuestJob, *, interactive: bool = False) -> list[Path]:
    """base + the kernel's virtio modules (if it has modules) + extra layers + the job
    (written beside *dest*), in the order the kernel unpacks them."""
    base = initramfs.base_layer(plan.arch)
    mods = None
    if kernel.modules is not None:
        paths = kernel.module_paths(["virtio_pci", "virtio_console"])
        mods = initramfs.modules_layer(kernel.release, paths)
    config = {**plan.guest_env(), **job.config}  # the CPU map: labcpu in the guest reads it
    job_cpio = initramfs.job_layer(dest.with_name("job.cpio"), job.script, config, interactive, files=job.files)
    return [p for p in (base, mods, *job.layers, job_cpio) if p is not None]


def build_initrd(dest: Path, plan: VmPlan, kernel: KernelArtifact, job: GuestJob, *, interactive: bool = False) -> Path:
    """The initramfs: initrd_layers() concatenated."""
    return initramfs.assemble(dest, initrd_layers(dest, plan, kernel, job, interactive=interactive))


def make_boot_files(
    plan: VmPlan, kernel: KernelArtifact, run_dir: Path, job: GuestJob, *, interactive: bool = False
) -> render.BootFiles:
    """Make the files a boot reads in *run_dir* (initramfs, arm64's device tree)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    files = render.boot_files(plan, boot_image(kernel, plan.topo.n_cpus), interactive=interactive)
    for f in (files.console, files.agent_log, files.results, files.monitor):
        if f is not None:
            (run_dir / f).unlink(missing_ok=True)
    build_initrd(run_dir / files.initrd, plan, kernel, job, interactive=interactive)
    if files.dtb is not None:
        # QEMU's own device tree for this machine, with the spec's caches and CPU order.
        dump = render.argv(plan, render.dump_files(files))
        dtb_mod.build(dump, plan.topo, run_dir / files.dtb)
    return files


class Stages:
    """A boot's progress steps: boot until the agent is ready, the topology snapshot,
    the job, the results; the agent's lines move them on (lines it says in between,
    e.g. a workload step starting, are the current step's detail)."""

    def __init__(self, progress: Progress, plan: VmPlan, kernel: KernelArtifact, job: GuestJob):
        self.progress, self.job = progress, job
        self.snapshot = job.config.get("LAB_SNAPSHOT", "1") == "1"
        self._stack = contextlib.ExitStack()
        self._first = f"{plan.topo.name}, {plan.topo.n_cpus} vCPUs, {kernel.name} ({kernel.release}), {plan.accel}"

    def __enter__(self) -> Stages:
        self._start("boot", self._first)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _start(self, name: str, detail: str = "") -> None:
        self._stack.close()
        self._stack.enter_context(self.progress.step(name, detail))

    def said(self, line: str) -> None:
        word = line.removeprefix("lab: ")
        if word.startswith("ready") and self.snapshot:
            self._start("snapshot", "the guest kernel's topology and sched domains")
        elif word.startswith("job start"):
            self._start(self.job.label)
        elif word.startswith("done"):
            self._start("results", "the guest's files over virtio-serial")
        else:
            self.progress.update(word)


def collect(
    plan: VmPlan, run_dir: Path, files: render.BootFiles, said: AgentLog, argv: list[str], wall: float, *,
    lost_boots: list[str] | None = None,
) -> BootResult:  # fmt: skip
    """After the VM ended, whatever ran it: the results the guest sent, unpacked and
    checked whole (nothing is judged on part of them), and boot.json."""
    assert files.console and files.agent_log and files.results
    console = run_dir / files.console
    out_dir = run_dir / rundir.OUT
    lines = [line for _, line in said.events]
    stream = integrity.check_stream(run_dir / files.results, lines)
    ignored = _extract(run_dir / files.results, out_dir)  # what arrived is kept, complete or not
    if said.ready_s is None or not said.done:
        raise LostGuest(f"guest stopped without reporting its results (console: {console})", console_tail(console))
    rc = integrity.count((out_dir / "rc").read_text(errors="replace")) if (out_dir / "rc").is_file() else None
    result = BootResult(
        run_dir=run_dir, out_dir=out_dir, argv=argv, accel=plan.accel, wall_s=wall, ready_s=said.ready_s,
        guest_ready_uptime=said.ready_uptime, rc=rc, online_s=said.online_s, events=said.events, stream=stream,
    )  # fmt: skip
    doc = {
        "accel": plan.accel, "accel_reason": plan.accel_reason, "wall_s": round(wall, 3),
        "ready_s": round(said.ready_s, 3), "guest_ready_uptime": said.ready_uptime, "bringup": plan.bringup,
        "online_s": said.online_s, "rc": result.rc, "stream": {**stream.figures, "ignored": ignored},
        "events": [[round(t, 3), e] for t, e in said.events],
    }  # fmt: skip
    if lost_boots:
        doc["lost_boots"] = lost_boots  # booted again: see BOOT_ATTEMPTS
    RunDir(run_dir).write_boot(doc)
    if stream.problem:  # nothing is judged on part of the results
        raise InfraError(f"{stream.problem} ({run_dir / files.results}; the agent's log: {run_dir / files.agent_log})")
    return result


class AgentLog:
    """What the guest's agent said on its lab.log port so far: every line with the time
    lab saw it, when it was ready, and how long onlining CPUs took (hotplug bring-up)."""

    def __init__(self, path: Path, plan: VmPlan, console: Path, on_event: Callable[[float, str], None] | None = None):
        self.path, self.plan, self.console, self.on_event = path, plan, console, on_event
        self.events: list[tuple[float, str]] = []
        self.ready_s: float | None = None
        self.ready_uptime: float | None = None
        self.online_s: float | None = None
        self._offset = 0  # bytes of the log taken so far
        self._partial = b""  # a line QEMU has not finished writing
        self._ino: int | None = None  # the file's inode: another one means it was rolled over
        self.on_note: Callable[[str], None] | None = None  # lab's own words on the progress line

    def progress_note(self, text: str) -> None:
        """A boot that lab starts again (BOOT_ATTEMPTS): say so on the progress line, and
        read the next boot's log from its start."""
        self._offset, self._partial, self._ino = 0, b"", None
        if self.on_note:
            self.on_note(text)

    def read(self, t: float) -> None:
        """Take the complete lines written since the last read, seen at *t* s (only the
        new bytes are read: this runs every 50 ms for the whole boot)."""
        try:
            with open(self.path, "rb") as f:
                ino = os.fstat(f.fileno()).st_ino
                data = b""
                if self._ino is not None and ino != self._ino:
                    # Rolled over (libvirt's virtlogd renames a file channel to .0 at
                    # 2 MiB and starts a new one): the old file's rest, then the new one.
                    data = _tail(self.path.with_name(self.path.name + ".0"), self._offset)
                    self._offset = 0
                self._ino = ino
                f.seek(self._offset)
                new = f.read()
        except OSError:
            return
        self._offset += len(new)
        data += new
        *complete, self._partial = (self._partial + data).split(b"\n")
        for raw in complete:
            line = raw.decode(errors="replace")
            self.events.append((t, line))
            if self.on_event:
                self.on_event(t, line)
            if line.startswith("lab: online "):
                self.online_s = _online(line, self.plan, self.console)
            if line.startswith("lab: ready") and self.ready_s is None:
                self.ready_s, self.ready_uptime = t, _field(line, "uptime")

    @property
    def done(self) -> bool:
        return integrity.said([line for _, line in self.events], "done") is not None

    def last_word(self) -> str:
        """Where a lost guest stopped, in the agent's words (e.g. the CPU it was onlining)."""
        if not self.events:
            return "; the agent said nothing"
        t, line = self.events[-1]
        return f"; the agent's last word, at {t:.1f}s: {line!r}"


def _tail(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


def watch(
    ended: Callable[[], int | None], pid: int | None, said: AgentLog, lost: Callable[[str], LostGuest], *,
    ready_within: float, finish_within: float,
) -> int | None:
    """Wait until *ended*() returns the VM's exit status (not None), reading the agent's
    log as it goes; a guest not ready or not finished in time is lost (raised).  *pid*
    is the process whose CPU time is the guest's (QEMU's), for the host clock (None: a
    guest on another host, whose deadlines are in wall time).

    The deadlines are in host time (host.HostClock): a busy host (other guests, other
    builds) stretches them by the share of its CPUs the other work took, so a boot
    that is slow only because the host is shared is not called lost."""
    t0 = time.monotonic()
    clock = host_mod.HostClock(pid)
    next_tick, host_s = 1.0, 0.0
    while True:
        rc = ended()
        now = time.monotonic() - t0
        said.read(now)
        if rc is not None:
            return rc
        if now >= next_tick:
            host_s, next_tick = clock.tick(), now + 1.0
        if said.ready_s is None and host_s > ready_within:
            raise lost(f"guest never reported ready within {ready_within:.0f}s{clock.describe()}")
        if host_s > finish_within:
            raise lost(f"guest did not finish within {finish_within:.0f}s{clock.describe()}")
        time.sleep(0.05)


# In the child: the kernel kills QEMU if lab dies, even by SIGKILL (PR_SET_PDEATHSIG).
die_with_parent = proc.die_with_parent(signal.SIGKILL)


def subprocess_devnull():
    return subprocess.DEVNULL


def _online(line: str, plan: VmPlan, console: Path) -> float | None:
    """The agent's "online cpus=... from=T uptime=U": every CPU must have come up."""
    m = re.search(r"cpus=(\S+)", line)
    want = cpulist.format(range(plan.topo.n_cpus))
    if not m or m.group(1) != want:
        raise InfraError(
            f"the guest brought CPUs {m.group(1) if m else '?'} online, not {want} (console: {console})"
        )
    t0, t1 = _field(line, "from"), _field(line, "uptime")
    return round(t1 - t0, 2) if t0 is not None and t1 is not None else None


def _field(line: str, key: str) -> float | None:
    for part in line.split():
        if part.startswith(key + "="):
            try:
                return float(part.split("=", 1)[1])
            except ValueError:
                return None
    return None


def _extract(tar_path: Path, out_dir: Path) -> list[str]:
    """Unpack the guest's results into *out_dir*: regular files and directories only, at
    plain relative names (guest output is data: no links, devices, absolute paths or
    '..').  Returns what was left out; a cut archive yields the members before the cut
    (integrity.check_stream() says whether it was whole)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ignored: list[str] = []
    try:
        with tarfile.open(tar_path, mode="r:") as tf:
            for m in tf:
                parts = [x for x in PurePosixPath(m.name).parts if x != "."]
                if m.isdir() and not parts:  # "./", out_dir itself
                    continue
                if not (m.isdir() or m.isreg()) or not parts or parts[0] == "/" or ".." in parts:
                    ignored.append(m.name)
                    continue
                dest = out_dir.joinpath(*parts)
                try:
                    if m.isdir():
                        dest.mkdir(parents=True, exist_ok=True)
                        continue
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    fh = tf.extractfile(m)
                    if fh is not None:
                        dest.write_bytes(fh.read())
                except OSError:  # e.g. a name sent both as a file and as a directory
                    ignored.append(m.name)
    except (OSError, EOFError, tarfile.TarError):  # missing, empty or cut short: see check_stream()
        pass
    return ignored[:50]
