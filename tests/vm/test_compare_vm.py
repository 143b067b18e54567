"""`lab compare SCENARIO --kernel A --kernel B` for real: the runs interleave A then B,
progress goes to stderr (timestamped lines when it is not a terminal), stdout is only
the JSON document, and the comparison is also saved in a run directory.  One run a
side (Debian's kernel twice, nothing to build) keeps it short; the statistics are
tested on recorded runs in tests/unit/test_compare.py."""

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .procs import qemu_running


@pytest.mark.vm
def test_compare_interleaves_and_keeps_stdout_clean(debian_kernel, tmp_path):
    runs = Path(os.environ["LAB_RUNS"])
    cp = subprocess.run(
        [sys.executable, "-m", "lab", "compare", "llc-spread-pinned", "--topology", "zen3-2s-mini",
         "--kernel", "debian", "--kernel", "debian", "--repeat", "1", "--json"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr[-3000:]
    doc = json.loads(cp.stdout)  # nothing but the document on stdout
    assert doc["schema"] == "lab.compare" and doc["interleaved"] is True
    assert doc["sides"]["a"]["runs"] == doc["sides"]["b"]["runs"] == 1
    a_dir, b_dir = doc["sides"]["a"]["run_dirs"][0], doc["sides"]["b"]["run_dirs"][0]
    assert Path(a_dir).name < Path(b_dir).name  # A ran first, then B
    err = cp.stderr.splitlines()
    said = [m[1] for ln in err if (m := re.match(r"^\[ *\d+\.\ds\] \[1/1\] ([AB]) debian", ln))]
    assert [k for k, _ in itertools.groupby(said)] == ["A", "B"], cp.stderr  # A's lines, then B's
    assert all(re.match(r"^\[ *\d+\.\ds\] |^lab: ", ln) for ln in err), cp.stderr  # plain lines, no spinner
    saved = sorted(runs.glob("*-compare-*"))[-1]
    assert json.loads((saved / "compare.json").read_text()) == doc
    assert (saved / "command").read_text().startswith("lab compare llc-spread-pinned")
    assert not qemu_running(a_dir) and not qemu_running(b_dir)
