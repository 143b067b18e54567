"""What a scenario needs and lab can tell before booting is a SKIP with the reason,
before any boot (and, for the topology and the tools, before any kernel is built or
fetched): a topology requirement, a tool that cannot be packed for the topology's arch,
a kernel config symbol the kernel's config lacks."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import host as host_mod
from lab import runner, session, topology
from lab import scenario as sc
from lab.backends import qemu as backend
from lab.cli import main
from lab.kernel.artifact import KernelArtifact
from lab.plan import VmOptions
from lab.render import qemu

HOST = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test host")


def _session(name: str, config: Path | None) -> session.Session:
    t = topology.load(name)
    k = KernelArtifact(name="fake", arch=t.arch, image=Path("/nonexistent/Image"), release="6.1.0-fake", modules=None,
                       config=config, features=frozenset(), id="fake-1")  # fmt: skip
    return session.Session(qemu.plan(t, HOST, VmOptions(kernel="fake"), kernel_features=frozenset(), kernel=k.ref()), k)


@pytest.fixture
def no_boot(monkeypatch):
    monkeypatch.setattr(session, "prepare", lambda *a, **k: pytest.fail("a kernel was resolved for a scenario that cannot run"))
    monkeypatch.setattr(backend, "boot", lambda *a, **k: pytest.fail("booted a scenario that cannot run"))


def test_a_tool_that_cannot_be_packed_for_the_arch_skips_before_anything(no_boot, tmp_path, monkeypatch):
    # An arm64 guest gets Debian's arm64 packages: here lab's apt knows no rt-tests for it.
    from lab.image import debian_pkgs

    monkeypatch.setattr(debian_pkgs, "ensure_lists", lambda arch, refresh=False: None)
    monkeypatch.setattr(debian_pkgs, "apt_show", lambda arch: lambda names: {})
    debian_pkgs.resolve.cache_clear()
    r = CliRunner().invoke(main, ["run", "soft-affinity", "--topology", "kunpeng920-2s-mini"])
    debian_pkgs.resolve.cache_clear()
    assert r.exit_code == 0, r.output
    assert r.output == (
        f"SKIP soft-affinity on kunpeng920-2s-mini: no Debian arm64 package for hackbench (rt-tests) "
        f"in {debian_pkgs.suite()}: cannot be packed for arm64 guests\n"
    )
    assert not (tmp_path / "runs").exists()  # no run directory: nothing ran
    r = CliRunner().invoke(main, ["run", "soft-affinity", "--topology", "kunpeng920-2s-mini", "--json"])
    assert json.loads(r.stdout)["status"] == "SKIP"


def test_a_tool_missing_on_the_host_skips_naming_the_package(no_boot, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    from lab.image import tools

    monkeypatch.setattr(tools.shutil, "which", lambda *a, **k: None)
    why = sc.load("soft-affinity").skip_reason(topology.load("xeon-2s22c-mini"))
    assert why is not None and "host tool 'hackbench' not found" in why and "rt-tests" in why


def test_topology_and_tools_reasons_are_all_given():
    why = sc.load("llc-spread-pinned").skip_reason(topology.load("xeon-2s22c-mini"))
    assert why == "the topology lacks at least 2 LLCs per socket, or one per socket with the sockets interleaved (the seed's Ice Lake)"
    assert sc.load("llc-spread-pinned").skip_reason(topology.load("icelake-2s-mini")) is None
    assert sc.load("llc-spread-pinned").skip_reason(topology.load("zen3-2s-mini")) is None


def _config(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config"
    p.write_text(text)
    return p


def test_a_kernel_without_the_config_a_scenario_needs_skips_before_booting(monkeypatch, tmp_path):
    monkeypatch.setattr(backend, "boot", lambda *a, **k: pytest.fail("booted a kernel that cannot show the effect"))
    s = sc.load("cluster-wakeup")
    sess = _session("kunpeng920-2s-mini", _config(tmp_path, "CONFIG_SMP=y\n# CONFIG_SCHED_CLUSTER is not set\n"))
    o = runner.run_once(s, sess)
    assert o.status == "SKIP" and o.run_dir is None
    assert o.message == (
        "kernel fake (6.1.0-fake) lacks CONFIG_SCHED_CLUSTER=y (the cluster sched-domain level; "
        "--kernel lab-6.1-arm64 has it)"
    )
    assert runner.EXIT[o.status] == 0


def test_a_kernel_with_it_or_of_unknown_config_is_not_skipped(tmp_path):
    s = sc.load("cluster-wakeup")
    t = topology.load("kunpeng920-2s-mini")
    have = _session("kunpeng920-2s-mini", _config(tmp_path, "CONFIG_SCHED_CLUSTER=y\n")).kernel
    unknown = _session("kunpeng920-2s-mini", None).kernel  # a bare image: lab cannot tell, so it boots
    assert s.skip_reason(t, have) is None and s.skip_reason(t, unknown) is None


def test_numa_scenarios_need_numa_balancing(tmp_path):
    lacking = _session("numa4-96-mini", _config(tmp_path, "CONFIG_NUMA=y\n")).kernel
    for name in ("numa-balancing", "preferred-node-migrations"):
        why = sc.load(name).skip_reason(topology.load(sc.load(name).topologies[0]), lacking)
        assert why is not None and "CONFIG_NUMA_BALANCING=y" in why


def test_numa_balancing_needs_vmstat_event_counters_numa_locality_does_not(tmp_path):
    """numa02 is judged by /proc/vmstat's hinting-fault counters: a kernel without
    VM_EVENT_COUNTERS (lab's tinyconfig builds) is a SKIP naming it, not a FAIL at 0
    faults; numa-locality judges from the trace and memprobe's samples, so it runs."""
    lacking = _session("numa4-96-micro", _config(tmp_path, "CONFIG_NUMA=y\nCONFIG_NUMA_BALANCING=y\n")).kernel
    t = topology.load("numa4-96-micro")
    assert sc.load("numa-balancing").skip_reason(t, lacking) == (
        "kernel fake (6.1.0-fake) lacks CONFIG_VM_EVENT_COUNTERS=y (/proc/vmstat's NUMA hinting-fault counters, "
        "which numa02 is judged by; Debian's kernels have it, lab's tinyconfig builds do not)"
    )
    assert sc.load("numa-locality").skip_reason(t, lacking) is None
    have = _session("numa4-96-micro", _config(tmp_path, "CONFIG_NUMA_BALANCING=y\nCONFIG_VM_EVENT_COUNTERS=y\n")).kernel
    assert sc.load("numa-balancing").skip_reason(t, have) is None


def test_scenarios_table_lists_kernel_needs_and_tools():
    r = CliRunner().invoke(main, ["scenarios"], terminal_width=400)
    assert r.exit_code == 0
    assert "CONFIG_SCHED_CLUSTER=y" in r.output and "tools: hackbench" in r.output


def _kernel(kid: str, features=(), metadata=None) -> KernelArtifact:
    return KernelArtifact(name=kid.split("@")[0], arch="x86_64", image=Path("/nonexistent/bzImage"), release="6.1.0-fake",
                          modules=None, config=None, features=frozenset(features), id=kid, metadata=metadata or {})  # fmt: skip


def test_soft_affinity_skips_before_booting_on_a_kernel_lab_knows_lacks_it(monkeypatch):
    """Seed 004's claim is soft affinity: Debian's kernels (the RFC never merged) and any
    kernel lab built without the feature or the patch cannot carry it; SKIP, no boot."""
    monkeypatch.setattr(backend, "boot", lambda *a, **k: pytest.fail("booted a kernel without soft affinity"))
    s = sc.load("soft-affinity")
    t = topology.load("xeon-2s22c-mini")
    debian = _kernel("debian-6.1.0-56-amd64")
    assert s.skip_reason(t, debian) == (
        f"kernel {debian.name} (6.1.0-fake) lacks soft affinity (/proc/<pid>/preferred_cpus, what seed 004 claims; "
        "--kernel lab-6.1-soft-affinity has it)"
    )
    built = {"inputs": {"patches": [{"name": "lab-node-reclaim-distance-param.patch", "sha256": "x", "revert": False}]}}
    assert "lacks soft affinity" in s.skip_reason(t, _kernel("a" * 64, metadata=built))
    reverted = {"inputs": {"patches": [{"name": "sched-soft-affinity.patch", "sha256": "x", "revert": True}]}}
    assert "lacks soft affinity" in s.skip_reason(t, _kernel("b" * 64, metadata=reverted))
    # through run_once: a SKIP with the reason, exit 0, no run directory
    sess = _session("xeon-2s22c-mini", None)
    sess = session.Session(sess.plan, _kernel("debian-6.1.0-56-amd64"))
    o = runner.run_once(s, sess)
    assert (o.status, o.run_dir, runner.EXIT[o.status]) == ("SKIP", None, 0) and "lacks soft affinity" in o.message


def test_soft_affinity_boots_a_kernel_with_it_or_an_image_lab_cannot_tell():
    s = sc.load("soft-affinity")
    t = topology.load("xeon-2s22c-mini")
    assert s.skip_reason(t, _kernel("c" * 64, features=["soft_affinity", "node_reclaim_distance_param"])) is None
    patched = {"inputs": {"patches": [{"name": "sched-soft-affinity.patch", "sha256": "x", "revert": False}]}}
    assert s.skip_reason(t, _kernel("d" * 64, metadata=patched)) is None  # a one-off --patch build
    # an image file lab did not build: the guest's probe decides (INCONCLUSIVE without it)
    assert s.skip_reason(t, _kernel("file-0123456789abcdef", metadata={"source_path": "/x/bzImage"})) is None
