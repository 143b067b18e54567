"""`lab kernel ...` through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main

FAKE = Path(__file__).parent.parent / "fixtures" / "fakelinux"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def run(*args: str):
    return CliRunner().invoke(main, ["kernel", *args])


def test_recipes_lists_shipped(cache):
    r = run("recipes")
    assert r.exit_code == 0, r.output
    for n in (
        "lab-6.1",
        "lab-6.1-no-affinity-imbalance",
        "lab-6.1-arm64",
        "lab-6.1-arm64-cluster-scan",
    ):
        assert n in r.output


def test_unknown_recipe_is_a_user_error(cache):
    r = run("config", "lab-61")
    assert r.exit_code == 2
    assert "unknown kernel recipe 'lab-61'" in r.output and "did you mean" in r.output


def test_list_show_rm(cache, tmp_path, fake_kernels):
    from lab.kernel import build, recipe

    r = run("list")
    assert r.exit_code == 0 and "no kernels yet" in r.output
    kdir, tree = fake_kernels()
    a = build.build(recipe.load("fake", kdir), jobs=1)

    r = run("list")
    assert r.exit_code == 0 and a.label in r.output and "6.1.0-fake" in r.output
    r = run("list", "--json")
    assert json.loads(r.output)[0]["id"] == a.id
    r = run("show", a.id[:8])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["release"] == "6.1.0-fake"
    r = run("rm", a.id[:8])
    assert r.exit_code == 0 and "removed" in r.output
    r = run("rm", a.id[:8])
    assert r.exit_code == 2 and "unknown kernel" in r.output


def _entry(cache: Path, id: str, name: str, arch: str, built: str) -> None:
    d = cache / "kernels" / id
    d.mkdir(parents=True)
    (d / "Image").write_bytes(b"")
    release = id.removeprefix("debian-") if name == "debian" else "6.1.0-lab"
    meta = {"id": id, "name": name, "arch": arch, "image": "Image", "release": release, "built_at": built}
    (d / "metadata.json").write_text(json.dumps(meta))


@pytest.fixture
def store_of_lookalikes(cache):
    """Debian's kernel for both arches and two builds of one recipe: the rows issue 14
    found could not be told apart."""
    _entry(cache, "debian-6.1.0-56-amd64", "debian", "x86_64", "2026-11-23T17:00:00")
    _entry(cache, "debian-6.1.0-56-arm64", "debian", "arm64", "2026-11-23T17:00:01")
    _entry(cache, "1a2b3c4d" + "0" * 56, "lab-6.1", "x86_64", "2026-11-23T17:01:00")
    _entry(cache, "1a2b9999" + "0" * 56, "lab-6.1", "x86_64", "2026-11-23T17:02:00")
    return cache


def test_list_tells_every_kernel_apart(store_of_lookalikes):
    r = run("list")
    assert r.exit_code == 0, r.output
    # Piped, within 80 columns: a line per kernel; what picks it goes on the line under it.
    rows = [line.split()[0] for line in r.output.splitlines() if not line.startswith(" ")]
    assert sorted(rows) == ["debian-6.1.0-56-amd64", "debian-6.1.0-56-arm64", "lab-6.1@1a2b3c4d", "lab-6.1@1a2b9999"]
    assert "--kernel debian (arm64)" in r.output


def test_show_and_rm_take_any_unambiguous_prefix(store_of_lookalikes):
    # 'debian' is what --kernel debian picks: the x86_64 one unless --arch says otherwise.
    for args, want in [
        (["debian"], "debian-6.1.0-56-amd64"),
        (["debian", "--arch", "arm64"], "debian-6.1.0-56-arm64"),
        (["debian-6.1.0-56-ar"], "debian-6.1.0-56-arm64"),
        (["debian-6.1", "--arch", "x86_64"], "debian-6.1.0-56-amd64"),
        (["lab-6.1@1a2b3"], "1a2b3c4d" + "0" * 56),
        (["1a2b9"], "1a2b9999" + "0" * 56),
    ]:
        r = run("show", *args)
        assert r.exit_code == 0, (args, r.output)
        assert json.loads(r.output)["id"] == want, args
    # Ambiguous: one line naming every match.
    for spec, names in [
        ("debian-6.1", ["debian-6.1.0-56-amd64 (x86_64)", "debian-6.1.0-56-arm64 (arm64)"]),
        ("lab-6.1@1a2b", ["lab-6.1@1a2b3c4d", "lab-6.1@1a2b9999"]),
        ("1a2b", ["lab-6.1@1a2b3c4d", "lab-6.1@1a2b9999"]),
    ]:
        for cmd in ("show", "rm"):
            r = run(cmd, spec)
            assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
            assert f"kernel '{spec}' is ambiguous: matches" in r.stderr and all(n in r.stderr for n in names), r.stderr
    r = run("rm", "debian-6.1", "--arch", "arm64")
    assert r.exit_code == 0 and "removed debian-6.1.0-56-arm64" in r.output, r.output
    r = run("rm", "lab-6.1@1a2b3")
    assert r.exit_code == 0 and "removed lab-6.1@1a2b3c4d" in r.output, r.output
    r = run("list")
    assert "arm64" not in r.output and "1a2b3c4d" not in r.output and "lab-6.1@1a2b9999" in r.output


def test_kernel_option_takes_a_label_and_keeps_debian(store_of_lookalikes):
    from lab.kernel import resolve

    assert resolve("debian", "arm64", build=False).id == "debian-6.1.0-56-arm64"
    assert resolve("debian-6.1.0-56", "arm64", build=False).id == "debian-6.1.0-56-arm64"
    assert resolve("lab-6.1@1a2b9", "x86_64", build=False).id.startswith("1a2b9999")
    # The recipe's current files were never built: its older builds are named.
    r = run("show", "lab-6.1")
    assert r.exit_code == 2 and "kernel recipe lab-6.1 is not built (its files changed since lab-6.1@1a2b9999, lab-6.1@1a2b3c4d" in r.stderr, r.stderr


def test_rm_takes_only_names_inside_the_store(store_of_lookalikes, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "metadata.json").write_text(json.dumps({"id": "x", "name": "x", "arch": "x86_64", "image": "i", "release": "r"}))
    r = run("rm", "../../outside")
    assert r.exit_code == 2 and outside.is_dir(), r.output


def test_show_a_recipe_takes_the_recipes_arch(cache):
    """`lab kernel show lab-6.1-arm64-cluster-scan` with no --arch: the recipe is arm64,
    so that is what is asked for (it said an x86_64 kernel was asked for)."""
    r = run("show", "lab-6.1-arm64-cluster-scan")
    assert r.exit_code == 2, r.output
    assert "lab: error: kernel recipe lab-6.1-arm64-cluster-scan is not built; run: lab kernel build" in r.output
