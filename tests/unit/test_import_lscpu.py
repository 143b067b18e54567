"""`lscpu -e` tables as a capture form (issue 34): the same view the sysfs importer builds,
and bad tables refused in one line naming the line and the column."""

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

LSCPU = Path(__file__).resolve().parents[1] / "fixtures" / "lscpu"
XEON = LSCPU / "xeon-gold-6130-2s.txt"
LAPTOP = LSCPU / "i7-1165g7-laptop.txt"


def spec_of(path: Path, name: str = "m") -> tuple[topology.Topology, list[str]]:
    view = sysfs.read_capture(path)
    text, notes = importer.view_to_spec(view, name, str(path))
    return topology.loads(text, default_name=name), notes


def test_two_socket_smt_box():
    t, notes = spec_of(XEON)
    assert t.n_cpus == 64 and t.node_ids == (0, 1) and t.smt
    assert t.node_cpus(0) == (*range(0, 16), *range(32, 48))
    assert t.group_of("core", 5) == (5, 37)
    assert t.groups("socket") == ((*range(0, 16), *range(32, 48)), (*range(16, 32), *range(48, 64)))
    assert t.groups("llc") == t.groups("socket")  # one L3 per socket
    assert t.numbering == "linear" or t.shape is not None
    assert t.distances == ((10, 20), (20, 10))
    assert any("no CPU vendor" in n for n in notes) and any("distance" in n for n in notes), notes


def test_same_view_as_the_sysfs_capture_of_the_same_machine(tmp_path):
    """The Xeon's table and a sysfs capture of that machine (written by the synthetic
    writer the property test uses) import to the same groups."""
    m = ss.build(sockets=2, nodes_per_socket=1, cores_per_cluster=16, threads=2, numbering="smt-last")
    cap = ss.write(ss.files(m, "list"), tmp_path / "sysfs")
    a, _ = spec_of(XEON)
    b, _ = spec_of(cap)
    for level in ("core", "llc", "node", "socket"):
        assert a.groups(level) == b.groups(level), level
    assert a.numbering == b.numbering and a.shape == b.shape


def test_one_node_laptop_with_and_without_a_node_column(tmp_path):
    t, _ = spec_of(LAPTOP)
    assert t.n_cpus == 8 and t.node_ids == (0,) and t.group_of("core", 1) == (1, 5)
    assert t.numbering == "smt-last"
    # A kernel without NUMA: lscpu -e prints no NODE column.
    lines = [line.split() for line in LAPTOP.read_text().splitlines()]
    no_node = tmp_path / "no-node.txt"
    no_node.write_text("\n".join(" ".join(c for i, c in enumerate(row) if i != 1) for row in lines) + "\n")
    u, notes = spec_of(no_node)
    assert u.groups("core") == t.groups("core") and u.node_ids == (0,)
    assert any("one node" in n for n in notes), notes


def test_offline_cpu_and_extra_columns(tmp_path):
    text = LAPTOP.read_text().splitlines()
    text[-1] = "  7    -      -    - -:-:-:-           no 4700.0000 400.0000 -"
    p = tmp_path / "off.txt"
    p.write_text("\n".join(text) + "\n")
    t, notes = spec_of(p)
    assert 7 not in t.cpu_ids and t.shape is None  # core 3 lost a thread: irregular
    assert any("CPUs 7 were offline" in n for n in notes), notes
    # -e=CPU,SOCKET,CORE,CLUSTER: the cluster lists
    q = tmp_path / "cl.txt"
    q.write_text("CPU SOCKET CORE CLUSTER\n" + "".join(f"{c} 0 {c} {c // 4}\n" for c in range(8)))
    view = sysfs.read_capture(q)
    assert view.cpus[5].siblings("cluster") == (4, 5, 6, 7)


def test_import_cli_takes_lscpu(tmp_path):
    out = tmp_path / "xeon.toml"
    r = CliRunner().invoke(main, ["topo", "import", str(XEON), "-o", str(out), "--mini"])
    assert r.exit_code == 0, r.output
    assert "note: from `lscpu -e`" in r.output
    assert topology.load(out).n_cpus == 64 and topology.load(tmp_path / "xeon-mini.toml").n_cpus <= 32


BAD = [
    ("CPU NODE SOCKET CORE\n0 0 0 0\n1 0 0 x\n", "line 3, column CORE: 'x' is not a whole number"),
    ("CPU NODE SOCKET CORE\n0 0 0 0\n0 0 0 1\n", "line 3, column CPU: CPU 0 is listed twice (line 2 too)"),
    ("CPU NODE SOCKET CORE\n0 0 0\n", "line 2, column CORE: 3 values for the header's 4 columns"),
    ("CPU NODE SOCKET CORE L1d:L1i:L2\n0 0 0 0 0:0\n", "line 2, column L1d:L1i:L2: '0:0' has 2 cache ids for the header's 3"),
    ("CPU NODE SOCKET CORE L1d:L1i\n0 0 0 0 0:q\n", "line 2, column L1d:L1i (L1i): 'q' is not a whole number"),
    ("CPU NODE SOCKET CORE\n5000 0 0 0\n", "line 2, column CPU: 5000 is out of range (0 to 4095)"),
    ("CPU NODE SOCKET CORE\n0 2000 0 0\n", "line 2, column NODE: 2000 is out of range (0 to 1023)"),
    ("CPU NODE SOCKET CORE ONLINE\n0 0 0 0 maybe\n", "line 2, column ONLINE: 'maybe' is not yes or no"),
    ("CPU NODE SOCKET CORE ONLINE\n0 0 - 0 yes\n", "line 2, column SOCKET: '-' for online CPU 0"),
    ("CPU NODE CORE\n0 0 0\n", "line 1: no SOCKET column"),
    ("CPU NODE SOCKET CORE\n", "an `lscpu -e` header with no CPU lines under it"),
    ("CPU NODE SOCKET CORE\n0 0 0 0\n1 0 0 0 7\n", "line 3, column 5 (past the last, CORE): 5 values"),
    ("CPU SOCKET CORE\n0 0 0\n1 0 1\n2 1 0\n", "node"),  # 2 sockets, no NODE: imported as one node
]


@pytest.mark.parametrize("text,want", BAD)
def test_bad_tables_are_one_line(tmp_path, text, want):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    if want == "node":  # not bad: one node holding both sockets
        t, _ = spec_of(p)
        assert t.node_ids == (0,) and len(t.groups("socket")) == 2
        return
    with pytest.raises(UserError) as e:
        spec_of(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: ") and want in msg and "\n" not in msg, msg
    r = CliRunner().invoke(main, ["topo", "import", str(p), "-o", str(tmp_path / "x.toml")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and want in r.stderr, r.output
