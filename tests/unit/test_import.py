"""lab topo capture / import: real captures (a guest's sysfs, this host) and edited variants."""

import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import importer, sysfs, topology
from lab.cli import main
from lab.errors import UserError

CAPS = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
GUEST = CAPS / "epyc7551-8n-mini-guest.tar.gz"  # recorded from a real guest of epyc7551-8n-mini


def unpack(tmp_path) -> Path:
    with tarfile.open(GUEST) as tf:
        tf.extractall(tmp_path, filter="data")
    return tmp_path / "epyc-guest"


def imported(src, name="m"):
    text, notes = importer.view_to_spec(sysfs.read_capture(src), name, str(src))
    return topology.loads(text, default_name=name), notes


def test_guest_capture_keeps_groups_and_distances():
    t, notes = imported(GUEST)
    # The guest had the Intel model, whose CPUID 4 gives each SMT thread its own L1.
    assert notes == ["L1d is private to each SMT thread here", "L1i is private to each SMT thread here"]
    assert t.per_thread == ("L1d", "L1i")
    assert [t.node_cpus(n) for n in t.node_ids] == [tuple(range(i, i + 8)) for i in range(0, 32, 8)]
    assert t.distances == ((10, 16, 32, 32), (16, 10, 32, 32), (32, 32, 10, 16), (32, 32, 16, 10))
    assert t.group_of("llc", 5) == (4, 5, 6, 7)
    assert t.group_of("core", 6) == (6, 7)
    assert t.vendor == "intel" and t.shape is not None
    # The same shape as the spec the guest was booted from.
    src = topology.load("epyc7551-8n-mini")
    assert t.shape == src.shape and t.numbering == "linear"


def test_directory_with_nul_bytes_offline_cpu_and_sparse_nodes(tmp_path):
    root = unpack(tmp_path)
    cpu = root / "sys/devices/system/cpu"
    # Real sysfs reads can carry trailing NULs.
    p = cpu / "cpu0/topology/thread_siblings_list"
    p.write_bytes(p.read_bytes().rstrip(b"\n") + b"\x00\n")
    # CPU 31 offline: its topology directory is gone and online says so.
    shutil.rmtree(cpu / "cpu31")
    (cpu / "online").write_text("0-30\n")
    node = root / "sys/devices/system/node"
    (node / "node3/cpulist").write_text("24-30\n")
    # Sparse node ids: 0, 1, 4, 6.
    (node / "node2").rename(node / "node4")
    (node / "node3").rename(node / "node6")
    t, notes = imported(root)
    assert t.node_ids == (0, 1, 4, 6)
    assert t.node_cpus(6) == tuple(range(24, 31))
    assert t.distance(0, 6) == 32 and t.distance(4, 6) == 16
    assert 31 not in t.cpu_ids and t.group_of("core", 30) == (30,)
    assert any("offline" in n for n in notes)
    assert t.shape is None  # one core lost a thread: irregular, still a valid spec


@pytest.mark.parametrize(
    "remove, words",
    [
        # Every form of the SMT siblings gone (lists and masks): nothing says which CPUs share a core.
        (
            "sys/devices/system/cpu/cpu3/topology/thread_siblings_list+core_cpus_list+thread_siblings+core_cpus",
            "thread_siblings_list",
        ),
        ("sys/devices/system/node/node1/distance", "node1/distance"),
        ("sys/devices/system/cpu", "no CPU topology files"),
    ],
)
def test_missing_files_one_line(tmp_path, remove, words):
    root = unpack(tmp_path)
    for part in remove.split("+"):
        p = root / part if "/" in part else root / remove.split("+")[0].rsplit("/", 1)[0] / part
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
    with pytest.raises(UserError) as e:
        sysfs.read_capture(root)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_capture_this_host_and_import(tmp_path):
    out = tmp_path / "host.tar.gz"
    n = sysfs.capture(out)
    assert n > 0
    t, _ = imported(out, "host")
    assert t.n_cpus >= 1 and t.n_nodes >= 1


def test_recorded_ci_host_capture():
    t, _ = imported(CAPS / "ci-host.tar.gz", "ci")
    assert t.n_cpus == 2 and t.n_nodes == 1


def test_cli_import_with_mini(tmp_path):
    r = CliRunner().invoke(main, ["topo", "import", str(GUEST), "-o", str(tmp_path / "box.toml"), "--mini"])
    assert r.exit_code == 0, r.output
    full = topology.load(tmp_path / "box.toml")
    mini = topology.load(tmp_path / "box-mini.toml")
    assert mini.n_cpus <= 32 and mini.levels == full.levels
    # A second import does not overwrite.
    r = CliRunner().invoke(main, ["topo", "import", str(GUEST), "-o", str(tmp_path / "box.toml")])
    assert r.exit_code == 2 and "exists" in r.output


def test_mini_of_full_catalog_machines_keeps_shape():
    for name in ("zen3-2s", "epyc7551-8n", "kunpeng920-2s", "xeon-2s22c", "icelake-2s"):
        big = topology.load(name)
        try:
            text = importer.mini(big, f"{name}-m")
        except UserError as e:
            assert name == "epyc7551-8n" and "cannot keep the shape" in str(e)
            continue
        m = topology.loads(text)
        assert m.n_cpus <= 32 and m.levels == big.levels and m.distances == big.distances
        assert m.numbering == big.numbering


def test_cli_bad_capture_is_one_line(tmp_path):
    bad = tmp_path / "x.tar.gz"
    bad.write_bytes(b"not a tarball")
    r = CliRunner().invoke(main, ["topo", "import", str(bad), "-o", str(tmp_path / "y.toml")])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "not a readable tarball" in r.output
