"""The fidelity stamp (lab.report.fidelity): exact text on recorded runs and on synthetic
records, the host conditions lab.runner records, and replay's comparison."""

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab import host, topology
from lab.report import bundle, document, fidelity, render, replay
from lab.topology.model import Provenance

RUNS = Path(__file__).parent.parent / "fixtures" / "runs"
TOPOS = Path(__file__).parent.parent.parent / "topologies"


def _stamp(name: str) -> dict[str, str]:
    return document.load_run(RUNS / name, stored=True).fidelity.to_dict()


def test_vendor_effect_explains_debian_pile_up():
    assert _stamp("llc-spread-pinned-zen3-2s-mini-debian") == {
        "machine": "in shape: a smaller zen3-2s (its levels, distances and SMT kept, fewer CPUs); the guest does not "
        "reproduce: L1d shared by SMT threads, L1i shared by SMT threads, vendor effect, dies, CPU vendor",
        "run": "tcg, QEMU 7.2.22, CPU model Skylake-Server (intel) for an amd machine; host load and steal not recorded",
        "judgement": "conditions could explain the FAIL: the vendor effect: the guest's intel model sets "
        "node_reclaim_distance=30, the real amd machine 32, so domains at distance 32 balance forks on one and not the other",
    }


def test_old_fixture_without_host_load_cannot_rule_out_tcg():
    s = _stamp("llc-spread-pinned-zen3-2s-mini-lab-6.1")
    assert s["machine"].endswith(
        "the guest does not reproduce: L1d shared by SMT threads, L1i shared by SMT threads, dies, CPU vendor"
    )
    assert s["judgement"] == ("cannot rule out the conditions: TCG and a timing-sensitive failure "
                              "(no balancing needed after the fork (no sched_migrate_task)), host load not recorded")  # fmt: skip


def test_arm_and_pass():
    assert _stamp("cluster-wakeup-kunpeng920-2s-mini-debian")["run"] == (
        "tcg, QEMU 7.2.22, CPU model cortex-a72 (arm); host load and steal not recorded"
    )
    assert (
        _stamp("soft-affinity-xeon-2s22c-mini-debian")["judgement"]
        == "conditions unlikely to explain the PASS"
    )


def _topo(name: str, **prov) -> topology.Topology:
    t = topology.load(TOPOS / f"{name}.toml")
    return dataclasses.replace(t, provenance=Provenance(**prov))


def test_machine_kinds():
    assert (
        fidelity.machine(_topo("zen3-2s", sources=("lab topo capture: /caps/box1",)))
        == "exact: imported from a capture (/caps/box1)"
    )
    nearest = _topo("zen3-2s", sources=("lab topo capture: /caps/box1",),
                    notes="nearest buildable machine, differs from the capture: clusters per LLC 3/4: 4")  # fmt: skip
    assert fidelity.machine(nearest, [("dies", "why")]) == (
        "deviations: the nearest buildable machine to the capture (clusters per LLC 3/4: 4); the guest does not reproduce: dies"
    )
    assert (
        fidelity.machine(topology.load(TOPOS / "zen3-2s.toml"))
        == "described: written from its sources, no capture to compare with"
    )


PLAN = {
    "accel": "tcg",
    "qemu_version": [10, 0, 2],
    "cpu_model": "Skylake-Server,-pcid",
    "cpu_vendor": "intel",
}
TIMED_FAIL = [{"name": "wakeup latency", "status": "FAIL", "figures": {"p99_latency_us": 900}},
              {"name": "placement", "status": "PASS", "figures": {"cpus": 4}}]  # fmt: skip


@pytest.mark.parametrize(
    "timing, status, want_run, want_judgement",
    [
        ({"host_cpus": 2, "host_load_start": 5.2, "host_load_end": 6.01, "host_steal_pct": 0.0}, "FAIL",
         "tcg, QEMU 10.0.2, CPU model Skylake-Server (intel); host 2 cores, load 5.2 at start, 6.01 at end, steal 0 %",
         "conditions could explain the FAIL: TCG and a timing-sensitive failure (wakeup latency) with the host's load 6.01 above its 2 cores"),
        ({"host_cpus": 8, "host_load_start": 1.0, "host_load_end": 1.5, "host_steal_pct": 0.2}, "FAIL",
         "tcg, QEMU 10.0.2, CPU model Skylake-Server (intel); host 8 cores, load 1 at start, 1.5 at end, steal 0.2 %",
         "conditions unlikely to explain the FAIL"),
        ({"host_cpus": 8, "host_load_start": 1.0, "host_load_end": 1.5, "host_steal_pct": 25.0}, "FAIL",
         "tcg, QEMU 10.0.2, CPU model Skylake-Server (intel); host 8 cores, load 1 at start, 1.5 at end, steal 25 %",
         "conditions could explain the FAIL: the hypervisor stole 25 % of the host's CPU time"),
        ({"host_cpus": 2, "host_load_start": 9.0, "host_load_end": 9.0, "host_steal_pct": 0.0}, "PASS",
         "tcg, QEMU 10.0.2, CPU model Skylake-Server (intel); host 2 cores, load 9 at start, 9 at end, steal 0 %",
         "conditions unlikely to explain the PASS"),
        ({"wall_s": 3.0}, "FAIL", "tcg, QEMU 10.0.2, CPU model Skylake-Server (intel); host load and steal not recorded",
         "cannot rule out the conditions: TCG and a timing-sensitive failure (wakeup latency), host load not recorded"),
    ],
)  # fmt: skip
def test_synthetic_conditions(timing, status, want_run, want_judgement):
    t = topology.load(TOPOS / "icelake-2s.toml")
    s = fidelity.stamp(
        t,
        PLAN,
        {
            "status": status,
            "timing": timing,
            "expectations": TIMED_FAIL if status == "FAIL" else [],
        },
    )
    assert (s.run, s.judgement) == (want_run, want_judgement)


def test_kvm_is_not_blamed_for_timing():
    t = topology.load(TOPOS / "icelake-2s.toml")
    timing = {"host_cpus": 2, "host_load_start": 5.0, "host_load_end": 5.0, "host_steal_pct": 1.0}
    s = fidelity.stamp(
        t,
        {**PLAN, "accel": "kvm"},
        {"status": "FAIL", "timing": timing, "expectations": TIMED_FAIL},
    )
    assert s.judgement == "conditions unlikely to explain the FAIL"


def test_stamp_heads_every_format():
    doc = document.load_run(RUNS / "llc-spread-pinned-zen3-2s-mini-debian", stored=True)
    txt = render.text(doc).splitlines()
    assert txt[2:5] == ["Fidelity:", "  machine: in shape: a smaller zen3-2s (its levels, distances and SMT kept,",
                        "           fewer CPUs); the guest does not reproduce: L1d shared by SMT threads,"]  # fmt: skip
    assert all(len(ln) <= render.WIDTH for ln in txt)
    assert (
        render.markdown(doc)
        .splitlines()[2]
        .startswith("- **Fidelity, machine**: in shape: a smaller zen3-2s")
    )
    page = render.html(doc)
    assert page.index('<section class="fidelity">') < page.index("<h2>Run</h2>")


def test_host_run_conditions():
    stat0 = "cpu  100 0 50 800 10 0 0 40 0 0\n"
    stat1 = "cpu  200 0 100 900 20 0 0 90 0 0\n"
    a = host.load_sample(lambda: stat0, lambda: "3.50 2.00 1.00 1/100 42\n")
    b = host.load_sample(lambda: stat1, lambda: "4.25 2.00 1.00 1/100 42\n")
    # 310 ticks (busy 200 with steal, idle 100, iowait 10): 50 stolen
    assert host.run_conditions(a, b, 2) == {"host_cpus": 2, "host_load_start": 3.5, "host_load_end": 4.25,
                                            "host_steal_pct": 16.1, "host_busy_pct": 64.5}  # fmt: skip
    assert host.run_conditions(None, None, 4) == {"host_cpus": 4}
    assert host.load_sample(lambda: "", lambda: "") is None


def test_replay_differences():
    was = {"accel": "tcg", "qemu_version": [7, 2, 22], "cpu_model": "Skylake-Server,-pcid"}
    assert fidelity.replay_differences(was, 2, dict(was), 2) == [
        "fidelity: the same conditions as the bundle's (tcg, QEMU 7.2.22, CPU model Skylake-Server, 2 host cores)"
    ]
    now = {"accel": "kvm", "qemu_version": [10, 0, 2], "cpu_model": "host"}
    assert fidelity.replay_differences(was, None, now, 8) == [
        "fidelity: the conditions differ from the bundle's: accelerator tcg -> kvm; QEMU 7.2.22 -> 10.0.2; "
        "CPU model Skylake-Server -> host; host cores not recorded -> 8"
    ]


def test_bundle_carries_the_stamp_and_replay_checks_it(tmp_path):
    run = RUNS / "llc-spread-pinned-zen3-2s-mini-debian"
    m = bundle.make(run, tmp_path / "b.tar.gz")
    assert m["fidelity"]["judgement"].startswith(
        "conditions could explain the FAIL: the vendor effect"
    )
    b = bundle.extract(tmp_path / "b.tar.gz", tmp_path / "open")
    assert json.loads((b.root / "host.json").read_text())["host_cpus"] >= 1
    plan = json.loads((run / "plan.json").read_text())
    now = SimpleNamespace(accel="tcg", qemu_version=(10, 0, 2), cpu_model="Skylake-Server,-pcid")
    notes = replay.fidelity_notes(b, plan, {"timing": {"host_cpus": 64}}, now)
    assert notes[0].startswith(
        "fidelity: the conditions differ from the bundle's: QEMU 7.2.22 -> 10.0.2; host cores 64 -> "
    )
    assert notes[1].startswith("the bundle's fidelity: conditions could explain the FAIL")
