"""Patches go onto a work copy, never the source; a bad one names patch and hunk."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lab.errors import UserError
from lab.kernel import source
from lab.kernel.recipe import Patch

FAKE = Path(__file__).parent.parent / "fixtures" / "fakelinux"
GOOD = """--- a/kernel/sched/core.c
+++ b/kernel/sched/core.c
@@ -1,3 +1,3 @@
 int a;
-int b;
+int b = 1;
 int c;
"""
BAD = """--- a/kernel/sched/core.c
+++ b/kernel/sched/core.c
@@ -1,3 +1,3 @@
 int a;
-int x;
+int x = 1;
 int c;
"""


@pytest.fixture
def tree(tmp_path):
    t = tmp_path / "linux"
    shutil.copytree(FAKE, t)
    return t


def p(tmp_path: Path, name: str, text: str, revert: bool = False) -> Patch:
    f = tmp_path / name
    f.write_text(text)
    return Patch(f, revert)


def test_prepare_applies_to_copy_only(tmp_path, tree, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    src = source.resolve(str(tree))
    work = tmp_path / "work"
    out = source.patched_copy(src, (p(tmp_path, "good.patch", GOOD),), work)
    assert "int b = 1;" in (out / "kernel/sched/core.c").read_text()
    assert "int b = 1;" not in (tree / "kernel/sched/core.c").read_text()
    # Without the patch the copy goes back to the source's content.
    out = source.patched_copy(src, (), work)
    assert (out / "kernel/sched/core.c").read_text() == (tree / "kernel/sched/core.c").read_text()


def test_revert(tmp_path, tree):
    (tree / "kernel/sched/core.c").write_text("int a;\nint b = 1;\nint c;\n")
    touched = source.apply_patch(p(tmp_path, "good.patch", GOOD, revert=True), tree)
    assert touched == {"kernel/sched/core.c"}
    assert "int b;" in (tree / "kernel/sched/core.c").read_text()


def test_patch_that_does_not_apply_names_patch_and_hunk(tmp_path, tree):
    bad = p(tmp_path, "bad.patch", BAD)
    before = (tree / "kernel/sched/core.c").read_text()
    with pytest.raises(UserError) as e:
        source.apply_patch(bad, tree)
    msg = str(e.value)
    assert str(bad.path) in msg and "hunk #1 of kernel/sched/core.c" in msg
    assert (tree / "kernel/sched/core.c").read_text() == before  # dry run first


def test_already_applied_patch_says_so(tmp_path, tree):
    good = p(tmp_path, "good.patch", GOOD)
    source.apply_patch(good, tree)
    with pytest.raises(UserError, match="already applied"):
        source.apply_patch(good, tree)


def test_shipped_patches_apply_to_linux_6_1(tmp_path):
    """Each shipped recipe's series applies in order to the real 6.1 sources it touches."""
    linux = Path("/tmp/linux-source-6.1")
    if not (linux / "kernel/sched/fair.c").is_file():
        if not source.DEBIAN_TARBALLS["6.1"].is_file():
            pytest.skip("no Linux 6.1 sources: apt-get install linux-source-6.1")
        linux = source.resolve("debian:6.1").tree
    from lab.kernel import recipe

    for name in recipe.names():
        r = recipe.load(name)
        t = tmp_path / name
        for rel in ("kernel/sched", "include/linux/sched"):
            shutil.copytree(linux / rel, t / rel)
        # and every other file a patch touches (soft affinity: sched.h, fs/proc/base.c)
        for patch in r.patches:
            for line in patch.path.read_text().splitlines():
                if line.startswith("+++ b/") and not (t / line[6:]).exists():
                    (t / line[6:]).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(linux / line[6:], t / line[6:])
        for patch in r.patches:
            source.apply_patch(patch, t)


def test_mirror_copies_only_changes(tmp_path, tree):
    dest = tmp_path / "copy"
    assert source.mirror(tree, dest) > 3
    assert source.mirror(tree, dest) == 0
    (tree / "kernel/sched/fair.c").write_text("/* changed */\n")
    (tree / "new.c").write_text("x")
    (tree / "Kconfig").unlink()
    assert source.mirror(tree, dest) == 2
    assert not (dest / "Kconfig").exists() and (dest / "new.c").is_file()


def test_source_errors(tmp_path):
    with pytest.raises(UserError, match="not a kernel tree"):
        source.resolve(str(tmp_path))
    with pytest.raises(UserError, match="debian:6.1"):
        source.resolve("debian:5.10")


def test_repatched_file_keeps_mtime_when_unchanged(tmp_path, tree, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    src = source.resolve(str(tree))
    work = tmp_path / "work"
    patches = (p(tmp_path, "good.patch", GOOD),)
    out = source.patched_copy(src, patches, work)
    m1 = (out / "kernel/sched/core.c").stat().st_mtime_ns
    os.utime(out / "kernel/sched/core.c", ns=(m1 - 10**9, m1 - 10**9))
    m1 -= 10**9
    out = source.patched_copy(src, patches, work)
    assert (out / "kernel/sched/core.c").stat().st_mtime_ns == m1
