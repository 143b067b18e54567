"""A heterogeneous arm64 machine booted (issue 34, item 3): the guest's cpu_capacity values
are the spec's and its kernel builds SD_ASYM_CPUCAPACITY(_FULL) where the real one does."""

import json
import shutil

import pytest
from click.testing import CliRunner

from lab.cli import main


def test_verify_big_little_capacities_and_asym_flags():
    if shutil.which("qemu-system-aarch64") is None or shutil.which("dtc") is None:
        pytest.skip("qemu-system-aarch64 and dtc are needed (apt-get install qemu-system-arm device-tree-compiler)")
    from lab.errors import LabError
    from lab.kernel import resolve

    try:
        resolve("debian", "arm64", build=False)
    except LabError as e:
        pytest.skip(f"no arm64 kernel: lab kernel fetch debian --arch arm64 ({e})")
    r = CliRunner().invoke(main, ["verify", "tensor-gs101", "--json"])
    assert r.exit_code == 0, r.output[-3000:]
    doc = json.loads(r.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert doc["ok"] is True, [c for c in doc["checks"] if not c["ok"]]
    assert checks["CPU capacities"]["ok"] and checks["CPU capacities"]["expected"] == "0-3: 250 | 4-5: 620 | 6-7: 1024"
    assert "ASYM_CPUCAPACITY ASYM_CPUCAPACITY_FULL" in checks["MC flags"]["expected"]
    assert checks["MC flags"]["ok"]
