"""lab domains: the guest's sched-domain tree from recorded runs' snapshots
(tests/fixtures/runs), printed and diffed, exact; bad input in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import domains
from lab.cli import main

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
ZEN3_LAB = "llc-spread-pinned-zen3-2s-mini-lab-6.1"
ZEN3_DEBIAN = "llc-spread-pinned-zen3-2s-mini-debian"

RENDER = """\
sched domains of llc-spread-pinned-zen3-2s-mini-lab-6.1
zen3-2s-mini, kernel lab-6.1 (6.1.192); 32 CPUs with domains; CPU ids as
  zen3-2s-mini numbers them

domain0 SMT: 16 spans of 2 CPUs
  spans: 0,16 1,17 2,18 3,19 4,20 5,21 6,22 7,23 8,24 9,25 10,26 11,27 12,28
         13,29 14,30 15,31
  flags: SD_BALANCE_NEWIDLE SD_BALANCE_EXEC SD_BALANCE_FORK SD_WAKE_AFFINE
         SD_SHARE_CPUCAPACITY SD_SHARE_PKG_RESOURCES SD_PREFER_SIBLING

domain1 MC: 8 spans of 4 CPUs
  spans: 0-1,16-17 2-3,18-19 4-5,20-21 6-7,22-23 8-9,24-25 10-11,26-27
         12-13,28-29 14-15,30-31
  flags: SD_BALANCE_NEWIDLE SD_BALANCE_EXEC SD_BALANCE_FORK SD_WAKE_AFFINE
         SD_SHARE_PKG_RESOURCES SD_PREFER_SIBLING

domain2 DIE: 2 spans of 16 CPUs
  spans: 0-7,16-23 8-15,24-31
  flags: SD_BALANCE_NEWIDLE SD_BALANCE_EXEC SD_BALANCE_FORK SD_WAKE_AFFINE
         SD_PREFER_SIBLING

domain3 NUMA: 1 span of 32 CPUs
  spans: 0-31
  flags: SD_BALANCE_NEWIDLE SD_BALANCE_EXEC SD_BALANCE_FORK SD_WAKE_AFFINE
         SD_SERIALIZE SD_OVERLAP SD_NUMA
"""

DIFF = """\
A: llc-spread-pinned-zen3-2s-mini-lab-6.1
   zen3-2s-mini, kernel lab-6.1 (6.1.192); CPU ids as zen3-2s-mini numbers them
B: llc-spread-pinned-zen3-2s-mini-debian
   zen3-2s-mini, kernel debian (6.1.0-56-amd64); CPU ids as zen3-2s-mini numbers
     them

domain0 SMT: the same (16 spans of 2 CPUs)

domain1 MC: the same (8 spans of 4 CPUs)

domain2 DIE: the same (2 spans of 16 CPUs)

domain3 NUMA:
  flags on CPUs 0-31: only A SD_BALANCE_EXEC SD_BALANCE_FORK SD_WAKE_AFFINE

1 difference(s)
"""


@pytest.fixture
def runs(monkeypatch):
    monkeypatch.chdir(RUNS)  # run directories named relatively: the output is the same anywhere


def lab(*args: str):
    return CliRunner().invoke(main, ["domains", *args])


def test_the_tree_of_a_recorded_run(runs):
    r = lab(ZEN3_LAB)
    assert r.exit_code == 0, r.output
    assert r.stdout == RENDER
    for line in r.stdout.splitlines():
        assert line.isascii() and len(line) <= 80


def test_two_kernels_on_one_machine_diffed(runs):
    """Both recorded under the Intel CPU model: lab-6.1 is given zen3's
    node_reclaim_distance=32 and keeps BALANCE_FORK/EXEC and WAKE_AFFINE at the NUMA
    level; Debian's 6.1 has no such knob and drops them (the vendor effect): the only
    difference."""
    r = lab(ZEN3_LAB, ZEN3_DEBIAN)
    assert r.exit_code == 0, r.output
    assert r.stdout == DIFF
    text, n = domains.diff(domains.read(Path(ZEN3_LAB)), domains.read(Path(ZEN3_LAB)))
    assert n == 0 and text.endswith("domain3 NUMA: the same (1 span of 32 CPUs)\n\nno differences\n")


def test_two_machines_on_one_kernel_diffed(runs):
    text, n = domains.diff(domains.read(Path("llc-spread-pinned-icelake-2s-mini-lab-6.1")), domains.read(Path(ZEN3_LAB)))
    assert n == 5
    assert "note: the two trees number CPUs differently; CPU ids are compared as they are" in text
    assert "  name on CPUs 0-31: A NUMA, B DIE\n" in text
    assert "domain3 NUMA:\n  name on CPUs 0-31: A (none), B NUMA\n" in text


def test_two_numa_levels_and_the_older_snapshot_place(runs):
    """numa4-96-mini builds two NUMA levels; its snapshot is also in out/guest/."""
    t = domains.read(Path("numa-balancing-numa4-96-mini-debian"))
    assert [d.name for d in t.cpus[0]] == ["SMT", "MC", "NUMA", "NUMA"]
    text = domains.render(t)
    assert "domain2 NUMA: 2 spans of 16 CPUs\n  spans: 0-15 16-31\n" in text
    assert "domain3 NUMA: 1 span of 32 CPUs\n  spans: 0-31\n  flags: SD_BALANCE_NEWIDLE SD_SERIALIZE SD_OVERLAP SD_NUMA\n" in text


def test_per_domain_parameters_and_groups_that_differ(tmp_path):
    """A snapshot holding imbalance_pct & co. shows them; CPUs whose flags differ at one
    level are their own group, and a diff names the CPUs."""
    run = tmp_path / "run"
    shutil.copytree(RUNS / ZEN3_LAB / "guest", run / "guest")
    sysfs = run / "guest" / "sysfs.txt"
    lines = sysfs.read_text().splitlines()
    extra = [f"/sys/kernel/debug/sched/domains/cpu{c}/domain3/imbalance_pct:{117 if c < 16 else 125}" for c in range(32)]
    lines = [ln.replace("SD_WAKE_AFFINE ", "") if ln.startswith("/sys/kernel/debug/sched/domains/cpu5/domain2/flags:") else ln for ln in lines]
    sysfs.write_text("\n".join(lines + extra) + "\n")
    t = domains.read(run)  # no plan.json: the guest's numbering
    assert t.numbering == "CPU ids as the guest numbered them (no plan.json)"
    text = domains.render(t)
    assert "domain2 DIE on CPUs 0-4,6-31: 2 spans of 16 CPUs\n" in text
    assert "domain2 DIE on CPU 5: 1 span of 16 CPUs\n  spans: 0-15\n  flags: SD_BALANCE_NEWIDLE SD_BALANCE_EXEC SD_BALANCE_FORK SD_PREFER_SIBLING\n" in text
    assert "domain3 NUMA on CPUs 0-15: 1 span of 32 CPUs" in text and "  imbalance_pct=117\n" in text and "  imbalance_pct=125\n" in text
    out, n = domains.diff(domains.read(RUNS / ZEN3_LAB), t)
    assert "  flags on CPU 5: only A SD_WAKE_AFFINE\n" in out
    assert ("note: A's snapshot holds no per-domain parameters (taken before lab recorded\n"
            "  them): parameters not compared\n") in out and "params" not in out.split("compared", 1)[1]  # fmt: skip
    assert n == 4, out  # and the SMT, MC and DIE spans: A in zen3's smt-last numbering, B in the guest's
    run2 = tmp_path / "run2"
    shutil.copytree(run, run2)
    (run2 / "guest" / "sysfs.txt").write_text(sysfs.read_text().replace("imbalance_pct:125", "imbalance_pct:117"))
    out, n = domains.diff(t, domains.read(run2))
    assert n == 1 and "domain3 NUMA:\n  params on CPUs 16-31: A imbalance_pct=125, B imbalance_pct=117\n" in out, out


def test_bad_input_is_one_line_naming_the_path(runs, tmp_path):
    for arg, msg in (
        ("cluster-wakeup-kunpeng920-2s-mini-debian", "lab: error: cluster-wakeup-kunpeng920-2s-mini-debian: no guest topology snapshot "
         "(guest/sysfs.txt): not a run directory, or a run that lost it"),
        (str(tmp_path / "nope"), f"lab: error: {tmp_path / 'nope'}: no such run directory"),
        (f"{ZEN3_LAB}/plan.json", f"lab: error: {ZEN3_LAB}/plan.json: not a directory (give a run directory)"),
    ):  # fmt: skip
        for args in ((arg,), (ZEN3_LAB, arg)):
            r = lab(*args)
            assert r.exit_code == 2 and r.stdout == "" and r.stderr.splitlines() == [msg], r.output
    empty = tmp_path / "empty" / "guest"
    empty.mkdir(parents=True)
    (empty / "sysfs.txt").write_text("/sys/devices/system/cpu/online:0-1\n")
    r = lab(str(empty.parent))
    assert r.exit_code == 2 and r.stderr.splitlines() == [
        f"lab: error: {empty}: the snapshot has no sched domains (debugfs was not readable in the guest)"]


def test_options_that_do_not_go_together_are_one_line(runs):
    for args, msg in (
        ((), "give a RUN_DIR (or two to diff), or --topology T to boot one"),
        ((ZEN3_LAB, ZEN3_LAB, ZEN3_LAB), "lab domains takes one run directory, or two to diff; got 3"),
        ((ZEN3_LAB, "--topology", "zen3-2s-mini"), "lab domains RUN_DIR reads finished runs: --topology and --kernel go without RUN_DIR"),
        (("--topology", "zen3-2s-mini", "--topology", "icelake-2s-mini", "--kernel", "a", "--kernel", "b"),
         "lab domains diffs two trees: two --kernel on one --topology, or two --topology on one kernel"),
    ):  # fmt: skip
        r = lab(*args)
        assert r.exit_code == 2 and r.stderr.splitlines() == [f"lab: error: {msg}"], r.output


def test_booted_guests_are_read_like_runs(runs, monkeypatch):
    """--topology T --kernel A --kernel B boots T twice (here: the recorded runs stand
    for the boots) and diffs the two snapshots as two run directories would be."""
    from lab.cli import domains as cli_domains

    booted = []

    def boot(topo, vm, timeout, runs_dir):
        booted.append((topo.name, vm.kernel))
        return Path({"lab-6.1": ZEN3_LAB, "debian": ZEN3_DEBIAN}[vm.kernel])

    monkeypatch.setattr(cli_domains, "_boot", boot)
    r = lab("--topology", "zen3-2s-mini", "--kernel", "lab-6.1", "--kernel", "debian")
    assert r.exit_code == 0 and r.stdout == DIFF, r.output
    assert booted == [("zen3-2s-mini", "lab-6.1"), ("zen3-2s-mini", "debian")]
    booted.clear()
    r = lab("--topology", "zen3-2s-mini", "--kernel", "lab-6.1")
    assert r.exit_code == 0 and r.stdout == RENDER and booted == [("zen3-2s-mini", "lab-6.1")]
