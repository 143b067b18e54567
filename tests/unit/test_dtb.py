"""arm64 device-tree editing against golden output (the input is the tree QEMU 7.2
generated for kunpeng920-2s-mini, dumped with -machine dumpdtb= and decompiled).

Regenerate after an intended change: LAB_REGEN=1 .venv/bin/pytest tests/unit/test_dtb.py
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab import topology
from lab.render import dtb

HERE = Path(__file__).resolve().parents[1]
QEMU_DTS = (HERE / "fixtures" / "dts" / "kunpeng920-2s-mini.qemu72.dts").read_text()
GOLDEN = HERE / "golden" / "dts"


def test_golden_kunpeng_mini():
    got = dtb.edit(QEMU_DTS, topology.load("kunpeng920-2s-mini"))
    path = GOLDEN / "kunpeng920-2s-mini.dts"
    if os.environ.get("LAB_REGEN") == "1":
        path.write_text(got)
    assert got == path.read_text()


def nodes(text):
    """name -> properties for every node with a phandle."""
    out = {}
    for m in re.finditer(r"^\t+([\w@,-]+) \{\n(.*?)^\t+\};", text, re.M | re.S):
        props = dict(re.findall(r"^\t+([\w,-]+) = <(0x[0-9a-f]+|\d+)>;", m.group(2), re.M))
        out[m.group(1)] = props
    return out


def test_cache_hierarchy_follows_the_spec():
    t = topology.load("kunpeng920-2s-mini")
    n = nodes(dtb.edit(QEMU_DTS, t))
    by_ph = {v["phandle"]: k for k, v in n.items() if "phandle" in v}
    for c in t.cpus:
        cpu = n[f"cpu@{c.index}"]
        l2 = by_ph[cpu["next-level-cache"]]
        l3 = by_ph[n[l2]["next-level-cache"]]
        assert l2 == f"l2-cache{c.core}" and l3 == f"l3-cache{c.llc}"
        assert n[l3]["cache-level"] == "3" and "next-level-cache" not in n[l3]
    phs = [v["phandle"] for v in n.values() if "phandle" in v]
    assert len(phs) == len(set(phs))


def test_cpu_nodes_follow_the_spec_numbering():
    spec = topology.loads(
        """
arch = "arm64"
[cpu]
vendor = "hisilicon"
[topology]
sockets = 2
nodes_per_socket = 2
clusters_per_llc = 2
cores_per_cluster = 4
numbering = "explicit"
cpus = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
        1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31]
[numa]
distances = [[10, 12, 20, 22], [12, 10, 22, 24], [20, 22, 10, 12], [22, 24, 12, 10]]
"""
    )
    out = dtb.edit(QEMU_DTS, spec)
    order = [int(x) for x in re.findall(r"^\t\tcpu@([0-9]+) \{", out, re.M)]
    # DT position p holds the CPU whose spec id is p: QEMU's cpu index i has id cpus[i].
    ids = [spec.by_index(i).id for i in order]
    assert ids == list(range(32))


@pytest.mark.skipif(shutil.which("dtc") is None, reason="dtc missing: apt-get install device-tree-compiler")
def test_edited_tree_compiles(tmp_path):
    src = tmp_path / "x.dts"
    src.write_text(dtb.edit(QEMU_DTS, topology.load("kunpeng920-2s-mini")))
    subprocess.run(["dtc", "-q", "-I", "dts", "-O", "dtb", "-o", str(tmp_path / "x.dtb"), str(src)], check=True)


def test_wrong_cpu_count_is_refused():
    with pytest.raises(ValueError, match="32 cpu nodes, the topology 128"):
        dtb.edit(QEMU_DTS, topology.load("kunpeng920-2s"))
