"""lab.levels.LEVELS is the one list of topology levels: the model's Cpu fields, the
spec's [groups] keys and the -smp words all come from it (the renderers' goldens in
test_render*.py stay byte-identical with the table driving them)."""

import dataclasses

from lab import levels, topology


def test_every_grouped_level_is_a_cpu_field():
    fields = [f.name for f in dataclasses.fields(topology.Cpu)]
    assert [x.attr for x in levels.GROUPED] == [f for f in fields if f not in ("id", "index", "thread")][::-1]


def test_groups_form_keys_come_from_the_table():
    from lab.topology import spec

    assert spec.GROUP_KEYS == {"nodes", "sockets", "llcs", "clusters", "cores", "numbering"}


def test_topology_levels_follow_the_table():
    t = topology.load("zen3-2s-mini")
    assert t.levels == ("core", "llc", "node", "socket", "machine")
    for name in levels.NAMES:
        assert sum(len(g) for g in t.groups(name)) == t.n_cpus


def test_smp_words_in_qemu_order():
    assert levels.smp("x86_64", 32, {"socket": 2, "llc": 4, "cluster": 2, "core": 2}, 2) == (
        "32,sockets=2,dies=4,modules=2,cores=2,threads=2"
    )
    assert levels.smp("arm64", 8, {"socket": 1, "cluster": 2, "core": 4}, 1) == "8,sockets=1,clusters=2,cores=4,threads=1"


def test_scenario_counts_by_plural():
    from lab import scenario

    t = topology.load("zen3-2s-mini")
    assert scenario._count(t, "sockets") == 2
    assert scenario._count(t, "nodes") == t.n_nodes
    assert scenario._count(t, "llcs_per_socket") == 4
    assert scenario._count(t, "clusters_per_llc") == 1
    assert scenario._count(t, "threads_per_core") == 2
