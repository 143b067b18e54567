"""The plan record: VmOptions passed whole, plan.json written and read by VmPlan itself,
a rechecked run seeing the same types as a live one, and bad input exiting 2 in `lab run`."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import host as host_mod
from lab import runner, session, topology
from lab import scenario as sc
from lab.cli import main
from lab.errors import UserError
from lab.kernel.artifact import KernelArtifact
from lab.plan import KernelRef, VmOptions, VmPlan
from lab.render import qemu

HOST = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test host")
RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def _session(name: str | topology.Topology = "zen3-2s-mini", **opts) -> session.Session:
    t = topology.load(name) if isinstance(name, str) else name
    k = KernelArtifact(
        name="fake", arch=t.arch, image=Path("/nonexistent/bzImage"), release="6.1.0", modules=None,
        config=None, features=frozenset({"node_reclaim_distance_param"}), id="fake-1",
    )  # fmt: skip
    vm = VmOptions(kernel="fake", **opts)
    return session.Session(qemu.plan(t, HOST, vm, kernel_features=session.features(k), kernel=k.ref()), k)


@pytest.mark.parametrize("name", ["zen3-2s-mini", "kunpeng920-2s-mini", "numa4-96-mini"])
def test_plan_json_round_trip_is_the_same_plan(tmp_path, name):
    s = _session(name, append="quiet", bringup="boot")
    s.plan.write(tmp_path)
    back = VmPlan.read(tmp_path)
    assert back == s.plan  # every field, the topology, the kernel and the options
    assert isinstance(back.kernel, KernelRef) and back.options == VmOptions(kernel="fake", append="quiet", bringup="boot")


def test_older_plan_json_still_reads():
    plan = VmPlan.read(RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1")
    assert plan.topo.name == "zen3-2s-mini" and plan.kernel == KernelRef("lab-6.1", "60391fab261024167e4881e2a4642dc5", "6.1.192", "x86_64", "(recorded)")
    assert plan.guest_to_spec[:4] == (0, 16, 1, 17) and plan.numbering_mode == "translated"


def test_unreadable_plan_is_one_line(tmp_path):
    with pytest.raises(UserError, match="no plan.json"):
        VmPlan.read(tmp_path)
    (tmp_path / "plan.json").write_text('{"topology": "zen3-2s-mini"}')
    with pytest.raises(UserError, match=r"plan.json: not a plan lab can read \(no field 'guest_to_spec'\)"):
        VmPlan.read(tmp_path)


def test_recheck_gives_check_the_same_types_as_a_live_run(monkeypatch):
    seen = []
    real = sc.call_check

    def spy(s, r):
        seen.append((type(r.plan), type(r.kernel)))
        return real(s, r)

    monkeypatch.setattr(sc, "call_check", spy)
    runner.recheck(RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1")
    assert seen == [(VmPlan, KernelRef)]
    # What a live run hands check(): the same record (runner._result is shared).
    s = _session()
    r = runner._result(sc.load("llc-spread-pinned"), s.plan, Path("/nonexistent"), Path("/nonexistent"))
    assert (type(r.plan), type(r.kernel)) == (VmPlan, KernelRef)


def test_bad_input_in_lab_run_exits_2_and_keeps_the_run_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_RUNS", str(tmp_path))
    monkeypatch.setattr(session, "prepare", lambda topo, vm, **kw: _session(topo.name))

    def refuse(arch, tools, progress=None):
        raise UserError(f"cannot pack {', '.join(tools)} for {arch} guests yet")

    monkeypatch.setattr(runner, "tools_layer", refuse)
    r = CliRunner().invoke(main, ["run", "soft-affinity", "--topology", "xeon-2s22c-mini"])
    assert r.exit_code == 2, r.output
    assert "lab: error: cannot pack hackbench for x86_64 guests yet" in r.output and "Traceback" not in r.output
    (run,) = tmp_path.glob("*-soft-affinity-*")
    res = json.loads((run / "results.json").read_text())
    assert res["status"] == "ERROR" and "cannot pack hackbench" in res["message"]
    assert VmPlan.read(run).options.kernel == "fake"


def test_vm_options_reach_the_plan_whole(monkeypatch):
    got = []
    monkeypatch.setattr(session, "prepare", lambda topo, vm, **kw: got.append(vm) or _session(topo.name))
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--dry-run", "--tcg-threads", "multi", "--bringup", "boot",
                                  "--append", "quiet", "--cpu-model", "intel", "--accel", "tcg", "--kernel", "lab-6.1"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert got == [VmOptions(kernel="lab-6.1", accel="tcg", cpu_model="intel", tcg_threads="multi", bringup="boot", append="quiet")]


# ---- options turned back into a command line, in one place (issue 33 item 2) ----------------

_VALUES = {"kernel": "lab-6.1", "accel": "tcg", "cpu_model": "intel", "tcg_threads": "single", "bringup": "hotplug",
           "append": "loglevel=7 lpj=0", "qemu": "lab", "backend": "libvirt", "connect": "qemu+ssh://h/system",
           "scheduler": "scx_qmap:-s 20000 '$(x) y'"}  # fmt: skip


def test_every_option_round_trips_through_its_command_line():
    import dataclasses

    from lab.plan import VmOptions

    names = [f.name for f in dataclasses.fields(VmOptions)]
    assert sorted(names) == sorted(_VALUES), "a new option needs a value here"
    for name in names:  # each alone, then all at once
        o = VmOptions(**{name: _VALUES[name]})
        assert VmOptions.from_args(o.to_args()) == o, name
    every = VmOptions(**_VALUES)
    assert VmOptions.from_args(every.to_args()) == every
    assert VmOptions().to_args() == [] and VmOptions().to_args(always=("kernel",)) == ["--kernel", "debian"]
    assert VmOptions.from_args(["run", "x", "--qemu=lab", "--json"]) == VmOptions(qemu="lab")


def test_every_option_is_a_lab_run_option():
    """to_args() names options `lab run` has: a command file replays."""
    import dataclasses

    from lab.cli import main
    from lab.plan import VmOptions

    run = main.commands["run"]
    have = {o for p in run.params for o in p.opts}
    for f in dataclasses.fields(VmOptions):
        assert VmOptions.flag(f.name) in have, f.name


def test_matrix_cells_run_on_the_qemu_the_matrix_was_given():
    """`lab matrix --qemu lab` recorded qemu: lab and planned each cell with it, but ran
    the cells without --qemu (the default QEMU): the issue's reproduction."""
    from pathlib import Path

    import lab.matrix as mx
    from lab.plan import VmOptions

    m = mx.expand("llc-spread-pinned", "zen3-2s-mini", "debian", options=VmOptions(qemu="lab", append="x=1"))
    argv = mx.Runner(m, Path("x")).lab_run_argv(m.cells[0], "k", None)
    assert argv[argv.index("--qemu") + 1] == "lab" and argv[argv.index("--append") + 1] == "x=1"
    assert VmOptions.from_args(argv[4:]).qemu == "lab"


def test_options_round_trip_property():
    """Any value of any option (spaces, quotes, '=', a leading '-', the default itself)
    comes back from its command line and from its record (the bisect step's state)."""
    import dataclasses

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from lab.plan import VmOptions

    names = [f.name for f in dataclasses.fields(VmOptions)]
    value = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
    opts = st.builds(VmOptions, **{n: value for n in names})

    @settings(max_examples=300, deadline=None)
    @given(opts)
    def check(o):
        assert VmOptions.from_args(o.to_args()) == o
        assert VmOptions.from_args(["run", "x", *o.to_args(always=tuple(names)), "--json"]) == o
        assert VmOptions.from_dict(o.to_dict()) == o

    check()

