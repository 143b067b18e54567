"""A tree build keeps its last checked .config when only source files changed (issue 32
item 7: the developer's loop re-made and re-checked the config on every edit of fair.c)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from lab.kernel import build, source


def _record(config: Path, inputs: str = "in") -> dict:
    return {"inputs": inputs, "config_sha256": hashlib.sha256(config.read_bytes()).hexdigest()}


@pytest.fixture
def config(tmp_path):
    c = tmp_path / ".config"
    c.write_text("CONFIG_SMP=y\n")
    return c


@pytest.mark.parametrize("changed", [[], ["kernel/sched/fair.c"], ["include/linux/sched.h", "arch/x86/entry/entry_64.S", "rust/kernel/lib.rs"]])
def test_kept_when_only_sources_changed(config, changed):
    assert build.config_reusable(_record(config), "in", config, changed) == (_record(config)["config_sha256"], "")


@pytest.mark.parametrize(
    "changed",
    [
        ["kernel/sched/fair.c", "init/Kconfig"],  # Kconfig itself
        ["arch/x86/Kconfig.cpu"],
        ["Makefile"],  # kernelversion, the config targets
        ["arch/x86/configs/tiny.config"],  # tinyconfig's own fragment
        ["scripts/kconfig/conf.c"],  # the config program is C, but it is what configures
        ["tools/lib/bpf/libbpf.c"],
        ["kernel/sched/Makefile"],
    ],
)
def test_made_again_when_anything_config_reads_changed(config, changed):
    kept, why = build.config_reusable(_record(config), "in", config, changed)
    assert kept is None and why == f"{next(c for c in changed if not c.endswith('.c') or c.startswith(('scripts', 'tools')))} changed"


def test_made_again_when_the_recipe_toolchain_or_config_differ(config, tmp_path):
    assert build.config_reusable(_record(config, "other"), "in", config, []) == (None, "the recipe's config inputs changed")
    assert build.config_reusable(None, "in", config, []) == (None, "no clean configure recorded")
    assert build.config_reusable(_record(config), "in", tmp_path / "missing", []) == (None, "no .config")
    rec = _record(config)
    config.write_text("CONFIG_SMP=n\n")  # the .config was changed after the check
    assert build.config_reusable(rec, "in", config, []) == (None, ".config changed since it was checked")


def test_mirror_and_patched_copy_report_what_they_wrote(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "kernel").mkdir(parents=True)
    (src / "kernel" / "a.c").write_text("a\n")
    (src / "Kconfig").write_text("config A\n")
    changed: list[str] = []
    source.mirror(src, dest, changed=changed)
    assert sorted(changed) == ["Kconfig", "kernel/a.c"]
    changed = []
    source.mirror(src, dest, changed=changed)
    assert changed == []  # nothing new
    (src / "kernel" / "a.c").write_text("a changed\n")
    (src / "Kconfig").unlink()
    changed = []
    source.mirror(src, dest, changed=changed)
    assert sorted(changed) == ["Kconfig", "kernel/a.c"]  # copied, and deleted


def test_config_inputs_follow_fragments_and_toolchain(tmp_path, monkeypatch):
    frag = tmp_path / "x.config"
    frag.write_text("CONFIG_SMP=y\n")

    class R:
        source = "debian:6.1"
        base = "tinyconfig"
        patches = ()
        make_vars: dict = {}
        arch = "x86_64"

        def all_fragments(self, kernels_dir=None):
            return [frag]

    class T:
        versions = {"cc": "gcc 12", "ld": "ld 2.40", "make": "4.3", "ccache": "4.8"}

    a = build.config_inputs(R(), T())
    T.versions = {**T.versions, "ccache": "4.9"}
    assert build.config_inputs(R(), T()) == a  # ccache does not change the output
    T.versions = {**T.versions, "cc": "gcc 13"}
    assert build.config_inputs(R(), T()) != a
    T.versions = {**T.versions, "cc": "gcc 12"}
    frag.write_text("CONFIG_SMP=n\n")
    assert build.config_inputs(R(), T()) != a



def test_a_symlink_with_the_same_target_is_not_copied_again(tmp_path):
    """A symlink's mtime is when it was made, so the mirror saw every symlink of the tree
    as changed on every build (tools/testing/selftests/powerpc/.../memcmp_32.S), and no
    .config was ever kept."""
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    (src / "a.S").write_text("x\n")
    (src / "link.S").symlink_to("a.S")
    source.mirror(src, dest)
    changed: list[str] = []
    assert source.mirror(src, dest, changed=changed) == 0 and changed == []
    (src / "link.S").unlink()
    (src / "b.S").write_text("y\n")
    (src / "link.S").symlink_to("b.S")  # a new target: copied, a change
    changed = []
    source.mirror(src, dest, changed=changed)
    assert sorted(changed) == ["b.S", "link.S"] and (dest / "link.S").readlink() == Path("b.S")
