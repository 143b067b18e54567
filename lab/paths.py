"""Where lab keeps things: the source tree's data folders and the user's cache.

Everything lab puts in its cache appears whole or not at all: it is written under a
temporary name in the same directory (``.tmp-<pid>-<name>-<random>``, unique to its
writer) and renamed into place.  A writer that dies leaves only such a name behind;
:func:`clean_stale` removes those whose process is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES = ROOT / "topologies"
# $LAB_KERNELS: another folder of recipes, fragments and patches (tests use a fake one).
KERNELS = Path(os.environ["LAB_KERNELS"]) if os.environ.get("LAB_KERNELS") else ROOT / "kernels"
IMAGES = ROOT / "images"
SCENARIOS = ROOT / "scenarios"

TMP_PREFIX = ".tmp-"


def cache_dir() -> Path:
    """$LAB_CACHE, else $XDG_CACHE_HOME/lab, else ~/.cache/lab."""
    env = os.environ.get("LAB_CACHE")
    if env:
        p = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        p = Path(base) / "lab"
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        from .errors import UserError

        raise UserError(
            f"cannot use {p} as lab's cache ({e.strerror}); set LAB_CACHE to a writable directory"
        ) from None
    return p


def runs_dir() -> Path:
    """$LAB_RUNS, else ./runs (relative to the current directory)."""
    return Path(os.environ.get("LAB_RUNS") or "runs")


def tmp_prefix(label: str) -> str:
    """The start of a temporary name for *label* made by this process."""
    return f"{TMP_PREFIX}{os.getpid()}-{label}-"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def tmp_owner(name: str) -> int | None:
    """The pid in a temporary name made by :func:`tmp_prefix`, else None."""
    if not name.startswith(TMP_PREFIX):
        return None
    pid = name[len(TMP_PREFIX) :].split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def clean_stale(directory: Path) -> None:
    """Remove temporary files and directories in *directory* left by processes that died."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        pid = tmp_owner(name)
        if pid is None or pid_alive(pid):
            continue
        p = directory / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()
