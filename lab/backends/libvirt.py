"""Boot a plan as a transient libvirt domain (libvirt-python), run a job, collect.

The domain is rendered from the same plan and files as the QEMU backend
(render.libvirt), the guest agent and its virtio-serial ports are the same, and so is
everything after the VM ends (guest.collect): only starting and stopping differ.

The domain is transient and started with VIR_DOMAIN_START_AUTODESTROY: libvirtd
destroys it when lab's connection closes, so a lab killed even by SIGKILL leaves no
VM behind; lab also destroys it on exit, on error and on Ctrl-C.

The results come back over libvirt's stream API (render.libvirt: a unix channel, not a
file, because virtlogd cuts file channels at 2 MiB), on a connection of their own
(_Results); the guest waits for lab to end the domain once every byte it sent has arrived
(LAB_HOST_ENDS), so none is left in the port's queue when QEMU stops.

Under TCG with more vCPUs than twice the host's cores the plan runs thread=single, as
through the QEMU backend; libvirt cannot ask for it, so the domain's <emulator> is lab's
wrapper (tcg_wrapper(), render.tcg_wrapper_script()) when libvirtd runs on this host.

Remote URIs (qemu+ssh://host/system): libvirtd on that host opens the kernel, the
initramfs, the console and the agent's log at the paths lab names, so they must be the
same paths there (lab's cache and runs folder on a shared file system, mounted at the
same place), and QEMU runs there as lab's uid:gid.  Tested through libvirt's ssh
transport to this same host (tests/vm/test_remote_libvirt_vm.py: transport, keys, the
far libvirtd); a separate host, where the paths must really be shared, is not.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree as ET

from .. import atomic, integrity, proc
from ..errors import InfraError, LostGuest, UserError
from ..kernel.artifact import KernelArtifact
from ..plan import VmPlan
from ..progress import Progress
from ..progress import of as progress_of
from ..render import libvirt as render
from ..render import qemu as render_qemu
from . import guest
from .base import Capabilities

DEFAULT_URI = "qemu:///system"

NAME = "libvirt"
CAPABILITIES = Capabilities(remote=True, run_dir_named=True)


def adapt(plan: VmPlan, kernel: KernelArtifact | None = None) -> VmPlan:
    """*plan* as this host's libvirt library runs it (a boot checks the daemon's own)."""
    return render.adapt(plan, library_version(), tcg_wrapper=tcg_wrapper_usable(plan))


def dry_run(plan: VmPlan, kernel: KernelArtifact) -> str:
    return dry_run_xml(plan, kernel).rstrip("\n")


def _module() -> Any:
    try:
        # deferred: optional (libvirt)
        import libvirt
    except ImportError:
        raise UserError(
            "--backend libvirt needs libvirt-python (sh scripts/setup.sh installs it, with libvirt-dev and pkg-config)"
        ) from None
    return libvirt


def _version(n: int) -> tuple[int, int, int]:
    return (n // 1_000_000, n // 1000 % 1000, n % 1000)


def library_version() -> tuple[int, int, int]:
    """The version of the libvirt library on this host (what `lab topo render` checks
    against; a boot checks the daemon's own)."""
    return _version(_module().getVersion())


def uri(p: VmPlan) -> str:
    return p.options.connect or DEFAULT_URI


def connect(name: str) -> Any:
    """An open connection to *name*, or one line naming the URI and libvirt's reason."""
    libvirt = _module()
    libvirt.registerErrorHandler(lambda *_: None, None)  # libvirt's own stderr printing: the UserError says it
    try:
        return libvirt.open(name)
    except libvirt.libvirtError as e:
        raise UserError(f"cannot connect to libvirt at {name}: {e.get_error_message() or e}") from None


def domain_xml(plan: VmPlan, files: render_qemu.BootFiles, run_dir: Path, emulator: str | None = None) -> str:
    tag = f"{socket.gethostname()}-{os.getpid()}"
    return render.domain_xml(
        plan, files, name=render.domain_name(run_dir, tag), run_dir=run_dir.resolve(), owner=(os.getuid(), os.getgid()),
        emulator=emulator,
    )  # fmt: skip


LOOPBACK = ("localhost", "localhost.localdomain", "127.0.0.1", "::1")


def is_local(where: str) -> bool:
    """Whether the libvirtd at URI *where* runs on this host (qemu:///system, or a
    transport to this host's own name or loopback): its QEMU is this host's process, and
    a file lab writes here is there."""

    try:
        host = urlsplit(where).hostname
    except ValueError:
        return False
    if not host:
        return True
    host = host.lower()
    # getfqdn() asks the resolver: only when the cheap names did not answer
    return host in LOOPBACK or host == socket.gethostname().lower() or host == socket.getfqdn().lower()


def tcg_wrapper_usable(plan: VmPlan) -> bool:
    """Whether a boot of *plan* can start QEMU through lab's TCG-threading wrapper
    (render.tcg_wrapper_script): the file lab writes must be on libvirtd's host."""
    return plan.accel == "tcg" and is_local(uri(plan))


WRAPPER_DIR = Path("/var/tmp")  # world-traversable: libvirtd probes an emulator as its own qemu user


def _default_emulator(conn: Any, plan: VmPlan, where: str) -> str:
    """The QEMU binary libvirtd at *where* runs for *plan*'s arch and accelerator."""

    libvirt = _module()
    try:
        caps = conn.getDomainCapabilities(None, render.ARCH[plan.arch], None, "kvm" if plan.accel == "kvm" else "qemu", 0)
        path = ET.fromstring(caps).findtext("path")
    except (libvirt.libvirtError, ET.ParseError) as e:
        raise InfraError(f"libvirt at {where} did not say which QEMU it runs for {plan.arch}: {e}") from None
    if not path:
        raise InfraError(f"libvirt at {where} names no QEMU binary for {plan.arch}")
    return path


def tcg_wrapper(conn: Any, plan: VmPlan, where: str) -> str:
    """The path of lab's wrapper running libvirt's QEMU with -accel tcg,thread=<plan's>,
    written once (named by its content: an existing file is the right one, and libvirt's
    cached probe of it stays valid) in
    /var/tmp/lab-<uid>/, which libvirtd's unprivileged capability probe can reach (lab's
    cache under a 0700 home cannot be)."""

    text = render.tcg_wrapper_script(_default_emulator(conn, plan, where), plan.tcg_threads)
    d = WRAPPER_DIR / f"lab-{os.getuid()}"
    path = d / f"qemu-tcg-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    how = "--tcg-threads multi runs QEMU's default threading without it"
    try:
        d.mkdir(mode=0o755, exist_ok=True)
        st = d.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise InfraError(f"{d} is not a directory only this user can write ({how})")
        if stat.S_IMODE(st.st_mode) != 0o755:
            d.chmod(0o755)  # a umask of 077 would hide the wrapper from libvirt's probe
        if not path.is_file():
            with atomic.atomic_file(path, mode=0o755, what="lab's QEMU wrapper for libvirt") as tmp:
                tmp.write_text(text)
    except OSError as e:
        raise InfraError(f"cannot write lab's QEMU wrapper for libvirt at {path}: {e.strerror or e} ({how})") from None
    return str(path)


def dry_run_xml(plan: VmPlan, kernel: KernelArtifact) -> str:
    """The domain XML a boot of *plan* starts, naming its run directory $RUN_DIR."""
    files = replace(render_qemu.boot_files(plan, guest.boot_image(kernel, plan.topo.n_cpus)), monitor=None)
    return render.domain_xml(plan, files, name=render.domain_name("RUN"), owner=(os.getuid(), os.getgid()))


def boot(
    plan: VmPlan,
    kernel: KernelArtifact,
    run_dir: Path,
    job: guest.GuestJob | None = None,
    *,
    timeout: float = 600,
    on_event: Callable[[float, str], None] | None = None,
    progress: Progress | None = None,
) -> guest.BootResult:
    """Start *plan* as a transient domain, run *job*, wait, collect (a step of
    *progress*).  Always destroys it."""
    with progress_of(progress).step("boot", f"{plan.topo.name} as a libvirt domain ({uri(plan)})"):
        return _boot(plan, kernel, run_dir, job, timeout=timeout, on_event=on_event)


def _boot(
    plan: VmPlan, kernel: KernelArtifact, run_dir: Path, job: guest.GuestJob | None, *, timeout: float,
    on_event: Callable[[float, str], None] | None,
) -> guest.BootResult:  # fmt: skip
    libvirt = _module()
    where = uri(plan)
    conn = connect(where)
    try:
        render.adapt(plan, _version(conn.getLibVersion()))  # the daemon's version, not only ours
        emulator = tcg_wrapper(conn, plan, where) if plan.accel == "tcg" and plan.tcg_threads != "multi" else None
        job = job or guest.GuestJob()
        job = replace(job, config={**job.config, "LAB_HOST_ENDS": "1"})  # see ended() below
        files = replace(guest.make_boot_files(plan, kernel, run_dir, job), monitor=None)  # libvirt owns QEMU's monitor
        assert files.console and files.agent_log and files.results
        xml = domain_xml(plan, files, run_dir, emulator)
        (run_dir / "domain.xml").write_text(xml)
        console = run_dir / files.console
        said = guest.AgentLog(run_dir / files.agent_log, plan, console, on_event)

        def lost(what: str) -> LostGuest:
            return LostGuest(f"{what}{said.last_word()} (console: {console})", guest.console_tail(console))

        t0 = time.monotonic()
        dom = None
        results: _Results | None = None
        try:
            with proc.signals_held():  # dom is set before an interrupt can unwind
                try:
                    dom = conn.createXML(xml, libvirt.VIR_DOMAIN_START_AUTODESTROY)
                except libvirt.libvirtError as e:
                    via = f"; QEMU through lab's wrapper {emulator}, --tcg-threads multi runs without it" if emulator else ""
                    raise InfraError(
                        f"libvirt at {where} could not start the domain: {e.get_error_message() or e} "
                        f"(domain XML: {run_dir / 'domain.xml'}{via})"
                    ) from None
            results = got = _Results(libvirt, dom, run_dir / files.results, where)
            got.start()
            pid = _qemu_pid(dom.name(), where)
            sent_at: list[float] = []

            def ended() -> int | None:
                # The guest waits for lab to end it once its results are all here
                # (LAB_HOST_ENDS): every byte it said it sent arrived, or the stream
                # ended, or nothing more came for SENT_GRACE_S (then judged short).
                sent = integrity.said([line for _, line in said.events], "sent")
                if sent is not None:
                    sent_at[:] = sent_at or [time.monotonic()]
                    want = integrity.count(sent.get("bytes"))
                    if got.eof or (want is not None and got.received >= want):
                        return 0
                    if time.monotonic() - max(sent_at[0], got.last_data) > SENT_GRACE_S:
                        return 0
                try:
                    return None if dom.isActive() else 0
                except libvirt.libvirtError:  # a transient domain is gone once it stops
                    return 0

            guest.watch(ended, pid, said, lost, ready_within=guest.boot_timeout(plan), finish_within=timeout)
        finally:
            if dom is not None:
                _destroy(libvirt, dom)
            if results is not None:
                results.close()
        wall = time.monotonic() - t0
        return guest.collect(plan, run_dir, files, said, ["virsh", "-c", where, "create", str(run_dir / "domain.xml")], wall)
    finally:
        _close(libvirt, conn)


def _close(libvirt: Any, conn: Any) -> None:
    try:
        conn.close()
    except libvirt.libvirtError:
        pass


SENT_GRACE_S = 30.0  # after the guest said "sent": how long lab waits for bytes that stopped coming


class _Results(threading.Thread):
    """Copies the guest's results channel into *path* through libvirt's stream API
    (virDomainOpenChannel), on this host or a remote one, as the guest writes them.

    On a connection of its own: while this thread waits in a blocking virStreamRecv,
    another call on the same connection can wait with it (seen over qemu+ssh in about
    one run in three: lab's virDomainDestroy, made once every result had arrived, did
    not return until the guest, tired of waiting to be ended, rebooted 120 s later)."""

    def __init__(self, libvirt: Any, dom: Any, path: Path, where: str):
        super().__init__(name="lab-results", daemon=True)
        self.libvirt, self.path = libvirt, path
        self.received, self.eof, self.last_data = 0, False, time.monotonic()
        self.error: BaseException | None = None
        self.conn = connect(where)
        try:
            self.stream = self.conn.newStream(0)
            self.conn.lookupByUUID(dom.UUID()).openChannel(render.RESULTS_PORT, self.stream, 0)
        except libvirt.libvirtError as e:
            _close(libvirt, self.conn)
            raise InfraError(f"libvirt at {where} could not open the guest's results channel: {e.get_error_message() or e}") from None
        self.file = open(path, "wb")

    def run(self) -> None:
        try:
            while True:
                data = self.stream.recv(1 << 18)
                if isinstance(data, int):  # -2: would block (not on a blocking stream)
                    time.sleep(0.01)
                    continue
                if not data:
                    break
                self.file.write(data)
                self.received += len(data)
                self.last_data = time.monotonic()
        except self.libvirt.libvirtError:  # the domain went away: what arrived is what there is
            pass
        except OSError as e:  # disk full: said by close(), in lab's thread
            self.error = e
        finally:
            self.eof = True

    def close(self) -> None:
        """Wait for the stream's end (the domain is gone by now), keep what arrived."""
        self.join(timeout=15)
        if self.is_alive():
            try:
                self.stream.abort()
            except self.libvirt.libvirtError:
                pass
            self.join(timeout=5)
        else:
            try:
                self.stream.finish()
            except self.libvirt.libvirtError:
                pass
        if not self.is_alive():
            self.file.close()
        _close(self.libvirt, self.conn)
        if self.error is not None:
            raise self.error


def _destroy(libvirt: Any, dom: Any) -> None:
    try:
        if dom.isActive():
            dom.destroy()
    except libvirt.libvirtError:  # already gone: the guest's reboot ended it
        pass


def _qemu_pid(name: str, where: str) -> int | None:
    """QEMU's pid for the host clock when libvirtd runs it on this host (whatever the
    transport; lab's own pid when libvirt's pid file is not readable: QEMU's time then
    counts as other work, which stretches deadlines, never shortens them); None for a
    remote host: its guest's CPU time is not ours to see and this host's load says
    nothing about it, so its deadlines count in wall time."""
    if not is_local(where):
        return None
    for d in ("/run/libvirt/qemu", "/var/run/libvirt/qemu"):
        try:
            return int(Path(d, f"{name}.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return os.getpid()
