"""What every bench result file says so it can be checked later (issue 31 item 9): the
commit measured and whether the tree had changes, when, on which host, under what load."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stamp() -> dict:
    def git(*a: str) -> str:
        p = subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True)
        return p.stdout.strip() if p.returncode == 0 else ""

    return {
        "commit": git("rev-parse", "HEAD") or "unknown",
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "host_cpus": os.cpu_count(),
        "loadavg_at_write": list(os.getloadavg()),
    }
