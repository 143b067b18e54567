"""What every bench result file says so it can be checked later (issue 31 item 9): the
commit measured and whether the tree had changes, when, on which host, under what load."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _git(*a: str) -> str:
    p = subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else ""


def _tree() -> dict:
    return {"commit": _git("rev-parse", "HEAD") or "unknown", "dirty": bool(_git("status", "--porcelain", "--untracked-files=no"))}


# The commit a bench measures is the one checked out when it started (this module is
# imported then), not the one at write time: a commit made while a long bench ran (a
# 30-minute matrix) would otherwise be named as what was measured.
AT_START = _tree()


def stamp() -> dict:
    now = _tree()
    out = {
        **AT_START,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "host_cpus": os.cpu_count(),
        "loadavg_at_write": list(os.getloadavg()),
    }
    if now != AT_START:  # HEAD moved or the tree changed while it ran: say so
        out["at_write"] = now
    return out


def write_result(bench: str, doc: dict) -> Path:
    """bench/results/<bench>-<time>.json with *doc* (which carries stamp()); returns its path."""
    out = REPO / "bench" / "results" / f"{bench}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return out


def lab_run_json(argv: list[str], runs: Path) -> tuple[float, int, dict | None, str]:
    """`lab run ... --json` (*argv*, runs kept under *runs*): (wall seconds, exit status,
    its first run's document or None, the last line of its stderr)."""
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "LAB_RUNS": str(runs)})
    wall = round(time.monotonic() - t0, 2)
    try:
        run = json.loads(p.stdout)["runs"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        run = None
    return wall, p.returncode, run, (p.stderr.strip().splitlines() or ["no output"])[-1]
