"""--kernel-tree / --watch pieces that need no build: tree checks, change detection,
what changed between two verdicts."""

import os
import subprocess

import pytest
from click.testing import CliRunner

from lab import iterate
from lab.cli import main
from lab.errors import UserError
from lab.runner import RunOutcome
from lab.scenario import Expectation


def fake_tree(root):
    (root / "kernel" / "sched").mkdir(parents=True)
    (root / "Makefile").write_text("all:\n")
    (root / "Kconfig").write_text("")
    (root / "kernel" / "sched" / "fair.c").write_text("int x;\n")
    return root


def test_not_a_kernel_tree(tmp_path):
    with pytest.raises(UserError, match="not a kernel tree \\(no Makefile\\)"):
        iterate.check_tree(tmp_path)
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--kernel-tree", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no such directory" in r.output


def test_tree_configured_in_place_is_refused(tmp_path):
    t = fake_tree(tmp_path)
    (t / ".config").write_text("CONFIG_SMP=y\n")
    with pytest.raises(UserError, match="make mrproper"):
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


def test_verdict_changes():
    def o(status, ok, mig):
        return RunOutcome("s", "t", "k", status, None, expectations=[Expectation("spread", ok, figures={"migrations": mig})])

    assert iterate.verdict_changes(None, o("PASS", True, 0)) == []
    ch = iterate.verdict_changes(o("FAIL", False, 3), o("PASS", True, 0))
    assert ch == ["verdict FAIL -> PASS", "spread: FAIL -> PASS", "spread: migrations 3 -> 0"]
