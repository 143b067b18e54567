"""--kernel-tree / --watch pieces that need no build: tree checks, change detection,
what changed between two verdicts."""

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import iterate
from lab.cli import main
from lab.errors import UserError
from lab.runner import RunOutcome
from lab.scenario import Expectation


def fake_tree(root, arches=("x86", "arm64")):
    (root / "kernel" / "sched").mkdir(parents=True)
    (root / "Makefile").write_text("all:\n")
    (root / "Kconfig").write_text("")
    (root / "kernel" / "sched" / "fair.c").write_text("int x;\n")
    for a in arches:
        (root / "arch" / a).mkdir(parents=True)
        (root / "arch" / a / "Kconfig").write_text("")
    return root


def test_not_a_kernel_tree(tmp_path):
    with pytest.raises(UserError, match="not a kernel tree \\(no Makefile\\)"):
        iterate.check_tree(tmp_path)
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--kernel-tree", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no such directory" in r.output


@pytest.mark.parametrize(
    "config, match",
    [("CONFIG_SMP=y\n", "make mrproper"), ("CONFIG_ARM64=y\nCONFIG_SMP=y\n", "configured in place for arm64")],
)
def test_tree_configured_in_place_is_refused(tmp_path, config, match):
    t = fake_tree(tmp_path)
    (t / ".config").write_text(config)
    with pytest.raises(UserError, match=match):
        iterate.check_tree(t)


def test_recipe_for_another_arch_is_refused(tmp_path):
    t = fake_tree(tmp_path)
    with pytest.raises(UserError, match="builds arm64, the topology is x86_64"):
        iterate.tree_kernel(t, "x86_64", "lab-6.1-arm64")


def test_options_need_a_tree():
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--watch"])
    assert r.exit_code == 2 and "--kernel-tree" in r.output


@pytest.mark.parametrize("git", [False, True])
def test_fingerprint_changes_with_the_source(tmp_path, git):
    t = fake_tree(tmp_path)
    if git:
        subprocess.run(["git", "init", "-q", str(t)], check=True)
        subprocess.run(["git", "-C", str(t), "add", "."], check=True)
        subprocess.run(["git", "-C", str(t), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True)
    a = iterate.fingerprint(t)
    assert iterate.fingerprint(t) == a  # quiet tree: no rebuild
    f = t / "kernel" / "sched" / "fair.c"
    f.write_text("int x; /* changed */\n")
    os.utime(f, ns=(1, 10**18))
    b = iterate.fingerprint(t)
    assert b != a
    info = iterate.describe(t)
    assert info["diff_sha256"] != "clean" if git else info["git_describe"] == "(not a git tree)"
    if git:
        # a new file, not yet added, is part of the judged code too
        (t / "kernel" / "sched" / "new.c").write_text("int y;\n")
        info2 = iterate.describe(t)
        assert info2["diff_sha256"] != info["diff_sha256"] and info2["untracked_files"] == "1"


def test_verdict_changes():
    def o(status, ok, mig):
        return RunOutcome("s", "t", "k", status, None, expectations=[Expectation("spread", ok, figures={"migrations": mig})])

    assert iterate.verdict_changes(None, o("PASS", True, 0)) == []
    ch = iterate.verdict_changes(o("FAIL", False, 3), o("PASS", True, 0))
    assert ch == ["verdict FAIL -> PASS", "spread: FAIL -> PASS", "spread: migrations 3 -> 0"]


def test_tree_for_another_arch_is_refused(tmp_path):
    t = fake_tree(tmp_path / "linux", arches=("arm64",))  # beside the test's runs folder, not around it
    with pytest.raises(UserError, match=r"no arch/x86/Kconfig, so it cannot build x86_64 kernels .*the tree builds arm64"):
        iterate.check_tree(t, "x86_64")
    assert iterate.check_tree(t, "arm64") == t.resolve()
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", "zen3-2s-mini", "--kernel-tree", str(t)])
    assert r.exit_code == 2 and "cannot build x86_64 kernels" in r.output


def test_bad_recipe_is_refused_before_any_build(tmp_path):
    t = fake_tree(tmp_path / "linux")
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--topology", "zen3-2s-mini", "--kernel-tree", str(t), "--recipe", "lab-61"])
    assert r.exit_code == 2 and "unknown kernel recipe 'lab-61'" in r.output and "did you mean lab-6.1" in r.output
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--kernel-tree", str(t), "--recipe", str(tmp_path / "nope.toml")])
    assert r.exit_code == 2 and "no such file" in r.output


def test_recipe_from_a_path(tmp_path):
    from lab.kernel import recipe

    d = tmp_path / "mine"
    d.mkdir()
    (d / "recipe.toml").write_text('extends = "lab-6.1"\ndescription = "mine"\n')
    for ref in (str(d), str(d / "recipe.toml")):
        r = recipe.load(ref)
        assert r.name == "mine" and r.arch == "x86_64" and r.description == "mine"
        # lab's shared fragments come first, then the parent's patch
        assert r.all_fragments()[0].name == "lab.config" and r.patches[0].path.name.startswith("lab-node-reclaim")


def test_saved_verdict_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    t = fake_tree(tmp_path / "linux")
    assert iterate.last_verdict(t, "x86_64", None) is None
    o = RunOutcome("llc-spread-pinned", "zen3-2s-mini", "k", "FAIL", tmp_path / "runs" / "r1")
    iterate.save_verdict(t, "x86_64", None, o, iterate.describe(t))
    v = iterate.last_verdict(t, "x86_64", None)
    assert v["status"] == "FAIL" and v["run_dir"] == str(tmp_path / "runs" / "r1")
    line = iterate.describe_verdict(v)
    assert line.startswith("FAIL for llc-spread-pinned on zen3-2s-mini at (not a git tree)") and "r1" in line
    # another recipe is another build of the tree, with its own verdict
    assert iterate.last_verdict(t, "x86_64", "lab-6.1-no-affinity-imbalance") is None


def test_own_paths_names_the_developers_files(tmp_path):
    work, tree = tmp_path / "work" / "lab-6.1-x86_64-tree-1", Path("/home/dev/linux")
    log = (
        "In file included from ../src/include/linux/sched.h:12,\n"
        "../src/kernel/sched/fair.c:9796:37: error: no member named 'nr_cpus_alowed'\n"
        f"{work}/src/kernel/sched/core.c:1:1: error: x\n"
        "see ../../src/kernel/x.c and foo../src/y.c\n"
    )
    out = iterate.own_paths(log, work, tree)
    assert out.splitlines() == [
        "In file included from /home/dev/linux/include/linux/sched.h:12,",
        "/home/dev/linux/kernel/sched/fair.c:9796:37: error: no member named 'nr_cpus_alowed'",
        "/home/dev/linux/kernel/sched/core.c:1:1: error: x",
        "see ../../src/kernel/x.c and foo../src/y.c",  # not a path into the mirror: left alone
    ]


def test_a_trees_kernel_line_picks_its_recipe(tmp_path):
    """--kernel-tree without --recipe: a 6.12 tree is built with lab-6.12's config and
    patches (lab-6.12-arm64 for an arm64 topology), a line lab has no recipe for with
    the arch's default."""
    from lab import iterate

    def tree(name, version, patchlevel):
        t = tmp_path / name
        t.mkdir()
        (t / "Makefile").write_text(f"# SPDX\nVERSION = {version}\nPATCHLEVEL = {patchlevel}\nSUBLEVEL = 117\n")
        return t

    t612, t61, t68 = tree("a", 6, 12), tree("b", 6, 1), tree("c", 6, 8)
    assert iterate.tree_version(t612) == "6.12" and iterate.tree_version(tmp_path) is None
    assert iterate.recipe_for_tree(t612, "x86_64") == "lab-6.12"
    assert iterate.recipe_for_tree(t612, "arm64") == "lab-6.12-arm64"
    assert iterate.recipe_for_tree(t61, "arm64") == "lab-6.1-arm64"
    assert iterate.recipe_for_tree(t68, "x86_64") == "lab-6.1"
    assert iterate.tree_recipe(t612, "arm64").name == "lab-6.12-arm64"
    assert iterate.tree_recipe(t612, "x86_64", "lab-6.1").name == "lab-6.1"  # --recipe wins
