"""A heterogeneous arm64 machine booted (issue 34, item 3): the guest's cpu_capacity values
are the spec's and its kernel builds SD_ASYM_CPUCAPACITY(_FULL) where the real one does."""

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))


def _need_arm64():
    if shutil.which("qemu-system-aarch64") is None or shutil.which("dtc") is None:
        pytest.skip("qemu-system-aarch64 and dtc are needed (apt-get install qemu-system-arm device-tree-compiler)")
    from lab.errors import LabError
    from lab.kernel import resolve

    try:
        resolve("debian", "arm64", build=False)
    except LabError as e:
        pytest.skip(f"no arm64 kernel: lab kernel fetch debian --arch arm64 ({e})")


def test_verify_big_little_capacities_and_asym_flags():
    _need_arm64()
    r = CliRunner().invoke(main, ["verify", "tensor-gs101", "--json"])
    assert r.exit_code == 0, r.output[-3000:]
    doc = json.loads(r.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert doc["ok"] is True, [c for c in doc["checks"] if not c["ok"]]
    assert checks["CPU capacities"]["ok"] and checks["CPU capacities"]["expected"] == "0-3: 250 | 4-5: 620 | 6-7: 1024"
    assert "ASYM_CPUCAPACITY ASYM_CPUCAPACITY_FULL" in checks["MC flags"]["expected"]
    assert checks["MC flags"]["ok"]
    assert checks["L3 sizes"]["ok"] and checks["L3 sizes"]["expected"] == "0-7: 4096K"


def _import_and_verify(cap, tmp_path) -> dict:
    """`lab topo import` of the capture *cap*, then `lab verify` of the spec: every check
    passed; the checks by name."""
    spec = tmp_path / "phone.toml"
    r = CliRunner().invoke(main, ["topo", "import", str(cap), "-o", str(spec)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["verify", str(spec), "--json"])
    assert r.exit_code == 0, r.output[-3000:]
    doc = json.loads(r.stdout)
    assert doc["ok"] is True, [c for c in doc["checks"] if not c["ok"]]
    return {c["name"]: c for c in doc["checks"]}


def test_imported_phone_keeps_each_core_type_s_cache_sizes(tmp_path):
    """A capture of a DynamIQ phone (core types with their own L1 and L2 sizes) imports,
    boots and verifies with every CPU's sizes (the device tree carries them)."""
    _need_arm64()
    from test_cache_sizes import phone_capture

    cap = phone_capture(tmp_path / "cap")
    checks = _import_and_verify(cap, tmp_path)
    assert checks["L2 sizes"]["expected"] == "0-3: 128K | 4-5: 256K | 6-7: 1024K" and checks["L2 sizes"]["ok"]
    assert checks["L1d sizes"]["expected"] == "0-3: 32K | 4-7: 64K" and checks["L1d sizes"]["ok"]
    assert checks["L1i sizes"]["ok"] and checks["L3 sizes"]["ok"] and checks["CPU capacities"]["ok"]


def test_phone_with_clusters_of_different_sizes_boots_with_them(tmp_path):
    """The same phone as a 6.x kernel shows it, clusters 4 + 2 + 2: imported without
    --nearest, booted with QEMU's one cluster and the device tree's three, verified."""
    _need_arm64()
    from test_uneven_clusters import uneven_phone

    cap = uneven_phone(tmp_path / "cap")
    checks = _import_and_verify(cap, tmp_path)
    assert checks["clusters"]["expected"] == "0-3 | 4-5 | 6-7" and checks["clusters"]["ok"]
    assert checks["L2 sizes"]["ok"] and checks["CPU capacities"]["ok"]
