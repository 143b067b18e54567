"""The topology model: catalog figures against the reference machines, numbering, bad input."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import cpulist, topology
from lab.errors import UserError

REF = Path(__file__).resolve().parents[3] / "shared" / "reference" / "machines"


def ref(name):
    p = REF / name
    if not p.exists():
        pytest.skip(f"reference data {p} not present (../shared is beside the checkout in CI)")
    return json.loads(p.read_text())


def nodes_of(t):
    return {n: cpulist.format(t.node_cpus(n)) for n in t.node_ids}


def test_catalog_loads_and_has_minis():
    names = topology.catalog_names()
    for full in ("zen3-2s", "kunpeng920-2s", "numa4-96", "epyc7551-8n", "xeon-2s22c", "icelake-2s"):
        assert full in names and f"{full}-mini" in names


@pytest.mark.parametrize("full", ["zen3-2s", "kunpeng920-2s", "numa4-96", "epyc7551-8n", "xeon-2s22c", "icelake-2s"])
def test_mini_keeps_the_shape(full):
    big, mini = topology.load(full), topology.load(f"{full}-mini")
    assert mini.n_cpus <= 32
    assert mini.arch == big.arch and mini.vendor == big.vendor and mini.numbering == big.numbering
    assert mini.levels == big.levels
    assert mini.smt == big.smt and mini.has_clusters == big.has_clusters
    assert {d for r in mini.distances for d in r} == {d for r in big.distances for d in r}
    assert mini.node_reclaim_distance == big.node_reclaim_distance
    # At least two of every grouping, as many sockets as the real machine.
    assert len(mini.groups("socket")) == len(big.groups("socket"))
    for level in ("node", "llc", "core"):
        assert len(mini.groups(level)) >= 2
    if big.smt:
        assert all(len(g) == big.threads_per_core for g in mini.groups("core"))
    if big.has_clusters:
        assert all(len(g) >= 2 for g in mini.groups("cluster"))
    # Same count of LLCs per node when a node has several (the LLC level must survive).
    if len(big.groups("llc")) > big.n_nodes:
        assert len(mini.groups("llc")) > mini.n_nodes
    assert mini.provenance.derived_from == full


def test_zen3_matches_reference():
    r = ref("amd-epyc-7763-zen3-2s.json")
    t = topology.load("zen3-2s")
    assert nodes_of(t) == {n["id"]: n["cpus"] for n in r["numa_nodes"]}
    assert [list(x) for x in t.distances] == r["distances"]
    assert cpulist.format(t.group_of("llc", 0)) == r["llc_groups_example"][0]
    assert cpulist.format(t.group_of("llc", 8)) == "8-15,136-143"
    assert t.group_of("core", 8) == (8, 136)
    assert t.node_reclaim_distance == 32


def test_kunpeng_matches_reference():
    r = ref("kunpeng-920-2s-128c-lkml.json")
    t = topology.load("kunpeng920-2s")
    assert nodes_of(t) == {n["id"]: n["cpus"] for n in r["numa_nodes"]}
    assert [list(x) for x in t.distances] == r["distances"]
    assert [cpulist.format(g) for g in t.groups("cluster") if g[0] >= 64 and g[0] < 96] == r["cluster_groups_example"]
    assert [cpulist.format(g) for g in t.groups("llc")] == r["llc_groups_example"]
    assert not t.smt


def test_epyc_naples_matches_reference():
    r = ref("amd-epyc-naples-2s-8node.json")
    t = topology.load("epyc7551-8n")
    assert nodes_of(t) == {n["id"]: n["cpus"] for n in r["numa_nodes"]}
    assert [list(x) for x in t.distances] == r["distances"]
    assert cpulist.format(t.group_of("llc", 0)) == "0-3,64-67"
    assert t.common_level(0, 64) == "core"
    assert t.common_level(0, 4) == "node"
    assert t.common_level(0, 8) == "socket"
    assert t.common_level(0, 32) == "machine"


def test_icelake_even_odd():
    r = ref("intel-icelake-2s-32c-evenodd.json")
    t = topology.load("icelake-2s")
    assert t.node_cpus(0) == tuple(range(0, 128, 2))
    assert t.node_cpus(1) == tuple(range(1, 128, 2))
    assert t.group_of("core", 8) == (8, 72)  # cpu8's L2 shared_cpu_list = 8,72
    assert "8,72" in r["cpu_numbering"]


def test_numa4_96_seed_001():
    t = topology.load("numa4-96")
    assert [cpulist.format(t.node_cpus(n)) for n in t.node_ids] == ["0-23", "24-47", "48-71", "72-95"]
    assert t.distances[0] == (10, 20, 40, 40) and t.distances[3] == (40, 40, 20, 10)


def test_xeon_22c():
    t = topology.load("xeon-2s22c")
    assert t.n_cpus == 88 and len(t.groups("llc")) == 2 and t.group_of("core", 0) == (0, 44)


@settings(deadline=None, max_examples=60)  # the box may be busy booting guests
@given(
    sockets=st.integers(1, 3),
    nps=st.integers(1, 3),
    llcs=st.integers(1, 3),
    clusters=st.integers(1, 3),
    cores=st.integers(1, 4),
    threads=st.integers(1, 2),
    numbering=st.sampled_from(["linear", "smt-last", "socket-interleaved"]),
)
def test_numbering_is_a_permutation_and_groups_nest(sockets, nps, llcs, clusters, cores, threads, numbering):
    n_nodes = sockets * nps
    dist = [[10 if i == j else 20 for j in range(n_nodes)] for i in range(n_nodes)]
    t = topology.from_dict(
        {
            "cpu": {"vendor": "intel"},
            "topology": {
                "sockets": sockets,
                "nodes_per_socket": nps,
                "llcs_per_node": llcs,
                "clusters_per_llc": clusters,
                "cores_per_cluster": cores,
                "threads_per_core": threads,
                "numbering": numbering,
            },
            "numa": {"distances": dist},
        }
    )
    assert sorted(c.id for c in t.cpus) == list(range(t.n_cpus))
    for c in t.cpus:
        core = set(t.group_of("core", c.id))
        llc = set(t.group_of("llc", c.id))
        node = set(t.group_of("node", c.id))
        sock = set(t.group_of("socket", c.id))
        assert core <= llc <= node <= sock
        assert len(core) == threads
    # The groups form of the same machine loads to the same CPUs.
    groups = {
        "cpu": {"vendor": "intel"},
        "groups": {
            "nodes": {str(n): cpulist.format(t.node_cpus(n)) for n in t.node_ids},
            "sockets": [cpulist.format(g) for g in t.groups("socket")],
            "llcs": [cpulist.format(g) for g in t.groups("llc")],
            "cores": [cpulist.format(g) for g in t.groups("core")],
        },
        "numa": {"distances": dist},
    }
    g = topology.from_dict(groups)
    for c in t.cpus:
        assert set(g.group_of("llc", c.id)) == set(t.group_of("llc", c.id))
        assert g.node_of(c.id) == t.node_of(c.id)
    if g.shape is not None:
        assert g.numbering in ("linear", "smt-last", "socket-interleaved", "explicit")


def test_smt_last_and_interleaved_formulas():
    t = topology.loads(
        """
[cpu]
vendor = "intel"
[topology]
sockets = 2
cores_per_cluster = 4
threads_per_core = 2
numbering = "socket-interleaved"
[numa]
distances = [[10, 20], [20, 10]]
"""
    )
    assert t.node_cpus(0) == (0, 2, 4, 6, 8, 10, 12, 14)
    assert t.group_of("core", 2) == (2, 10)


# ---- bad input: one line naming file and field --------------------------------------------

GOOD = """
[cpu]
vendor = "intel"
[topology]
sockets = 2
cores_per_cluster = 2
threads_per_core = 2
[numa]
distances = [[10, 20], [20, 10]]
"""


@pytest.mark.parametrize(
    "edit, field, words",
    [
        (("distances = [[10, 20], [20, 10]]", "distances = [[10, 20, 30], [20, 10, 30]]"), "numa.distances[0]", "2 entries"),
        (("distances = [[10, 20], [20, 10]]", "distances = [[10, 20]]"), "numa.distances", "2 x 2"),
        (("distances = [[10, 20], [20, 10]]", "distances = [[11, 20], [20, 10]]"), "numa.distances[0][0]", "diagonal"),
        (("distances = [[10, 20], [20, 10]]", "distances = [[10, 10], [20, 10]]"), "numa.distances[0][1]", "more than 10"),
        (("sockets = 2", "sockets = 0"), "topology.sockets", "at least 1"),
        (("sockets = 2", "sockets = 2\nsockts = 2"), "topology.sockts", "did you mean 'sockets'"),
        (("vendor = \"intel\"", "vendor = \"intl\""), "cpu.vendor", "must be one of"),
        (("threads_per_core = 2", "threads_per_core = 2\nnumbering = \"zigzag\""), "topology.numbering", "must be one of"),
        (("[numa]", "[numaa]\n[numa]"), "numaa", "unknown key"),
    ],
)
def test_bad_specs(tmp_path, edit, field, words):
    p = tmp_path / "bad.toml"
    p.write_text(GOOD.replace(*edit))
    with pytest.raises(topology.SpecError) as e:
        topology.load(p)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{p}: {field}") or f": {field}:" in msg, msg
    assert words in msg


GROUPS = """
[cpu]
vendor = "intel"
[groups]
nodes = {{ "0" = "{n0}", "1" = "{n1}" }}
sockets = ["0-3", "4-7"]
llcs = {llcs}
cores = ["0-1", "2-3", "4-5", "6-7"]
[numa]
distances = [[10, 20], [20, 10]]
"""


@pytest.mark.parametrize(
    "n0, n1, llcs, field, words",
    [
        ("0-4", "4-7", '["0-3", "4-7"]', "groups.nodes", "CPU 4 is in both"),
        ("0-2", "4-7", '["0-3", "4-7"]', "groups.sockets", "is in no node"),
        ("0-3", "4-7", '["0-5", "6-7"]', "groups.llcs[0]", "straddles"),
        ("0-3", "4-7", '["0-3"]', "groups.llcs", "in no group"),
    ],
)
def test_bad_groups(tmp_path, n0, n1, llcs, field, words):
    p = tmp_path / "g.toml"
    p.write_text(GROUPS.format(n0=n0, n1=n1, llcs=llcs))
    with pytest.raises(topology.SpecError) as e:
        topology.load(p)
    assert f": {field}" in str(e.value) and words in str(e.value), str(e.value)


def test_unknown_name_suggests_nearest():
    with pytest.raises(UserError, match="did you mean zen3-2s-mini"):
        topology.load("zen3-2s-mimi")


def test_toml_syntax_error_names_file(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text("[cpu\n")
    with pytest.raises(topology.SpecError, match=r"x.toml: TOML syntax"):
        topology.load(p)
