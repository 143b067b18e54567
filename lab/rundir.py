"""A run directory's layout: the one place that names its files.

Every run lab makes (``lab run``, ``lab boot``, ``lab vm verify``, a matrix cell) is a
directory under the runs folder, named by ``label()`` (time stamp, kind, machine,
kernel; ``-2``, ``-3`` on a clash).  What is in it:

    command          the lab command that reproduces the run (written first)
    plan.json        the VM plan (lab.plan.VmPlan.write), numbering.json its CPU numbering
    qemu.argv        the QEMU command line, boot.json how the boot went, qemu.stderr
    console.log      the guest's console, console.tail its last lines when the boot failed
    agent.log        what lab's guest agent said (virtio-serial port lab.log)
    results.tar      the results stream as QEMU wrote it (port lab.out), unpacked into out/
    out/             traces (trace.dat, trace.<phase>.dat once assembled), rc files, figures
    guest/           the guest's topology snapshot (sysfs.txt)
    job.sh           the job the guest ran
    results.json     the verdict and figures (lab.runner), junit.xml the same for CI
    verify.json      lab vm verify's report
    lost.registers   where the vCPUs were when the guest was lost (QMP)

``RunDir`` wraps a directory's path with these names and the readers and writers of the
files more than one module uses.  This module imports nothing of lab above the basics.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import atomic
from .errors import UserError

COMMAND = "command"
PLAN = "plan.json"
NUMBERING = "numbering.json"
QEMU_ARGV = "qemu.argv"
QEMU_STDERR = "qemu.stderr"
BOOT = "boot.json"
CONSOLE = "console.log"
CONSOLE_TAIL = "console.tail"
AGENT_LOG = "agent.log"
RESULTS_TAR = "results.tar"
JOB = "job.sh"
RESULTS = "results.json"
JUNIT = "junit.xml"
VERIFY = "verify.json"
LOST_REGISTERS = "lost.registers"
# What QEMU reads and makes there (render.qemu.BootFiles), not kept in a bundle.
INITRD = "initrd.cpio"
DTB = "machine.dtb"
QMP = "qmp.sock"
OUT = "out"  # the results stream, unpacked
GUEST = "guest"  # the guest's topology snapshot
SNAPSHOT = "sysfs.txt"  # in guest/: the sysfs and debugfs files the agent read

# The files a run keeps (a bundle carries them), in the order they are made.
FILES = (COMMAND, PLAN, QEMU_ARGV, BOOT, CONSOLE, CONSOLE_TAIL, QEMU_STDERR, AGENT_LOG, JOB, RESULTS, JUNIT,
         LOST_REGISTERS)  # fmt: skip
DIRS = (OUT, GUEST)


def trace_name(phase: str) -> str:
    """The assembled trace of *phase* in out/: trace.dat for the main phase."""
    return "trace.dat" if phase == "main" else f"trace.{phase}.dat"


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s)[:40]


def label(kind: str, machine: str, kernel: str, stamp: str | None = None) -> str:
    """A run directory's name: when, what kind, which machine and kernel."""
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{_slug(kind)}-{_slug(machine)}-{_slug(kernel)}"


@dataclass(frozen=True)
class RunDir:
    path: Path

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    # ---- where --------------------------------------------------------------------------
    @property
    def command(self) -> Path:
        return self.path / COMMAND

    @property
    def plan(self) -> Path:
        return self.path / PLAN

    @property
    def numbering(self) -> Path:
        return self.path / NUMBERING

    @property
    def results(self) -> Path:
        return self.path / RESULTS

    @property
    def junit(self) -> Path:
        return self.path / JUNIT

    @property
    def verify(self) -> Path:
        return self.path / VERIFY

    @property
    def results_tar(self) -> Path:
        """The results stream as QEMU wrote it."""
        return self.path / RESULTS_TAR

    @property
    def agent_log(self) -> Path:
        return self.path / AGENT_LOG

    @property
    def qemu_argv(self) -> Path:
        return self.path / QEMU_ARGV

    @property
    def boot(self) -> Path:
        return self.path / BOOT

    @property
    def out(self) -> Path:
        return self.path / OUT

    @property
    def guest(self) -> Path:
        return self.path / GUEST

    def trace(self, phase: str = "main") -> Path:
        return self.out / trace_name(phase)

    def snapshot(self) -> Path | None:
        """The guest topology snapshot's folder (guest/, out/guest/ in older runs), or None."""
        for d in (self.guest, self.out / GUEST):
            if os.path.lexists(d / SNAPSHOT):
                return d
        return None

    # ---- readers ------------------------------------------------------------------------
    def has_results(self) -> bool:
        return self.results.is_file()

    def is_run(self) -> bool:
        """A finished run: results.json and plan.json."""
        return self.results.is_file() and self.plan.is_file()

    def read_command(self) -> str:
        """The lab command that made the run ("" when it has none)."""
        return self.command.read_text(errors="replace").strip() if self.command.is_file() else ""

    def read_json(self, name: str) -> Any:
        """A JSON file of the run, or a UserError naming it."""
        p = self.path / name
        try:
            return json.loads(p.read_text())
        except FileNotFoundError:
            raise UserError(f"{p}: no such file (not a lab run directory, or a run that stopped early)") from None
        except (OSError, ValueError) as e:
            raise UserError(f"{p}: cannot be read: {e}") from None

    def read_results(self) -> dict[str, Any]:
        d = self.read_json(RESULTS)
        if not isinstance(d, dict):
            raise UserError(f"{self.results}: not a JSON object")
        return d

    # ---- writers ------------------------------------------------------------------------
    def write_command(self, args: Sequence[str]) -> None:
        atomic.write_text(self.command, shlex.join(["lab", *args]) + "\n", "the run's command")

    def write_results(self, doc: Any) -> None:
        atomic.write_text(self.results, json.dumps(doc, indent=1, default=str), "the run's results")

    def write_junit(self, text: str) -> None:
        atomic.write_text(self.junit, text, "the run's JUnit report")

    def write_verify(self, doc: Any) -> None:
        atomic.write_text(self.verify, json.dumps(doc, indent=1), "the verify report")

    def write_argv(self, argv: Sequence[str]) -> None:
        self.qemu_argv.write_text(shlex.join(argv) + "\n")

    def write_boot(self, doc: Any) -> None:
        self.boot.write_text(json.dumps(doc, indent=1))
