"""`lab qemu build`, the fallback where Debian's bookworm-backports is not reachable:
Debian trixie's QEMU source built into lab's store, then booted.  83 minutes of both
cores on the 2-core CI machine (measured by the session that wrote `lab qemu build`;
README, "A newer QEMU"), so it is hand-run: `pytest -m handrun tests/build/test_qemu_build.py`.
`lab qemu fetch` (seconds) is what setup.sh and CI use."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from lab.cli import main

pytestmark = [pytest.mark.build, pytest.mark.handrun]


def test_qemu_build_publishes_a_qemu_10_that_boots_jacobsville(debian_kernel, tmp_path):
    from lab import emulators

    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["qemu", "build", "--arch", "x86_64"])
    assert r.exit_code == 0, r.output[-3000:]
    built = [e for e in emulators.built() if e.origin == "lab" and e.arch == "x86_64" and e.version >= (10, 0, 0)]
    assert built, emulators.built()
    meta = json.loads((emulators.store() / built[0].entry / "metadata.json").read_text())
    assert meta["version"].startswith("10.") and meta["build_s"] > 0
    print(f"lab qemu build (x86_64): {time.monotonic() - t0:.0f} s")  # the figure to quote
    # x86 clusters need 9.1+: jacobsville verifies on the built QEMU.
    r = CliRunner().invoke(main, ["verify", "jacobsville-24c-mini", "--qemu", built[0].path, "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["ok"] is True, r.output[-3000:]
