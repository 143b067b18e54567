"""Shared pieces of the CLI: parameter types and the rich console."""

from __future__ import annotations

import functools
import math
import os
import re
import sys
from pathlib import Path
from typing import IO, cast

import click

from .. import topology
from ..errors import UserError
from ..progress import LiveProgress, PlainProgress, Progress


class TopologyType(click.ParamType):
    """A catalog name or a spec file; loads and validates it."""

    name = "TOPOLOGY"

    def convert(self, value, param, ctx):
        if isinstance(value, topology.Topology):
            return value
        return topology.load(value)  # UserError -> one line from LabGroup

    def shell_complete(self, ctx, param, incomplete):
        # deferred: CLI start (click.shell_completion)
        from click.shell_completion import CompletionItem

        return [CompletionItem(n) for n in topology.catalog_names() if n.startswith(incomplete)]


TOPOLOGY = TopologyType()


class Seconds(click.ParamType):
    """A time limit: a finite number of seconds above zero (nan, inf or 0 would turn the
    watchdog off or fire it at once)."""

    name = "SECONDS"

    def convert(self, value, param, ctx):
        try:
            s = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not (math.isfinite(s) and s > 0):
            self.fail(f"{value!r}: give a number of seconds above 0", param, ctx)
        return s


SECONDS = Seconds()


class ToolList(click.ParamType):
    """A comma-separated list of host tool names (programs on the host's PATH)."""

    name = "TOOLS"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        names = [t.strip() for t in str(value).split(",") if t.strip()]
        for t in names:
            if "/" in t or not re.fullmatch(r"[A-Za-z0-9._+-]+", t):
                self.fail(f"{t!r} is not a program name (give names on the host's PATH, e.g. numactl,perf)", param, ctx)
        return tuple(dict.fromkeys(names))


TOOLS = ToolList()


class OutputFile(click.ParamType):
    """A file lab writes: not a directory, in a directory that exists."""

    name = "FILE"

    def convert(self, value, param, ctx):
        p = Path(value)
        if p.is_dir():
            self.fail(f"{p} is a directory; name a file in it", param, ctx)
        if not p.parent.is_dir():
            what = "not a directory" if p.parent.exists() else "no such directory"
            self.fail(f"{p}: {p.parent}: {what}", param, ctx)
        return p


OUTPUT = OutputFile()


class CpuModel(click.ParamType):
    """auto, intel, amd, or a QEMU -cpu model.  Which models exist is QEMU's to say (at
    boot); what cannot be one (empty, with spaces) is refused here."""

    name = "MODEL"

    def convert(self, value, param, ctx):
        if not value or any(c.isspace() for c in value):
            self.fail(f"{value!r}: give auto, intel, amd, or a QEMU -cpu model (e.g. Skylake-Server)", param, ctx)
        return value


CPU_MODEL = CpuModel()


class QemuChoice(click.ParamType):
    """auto, system, lab, or a QEMU binary (an executable file)."""

    name = "QEMU"

    def convert(self, value, param, ctx):
        if value in ("auto", "system", "lab"):
            return value
        p = Path(value).expanduser()
        if not value or not p.is_file():
            self.fail(f"{value!r}: give auto, system, lab, or the path of a QEMU binary", param, ctx)

        if not os.access(p, os.X_OK):
            self.fail(f"{value}: not executable", param, ctx)
        return str(p.resolve())


QEMU_CHOICE = QemuChoice()


class Folder(click.ParamType):
    """A folder lab makes if needed: named (not empty), and not an existing non-folder."""

    name = "DIR"

    def convert(self, value, param, ctx):
        if isinstance(value, Path):
            return value
        if not value:
            self.fail("give a folder, not an empty name", param, ctx)
        p = Path(value).expanduser()
        if p.exists() and not p.is_dir():
            self.fail(f"{p} exists and is not a folder", param, ctx)
        return p


RUNS = click.option(
    "--runs", type=Folder(), default=None, metavar="DIR",
    help="Put the run directory in DIR (default: $LAB_RUNS, the settings file's runs, else ~/.local/share/lab/runs).",
)  # fmt: skip

TEXT_WIDTH = 80  # what pastes into a mail


def text_format_option(f):
    """``--format rich|text`` for a command that prints tables: text is plain ASCII within
    80 columns (what lab prints anyway when stdout is not a terminal)."""

    def remember(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value == "text":
            ctx.find_root().meta["lab.text"] = True
        return value

    return click.option(
        "--format", "table_format", type=click.Choice(["rich", "text"]), default="rich", show_default=True,
        expose_value=False, is_eager=True, callback=remember,
        help="text: plain ASCII tables within 80 columns, as when stdout is not a terminal.",
    )(f)  # fmt: skip


def plain_text() -> bool:
    """Whether this command prints plain text (--format text), whatever stdout is."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().meta.get("lab.text"))


def console(stderr: bool = False):
    """lab's rich console (stdout), or one on stderr for commands whose stdout is JSON.

    On a terminal it is rich's own; anywhere else (a pipe, a file, a mail), or with
    ``--format text``, it writes plain ASCII within 80 columns: ASCII boxes and tree
    guides, no colour, any other character replaced."""
    return _console(bool(stderr), plain_text() and not stderr)  # one per stream and mode


class _AsciiStream:
    """stdout or stderr (looked up at each write, as rich does) seen as an ASCII stream:
    rich then draws ASCII boxes and tree guides; an ellipsis rich adds becomes '~', and
    anything else not ASCII (a guest's bytes quoted in an error) its escape."""

    encoding = "ascii"

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr

    def _f(self):
        return sys.stderr if self._stderr else sys.stdout

    def write(self, s: str) -> int:
        # rich pads each line to the width: a mail does not want the trailing blanks.
        return self._f().write(_TRAILING.sub("\n", to_ascii(s)))

    def flush(self) -> None:
        self._f().flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._f().fileno()


_TRAILING = re.compile(r"[ \t]+\n")


def to_ascii(s: str) -> str:
    """*s* in ASCII: the typographic characters rich itself adds as one ASCII character
    ('~' for an ellipsis), anything else (a guest's bytes in an error) as its escape
    (``\\xb2``), so what is wrong stays readable in a mail instead of becoming '?'."""
    if s.isascii():
        return s
    return "".join(c if c.isascii() else _ASCII.get(c) or c.encode("ascii", "backslashreplace").decode() for c in s)


_ASCII = {"\u2026": "~", "\u2013": "-", "\u2014": "-", "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00b5": "u", "\u2192": ">", "\u00d7": "x"}


def progress_for_cli(quiet: bool = False) -> Progress:
    """The CLI's progress: live on a terminal, plain lines otherwise, nothing when *quiet*."""
    if quiet:
        return Progress()
    c = console(stderr=True)
    return LiveProgress(c) if c.is_terminal else PlainProgress()


@functools.cache
def _console(stderr: bool, text: bool):
    # deferred: CLI start (rich)
    from rich.console import Console

    c = Console(stderr=stderr)
    if text or not c.is_terminal:
        # Piped, in CI, or --format text: what pastes into a mail.
        c = Console(file=cast("IO[str]", _AsciiStream(stderr)), width=TEXT_WIDTH, color_system=None, force_terminal=False,
                    highlight=False, emoji=False)  # fmt: skip
    return c


def one_of_scenario_or_workload(name: str | None, workloads: tuple[str, ...], cmd: str, both_prefix: str = "") -> None:
    """SCENARIO or --workload CMD, exactly one (`lab run`, `lab bisect`): one line otherwise."""
    if workloads and name is not None:
        raise UserError(f"{both_prefix}give a SCENARIO or --workload CMD, not both ({name!r} and --workload)")
    if not workloads and name is None:
        raise UserError(f"{cmd}: give a SCENARIO (`lab scenarios` lists them) or --workload CMD with --check EXPR")
