"""The `lab` command.  Thin click commands; heavy imports happen inside them.

This is the only place that turns LabError into a message and an exit code.
"""

from __future__ import annotations

import errno
import faulthandler
import io
import logging
import os
import signal
import sys

import click

from .. import session
from ..errors import LabError, UserError, storage_error
from . import bisect, compare, domains, kernel, matrix, minimize, qemu, report, scheduler, topo, vm
from . import run as run_mod


class LabGroup(click.Group):
    """A click group that turns lab's errors into one line and an exit code."""

    def main(self, args=None, *a, **kw):
        # Remember the exact arguments: every run directory records the `lab ...`
        # line that reproduces it.
        session.ARGV = list(sys.argv[1:] if args is None else args)
        # SIGTERM/SIGHUP unwind like Ctrl-C, so every finally clause runs: VMs and
        # builds are stopped and what was gathered is written.
        def _interrupt(signum, frame):
            raise KeyboardInterrupt

        try:
            # An inherited SIG_IGN for SIGINT (a background job of a script, `nohup lab ...
            # &`, some CI runners) would make lab deaf to Ctrl-C and `kill -INT`: Python
            # installs its KeyboardInterrupt handler only where SIGINT was at its default.
            if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL):
                signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, _interrupt)
            # SIGHUP ignored on purpose (nohup) stays ignored: surviving the terminal
            # going away is what the user asked for.
            if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
                signal.signal(signal.SIGHUP, _interrupt)
        except ValueError:  # not the main thread (e.g. under a test runner's thread)
            pass
        # A mask inherited from the caller (some CI runners and daemons block signals in
        # the thread that spawns) would leave lab deaf to the signals it unwinds on.
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
        except (AttributeError, ValueError, OSError):
            pass
        # `kill -USR1 <lab>` prints where lab is (every thread's Python stack) to stderr.
        try:
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        except (AttributeError, ValueError, RuntimeError, OSError):
            pass
        _quiet_stdout()
        return super().main(args, *a, **kw)

    def make_context(self, info_name, args, parent=None, **extra):
        # `lab --nope`: lab's own options are parsed here, before invoke().
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            _usage(e)
            raise click.exceptions.Exit(2) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:  # `lab topo`: the help, as click shows it
            raise
        except click.UsageError as e:
            _usage(e)
            ctx.exit(2)
        except (LabError, OSError) as e:
            err = e if isinstance(e, LabError) else (_storage_error(e) or _name_error(e))
            if err is None:  # any other OSError is lab's bug: its traceback is the report
                raise
            # One line, always: the message says what and where; details live in logs.
            msg = " ".join(str(err).split("\n"))
            click.echo(f"lab: error: {msg}", err=True)
            if err.detail:
                click.echo(f"--- {err.detail_title or 'detail'} ---", err=True)
                click.echo(err.detail.rstrip(), err=True)
            ctx.exit(err.exit_code)
        except KeyboardInterrupt:
            click.echo("lab: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:  # a write to a reader that left, past the wrapper: SIGPIPE's code
            _to_devnull(1)
            ctx.exit(128 + 13)


def _to_devnull(fd: int) -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


class _QuietPipe(io.TextIOBase):
    """stdout whose reader may leave (`lab recheck RUN | head -1`): once a write or flush
    meets a broken pipe, the rest goes to /dev/null, so lab goes on to the end and exits
    with the verdict's code, printing no traceback."""

    def __init__(self, f) -> None:
        self._f = f
        self.broken = False

    def _broke(self) -> None:
        self.broken = True
        try:
            _to_devnull(self._f.fileno())
        except (OSError, ValueError):
            pass

    def write(self, s: str) -> int:
        if not self.broken:
            try:
                return self._f.write(s)
            except BrokenPipeError:
                self._broke()
        return len(s)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._f.flush()
            except BrokenPipeError:
                self._broke()

    def fileno(self) -> int:
        return self._f.fileno()

    def isatty(self) -> bool:
        return self._f.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self):  # type: ignore[override]
        return self._f.encoding

    @property
    def errors(self):  # type: ignore[override]
        return self._f.errors

    def __getattr__(self, name: str):
        return getattr(self._f, name)


def _quiet_stdout() -> None:
    """stdout closed by the caller (`lab topo list >&-`) is /dev/null; a pipe whose reader
    leaves is _QuietPipe's."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the process's life
    elif not isinstance(sys.stdout, _QuietPipe) and type(sys.stdout) is io.TextIOWrapper:
        sys.stdout = _QuietPipe(sys.stdout)


def _usage(e: click.UsageError) -> None:
    """click's usage error as lab's one line, with where to get help."""
    msg = " ".join(e.format_message().split()).rstrip(".")
    where = f" (see {e.ctx.command_path} --help)" if e.ctx is not None else ""
    click.echo(f"lab: error: {msg}{where}", err=True)


def _name_error(e: OSError) -> LabError | None:
    """A path lab was given that the file system cannot take (ENAMETOOLONG), or that goes
    through a file (ENOTDIR), as one line naming it."""

    if e.errno not in (errno.ENAMETOOLONG, errno.ENOTDIR):
        return None
    name = os.fsdecode(e.filename) if e.filename is not None else "a path"
    shown = name if len(name) <= 80 else f"{name[:60]}...({len(name)} characters)"
    return UserError(f"{shown}: {e.strerror or os.strerror(e.errno or 0)}")


def _storage_error(e: OSError) -> LabError | None:
    """A write the storage refused (disk full, quota, read-only, permission) somewhere
    lab did not expect it, as one line naming the file."""

    return storage_error(e, path=None if e.filename is not None else _file_written(e))


def _file_written(e: BaseException) -> str | None:
    """The file a failed write was writing to.  ENOSPC and EDQUOT come from write(2) and
    close(2), so the OSError names no file; the file object is still a local variable
    of a frame the error unwound (`f` in Path.write_text, `fdst` in shutil.copyfileobj)."""
    frames = []
    tb = e.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):  # the innermost first
        for v in frame.f_locals.values():
            if not isinstance(v, io.IOBase):
                continue
            name, mode = getattr(v, "name", None), getattr(v, "mode", None)
            if isinstance(name, str) and isinstance(mode, str) and set(mode) & set("wax+"):
                return name
    return None


@click.group(cls=LabGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log every command lab runs.")
@click.version_option(package_name="lab")
def main(verbose: bool) -> None:
    """Make a VM with a real machine's CPU topology, run scheduler scenarios, judge placement."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(name)s: %(message)s",
        stream=sys.stderr,
    )


def _register() -> None:
    main.add_command(topo.topo)
    main.add_command(compare.compare_cmd)
    main.add_command(bisect.bisect_cmd)
    main.add_command(bisect.bisect_step_cmd)
    main.add_command(domains.domains_cmd)
    main.add_command(minimize.minimize_cmd)
    main.add_command(minimize.attribute_cmd)
    main.add_command(kernel.kernel)
    main.add_command(scheduler.scheduler)
    main.add_command(qemu.qemu)
    main.add_command(report.report)
    main.add_command(matrix.matrix)
    for cmd in vm.COMMANDS:
        main.add_command(cmd)
    for cmd in run_mod.COMMANDS:
        main.add_command(cmd)


_register()
