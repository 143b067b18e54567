"""Every form a capture comes in (issue 34, item 1): lists or masks for each file lab reads,
cross-checked when both are there; no node/ directory; no distances; offline CPUs and
holes in the ids.  The captures are synthetic (tests/unit/_synth_sysfs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import importer, sysfs, topology
from lab.cli import main
from lab.errors import UserError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _synth_sysfs as ss  # noqa: E402


def imported(root: Path, name: str = "m"):
    text, notes = importer.view_to_spec(sysfs.read_capture(root), name, "cap")
    return topology.loads(text, default_name=name), notes


def model(t: topology.Topology):
    """What an import keeps, without where it came from."""
    return (t.cpus, t.node_ids, t.distances, t.snc, t.per_thread, t.has_clusters, t.shape)


def machine() -> ss.Machine:
    # 2 sockets, 2 nodes each, 2 LLCs per node, SMT numbered +16: every group kind differs.
    return ss.build(sockets=2, nodes_per_socket=2, llcs_per_node=2, cores_per_cluster=2, threads=2, numbering="smt-last")


@pytest.mark.parametrize("kind", ss.KINDS)
@pytest.mark.parametrize("form", ["mask", "both"])
def test_masks_import_like_lists(tmp_path, kind, form):
    m = machine()
    ref, ref_notes = imported(ss.write(ss.files(m, "list"), tmp_path / "lists"))
    t, notes = imported(ss.write(ss.files(m, {kind: form}), tmp_path / "x"))
    assert model(t) == model(ref) and notes == ref_notes


def test_masks_only_everywhere(tmp_path):
    """An old kernel's capture: no *_list file at all, node cpumap only."""
    m = machine()
    f = ss.files(m, "mask")
    assert not any(p.endswith(("_list", "cpulist")) for p in f)
    ref, _ = imported(ss.write(ss.files(m, "list"), tmp_path / "lists"))
    t, _ = imported(ss.write(f, tmp_path / "masks"))
    assert model(t) == model(ref)
    assert t.group_of("core", 3) == (3, 19) and t.node_cpus(1) == (4, 5, 6, 7, 20, 21, 22, 23)


def test_mask_wider_than_the_machine(tmp_path):
    """Masks are as wide as nr_cpu_ids, often past the last CPU: leading zero words."""
    m = ss.build(cores_per_cluster=4)
    f = ss.files(m, "mask")
    f = {p: (("00000000," * 3) + v if p.endswith(("siblings", "cpumap", "shared_cpu_map")) else v) for p, v in f.items()}
    t, _ = imported(ss.write(f, tmp_path))
    assert t.n_cpus == 4 and t.n_nodes == 1


@pytest.mark.parametrize(
    "path, name",
    [
        ("sys/devices/system/cpu/cpu5/topology/thread_siblings", "thread_siblings_list"),
        ("sys/devices/system/cpu/cpu5/topology/core_siblings", "core_siblings_list"),
        ("sys/devices/system/cpu/cpu5/cache/index3/shared_cpu_map", "shared_cpu_list"),
        ("sys/devices/system/node/node1/cpumap", "cpulist"),
    ],
)
def test_mask_and_list_that_disagree_is_one_line_naming_the_file(tmp_path, path, name):
    m = machine()
    f = ss.files(m, "both")
    f[path] = ss.fmt_mask([5, 6], 32) + "\n"
    root = ss.write(f, tmp_path)
    with pytest.raises(UserError) as e:
        sysfs.read_capture(root)
    msg = str(e.value)
    assert "\n" not in msg and path in msg and name in msg and "5-6" in msg, msg
    r = CliRunner().invoke(main, ["topo", "import", str(root), "-o", str(tmp_path / "y.toml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and path in r.output, r.output


def test_bad_mask_is_one_line(tmp_path):
    f = ss.files(machine(), "mask")
    f["sys/devices/system/cpu/cpu2/topology/thread_siblings"] = "zz,00000004\n"
    with pytest.raises(UserError) as e:
        sysfs.read_capture(ss.write(f, tmp_path))
    assert "cpu2/topology/thread_siblings" in str(e.value) and "hex" in str(e.value) and "\n" not in str(e.value)


def test_no_node_directory_is_one_node(tmp_path):
    """A kernel without CONFIG_NUMA (a laptop's): no sys/devices/system/node at all."""
    m = ss.build(cores_per_cluster=4, threads=2)
    t, notes = imported(ss.write(ss.files(m, no_node_dir=True), tmp_path))
    assert t.node_ids == (0,) and t.distances == ((10,),) and t.n_cpus == 8
    assert any("one node (a machine without NUMA)" in n for n in notes)


def test_one_node(tmp_path):
    m = ss.build(cores_per_cluster=4, threads=2, numbering="smt-last")
    t, notes = imported(ss.write(ss.files(m, "mask"), tmp_path))
    assert t.node_ids == (0,) and t.n_cpus == 8 and notes == []


def test_no_distance_files_take_the_kernels_defaults(tmp_path):
    m = machine()
    t, notes = imported(ss.write(ss.files(m, no_distances=True), tmp_path))
    assert t.distances == tuple(tuple(10 if i == j else 20 for j in range(4)) for i in range(4))
    assert any("no node*/distance files" in n and "10 local, 20 remote" in n for n in notes)


def test_some_distance_files_missing_is_a_truncated_capture(tmp_path):
    f = ss.files(machine())
    del f["sys/devices/system/node/node2/distance"]
    with pytest.raises(UserError, match="node2/distance"):
        sysfs.read_capture(ss.write(f, tmp_path))


def test_offline_cpus_and_holes_are_named(tmp_path):
    # Ids 0-7 and 16-23 (a hole at 8-15, as firmware with disabled cores numbers them),
    # CPU 17 offline.
    ids = [*range(8), *range(16, 24)]
    m = ss.build(sockets=2, cores_per_cluster=4, threads=2, numbering=ids)
    m.offline = [17]
    t, notes = imported(ss.write(ss.files(m, "mask"), tmp_path))
    assert t.cpu_ids == tuple(i for i in ids if i != 17)
    assert any("CPUs 17 were offline" in n for n in notes)
    assert any("CPU ids 8-15 do not exist" in n for n in notes)


def test_cpu_in_two_nodes_names_both_files(tmp_path):
    f = ss.files(machine(), "mask")
    f["sys/devices/system/node/node2/cpumap"] = ss.fmt_mask([1, 8, 9, 10, 11, 24, 25, 26, 27], 32) + "\n"
    r = CliRunner().invoke(main, ["topo", "import", str(ss.write(f, tmp_path / "c")), "-o", str(tmp_path / "y.toml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "node0/cpulist and node2/cpulist both list CPU 1" in r.output


def test_hwloc_gather_topology_style_tarball(tmp_path):
    """hwloc-gather-topology's tarball: one top folder, bzip2, masks only, and files lab
    does not read (proc/self/..., the lstopo output) beside them."""
    import io
    import tarfile

    m = machine()
    f = {f"myhost/{p}": v for p, v in ss.files(m, "mask").items()}
    f["myhost/proc/self/status"] = "Name: hwloc-gather\n"
    f["myhost.output"] = "Machine (16GB)\n"
    out = tmp_path / "myhost.tar.bz2"
    with tarfile.open(out, "w:bz2") as tf:
        for name, text in f.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    t, _ = imported(out)
    ref, _ = imported(ss.write(ss.files(m), tmp_path / "lists"))
    assert model(t) == model(ref)


def _with_sizes(f: dict[str, str], size_of) -> dict[str, str]:
    """The capture with cache/indexN/size added: size_of(cpu, index) -> text."""
    import re as _re

    out = dict(f)
    for path in f:
        m = _re.match(r"(.*/cpu(\d+)/cache/index(\d+))/level$", path)
        if m:
            out[f"{m.group(1)}/size"] = size_of(int(m.group(2)), int(m.group(3))) + "\n"
    return out


def test_cache_sizes_that_differ_between_cpus_are_named(tmp_path):
    """Issue 34 item 3: sockets with different L3 sizes import (the shape is regular) and
    the difference is named, since the guest's L3 has one size; uniform sizes say nothing."""
    m = ss.build(sockets=2, nodes_per_socket=1, llcs_per_node=1, cores_per_cluster=2, threads=1, numbering="linear")
    per_socket = {c.id: c.package_id for c in m.cpus}
    same = _with_sizes(ss.files(m, "list"), lambda cpu, i: ["48K", "32K", "1280K", "49152K"][i])
    _, notes = imported(ss.write(same, tmp_path / "same"))
    assert not [n for n in notes if "sizes differ" in n]
    mixed = _with_sizes(ss.files(m, "list"), lambda cpu, i: ["48K", "32K", "1280K", "49152K" if per_socket[cpu] == 0 else "32M"][i])
    _, notes = imported(ss.write(mixed, tmp_path / "mixed"))
    s0 = ",".join(str(c.id) for c in m.cpus if c.package_id == 0)
    (note,) = [n for n in notes if "sizes differ" in n]
    assert note.startswith("L3 sizes differ between CPUs (32768K on CPUs ") and "49152K on CPUs" in note, note
    assert "not reproduced" in note and s0


def test_a_cache_size_lab_cannot_read_is_not_a_refusal(tmp_path):
    m = machine()
    f = _with_sizes(ss.files(m, "list"), lambda cpu, i: "garbage" if cpu == 0 else "32K")
    t, notes = imported(ss.write(f, tmp_path / "x"))
    assert t.n_cpus == len(m.cpus) and not [n for n in notes if "sizes differ" in n]
