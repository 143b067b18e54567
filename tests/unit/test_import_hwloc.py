"""hwloc's descriptions (issue 34, item 1): `lstopo --of xml` (2.x and 1.x) imports like the
sysfs capture of the same machine; `lab topo synth` makes a spec of a synthetic string."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import hwloc, importer, sysfs, topology
from lab.cli import main
from lab.errors import UserError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _synth_sysfs as ss  # noqa: E402


def imported(path: Path, name: str = "m"):
    text, notes = importer.view_to_spec(sysfs.read_capture(path), name, "cap")
    return topology.loads(text, default_name=name), notes


def model(t: topology.Topology):
    return (t.cpus, t.node_ids, t.distances, t.snc, t.per_thread, t.has_clusters, t.shape, t.vendor, t.family)


@pytest.mark.parametrize(
    "kw",
    [
        dict(sockets=2, nodes_per_socket=2, llcs_per_node=2, cores_per_cluster=2, threads=2, numbering="smt-last"),
        dict(sockets=2, nodes_per_socket=2, cores_per_cluster=3, threads=2, numbering="node-interleaved", node_ids=[0, 3, 8, 9]),
        dict(sockets=1, cores_per_cluster=4, threads=2, numbering="random", seed=7),
    ],
)
def test_lstopo_xml_imports_like_the_sysfs_capture(tmp_path, kw):
    m = ss.build(**kw)
    ref, _ = imported(ss.write(ss.files(m), tmp_path / "sysfs"))
    xml = tmp_path / "m.xml"
    xml.write_text(ss.hwloc_xml(m))
    t, _ = imported(xml)
    assert model(t) == model(ref)


HWLOC1 = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc.dtd">
<topology>
  <object type="Machine" os_index="0" cpuset="0x000000ff">
    <object type="NUMANode" os_index="0" cpuset="0x0000000f" local_memory="1000">
      <object type="Socket" os_index="0" cpuset="0x0000000f">
        <info name="CPUVendor" value="AuthenticAMD"/><info name="CPUFamilyNumber" value="16"/>
        <info name="CPUModel" value="AMD Opteron(tm) Processor 2427"/>
        <object type="Cache" cpuset="0x0000000f" cache_size="6291456" depth="3" cache_type="0">
          {cores0}
        </object>
      </object>
    </object>
    <object type="NUMANode" os_index="1" cpuset="0x000000f0" local_memory="1000">
      <object type="Socket" os_index="1" cpuset="0x000000f0">
        <object type="Cache" cpuset="0x000000f0" cache_size="6291456" depth="3" cache_type="0">
          {cores1}
        </object>
      </object>
    </object>
    <distances nbobjs="2" relative_depth="1" latency_base="10.000000">
      <latency value="1.000000"/><latency value="2.000000"/><latency value="2.000000"/><latency value="1.000000"/>
    </distances>
  </object>
</topology>
"""


def _v1_cores(first: int) -> str:
    return "".join(
        f'<object type="Cache" cpuset="0x{1 << c:08x}" depth="2" cache_type="0"><object type="Core" os_index="{c - first}" '
        f'cpuset="0x{1 << c:08x}"><object type="PU" os_index="{c}" cpuset="0x{1 << c:08x}"/></object></object>'
        for c in range(first, first + 4)
    )


def test_hwloc1_xml_with_relative_latencies(tmp_path):
    """hwloc 1.x: NUMANode above Socket, generic Cache objects by depth, distances as
    latencies relative to a base, in the NUMANodes' logical order."""
    p = tmp_path / "old.xml"
    p.write_text(HWLOC1.format(cores0=_v1_cores(0), cores1=_v1_cores(4)))
    t, _ = imported(p)
    assert t.node_ids == (0, 1) and t.distances == ((10, 20), (20, 10))
    assert t.groups("socket") == ((0, 1, 2, 3), (4, 5, 6, 7)) and t.groups("llc") == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert t.vendor == "amd" and t.family == 16 and t.threads_per_core == 1


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda x: x.replace('os_index="5" cpuset="0x00000020"', 'os_index="5" cpuset="0xzz"'), "PU 5: cpuset '0xzz' is not hex"),
        (lambda x: x.replace("</topology>", ""), "not hwloc XML"),
        (lambda x: x.replace('<latency value="2.000000"/>', "", 1), ""),
        (lambda x: x.replace('os_index="6" cpuset', 'os_index="5" cpuset'), "PU os_index 5 appears twice"),
    ],
)
def test_bad_hwloc_xml_is_one_line(tmp_path, edit, words):
    p = tmp_path / "bad.xml"
    p.write_text(edit(HWLOC1.format(cores0=_v1_cores(0), cores1=_v1_cores(4))))
    if not words:  # a truncated distance list: no distances, the kernel's defaults and a note
        t, notes = imported(p)
        assert t.distances == ((10, 20), (20, 10)) and any("no node*/distance files" in n for n in notes)
        return
    r = CliRunner().invoke(main, ["topo", "import", str(p), "-o", str(tmp_path / "y.toml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and words in r.output and str(p) in r.output, r.output


def test_xml_entity_expansion_is_refused(tmp_path):
    p = tmp_path / "lol.xml"
    p.write_text(
        '<?xml version="1.0"?><!DOCTYPE topology [<!ENTITY a "aaaaaaaaaa">'
        + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
        + ']><topology><object type="Machine" cpuset="&i;"/></topology>'
    )
    with pytest.raises(UserError) as e:
        sysfs.read_capture(p)
    assert "\n" not in str(e.value) and str(p) in str(e.value)


@pytest.mark.parametrize(
    "text, sockets, nps, spn, llcs, clusters, cores, threads",
    [
        ("pack:2 numa:2 l3:4 core:8 pu:2", 2, 2, 1, 4, 1, 8, 2),
        ("numa:2 pack:2 core:4 pu:1", 4, 1, 2, 1, 1, 4, 1),
        ("Package:1 L3Cache:1 L2Cache:4 Core:2 PU:1", 1, 1, 1, 1, 4, 2, 1),
        ("pack:1 l3:2 l2:4 l1:1 core:1 pu:2", 1, 1, 1, 2, 1, 4, 2),
        ("machine:1 pack:2 pu:4", 2, 1, 1, 1, 1, 4, 1),
    ],
)
def test_synth_strings(text, sockets, nps, spn, llcs, clusters, cores, threads):
    spec, _ = hwloc.synth_spec(text, "s")
    t = topology.loads(spec)
    s = t.shape
    assert s is not None
    assert (s.sockets, s.nodes_per_socket, s.sockets_per_node, s.llcs_per_node) == (sockets, nps, spn, llcs)
    assert (s.clusters_per_llc, s.cores_per_cluster, s.threads_per_core) == (clusters, cores, threads)


def test_cli_synth(tmp_path):
    out = tmp_path / "hw.toml"
    r = CliRunner().invoke(main, ["topo", "synth", "pack:2 numa:2 l3:4 core:8 pu:2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    t = topology.load(out)
    assert t.n_cpus == 256 and t.n_nodes == 4 and t.distances[0] == (10, 20, 20, 20)
    assert "kernel's defaults" in r.output


@pytest.mark.parametrize(
    "text, words",
    [
        ("pack:2 core:4", "the last level must be pu:N"),
        ("pack:2 blade:3 pu:1", "'blade:3': expected type:count"),
        ("pack:0 pu:1", "the count must be a whole number from 1"),
        ("core:2 pack:2 pu:1", "levels out of order"),
        ("pack:2 die:2 core:2 pu:1", "no die level"),
        ("pack:64 core:64 pu:2", "more than the 4096"),
    ],
)
def test_bad_synth_strings_are_one_line(tmp_path, text, words):
    r = CliRunner().invoke(main, ["topo", "synth", text, "-o", str(tmp_path / "x.toml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and words in r.output, r.output
