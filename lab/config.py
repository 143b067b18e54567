"""The user's settings file: ``$LAB_CONFIG``, else ``$XDG_CONFIG_HOME/lab/config.toml``
(``~/.config/lab/config.toml``).  Every key is optional; a missing file is no settings.

```toml
kernel = "lab-6.1"                 # the default --kernel (else debian)
accel = "tcg"                      # the default --accel: auto | kvm | tcg
runs = "~/lab-runs"                # where run directories go (LAB_RUNS and --runs win)
topologies = ["~/my-topologies"]   # more topology folders, searched before lab's own
scenarios = ["~/my-scenarios"]     # more scenario folders, searched before lab's own
```

An environment variable beats the file (``LAB_RUNS``, ``LAB_TOPOLOGIES``,
``LAB_SCENARIOS``), and a command-line option beats both.  A key lab does not know, or a
value of the wrong type, is refused in one line naming the file and the key.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError, nearest


def expand(p: str | Path, where: str) -> Path:
    """*p* with ~ expanded; a ~user that names nobody is a one-line UserError naming
    *where* the path came from (a setting, a variable).  Here, not in paths, which reads
    this module's settings (the other way round was an import cycle)."""
    try:
        return Path(p).expanduser()
    except RuntimeError:
        raise UserError(f"{where}: {str(p)[:80]!r}: no such user's home directory") from None


ACCELS = ("auto", "kvm", "tcg")
_STR_KEYS = ("kernel", "accel", "runs")
_LIST_KEYS = ("topologies", "scenarios")


@dataclass(frozen=True)
class Config:
    path: Path  # the file these came from (it need not exist)
    kernel: str | None = None
    accel: str | None = None
    runs: Path | None = None
    topologies: tuple[Path, ...] = ()
    scenarios: tuple[Path, ...] = ()


def path() -> Path:
    env = os.environ.get("LAB_CONFIG")
    if env:
        return expand(env, "LAB_CONFIG")
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "lab" / "config.toml"


def load() -> Config:
    """The settings file's values (read on every call: it is a few bytes, and a test or
    a long `--watch` sees an edit)."""
    f = path()
    try:
        text = f.read_text()
    except FileNotFoundError:
        return Config(f)
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{f}: cannot read lab's settings file: {getattr(e, 'strerror', None) or e}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{f}: not valid TOML: {e}") from None
    known = (*_STR_KEYS, *_LIST_KEYS)
    for key in data:
        if key not in known:
            close = nearest(key, known)
            hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(known)})"
            raise UserError(f"{f}: unknown setting '{key}'{hint}")
    for key in _STR_KEYS:
        if key in data and not (isinstance(data[key], str) and data[key]):
            raise UserError(f"{f}: {key}: give a non-empty string, not {data[key]!r}")
    for key in _LIST_KEYS:
        v = data.get(key, [])
        if not (isinstance(v, list) and all(isinstance(x, str) and x for x in v)):
            raise UserError(f"{f}: {key}: give a list of folders (strings), not {v!r}")
    accel = data.get("accel")
    if accel is not None and accel not in ACCELS:
        raise UserError(f"{f}: accel: '{accel}' is not one of {', '.join(ACCELS)}")
    runs = data.get("runs")
    return Config(
        f,
        kernel=data.get("kernel"),
        accel=accel,
        runs=expand(runs, f"{f}: runs") if runs else None,
        topologies=tuple(expand(x, f"{f}: topologies") for x in data.get("topologies", [])),
        scenarios=tuple(expand(x, f"{f}: scenarios") for x in data.get("scenarios", [])),
    )
