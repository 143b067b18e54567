"""Where lab keeps things: its data folders (topologies, scenarios, kernel recipes,
workloads), the user's own folders beside them, the run directories and the cache.

In a checkout the data folders are the top-level ``topologies/``, ``scenarios/``,
``kernels/`` and ``images/``; an installed lab (a wheel, ``pipx install``) has the same
folders as package data under ``lab/_data/`` (setup.py copies them there).

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

from . import config
from .config import expand
from .errors import UserError

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent


def _shipped(name: str) -> Path:
    """Data folder *name*: the checkout's top-level one, else the installed copy."""
    if (ROOT / "pyproject.toml").is_file() and (ROOT / name).is_dir():
        return ROOT / name
    return PACKAGE / "_data" / name


TOPOLOGIES = _shipped("topologies")
# $LAB_KERNELS: another folder of recipes, fragments and patches (tests use a fake one).
KERNELS = Path(os.environ["LAB_KERNELS"]) if os.environ.get("LAB_KERNELS") else _shipped("kernels")
IMAGES = _shipped("images")
SCENARIOS = _shipped("scenarios")

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
        raise UserError(
            f"cannot use {p} as lab's cache ({e.strerror}); set LAB_CACHE to a writable directory"
        ) from None
    return p


def _user_dirs(env: str, configured: tuple[Path, ...]) -> list[Path]:
    """The user's own folders: $<env> (folders separated by ':'), else the settings file's.
    One that exists but is not a folder is refused (it would be silently ignored)."""
    value = os.environ.get(env)
    if value is not None:
        dirs = [expand(p, env) for p in value.split(os.pathsep) if p]
        where = env
    else:
        dirs, where = list(configured), "the settings file"
    for d in dirs:
        if d.exists() and not d.is_dir():
            raise UserError(f"{where}: {d} is not a folder (give folders of .toml or .py files)")
    return dirs


def topology_dirs() -> list[Path]:
    """Where topology names are looked up, in order: $LAB_TOPOLOGIES (else the settings
    file's ``topologies``), then lab's catalog."""
    return [*_user_dirs("LAB_TOPOLOGIES", config.load().topologies), TOPOLOGIES]


def scenario_dirs() -> list[Path]:
    """Where scenario names are looked up: $LAB_SCENARIOS (else the settings file's
    ``scenarios``), then lab's own."""
    return [*_user_dirs("LAB_SCENARIOS", config.load().scenarios), SCENARIOS]


def runs_dir(choice: Path | None = None) -> Path:
    """Where run directories go: *choice* (``--runs``), else $LAB_RUNS, else the settings
    file's ``runs``, else $XDG_DATA_HOME/lab/runs (~/.local/share/lab/runs): never the
    current directory, which may be a source tree."""
    if choice is not None:
        return _runs_folder(expand(choice, "--runs"), "--runs")
    env = os.environ.get("LAB_RUNS")
    if env:
        return _runs_folder(expand(env, "LAB_RUNS"), "LAB_RUNS")
    configured = config.load().runs
    if configured is not None:
        return _runs_folder(configured, "the settings file's runs")
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "lab" / "runs"


def _runs_folder(p: Path, where: str) -> Path:
    if p.exists() and not p.is_dir():
        raise UserError(f"{where}: {p} is a file, not a folder for run directories")
    return p


def check_runs_outside(runs: Path, tree: Path) -> None:
    """Refuse a runs folder inside the kernel tree lab was given: lab never writes there
    (a run directory in it would change its ``git describe`` and wake ``--watch``)."""
    r, t = runs.expanduser().resolve(), tree.expanduser().resolve()
    if r == t or t in r.parents:
        raise UserError(
            f"run directories would go to {runs}, inside the kernel tree {tree} (--kernel-tree), "
            "and lab never writes into your tree; choose another folder with --runs DIR or LAB_RUNS"
        )


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
