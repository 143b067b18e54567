"""One progress API for every long step (fetch, build, boot, snapshot, workload, verify,
each repeat, each matrix cell, each bisect step).

Progress always goes to stderr, so stdout stays the command's own output (a table, JSON,
the guest command's bytes).  On a terminal it is one live status line (rich); anywhere
else (CI logs, a pipe, a file) it is plain timestamped lines, one when a step starts and
one when a step that took over ``SLOW_S`` ends, never a spinner's control characters:

    [  0.0s] boot: zen3-2s-mini, 32 vCPUs, debian-6.1.0-56-amd64
    [  6.3s] boot: done (6.3s)

Library code takes a ``Progress`` (or ``None``) and calls ``step``/``update``; only the
CLI makes one with ``lab.cli.common.progress_for_cli()``.  ``callback()`` adapts it to the older
``(stage, detail)`` callables the kernel build takes.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

SLOW_S = 2.0  # a step that took longer says when it ended (plain mode)
_PLAIN_UPDATE_EVERY_S = 10.0  # plain mode: at most one update line per step this often


class Progress:
    """Steps and their details.  The base class prints nothing (tests, --quiet, library use)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self._steps: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def step(self, name: str, detail: str = "") -> Iterator[Progress]:
        """A step: started now, ended when the block leaves (also on an error)."""
        self._steps.append((name, time.monotonic()))
        self._start(name, detail)
        ok = False
        try:
            yield self
            ok = True
        finally:
            _, t = self._steps.pop()
            # Only a step that finished says "done": an interrupted or failed one ends
            # silently (the error or "interrupted" line says the rest).
            if ok:
                self._end(name, time.monotonic() - t)
            else:
                self._abort(name)

    def _abort(self, name: str) -> None:
        """A step left by an exception: nothing to print by default."""

    def update(self, detail: str) -> None:
        """What the current step is doing now (e.g. the guest agent's last line)."""
        if self._steps:
            self._update(self._steps[-1][0], detail)

    def note(self, text: str) -> None:
        """A line that stays (a warning, where the run directory is)."""

    def callback(self) -> Callable[[str, str], None]:
        """The kernel build's ``progress(stage, detail)`` as updates of the current step."""
        return lambda stage, detail: self.update(f"{stage}: {detail}" if detail else stage)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    # what subclasses show
    def _start(self, name: str, detail: str) -> None:
        pass

    def _update(self, name: str, detail: str) -> None:
        pass

    def _end(self, name: str, seconds: float) -> None:
        pass


class PlainProgress(Progress):
    """Timestamped lines, for logs: no control characters, nothing overwritten."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__()
        self.stream = stream or sys.stderr
        self._last_update = 0.0

    def _line(self, text: str) -> None:
        try:
            self.stream.write(f"[{self.elapsed():6.1f}s] {text}\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe must not end the run
            pass

    def _start(self, name: str, detail: str) -> None:
        self._last_update = time.monotonic()
        self._line(f"{name}: {detail}" if detail else name)

    def _update(self, name: str, detail: str) -> None:
        now = time.monotonic()
        if now - self._last_update >= _PLAIN_UPDATE_EVERY_S:
            self._last_update = now
            self._line(f"{name}: {detail}")

    def _end(self, name: str, seconds: float) -> None:
        if seconds >= SLOW_S:
            self._line(f"{name}: done ({seconds:.1f}s)")

    def note(self, text: str) -> None:
        self._line(text)


class LiveProgress(Progress):
    """One rich status line on a terminal, showing the step, its detail and its time."""

    def __init__(self, console: Any) -> None:
        super().__init__()
        self.console = console
        self._status: Any = None
        self._detail = ""

    def _text(self, name: str) -> str:
        # deferred: CLI start (rich)
        from rich.markup import escape

        t = time.monotonic() - self._steps[-1][1] if self._steps else 0.0
        return escape(f"{name}: {self._detail} (+{t:.1f}s)" if self._detail else f"{name} (+{t:.1f}s)")

    def _start(self, name: str, detail: str) -> None:
        self._detail = detail
        if self._status is None:
            self._status = self.console.status(self._text(name))
            self._status.start()
        else:
            self._status.update(self._text(name))

    def _update(self, name: str, detail: str) -> None:
        self._detail = detail
        if self._status is not None:
            self._status.update(self._text(name))

    def _end(self, name: str, seconds: float) -> None:
        if not self._steps and self._status is not None:
            self._status.stop()
            self._status = None

    def _abort(self, name: str) -> None:
        self._end(name, 0.0)  # the status line goes, as at a step's end

    def note(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)


def of(p: Progress | None) -> Progress:
    """*p*, or one that shows nothing: library functions take ``progress=None``."""
    return p if p is not None else Progress()
