"""`--backend vng --kernel-tree`: a real kernel tree built by `vng --build` (vng's own
minimal config with lab's fragments), checked to have kept what lab asks for (vng's
config turns SCHED_MC off), then judged through vng: llc-spread-pinned PASSes on 6.1
(seed 000's fix is in it) as on lab-6.1.  A full build of a second config: run by hand
(`pytest -m handrun tests/build/test_vng_build.py`), figures in the closing note."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main
from lab.kernel.config import read_config

pytestmark = [pytest.mark.build, pytest.mark.handrun]


@pytest.fixture(scope="module")
def vng_tree(tmp_path_factory):
    from lab.kernel import source

    try:
        src = source.resolve("debian:6.1")
    except Exception as e:  # noqa: BLE001 - any failure here means no source to test with
        pytest.skip(f"linux-source-6.1 not available: {e}")
    tree = tmp_path_factory.mktemp("vng") / "linux"
    subprocess.run(["cp", "-al", str(src.tree), str(tree)], check=True)
    yield tree
    import shutil

    from lab.backends import vng

    shutil.rmtree(vng.tree_out(tree.resolve()), ignore_errors=True)


def test_vng_build_keeps_lab_s_config_and_judges_the_tree(vng_tree, debian_kernel):
    from lab.backends import vng

    fair = vng_tree / "kernel" / "sched" / "fair.c"
    before = fair.stat().st_mtime_ns
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", "zen3-2s-mini", "--backend", "vng", "--kernel-tree", str(vng_tree)])
    wall = time.monotonic() - t0
    assert r.exit_code == 0, r.output[-3000:]
    runs = sorted(Path(os.environ["LAB_RUNS"]).glob("*-llc-spread-pinned-*"))
    res = json.loads((runs[-1] / "results.json").read_text())
    assert res["status"] == "PASS", res
    cfg = read_config(vng.tree_out(vng_tree.resolve()) / ".config")
    # What vng's minimal config would lose and every multi-LLC scenario needs.
    assert cfg.get("SCHED_MC") == "y" and cfg.get("NUMA") == "y" and cfg.get("FTRACE") == "y", cfg
    assert fair.stat().st_mtime_ns == before and not (vng_tree / ".config").exists()  # the tree is never written
    print(f"vng --build + run: {wall:.0f} s")
