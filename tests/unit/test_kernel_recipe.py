"""Recipe loading: the shipped recipes, inheritance, and errors naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.errors import UserError
from lab.kernel import recipe


def write(kdir: Path, name: str, text: str) -> Path:
    d = kdir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "recipe.toml").write_text(text)
    return d / "recipe.toml"


@pytest.fixture
def kdir(tmp_path: Path) -> Path:
    (tmp_path / "fragments").mkdir()
    (tmp_path / "fragments" / "lab.config").write_text("CONFIG_SMP=y\n")
    (tmp_path / "fragments" / "lab-x86_64.config").write_text("CONFIG_NUMA=y\n")
    (tmp_path / "fragments" / "extra.config").write_text("CONFIG_SCHED_MC=y\n")
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "one.patch").write_text("")
    return tmp_path


def test_shipped_recipes_load():
    names = recipe.names()
    for n in (
        "lab-6.1",
        "lab-6.1-no-affinity-imbalance",
        "lab-6.1-arm64",
        "lab-6.1-arm64-cluster-scan",
    ):
        assert n in names
        r = recipe.load(n)
        assert r.source == "debian:6.1"
        assert all(p.path.is_file() for p in r.patches)
        assert "node_reclaim_distance_param" in r.all_features()


def test_shipped_inheritance():
    base = recipe.load("lab-6.1")
    rev = recipe.load("lab-6.1-no-affinity-imbalance")
    assert rev.arch == "x86_64" and rev.base == base.base
    assert rev.patches[: len(base.patches)] == base.patches
    assert (
        rev.patches[-1].revert
        and rev.patches[-1].name == "sched-fair-find-idlest-group-affinity.patch"
    )
    cs = recipe.load("lab-6.1-arm64-cluster-scan")
    assert cs.arch == "arm64"
    assert [p.name for p in cs.patches][-2:] == [
        "sched-add-cpus_share_resources-api.patch",
        "sched-fair-scan-cluster-before-llc.patch",
    ]
    assert "cluster_scan" in cs.all_features()
    assert cs.image_target() == "Image" and base.image_target() == "bzImage"


def test_fragment_order_lab_first(kdir):
    write(kdir, "r", 'arch = "x86_64"\nsource = "debian:6.1"\nfragments = ["extra"]\n')
    r = recipe.load("r", kdir)
    assert [f.name for f in r.all_fragments()] == [
        "lab.config",
        "lab-x86_64.config",
        "extra.config",
    ]


def test_patch_table_and_make_vars(kdir):
    write(
        kdir,
        "r",
        'arch = "x86_64"\nsource = "debian:6.1"\n'
        '[[patches]]\nfile = "one.patch"\nrevert = true\nfeatures = ["f1"]\n'
        '[make]\nKCFLAGS = "-O1"\n',
    )
    r = recipe.load("r", kdir)
    assert r.patches[0].revert and r.patches[0].features == ("f1",)
    assert r.all_features() == {"f1"}
    assert r.make_vars == (("KCFLAGS", "-O1"),)


def test_unknown_recipe_suggests(kdir):
    write(kdir, "lab-6.1", 'arch = "x86_64"\nsource = "debian:6.1"\n')
    with pytest.raises(UserError, match="did you mean lab-6.1"):
        recipe.load("lab-61", kdir)


@pytest.mark.parametrize(
    "text, match",
    [
        ('source = "debian:6.1"\n', "missing field 'arch'"),
        ('arch = "riscv"\nsource = "debian:6.1"\n', "arch: 'riscv' is not one of"),
        ('arch = "x86_64"\nsource = "debian:6.1"\nbase = "bigconfig"\n', "base: 'bigconfig'"),
        (
            'arch = "x86_64"\nsource = "debian:6.1"\nfragmnets = []\n',
            "unknown field 'fragmnets'; did you mean 'fragments'",
        ),
        ('arch = "x86_64"\nsource = "debian:6.1"\npatches = ["nope.patch"]\n', r"patches\[0\]"),
        ('arch = "x86_64"\nsource = "debian:6.1"\nfragments = ["nope"]\n', r"fragments\[0\]"),
        (
            'arch = "x86_64"\nsource = "debian:6.1"\n[[patches]]\nfile = "one.patch"\nrevert = "yes"\n',
            r"patches\[0\].revert",
        ),
        ('arch = "x86_64"\nsource = 3\n', "source: expected"),
        ('arch = "x86_64"\nsource = "debian:6.1"\nextends = "r"\n', "extends: cycle"),
        ("arch = \n", "not valid TOML"),
    ],
)
def test_bad_recipes_name_file_and_field(kdir, text, match):
    f = write(kdir, "r", text)
    with pytest.raises(UserError, match=match) as e:
        recipe.load("r", kdir)
    assert str(f) in str(e.value)


def test_with_patches_adds_variant(kdir, tmp_path):
    write(kdir, "r", 'arch = "x86_64"\nsource = "debian:6.1"\n')
    extra = tmp_path / "x.patch"
    extra.write_text("diff\n")
    r = recipe.load("r", kdir)
    r2 = r.with_patches([extra])
    assert r2.patches[-1].path == extra and r2.variant.startswith("p") and r.variant == ""
    with pytest.raises(UserError, match="no such file"):
        r.with_patches([tmp_path / "missing.patch"])


def test_input_digest_changes_with_fragment(kdir):
    write(kdir, "r", 'arch = "x86_64"\nsource = "debian:6.1"\nfragments = ["extra"]\n')
    d1 = recipe.input_digest(recipe.load("r", kdir))
    (kdir / "fragments" / "extra.config").write_text("CONFIG_SCHED_MC=n\n")
    assert recipe.input_digest(recipe.load("r", kdir)) != d1
