"""Builds with a fake kernel tree: the store only ever shows complete kernels."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.errors import InfraError, UserError
from lab.kernel import build, recipe, store

FAKE = Path(__file__).parent.parent / "fixtures" / "fakelinux"


@pytest.fixture
def setup(tmp_path, monkeypatch, fake_kernels):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    return fake_kernels("CONFIG_SMP=y\nCONFIG_NUMA=y\n", 'features = ["node_reclaim_distance_param"]\n')


def test_build_makes_an_entry_with_metadata(setup):
    kdir, tree = setup
    r = recipe.load("fake", kdir)
    a = build.build(r, jobs=1)
    assert a.image.is_file() and a.release == "6.1.0-fake" and a.arch == "x86_64"
    assert a.features == {"node_reclaim_distance_param"} and a.modules is None
    meta = json.loads((a.image.parent / "metadata.json").read_text())
    for k in ("inputs", "hashes", "timings", "toolchain", "release", "features", "key"):
        assert k in meta
    assert meta["build_env"]["KBUILD_BUILD_USER"] == "lab"
    assert store.get(a.id[:8]).id == a.id
    assert [e.id for e in store.entries()] == [a.id]
    # Same inputs: same id, no rebuild; the fast lookup finds it too.
    assert build.build(r, jobs=1).id == a.id
    # An edit to the tree is a different kernel.
    (tree / "kernel/sched/fair.c").write_text("/* edited */\n")
    time.sleep(0.01)
    b = build.build(recipe.load("fake", kdir), jobs=1)
    assert b.id != a.id
    store.remove(a.id)
    assert [e.id for e in store.entries()] == [b.id]


def test_config_check_failure_names_dependency(setup):
    kdir, _ = setup
    (kdir / "fragments" / "lab.config").write_text("# CONFIG_SMP is not set\nCONFIG_NUMA=y\n")
    with pytest.raises(
        UserError,
        match=r"CONFIG_NUMA=y \(.*lab.config:2\) ended up n: unmet dependency: depends on SMP",
    ):
        build.build(recipe.load("fake", kdir), jobs=1)
    assert store.entries() == []


def test_make_failure_reports_tail_and_log(setup, monkeypatch):
    kdir, _ = setup
    monkeypatch.setenv("FAKE_FAIL", "1")
    with pytest.raises(InfraError) as e:
        build.build(recipe.load("fake", kdir), jobs=1)
    msg = str(e.value)
    assert "fake failure" in msg and "build.log" in msg
    log = Path(msg.split("full log: ", 1)[1].split("\n", 1)[0])
    assert "CC      kernel/sched/fair.o" in log.read_text()
    assert store.entries() == []
    assert not [d for d in store.root().iterdir() if d.name.startswith(".tmp")]


def test_killed_build_leaves_no_entry(setup, tmp_path):
    kdir, _ = setup
    env = dict(os.environ, FAKE_HANG="1")
    code = (
        "import sys; from pathlib import Path; from lab.kernel import build, recipe;"
        f"build.build(recipe.load('fake', Path({str(kdir)!r})), jobs=1)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    pgid_file = Path(env["LAB_CACHE"]) / "work" / "fake-x86_64" / "obj" / "make.pgid"
    try:
        for _ in range(300):
            if pgid_file.is_file() and pgid_file.read_text().strip():
                break
            time.sleep(0.1)
        else:
            pytest.fail("fake build never reached the compile step")
        child.kill()
        child.wait()
    finally:
        if pgid_file.is_file():
            try:
                os.killpg(int(pgid_file.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        if child.poll() is None:
            child.kill()
    assert store.entries() == []


def test_stale_staging_dir_is_invisible_and_cleaned(setup):
    d = store.root() / ".tmp-abc-999999999"
    d.mkdir()
    (d / "metadata.json").write_text(
        json.dumps({"id": "abc", "name": "x", "arch": "x86_64", "image": "bzImage", "release": "r"})
    )
    assert store.entries() == []
    store.clean_stale()
    assert not d.exists()


def test_failure_inside_staging_publishes_nothing(setup):
    with pytest.raises(RuntimeError):
        with store.staging("deadbeef") as tmp:
            (tmp / "bzImage").write_bytes(b"x")
            raise RuntimeError("copy failed")
    assert not (store.root() / "deadbeef").exists()
    assert list(store.root().iterdir()) == []


def test_resolve_paths_and_errors(setup, tmp_path):
    from lab.kernel import from_image, resolve

    kdir, _ = setup
    a = build.build(recipe.load("fake", kdir), jobs=1)
    assert resolve(a.id[:10], "x86_64").id == a.id
    with pytest.raises(UserError, match="is x86_64"):
        resolve(a.id[:10], "arm64")
    img = from_image(a.image, "x86_64")
    assert img.release == "6.1.0-fake" and img.features == {"node_reclaim_distance_param"}
    assert resolve(str(a.image), "x86_64").release == "6.1.0-fake"
    with pytest.raises(UserError, match="unknown kernel"):
        resolve("no-such-kernel", "x86_64")
    with pytest.raises(UserError, match="lab kernel fetch debian"):
        resolve("debian", "x86_64", build=False)
