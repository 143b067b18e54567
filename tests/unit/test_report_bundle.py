"""Bundles: a recorded run bundled and opened again whole, and hostile bundles refused
in one line with nothing written outside the target (and the target removed)."""

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import __version__
from lab.cli import main
from lab.errors import UserError
from lab.report import bundle

RUNS = Path(__file__).parent.parent / "fixtures" / "runs"
RUN = RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1"


def _manifest(members: dict[str, bytes], **over) -> bytes:
    m = {
        "format": bundle.FORMAT,
        "lab_version": __version__,
        "members": {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in members.items()},
    }
    m.update(over)
    return json.dumps(m).encode()


def _tar(path: Path, entries: list[tarfile.TarInfo | tuple[str, bytes]], manifest: bytes | None = None) -> Path:
    """A gzipped tar of *entries*: (name, data) for regular files, or a TarInfo as is."""
    with gzip.open(path, "wb") as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf:
        if manifest is not None:
            ti = tarfile.TarInfo(bundle.MANIFEST)
            ti.size = len(manifest)
            tf.addfile(ti, io.BytesIO(manifest))
        for e in entries:
            if isinstance(e, tarfile.TarInfo):
                tf.addfile(e, io.BytesIO(b"") if e.isreg() else None)
            else:
                ti = tarfile.TarInfo(e[0])
                ti.size = len(e[1])
                tf.addfile(ti, io.BytesIO(e[1]))
    return path


def _info(name: str, kind: bytes, **kw) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


@pytest.fixture
def box(tmp_path):
    """A directory holding the bundle and the target, with a file outside the target
    that a hostile bundle would like to overwrite."""
    (tmp_path / "victim").write_text("untouched")
    return tmp_path


def _refused(box: Path, tar: Path, words: str) -> None:
    before = sorted(p.relative_to(box) for p in box.rglob("*"))
    with pytest.raises(UserError) as e:
        bundle.extract(tar, box / "target")
    msg = str(e.value)
    assert "\n" not in msg and str(tar) in msg and words in msg, msg
    assert not (box / "target").exists()  # nothing of a refused bundle stays
    assert sorted(p.relative_to(box) for p in box.rglob("*")) == before
    assert (box / "victim").read_text() == "untouched"
    assert not Path("/tmp/lab-bundle-escape").exists()
    # The CLI says it in one line, exit 2, no traceback.
    r = CliRunner().invoke(main, ["report", "render", str(tar)])
    assert r.exit_code == 2 and r.output.startswith("lab: error: ") and words in r.output, r.output
    assert r.output.count("\n") == 1


def test_round_trip_of_a_recorded_run(tmp_path):
    out = tmp_path / "run.tar.gz"
    m = bundle.make(RUN, out)
    assert m["format"] == bundle.FORMAT and m["lab_version"] == __version__
    assert m["scenario"] == "scenario/llc_spread_pinned.py" and m["topology"] == "topology/zen3-2s-mini.toml"
    assert m["kernel"]["kind"] == "recipe" and "kernel/kernels/lab-6.1/recipe.toml" in m["members"]
    b = bundle.extract(out, tmp_path / "open")
    for rel in ("plan.json", "results.json", "out/trace.main.txt", "guest/sysfs.txt"):
        assert (b.run_dir / rel).read_bytes() == (RUN / rel).read_bytes()
    for name, want in m["members"].items():
        data = (b.root / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == want["sha256"]
    assert json.loads((b.root / "host.json").read_text())["accel"] == "tcg"


@pytest.mark.parametrize(
    "name, words",
    [
        ("../escape", "leads out of the bundle"),
        ("run/../../escape", "leads out of the bundle"),
        ("/tmp/lab-bundle-escape", "absolute path"),
        ("C:/escape", "absolute path"),
    ],
)
def test_paths_leaving_the_target_are_refused(box, name, words):
    data = b"evil"
    tar = _tar(box / "b.tar.gz", [(name, data)], _manifest({name: data}))
    _refused(box, tar, words)


@pytest.mark.parametrize(
    "entry, words",
    [
        (_info("run/link", tarfile.SYMTYPE, linkname="../../victim"), "a symbolic link"),
        (_info("run/abs", tarfile.SYMTYPE, linkname="/etc/passwd"), "a symbolic link"),
        (_info("run/hard", tarfile.LNKTYPE, linkname="victim"), "a hard link"),
        (_info("run/null", tarfile.CHRTYPE, devmajor=1, devminor=3), "a character device"),
        (_info("run/sda", tarfile.BLKTYPE, devmajor=8, devminor=0), "a block device"),
        (_info("run/fifo", tarfile.FIFOTYPE), "a FIFO"),
    ],
    ids=["symlink-up", "symlink-abs", "hardlink", "chardev", "blockdev", "fifo"],
)
def test_links_and_devices_are_refused(box, entry, words):
    tar = _tar(box / "b.tar.gz", [entry], _manifest({}))
    _refused(box, tar, words)


def test_a_file_written_through_a_link_made_earlier_cannot_happen(box):
    # The classic two-step: a symlink 'd' -> outside, then 'd/file'.  The link is refused
    # before anything after it is read.
    tar = _tar(box / "b.tar.gz", [_info("d", tarfile.SYMTYPE, linkname=str(box)), ("d/victim", b"owned")], _manifest({}))
    _refused(box, tar, "a symbolic link")


def test_decompression_bomb_header_is_refused_before_writing(box, monkeypatch):
    monkeypatch.setattr(bundle, "MAX_BYTES", 1 << 20)
    big = _info("run/big", tarfile.REGTYPE, size=2 << 20)
    # The header claims 2 MiB: refused from the header, not after unpacking it.
    path = box / "b.tar.gz"
    with gzip.open(path, "wb") as gz, tarfile.open(fileobj=gz, mode="w") as tf:
        m = _manifest({})
        ti = tarfile.TarInfo(bundle.MANIFEST)
        ti.size = len(m)
        tf.addfile(ti, io.BytesIO(m))
        tf.addfile(big, io.BytesIO(bytes(big.size)))
    assert path.stat().st_size < 64 << 10  # zeros compress ~1000:1
    _refused(box, path, "decompression bomb")


def test_decompression_bomb_in_a_header_is_refused(box, monkeypatch):
    # Bytes that are no member's data count too: a PAX extended header that claims
    # 4 MiB (tarfile reads a header's data whole) is stopped at the byte budget.
    monkeypatch.setattr(bundle, "MAX_BYTES", 1 << 20)
    path = box / "b.tar.gz"
    with gzip.open(path, "wb") as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tf:
        pax = _info("././@PaxHeader", tarfile.XHDTYPE, size=4 << 20)
        tf.addfile(pax, io.BytesIO(bytes(pax.size)))
    assert path.stat().st_size < 64 << 10
    _refused(box, path, "decompression bomb")


def test_too_many_members_are_refused(box, monkeypatch):
    monkeypatch.setattr(bundle, "MAX_MEMBERS", 5)
    files = {f"run/f{i}": b"x" for i in range(10)}
    tar = _tar(box / "b.tar.gz", list(files.items()), _manifest(files))
    _refused(box, tar, "more than 5 members")


def test_a_bundle_from_a_newer_lab_is_refused_naming_its_version(box):
    data = b"x"
    tar = _tar(box / "b.tar.gz", [("run/x", data)], _manifest({"run/x": data}, lab_version="99.1.0"))
    _refused(box, tar, "made by lab 99.1.0")
    tar2 = _tar(box / "c.tar.gz", [("run/x", data)], _manifest({"run/x": data}, format=bundle.FORMAT + 1))
    _refused(box, tar2, f"bundle format {bundle.FORMAT + 1}")


@pytest.mark.parametrize(
    "entries, manifest, words",
    [
        ([("run/x", b"changed")], _manifest({"run/x": b"original"}), "does not match its sha256"),
        ([("run/x", b"x")], _manifest({}), "not in the manifest"),
        ([("run/x", b"x")], _manifest({"run/x": b"x", "run/y": b"y"}), "'run/y' of the manifest is missing"),
        ([("run/x", b"x")], None, "no manifest.json"),
        ([("run/x", b"x"), ("run/x", b"x")], _manifest({"run/x": b"x"}), "appears twice"),
        ([("run/x", b"x"), ("run/x/y", b"y")], _manifest({"run/x": b"x", "run/x/y": b"y"}), "which is a file"),
    ],
    ids=["tampered", "unlisted", "missing", "no-manifest", "duplicate", "file-as-dir"],
)
def test_bundles_that_do_not_match_their_manifest_are_refused(box, entries, manifest, words):
    tar = _tar(box / "b.tar.gz", entries, manifest)
    _refused(box, tar, words)


def test_not_a_bundle(box):
    p = box / "b.tar.gz"
    p.write_bytes(b"not gzip at all")
    _refused(box, p, "not a readable bundle")


def test_an_existing_target_is_never_opened_into(tmp_path):
    out = tmp_path / "run.tar.gz"
    bundle.make(RUN, out)
    (tmp_path / "t").mkdir()
    with pytest.raises(UserError, match="already exists"):
        bundle.extract(out, tmp_path / "t")
    assert os.listdir(tmp_path / "t") == []


def test_cli_bundle_and_its_errors(tmp_path):
    r = CliRunner().invoke(main, ["report", "bundle", str(RUN), "-o", str(tmp_path / "x.tar.gz")])
    assert r.exit_code == 0, r.output
    assert "llc-spread-pinned on zen3-2s-mini" in r.output and "verdict FAIL" in r.output
    r = CliRunner().invoke(main, ["report", "bundle", str(RUN), "-o", str(tmp_path / "x.zip")])
    assert r.exit_code == 2 and "name it .tar.gz" in r.output
    # A run that has not finished has no verdict to bundle.
    unfinished = tmp_path / "run"
    shutil.copytree(RUN, unfinished)
    res = json.loads((unfinished / "results.json").read_text())
    res["status"] = "RUNNING"
    (unfinished / "results.json").write_text(json.dumps(res))
    r = CliRunner().invoke(main, ["report", "bundle", str(unfinished), "-o", str(tmp_path / "y.tar.gz")])
    assert r.exit_code == 2 and "has no verdict" in r.output, r.output
    assert not (tmp_path / "y.tar.gz").exists()
    r = CliRunner().invoke(main, ["report", "replay", str(tmp_path / "nope.tar.gz")])
    assert r.exit_code == 2 and "no such bundle" in r.output, r.output


def test_a_recipe_kernel_is_rebuilt_from_the_bundles_own_recipe(tmp_path):
    """The recipe, fragments and patches a bundle carries give the same build inputs as
    this lab's, so replay finds (or builds) the very same kernel."""
    from lab.kernel import recipe as krecipe
    from lab.report import replay

    out = tmp_path / "run.tar.gz"
    bundle.make(RUN, out)
    b = bundle.extract(out, tmp_path / "open")
    kdir = b.root / "kernel" / "kernels"
    mine = krecipe.load("lab-6.1", kernels_dir=kdir)
    assert Path(mine.file).is_relative_to(b.root)
    assert krecipe.input_digest(mine, kdir) == krecipe.input_digest(krecipe.load("lab-6.1"))
    assert b.kernel["kind"] == "recipe" and b.kernel["recipe"] == "lab-6.1"
    # A bundle that claims a recipe it does not carry is refused in one line.
    shutil.rmtree(kdir / "lab-6.1")
    with pytest.raises(UserError, match="carries no kernel/kernels/lab-6.1/recipe.toml"):
        replay.kernel_spec(b, None)


def test_a_kernel_tree_run_carries_its_describe_and_diff(tmp_path):
    import subprocess

    from lab import iterate
    from lab.report import replay

    tree = tmp_path / "linux"
    tree.mkdir()
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tree / "fair.c").write_text("int x;\n")
    subprocess.run([*git, "add", "fair.c"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (tree / "fair.c").write_text("int x = 1; /* the fix */\n")
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    res = json.loads((run / "results.json").read_text())
    res["kernel_info"] = {"id": "x", "release": "6.1.0", **iterate.describe(tree)}
    (run / "results.json").write_text(json.dumps(res))
    m = bundle.make(run, tmp_path / "tree.tar.gz")
    assert m["kernel"]["kind"] == "tree" and m["kernel"]["tree"]["diff_sha256"] == res["kernel_info"]["diff_sha256"]
    b = bundle.extract(tmp_path / "tree.tar.gz", tmp_path / "open")
    assert "+int x = 1; /* the fix */" in (b.root / "kernel" / "tree.diff").read_text()
    # Replay cannot rebuild a developer's tree: it says what the tree was and what to give.
    with pytest.raises(UserError) as e:
        replay.kernel_spec(b, None)
    assert "built from a kernel tree" in str(e.value) and "--kernel" in str(e.value) and "\n" not in str(e.value)
    assert replay.kernel_spec(b, "debian")[0] == "debian"


def test_a_run_too_big_to_open_is_not_bundled(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "MAX_BYTES", 50_000)  # the fixture run holds ~120 KB
    with pytest.raises(UserError, match="a bundle holds at most 48.8 KiB"):
        bundle.make(RUN, tmp_path / "big.tar.gz")
    assert list(tmp_path.iterdir()) == []


def test_replay_fetches_the_bundles_backports_qemu_or_says_which_it_got(tmp_path, monkeypatch):
    """Issue 32, item 2: a bundle that ran on Debian's bookworm-backports QEMU is replayed
    on one fetched here; when the archive has moved on, the replay says which it got."""
    from types import SimpleNamespace

    from lab import emulators
    from lab.emulators import Emulator
    from lab.report import replay

    plan = {"qemu_origin": "debian-backports", "qemu_debian_version": "1:10.0.2+ds-2", "qemu_version": [10, 0, 2]}
    fetched: list[str] = []
    store: list[Emulator] = []

    def fake_fetch(progress=None, mirror=emulators.MIRROR, version="1:10.0.2+ds-2"):
        fetched.append(version)
        store[:] = [Emulator("x86_64", "/s/q", (10, 0, 2), "debian-backports", "10.0.2-x", (), version)]
        return list(store), True

    monkeypatch.setattr(emulators, "built", lambda: list(store))
    monkeypatch.setattr(emulators, "fetch", fake_fetch)
    assert replay.qemu_notes_before(plan, "x86_64") == ["fetched the bundle's QEMU 1:10.0.2+ds-2 from Debian's bookworm-backports"]
    assert replay.qemu_notes_before(plan, "x86_64") == [] and len(fetched) == 1  # there now: not fetched again
    store.clear()
    monkeypatch.setattr(emulators, "fetch", lambda progress=None: fake_fetch(version="1:10.0.3+ds-1"))
    assert replay.qemu_notes_before(plan, "x86_64") == [
        "the bundle ran on Debian's QEMU 1:10.0.2+ds-2; bookworm-backports now serves 1:10.0.3+ds-1, fetched for this replay"]
    assert replay.qemu_notes_before({"qemu_origin": "system", "qemu_version": [7, 2, 0]}, "x86_64") == []
    now = SimpleNamespace(qemu_version=(10, 0, 3), qemu_origin="debian-backports", qemu_debian_version="1:10.0.3+ds-1")
    assert replay.qemu_notes_after(plan, now) == [
        "QEMU differs: the bundle ran 10.0.2 (debian-backports, 1:10.0.2+ds-2), this replay 10.0.3 (debian-backports, 1:10.0.3+ds-1)"]
    same = SimpleNamespace(qemu_version=(10, 0, 2), qemu_origin="debian-backports", qemu_debian_version="1:10.0.2+ds-2")
    assert replay.qemu_notes_after(plan, same) == []
