"""Several lab processes on one cache at once: they wait for each other or reuse what
another made, never corrupt it, and never die with a traceback.

Every test starts real processes (2-4) on one temporary LAB_CACHE, held at a start line
until all of them are up, so they race for real.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import lzma
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, LAB_CACHE=str(tmp_path / "cache"), **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def race(
    tmp_path: Path, code: str, n: int, *, env: dict[str, str], setup: str = ""
) -> list[tuple[int, str, str]]:
    """Run *code* in *n* Python processes that start it together (after *setup*, the
    imports); (rc, stdout, stderr) each."""
    line = tmp_path / f"start-{time.monotonic_ns()}"
    line.mkdir()
    go = line / "go"
    prologue = "import os, sys, time\nfrom pathlib import Path\n" + textwrap.dedent(setup) + "\n"
    prologue += f"Path({str(line)!r}, str(os.getpid())).touch()\n"
    prologue += f"while not Path({str(go)!r}).exists():\n    time.sleep(0.005)\n"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", prologue + textwrap.dedent(code)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(n)
    ]
    end = time.monotonic() + 60
    while len(list(line.iterdir())) < n and time.monotonic() < end:
        if any(p.poll() is not None for p in procs):
            break  # one died before the start: its stderr says why
        time.sleep(0.01)
    go.touch()
    out = []
    for p in procs:
        o, e = p.communicate(timeout=120)
        out.append((p.returncode, o.decode(), e.decode()))
    return out


def assert_clean(results: list[tuple[int, str, str]]) -> None:
    for rc, _, err in results:
        assert rc == 0 and "Traceback" not in err, err


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".tmp"))


# --- the vmlinux a PVH boot extracts ---------------------------------------------------


def test_concurrent_boots_extract_the_vmlinux_once(tmp_path):
    elf = b"\x7fELF" + os.urandom(4 << 20)  # big enough that the extractions overlap
    bz = tmp_path / "bzImage"
    bz.write_bytes(b"MZ" + lzma.compress(elf, format=lzma.FORMAT_XZ, preset=0))
    (tmp_path / "config").write_text("CONFIG_PVH=y\n")
    setup = """
        from lab.backends import guest
        from lab.kernel.artifact import KernelArtifact
        unpack = guest._decompress
        def slow(kind, blob):  # as slow as a real kernel's 30 MB, so the boots overlap
            time.sleep(1)
            return unpack(kind, blob)
        guest._decompress = slow
    """
    code = f"""
        k = KernelArtifact("k", "x86_64", Path({str(bz)!r}), "r", None, Path({str(tmp_path / "config")!r}), frozenset(), "kid")
        out = guest.boot_image(k)
        print(out, len(out.read_bytes()))
    """
    results = race(tmp_path, code, 4, env=_env(tmp_path), setup=setup)
    assert_clean(results)
    outs = {o.strip() for _, o, _ in results}
    # keyed by the image's content as well as the kernel's id
    out = tmp_path / "cache" / "vmlinux" / f"kid-{hashlib.sha256(bz.read_bytes()).hexdigest()[:16]}.elf"
    assert outs == {f"{out} {len(elf)}"}
    assert out.read_bytes() == elf
    assert leftovers(out.parent) == []
    # The three that came second waited for the first rather than extracting again.
    assert sum("waiting for another lab extracting the vmlinux of k (pid" in e for _, _, e in results) == 3


# --- the kernel store -------------------------------------------------------------------

PUBLISH = """
    import hashlib, json
    from lab.kernel import store
    replace = sys.argv[2] == "replace"
    for i in range(int(sys.argv[1])):
        with store.staging("entry", replace=replace) as tmp:
            image = os.urandom(1 << 16)
            (tmp / "bzImage").write_bytes(image)
            (tmp / "metadata.json").write_text(json.dumps({"id": "entry", "name": "x", "arch": "x86_64",
                "image": "bzImage", "release": "r", "image_size": len(image)}))
"""

READ = """
    from lab.kernel import store
    missing = bad = seen = 0
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        a = store.get("entry")
        if a is None or not a.image.is_file():
            missing += 1
        elif a.metadata["image_size"] != 1 << 16:
            bad += 1
        seen += 1
    print(missing, bad, seen)
"""


@pytest.mark.parametrize("mode", ["keep", "replace"])
def test_concurrent_publish_of_one_store_entry(tmp_path, monkeypatch, mode):
    """Publishers of one id (two recipes that make the same kernel; `--force` rebuilds)
    never fail, and a reader always finds the whole entry."""
    env = _env(tmp_path)
    subprocess.run([sys.executable, "-c", "import os, sys\n" + textwrap.dedent(PUBLISH), "1", mode], env=env, check=True)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", "import os, sys, time\n" + textwrap.dedent(PUBLISH), "150", mode],
            env=env, stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    reader = subprocess.Popen(
        [sys.executable, "-c", "import os, sys, time\n" + textwrap.dedent(READ), "3"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    for w in writers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0 and not err, err.decode()
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err.decode()
    missing, bad, seen = map(int, out.split())
    assert seen > 100 and (missing, bad) == (0, 0)
    monkeypatch.setenv("LAB_CACHE", env["LAB_CACHE"])
    from lab.kernel import store

    assert [a.id for a in store.entries()] == ["entry"]
    assert leftovers(store.root()) == []


def test_removal_is_one_step(tmp_path, monkeypatch):
    """`lab kernel rm` renames the entry away before deleting its files: a reader sees
    the whole entry or none, never one half deleted."""
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    from lab.kernel import store

    with store.staging("gone") as tmp:
        (tmp / "bzImage").write_bytes(b"x")
        (tmp / "metadata.json").write_text(json.dumps({"id": "gone", "name": "x", "arch": "x86_64", "image": "bzImage", "release": "r"}))
    renamed = []
    real_rename = os.rename

    def spy(a, b):
        renamed.append((Path(a).name, Path(b).parent.name))
        assert Path(a, "bzImage").exists()  # nothing deleted before the entry left
        real_rename(a, b)

    monkeypatch.setattr(store.os, "rename", spy)
    store.remove("gone")
    assert renamed and renamed[0][0] == "gone"
    assert store.get("gone") is None and list(store.root().iterdir()) == []


# --- initramfs layers ----------------------------------------------------------------


def test_concurrent_layer_builds_fill_once(tmp_path):
    log = tmp_path / "fills"
    code = f"""
        def fill(root):
            with open({str(log)!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")
            (root / "bin").mkdir()
            (root / "bin" / "tool").write_bytes(b"x" * 100000)
            time.sleep(0.5)
        out = initramfs.cached_tree_layer("tools", "key1", fill)
        # The plain entry point of the same layer finds it made.
        assert initramfs.tree_layer("tools", Path("/nonexistent"), "key1") == out
        print(out)
    """
    results = race(tmp_path, code, 4, env=_env(tmp_path), setup="from lab.image import initramfs")
    assert_clean(results)
    assert len({o for _, o, _ in results}) == 1
    assert len(log.read_text().split()) == 1  # one filled it, three reused it
    out = Path(results[0][1].strip())
    data = out.read_bytes()
    assert data.startswith(b"070701") and b"bin/tool" in data and len(data) % 512 == 0
    assert leftovers(out.parent) == []


def test_concurrent_tree_layers_write_whole_files(tmp_path):
    """Without the caller's lock (runner.py builds the tree itself), every writer
    still publishes a whole archive through a name of its own."""
    src = tmp_path / "root"
    (src / "usr").mkdir(parents=True)
    for i in range(20):
        (src / "usr" / f"f{i}").write_bytes(os.urandom(50000))
    code = f"""
        print(initramfs.tree_layer("workloads", Path({str(src)!r}), "k"))
    """
    results = race(tmp_path, code, 4, env=_env(tmp_path), setup="from lab.image import initramfs")
    assert_clean(results)
    out = Path(results[0][1].strip())
    from lab.image import cpio

    buf = io.BytesIO()
    w = cpio.Writer(buf)
    for e in cpio.tree(src):
        w.add(e)
    w.close()
    assert out.read_bytes() == buf.getvalue()
    assert leftovers(out.parent) == []


def test_failed_layer_write_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    from lab.image import cpio, initramfs

    out = initramfs.images_dir() / "x.cpio"
    with pytest.raises(FileNotFoundError):  # a layer naming a file that is not there: lab's bug
        cpio.write(out, [cpio.file("a", data=b"1"), cpio.file("b", source=tmp_path / "missing")])
    assert list(out.parent.iterdir()) == []


def test_stale_temporary_files_are_cleaned(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    from lab import atomic, paths

    d = paths.cache_dir() / "images"
    d.mkdir()
    dead = d / ".tmp-999999999-x.cpio-abc"  # no such pid
    dead.write_bytes(b"half")
    alive = d / f".tmp-{os.getpid()}-y.cpio-abc"  # being written by a live lab
    alive.write_bytes(b"half")
    with atomic.atomic_file(d / "z") as tmp:
        tmp.write_bytes(b"z")
    assert sorted(p.name for p in d.iterdir()) == sorted([alive.name, "z"])


# --- kernel builds ---------------------------------------------------------------------


@pytest.fixture
def slow_fake(fake_kernels, tmp_path):
    """The fake recipe, with a make that takes a second and counts its kernel builds."""
    kdir, tree = fake_kernels()
    mk = tree / "Makefile"
    count = tmp_path / "builds"
    mk.write_text(
        mk.read_text().replace(
            "\t@mkdir -p $(O)/arch/x86/boot $(O)/arch/arm64/boot\n",
            f"\t@echo built >> {count}\n\t@sleep 1\n\t@mkdir -p $(O)/arch/x86/boot $(O)/arch/arm64/boot\n",
        )
    )
    return kdir, count


def test_concurrent_builds_of_a_recipe_wait_and_reuse(tmp_path, slow_fake):
    """The second and third `--kernel fake` wait for the first build, then use its kernel
    (before: they failed at once, "another lab build is using ...")."""
    kdir, count = slow_fake
    code = """
        print(resolve("fake", "x86_64").id)
    """
    env = _env(tmp_path, LAB_KERNELS=str(kdir))
    results = race(tmp_path, code, 3, env=env, setup="from lab.kernel import resolve")
    assert_clean(results)
    ids = {o.strip() for _, o, _ in results}
    assert len(ids) == 1 and len(ids.pop()) == 32
    assert count.read_text().split() == ["built"]  # made once
    waited = [e for _, _, e in results if "waiting for another lab building fake (pid " in e]
    assert len(waited) == 2


def test_cli_builds_at_once(tmp_path, slow_fake):
    """Two `lab kernel build` at once: both print the kernel's id, exit 0."""
    kdir, count = slow_fake
    code = """
        sys.argv = ["lab", "kernel", "build", "fake", "-j", "1"]
        main()
    """
    results = race(tmp_path, code, 2, env=_env(tmp_path, LAB_KERNELS=str(kdir)), setup="from lab.cli import main")
    assert_clean(results)
    assert len({o.strip().splitlines()[-1] for _, o, _ in results}) == 1
    assert count.read_text().split() == ["built"]


HOLD = """
    from lab.lock import cache_lock
    with cache_lock(sys.argv[1], "building fake"):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
"""


def hold(env: dict[str, str], name: str, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n" + textwrap.dedent(HOLD), name, str(seconds)],
        env=env, stdout=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stdout.readline() == b"held\n"
    return p


def test_lock_timeout_is_one_line(tmp_path, slow_fake):
    kdir, _ = slow_fake
    env = _env(tmp_path, LAB_KERNELS=str(kdir), LAB_LOCK_TIMEOUT="1")
    holder = hold(env, "work-fake-x86_64", 60)
    try:
        cp = subprocess.run(
            [sys.executable, "-c", "import sys; sys.argv = ['lab', 'kernel', 'build', 'fake']; "
             "from lab.cli import main; main()"],
            env=env, capture_output=True, timeout=60,
        )
    finally:
        holder.kill()
        holder.wait()
    err = [ln for ln in cp.stderr.decode().splitlines() if ln.strip()]
    assert cp.returncode == 3
    assert err[0].endswith("] build: kernel fake (x86_64)")  # the progress line, piped
    assert err[1:] == [
        f"lab: waiting for another lab building fake (pid {holder.pid})",
        f"lab: error: gave up after 1s waiting for another lab building fake (pid {holder.pid}, "
        f"lock {tmp_path / 'cache' / 'locks' / 'work-fake-x86_64.lock'}); set LAB_LOCK_TIMEOUT to wait longer",
    ]


def test_a_killed_holder_frees_the_lock(tmp_path, monkeypatch):
    env = _env(tmp_path)
    monkeypatch.setenv("LAB_CACHE", env["LAB_CACHE"])
    holder = hold(env, "x", 60)
    from lab.lock import cache_lock

    t0 = time.monotonic()
    os.kill(holder.pid, signal.SIGKILL)
    with cache_lock("x", "testing", timeout=30) as waited:
        assert time.monotonic() - t0 < 10
    holder.wait()
    assert waited in (True, False)
    with pytest.raises(RuntimeError, match="taken twice"):
        with cache_lock("y", "a"), cache_lock("y", "b"):
            pass


# --- lab kernel fetch debian, with a fake apt ---------------------------------------------

RELEASE = "6.1.0-99-amd64"
PKG = f"linux-image-{RELEASE}"


def _fake_deb(path: Path) -> None:
    """What the fake apt-get downloads: a tarball the fake dpkg-deb unpacks."""
    files = {
        f"boot/vmlinuz-{RELEASE}": b"MZ fake bzImage" + b"\0" * 4096,
        f"boot/config-{RELEASE}": b"CONFIG_VIRTIO=m\nCONFIG_VIRTIO_PCI=m\nCONFIG_VIRTIO_CONSOLE=m\n",
        f"boot/System.map-{RELEASE}": b"ffffffff81000000 T _text\n",
        f"lib/modules/{RELEASE}/kernel/virtio.ko.xz": lzma.compress(b"\x7fELF virtio"),
        f"lib/modules/{RELEASE}/modules.dep": b"kernel/virtio.ko.xz:\n",
    }
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))


@pytest.fixture
def fake_apt(tmp_path):
    """apt-cache, apt-get, dpkg and dpkg-deb on PATH that know one kernel package; each
    download takes a second and is counted."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    deb = tmp_path / "pkg.deb"
    _fake_deb(deb)
    count = tmp_path / "downloads"
    scripts = {
        "apt-cache": f'echo "{PKG} - Linux 6.1 for 64-bit PCs (signed)"',
        "apt-get": f'[ "$1" = download ] || exit 0\necho x >> {count}\nsleep 1\ncp {deb} ./{PKG}_6.1.999-1_amd64.deb',
        "dpkg": 'case "$1" in --print-architecture) echo amd64;; esac',
        "dpkg-deb": 'case "$1" in -f) echo 6.1.999-1;; -x) mkdir -p "$3" && tar -xzf "$2" -C "$3";; esac',
    }
    for name, body in scripts.items():
        f = bin_ / name
        f.write_text(f"#!/bin/sh\n{body}\n")
        f.chmod(0o755)
    return bin_, count


def test_concurrent_debian_fetches_download_once(tmp_path, fake_apt):
    bin_, count = fake_apt
    env = _env(tmp_path, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}")
    code = """
        a = fetch_debian("x86_64")
        print(a.id, a.image.read_bytes()[:2].decode(), a.metadata["guest_modules"])
    """
    results = race(tmp_path, code, 3, env=env, setup="from lab.kernel import fetch_debian")
    assert_clean(results)
    assert {o.strip() for _, o, _ in results} == {
        f"debian-{RELEASE} MZ ['virtio', 'virtio_pci', 'virtio_console']"
    }
    assert count.read_text().split() == ["x"]  # one download; the others waited and reused it
    assert sum("waiting for another lab fetching Debian's x86_64 kernel" in e for _, _, e in results) == 2
    entry = tmp_path / "cache" / "kernels" / f"debian-{RELEASE}"
    assert (entry / "lib" / "modules" / RELEASE / "kernel" / "virtio.ko").read_bytes() == b"\x7fELF virtio"
    assert leftovers(entry.parent) == []


def test_gzipped_image_decompressed_by_many_at_once(tmp_path):
    """from_image's decompressed arm64 Image: each writer has its own temporary name."""
    image = b"\0" * 56 + b"ARM\x64" + os.urandom(1 << 20)
    gz = tmp_path / "vmlinuz"
    gz.write_bytes(gzip.compress(image, compresslevel=1))
    code = f"""
        print(from_image(Path({str(gz)!r}), "arm64").image)
    """
    results = race(tmp_path, code, 4, env=_env(tmp_path), setup="from lab.kernel import from_image")
    assert_clean(results)
    out = Path(results[0][1].strip())
    assert out.read_bytes() == image and leftovers(out.parent) == []


def test_threads_wait_for_each_other(tmp_path, monkeypatch):
    """Two threads of one process wait for each other like two processes (flock locks
    belong to the open file); only one thread taking a lock twice is a bug."""
    import threading

    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    from lab.lock import cache_lock

    inside, order = threading.Event(), []

    def first():
        with cache_lock("t", "testing"):
            inside.set()
            time.sleep(0.3)
            order.append("first")

    t = threading.Thread(target=first)
    t.start()
    inside.wait(10)
    with cache_lock("t", "testing", timeout=30) as waited:
        order.append("second")
    t.join()
    assert order == ["first", "second"] and waited


def test_unusable_cache_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "file" / "cache"))
    from lab import paths
    from lab.errors import UserError

    with pytest.raises(UserError, match=r"cannot use .*/file/cache as lab's cache \(Not a directory\); set LAB_CACHE"):
        paths.cache_dir()


@pytest.mark.parametrize("exchange", [True, False])
def test_replacing_an_entry(tmp_path, monkeypatch, exchange):
    """--force puts the new entry in place of the old; where the filesystem cannot
    exchange two names (no renameat2), by two renames, the old one put back if the
    second fails."""
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    from lab.kernel import store

    if not exchange:
        monkeypatch.setattr(store.ctypes, "CDLL", lambda *a, **k: object())

    def publish(image: bytes) -> None:
        with store.staging("e", replace=True) as tmp:
            (tmp / "bzImage").write_bytes(image)
            (tmp / "metadata.json").write_text(json.dumps({"id": "e", "name": "x", "arch": "x86_64", "image": "bzImage", "release": "r"}))

    publish(b"old")
    publish(b"new")
    assert store.get("e").image.read_bytes() == b"new"
    assert [p.name for p in store.root().iterdir()] == ["e"]
    if not exchange:
        real, tries = os.rename, []

        def fail_second(a, b):
            if Path(b).name == "e" and Path(a).name.startswith(".tmp-"):
                tries.append(a)
                if len(tries) == 2:  # the first fails by itself: the entry is there
                    raise OSError(28, "No space left on device")
            real(a, b)

        monkeypatch.setattr(store.os, "rename", fail_second)
        from lab.errors import InfraError

        with pytest.raises(InfraError, match="cannot add kernel e to the store"):
            publish(b"newer")
        assert len(tries) == 2
        assert store.get("e").image.read_bytes() == b"new"
        assert [p.name for p in store.root().iterdir()] == ["e"]


def test_an_unpacked_source_tree_is_replaced_without_a_moment_missing(tmp_path):
    """kernel/source.py publishes a re-unpacked tree by exchanging it with the old one, so a
    build copying from the old tree never finds it gone; the old one is removed after."""
    from lab.kernel import source

    dest, tmp = tmp_path / "debian-linux-source", tmp_path / ".tmp-new"
    (dest / "tree").mkdir(parents=True)
    (dest / "tree" / "Makefile").write_text("old")
    (tmp / "tree").mkdir(parents=True)
    (tmp / "tree" / "Makefile").write_text("new")
    source._publish(tmp, dest)
    assert (dest / "tree" / "Makefile").read_text() == "new" and not tmp.exists()
    (tmp_path / ".tmp-2" / "tree").mkdir(parents=True)
    source._publish(tmp_path / ".tmp-2", tmp_path / "fresh")  # nothing there yet: a plain rename
    assert (tmp_path / "fresh" / "tree").is_dir()


def test_unpacking_a_source_again_never_leaves_it_missing(tmp_path, monkeypatch):
    """End to end through resolve(): a changed linux-source tarball is unpacked again
    while other recipes' builds may be copying from the tree: after every deletion the
    tree is there, old or new.  A failed unpack leaves the tree as it was and nothing
    behind (a GB each: before, they piled up in sources/)."""
    import shutil

    from lab.errors import InfraError, UserError
    from lab.kernel import source

    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    tarball = tmp_path / "linux-source-6.1.tar.xz"

    def pack(version: str) -> None:
        top = tmp_path / "pack" / "linux-source-6.1"
        shutil.rmtree(tmp_path / "pack", ignore_errors=True)
        top.mkdir(parents=True)
        (top / "Makefile").write_text(f"# {version}\n")
        (top / "Kconfig").write_text("")
        subprocess.run(["tar", "-cJf", tarball, "-C", tmp_path / "pack", "linux-source-6.1"], check=True)

    monkeypatch.setattr(source, "DEBIAN_TARBALLS", {"6.1": tarball})
    monkeypatch.setattr(source, "_dpkg_version", lambda pkg: "6.1.999-1")
    pack("old")
    tree = source.resolve("debian:6.1").tree
    assert (tree / "Makefile").read_text() == "# old\n"

    real_rmtree, seen = shutil.rmtree, []

    def rmtree(path, *a, **kw):  # what a build copying from the tree would find right after each deletion
        real_rmtree(path, *a, **kw)
        seen.append((tree / "Makefile").read_text() if (tree / "Makefile").is_file() else None)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    pack("new, a longer one")
    again = source.resolve("debian:6.1")
    assert again.tree == tree and (tree / "Makefile").read_text() == "# new, a longer one\n"
    assert seen and None not in seen, seen
    assert sorted(p.name for p in tree.parent.parent.iterdir()) == [tree.parent.name]

    tarball.write_bytes(b"not xz, and a different size")
    with pytest.raises((InfraError, UserError)):
        source.resolve("debian:6.1")
    assert (tree / "Makefile").read_text() == "# new, a longer one\n"
    assert sorted(p.name for p in tree.parent.parent.iterdir()) == [tree.parent.name]
