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
    assert r.exit_code == 0 and a.id[:12] in r.output and "6.1.0-fake" in r.output
    r = run("list", "--json")
    assert json.loads(r.output)[0]["id"] == a.id
    r = run("show", a.id[:8])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["release"] == "6.1.0-fake"
    r = run("rm", a.id[:8])
    assert r.exit_code == 0 and "removed" in r.output
    r = run("rm", a.id[:8])
    assert r.exit_code == 2 and "unknown kernel" in r.output
