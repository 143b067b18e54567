"""The developer's loop for real: a kernel tree outside lab, built out of tree with
lab-6.1's config, judged by llc-spread-pinned; then an edit to kernel/sched/fair.c,
an incremental rebuild and a new verdict.  The tree is never written by lab."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main

pytestmark = pytest.mark.build


@pytest.fixture(scope="module")
def dev_tree(tmp_path_factory):
    from lab.kernel import source

    try:
        src = source.resolve("debian:6.1")
    except Exception as e:  # noqa: BLE001 - any failure here means no source to test with
        pytest.skip(f"linux-source-6.1 not available: {e}")
    tree = tmp_path_factory.mktemp("dev") / "linux"
    # Hard links: instant, and lab must not write through them (it mirrors the tree).
    subprocess.run(["cp", "-al", str(src.tree), str(tree)], check=True)
    yield tree
    from lab import iterate

    iterate.forget_tree(tree, "x86_64")  # its mirror and objects: ~1.7 GB per tree


def run_tree(tree: Path) -> dict:
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", "zen3-2s-mini", "--kernel-tree", str(tree)])
    assert r.exit_code in (0, 1), r.output[-2000:]
    runs = sorted(Path(os.environ["LAB_RUNS"]).glob("*-llc-spread-pinned-*"))
    return json.loads((runs[-1] / "results.json").read_text())


def test_tree_edit_rebuild_verdict(dev_tree, debian_kernel):
    fair = dev_tree / "kernel" / "sched" / "fair.c"
    before = fair.stat()
    res = run_tree(dev_tree)
    assert res["status"] == "PASS", res
    pass_runs = set(Path(os.environ["LAB_RUNS"]).glob("*-llc-spread-pinned-*"))
    assert res["kernel_info"]["tree"] == str(dev_tree)
    assert fair.stat().st_mtime_ns == before.st_mtime_ns and not (dev_tree / ".config").exists()

    # Revert seed 000's fix in the developer's tree (a new file: keep the hard link intact).
    text = fair.read_text()
    old = "if (p->nr_cpus_allowed != NR_CPUS) {"
    assert old in text
    new = text.replace(old, "if (0 && p->nr_cpus_allowed != NR_CPUS) {", 1)
    tmp = fair.with_suffix(".new")
    tmp.write_text(new)
    os.replace(tmp, fair)
    res2 = run_tree(dev_tree)
    assert res2["kernel_info"]["id"] != res["kernel_info"]["id"]
    from lab.kernel import store

    # Only fair.c changed: the .config made and checked for the first build is kept, not
    # made and checked again (issue 32 item 7); the first build made its own.
    timings = store.get(res2["kernel_info"]["id"]).metadata["timings"]
    assert timings.get("config_kept") is True, timings
    pile = next(e for e in res2["expectations"] if e["name"] == "targets distinct (no pile-up)")
    assert pile["status"] == "FAIL" and pile["evidence"]

    # A typo in fair.c: the build fails with gcc's error, the log's path, and the verdict
    # that stands for this tree (the FAIL just above) and its run directory.
    broken = new.replace("if (0 && p->nr_cpus_allowed", "if (0 && p->nr_cpus_alowed", 1)
    before_runs = sorted(Path(os.environ["LAB_RUNS"]).glob("*-llc-spread-pinned-*"))
    tmp.write_text(broken)
    os.replace(tmp, fair)
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", "zen3-2s-mini", "--kernel-tree", str(dev_tree)])
    assert r.exit_code == 3, r.output[-2000:]
    first = next(ln for ln in r.output.splitlines() if ln.startswith("lab: error: make failed"))
    assert f"at {dev_tree.resolve()}/kernel/sched/fair.c:" in first and "error:" in first and "nr_cpus_alowed" in first, first
    assert Path(first.rsplit("full log: ", 1)[1]).is_file()
    assert "--- build errors ---" in r.output
    runs = sorted(Path(os.environ["LAB_RUNS"]).glob("*-llc-spread-pinned-*"))
    assert runs == before_runs  # no run for a tree that did not build
    assert "previous verdict for this tree kept: FAIL for llc-spread-pinned on zen3-2s-mini" in r.output
    # The standing verdict's evidence: one of the FAIL verdict's runs (side by side, the
    # majority's runs start in the same second), named by the saved verdict.
    kept = r.output.rsplit("; run dir ", 1)[1].split()[0]
    assert Path(kept) in set(runs) - pass_runs and json.loads((Path(kept) / "results.json").read_text())["status"] == "FAIL", kept
