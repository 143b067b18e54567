"""The expected guest view: sched-domain trees against real machines' dumps, and
verify() against a guest snapshot recorded from a real boot."""

import json
from pathlib import Path

import pytest

from lab import cpulist, expect, host, sysfs, topology
from lab.plan import VmOptions
from lab.render import qemu

REF = Path(__file__).resolve().parents[3] / "shared" / "reference" / "machines"
GUEST = Path(__file__).resolve().parents[1] / "fixtures" / "captures" / "epyc7551-8n-mini-guest.tar.gz"
HOST = host.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")


def spans(doms):
    return [(d.name, cpulist.format(d.span)) for d in doms]


def test_kunpeng_cpu64_matches_the_lkml_dump():
    p = REF / "kunpeng-920-2s-128c-lkml.json"
    if not p.exists():
        pytest.skip("shared/reference not beside the checkout")
    ref = json.loads(p.read_text())["sched_domains_other"]["cpu64_2023_dump"]
    t = topology.load("kunpeng920-2s")
    got = expect.expected_domains(t, reclaim_distance=30, cluster_level=True, llc="spec")[64]
    assert spans(got) == [(d["name"], d["span"]) for d in ref]


def test_kunpeng_2021_masks_without_cls():
    p = REF / "kunpeng-920-2s-128c-lkml.json"
    if not p.exists():
        pytest.skip("shared/reference not beside the checkout")
    masks = json.loads(p.read_text())["sched_domains_other"]["schedstat_2021_masks"]
    t = topology.load("kunpeng920-2s")
    doms = expect.expected_domains(t, reclaim_distance=30, cluster_level=False, llc="spec")
    for cpu, want in masks.items():
        assert [cpulist.format(d.span) for d in doms[int(cpu[3:])]] == want


def test_zen3_tree_and_vendor_flags():
    t = topology.load("zen3-2s")
    amd = expect.expected_domains(t, reclaim_distance=32, cluster_level=True)[0]
    assert spans(amd) == [("SMT", "0,128"), ("MC", "0-7,128-135"), ("DIE", "0-63,128-191"), ("NUMA", "0-255")]
    assert "SD_BALANCE_FORK" in amd[-1].flags
    intel = expect.expected_domains(t, reclaim_distance=30, cluster_level=True)[0]
    assert "SD_BALANCE_FORK" not in intel[-1].flags and "SD_NUMA" in intel[-1].flags


def test_numa_in_package_has_no_die_level():
    t = topology.load("epyc7551-8n")
    d = expect.expected_domains(t, reclaim_distance=32, cluster_level=True)[0]
    assert spans(d) == [("SMT", "0,64"), ("MC", "0-3,64-67"), ("NODE", "0-7,64-71"), ("NUMA", "0-31,64-95"), ("NUMA", "0-127")]


def guest_view():
    return sysfs.read_capture(GUEST)


def test_verify_recorded_guest_passes_with_named_vendor_effect():
    # The recorded guest was booted with the Intel model (--cpu-model intel's view).
    t = topology.load("epyc7551-8n-mini")
    p = qemu.plan(t, HOST, VmOptions(cpu_model="intel"))
    vd = expect.verify(t, p, guest_view(), cluster_level=True)
    assert vd.ok() and not vd.ok(strict=True)
    known = {c.name: c for c in vd.checks if c.status == "known"}
    assert "vendor effect" in known["NUMA (distance 32) flags"].known
    # The Intel model's CPUID 4 gives each thread its own L1; the EPYC shares it per core.
    for name in ("L1d shared by SMT threads", "L1i shared by SMT threads"):
        assert known[name].actual == "one per CPU" and "CPUID leaf 4" in known[name].known
    # The guest's vendor is not the real machine's: named, with why (issue 34).
    assert "chosen with --cpu-model" in known["CPU vendor"].known and known["CPU vendor"].actual == "intel"
    assert set(known) == {
        "NUMA (distance 32) flags", "L1d shared by SMT threads", "L1i shared by SMT threads", "dies", "CPU vendor"
    }


def test_verify_catches_a_wrong_guest():
    t = topology.load("epyc7551-8n-mini")
    p = qemu.plan(t, HOST, VmOptions(cpu_model="intel"))
    v = guest_view()
    v.nodes[0], v.nodes[1] = v.nodes[1], v.nodes[0]  # the guest put node 0's CPUs in node 1
    v.distances[0] = (10, 20, 32, 32)
    vd = expect.verify(t, p, v, cluster_level=True)
    bad = {c.name for c in vd.checks if c.status == "FAIL"}
    assert {"node 0 CPUs", "node 1 CPUs", "node 0 distances"} <= bad
    assert not vd.ok()


def test_verify_catches_wrong_spec_against_the_same_guest():
    """The recorded guest was epyc7551-8n-mini; judged as zen3-2s-mini it must fail."""
    t = topology.load("zen3-2s-mini")
    p = qemu.plan(t, HOST)
    vd = expect.verify(t, p, guest_view(), cluster_level=True)
    assert not vd.ok()
