"""Where lab keeps things: the source tree's data folders and the user's cache."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES = ROOT / "topologies"
# $LAB_KERNELS: another folder of recipes, fragments and patches (tests use a fake one).
KERNELS = Path(os.environ["LAB_KERNELS"]) if os.environ.get("LAB_KERNELS") else ROOT / "kernels"
IMAGES = ROOT / "images"
SCENARIOS = ROOT / "scenarios"


def cache_dir() -> Path:
    """$LAB_CACHE, else $XDG_CACHE_HOME/lab, else ~/.cache/lab."""
    env = os.environ.get("LAB_CACHE")
    if env:
        p = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        p = Path(base) / "lab"
    p.mkdir(parents=True, exist_ok=True)
    return p


def runs_dir() -> Path:
    """$LAB_RUNS, else ./runs (relative to the current directory)."""
    return Path(os.environ.get("LAB_RUNS") or "runs")
