"""Captures and guest snapshots are data: bounded, regular files only, one-line errors (issue 13)."""

from __future__ import annotations

import gzip
import io
import os
import resource
import shutil
import tarfile
import threading
from pathlib import Path

import pytest
from _bounds import one_line, within
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import importer, limits, sysfs
from lab.errors import UserError
from lab.limits import MAX_CPUS, MAX_FILE_BYTES, MAX_NODES

CAPS = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
HOST = CAPS / "ci-host.tar.gz"  # 66 regular files: 2 CPUs, 1 node
TOPO = "capture/sys/devices/system/cpu/cpu0/topology/core_cpus_list"
NODE = "capture/sys/devices/system/node/node0/cpulist"
SECRET = "s3cr3t-token: must never reach a message"


def unpack(tmp_path: Path) -> Path:
    with tarfile.open(HOST) as tf:
        tf.extractall(tmp_path / "cap", filter="data")
    return tmp_path / "cap"


def refused(path: Path, *words: str, seconds: float = 2.0) -> str:
    with within(seconds), pytest.raises(UserError) as e:
        sysfs.read_capture(path)
    msg = one_line(str(e.value))
    assert msg.startswith(f"{path}: ") and all(w in msg for w in words), msg
    assert SECRET[:6] not in msg
    return msg


def peak_rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def in_thread(fn, seconds: float = 5.0):
    """fn()'s result or exception; fails if it blocks (a FIFO waiting for a writer)."""
    out: list = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            out.append(e)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(seconds)
    assert out, f"blocked for {seconds}s"
    return out[0]


# ---- directories -------------------------------------------------------------------------


def test_fixture_still_reads(tmp_path):
    assert sorted(sysfs.read_capture(unpack(tmp_path)).cpus) == [0, 1]
    assert sorted(sysfs.read_capture(HOST).cpus) == [0, 1]


@pytest.mark.parametrize(
    "rel, content, words",
    [
        (NODE, "0-999999999", ("node0/cpulist", "ids go up to 4095")),  # before: MemoryError
        (TOPO, "0-", ("core_cpus_list", "no end")),
        ("capture/sys/devices/system/cpu/cpu0/cache/index0/level", "x", ("cache/index0", "cache level 'x'")),
        ("capture/sys/devices/system/node/node0/distance", "10 x", ("node0/distance", "distance 'x'")),
        ("capture/sys/devices/system/node/node0/distance", "10 256", ("out of range",)),
        ("capture/sys/devices/system/node/node0/distance", "10 " * (MAX_NODES + 1), ("more than the 1024",)),
        ("capture/sys/devices/system/cpu/cpu0/topology/physical_package_id", "9" * 5000, ("physical_package_id", "out of range")),
        ("capture/sys/devices/system/cpu/cpu0/topology/core_id", "\u0663", ("not a whole number",)),
        ("capture/proc/cpuinfo", "vendor_id : AuthenticAMD\ncpu family : 99999999999999999999\n", ("cpu family",)),
        ("capture/sys/devices/system/cpu/cpu99999999999999999999/topology/core_id", "0", ("CPU '9999",)),
        (f"capture/sys/devices/system/cpu/cpu{MAX_CPUS}/topology/core_id", "0", (f"CPU {MAX_CPUS} is out of range",)),
        ("capture/sys/devices/system/node/node1024/cpulist", "0", ("node 1024 is out of range",)),
        ("capture/sys/devices/system/cpu/cpu0/cache/index99999/level", "1", ("cache index",)),
        ("capture/proc/schedstat", "version 15\ncpu0 1 2\ndomain0 zz 1 2\n", ("proc/schedstat: line 3", "not hex")),
        ("capture/proc/schedstat", "cpu0 1\ndomain0 " + "f" * 400_000 + " 1\n", ("line 2", "longer than")),
        ("capture/proc/schedstat", "cpu0 1\ndomain\u0663 ff 1\n", ("domain level",)),
    ],
)
def test_bad_values_name_the_file(tmp_path, rel, content, words):
    root = unpack(tmp_path)
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(content)
    refused(root, *words)


def test_huge_file_is_refused_unread(tmp_path):
    # Before: 1 GiB of zeros was read whole and decoded (RSS twice the file), then parsed.
    root = unpack(tmp_path)
    p = root / TOPO
    p.unlink()
    with open(p, "wb") as f:
        f.truncate(1 << 30)  # sparse: costs no disk
    before = peak_rss_mb()
    refused(root, "core_cpus_list", f"larger than {MAX_FILE_BYTES >> 20} MiB", seconds=1.0)
    assert peak_rss_mb() - before < 100


def test_huge_file_nobody_reads_is_skipped(tmp_path):
    root = unpack(tmp_path)
    with open(root / "capture/sys/devices/system/cpu/cpu0/cpufreq_dump", "wb") as f:
        f.truncate(1 << 30)
    with within(1.0):
        assert sorted(sysfs.read_capture(root).cpus) == [0, 1]


def test_symlink_is_not_followed(tmp_path):
    # Before: the link was read and its first 60 characters put in the error message.
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n")
    root = unpack(tmp_path)
    (root / TOPO).unlink()
    (root / TOPO).symlink_to(secret)
    refused(root, "core_cpus_list", "a symbolic link")


def test_symlinked_directory_is_not_followed(tmp_path):
    root = unpack(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(root / "capture/sys", elsewhere)
    (root / "capture/sys").symlink_to(elsewhere)
    refused(root, "no CPU topology files", "symbolic links are not followed (capture/sys)")


def test_fifo_and_device_are_refused_without_blocking(tmp_path):
    root = unpack(tmp_path)
    (root / TOPO).unlink()
    os.mkfifo(root / TOPO)
    e = in_thread(lambda: sysfs.read_capture(root))  # before: read forever
    assert isinstance(e, UserError) and "a FIFO, not a regular file" in one_line(str(e))
    fifo = tmp_path / "c.tar.gz"
    os.mkfifo(fifo)
    e = in_thread(lambda: sysfs.read_capture(fifo))  # before: tarfile.open() waited forever
    assert isinstance(e, UserError) and "a FIFO, not a capture" in one_line(str(e))


def test_capture_budget(tmp_path):
    root = unpack(tmp_path)
    with pytest.raises(UserError, match="more than .* files"):
        sysfs._read_dir(root, [], sysfs._Budget(root, 10, 1 << 20))
    with pytest.raises(UserError, match="of files; not a topology capture"):
        sysfs._read_dir(root, [], sysfs._Budget(root, 1000, 100))


# ---- tarballs ----------------------------------------------------------------------------


def make_tar(path: Path, replace: dict[str, tarfile.TarInfo | bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as out, tarfile.open(HOST) as src:
        for m in src.getmembers():
            if m.name in replace:
                continue
            out.addfile(m, src.extractfile(m))
        for name, what in replace.items():
            if isinstance(what, bytes):
                info = tarfile.TarInfo(name)
                info.size = len(what)
                out.addfile(info, io.BytesIO(what))
            else:
                what.name = name
                out.addfile(what)
    return path


def special(kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo("x")
    info.type = kind
    info.linkname = link
    return info


@pytest.mark.parametrize(
    "kind, words",
    [
        (tarfile.SYMTYPE, "a symbolic link"),
        (tarfile.LNKTYPE, "a hard link"),
        (tarfile.FIFOTYPE, "a FIFO"),
        (tarfile.CHRTYPE, "a character device"),
        (tarfile.DIRTYPE, "a directory"),
    ],
)
def test_tar_members_must_be_regular(tmp_path, kind, words):
    # Before: symlink members were skipped without a word (and a directory reader followed them).
    tar = make_tar(tmp_path / "c.tar.gz", {TOPO: special(kind, "/etc/passwd")})
    refused(tar, "core_cpus_list", words)
    # A link nobody reads is no reason to refuse the capture.
    ok = make_tar(tmp_path / "d.tar.gz", {"capture/sys/devices/system/cpu/cpu0/subsystem": special(tarfile.SYMTYPE, "..")})
    assert sorted(sysfs.read_capture(ok).cpus) == [0, 1]


def test_tar_member_too_big_is_refused_unread(tmp_path):
    tar = make_tar(tmp_path / "c.tar.gz", {TOPO: b"0" * (MAX_FILE_BYTES + 1)})
    refused(tar, "core_cpus_list", "larger than 1 MiB")


def test_tar_bomb_is_bounded(tmp_path):
    # 8 MiB of zeros compresses to a few KiB; with a 1 MiB budget it is refused while
    # skipping it, instead of decompressing whatever the headers claim.
    tar = make_tar(tmp_path / "c.tar.gz", {"capture/junk": bytes(8 << 20)})
    assert tar.stat().st_size < 100_000
    with pytest.raises(UserError, match="of files; not a topology capture"):
        sysfs._read_tar(tar, sysfs._Budget(tar, 1000, 1 << 20))
    with pytest.raises(UserError, match="more than .* files"):
        sysfs._read_tar(tar, sysfs._Budget(tar, 5, 1 << 30))


def test_not_a_tarball(tmp_path):
    zeros = tmp_path / "z.tar"
    with open(zeros, "wb") as f:
        f.truncate(64 << 20)  # before: 1 GB of zeros: read, then "no CPU topology files"
    refused(zeros, "no CPU topology files", seconds=2.0)
    bad = tmp_path / "b.tar.gz"
    bad.write_bytes(gzip.compress(b"not a tar at all" * 100)[:50])
    refused(bad, "not a readable tarball")
    big = tmp_path / "big.tar"
    with open(big, "wb") as f:
        f.truncate(limits.MAX_CAPTURE_BYTES + 1)
    refused(big, "larger than 128 MiB", seconds=1.0)


# ---- the guest's snapshot ------------------------------------------------------------------


def snapshot(tmp_path: Path, sysfs_txt: str, **files: str) -> Path:
    d = tmp_path / "guest"
    d.mkdir(exist_ok=True)
    (d / "sysfs.txt").write_text(sysfs_txt)
    for name, text in files.items():
        (d / name).write_text(text)
    return d


GUEST_OK = (
    "/sys/devices/system/cpu/online:0-1\n"
    "/sys/devices/system/cpu/cpu0/topology/physical_package_id:0\n"
    "/sys/devices/system/cpu/cpu1/topology/physical_package_id:0\n"
)


@pytest.mark.parametrize(
    "text, files, words",
    [
        ("/sys/devices/system/cpu/online:0-999999999\n", {}, "ids go up to"),  # before: MemoryError
        (GUEST_OK, {"schedstat": "version 15\ncpu0 0 0\ndomain0 zz 1 2\n"}, "not hex"),  # before: ValueError
        (GUEST_OK, {"schedstat": "cpu0 0\ndomain0 " + "f" * 400_000 + " 1\n"}, "longer than"),  # before: >20 s
        (GUEST_OK + "/sys/devices/system/cpu/cpu0/topology/die_id:" + "9" * 5000 + "\n", {}, "die_id"),
        (GUEST_OK + "/sys/devices/system/cpu/cpu0/cache/index0/level:one\n"
         "/sys/devices/system/cpu/cpu0/cache/index0/shared_cpu_list:0\n", {}, "cache level 'one'"),
    ],
)
def test_guest_snapshot_values(tmp_path, text, files, words):
    d = snapshot(tmp_path, text, **files)
    with within(2.0), pytest.raises(UserError) as e:
        sysfs.read_snapshot(d)
    assert words in one_line(str(e.value)) and str(d) in str(e.value)


def test_guest_snapshot_files_are_data(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    d = snapshot(tmp_path, GUEST_OK)
    (d / "cpuinfo").symlink_to(secret)  # a guest's tar stream could carry one
    with pytest.raises(UserError, match="a symbolic link, not a regular file"):
        sysfs.read_snapshot(d)
    (d / "cpuinfo").unlink()
    (d / "sysfs.txt").unlink()
    with open(d / "sysfs.txt", "wb") as f:
        f.truncate(1 << 30)
    with within(1.0), pytest.raises(UserError, match="larger than 64 MiB"):
        sysfs.read_snapshot(d)
    (d / "sysfs.txt").unlink()
    os.mkfifo(d / "sysfs.txt")
    e = in_thread(lambda: sysfs.read_snapshot(d))
    assert isinstance(e, UserError) and "a FIFO" in str(e)


PATHS = [
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/cpu{n}/topology/physical_package_id",
    "/sys/devices/system/cpu/cpu{n}/topology/core_id",
    "/sys/devices/system/cpu/cpu{n}/topology/thread_siblings_list",
    "/sys/devices/system/cpu/cpu{n}/cache/index{n}/level",
    "/sys/devices/system/cpu/cpu{n}/cache/index{n}/shared_cpu_list",
    "/sys/devices/system/node/node{n}/cpulist",
    "/sys/devices/system/node/node{n}/distance",
    "/sys/kernel/debug/sched/domains/cpu{n}/domain{n}/name",
]
numbers = st.one_of(st.integers(-2, 5000).map(str), st.sampled_from(["", "x", "\u0663", "9" * 30, "1_0", "-0"]))
values = st.one_of(
    numbers,
    st.text(alphabet="0123456789-,: xf\x00", max_size=20),
    st.lists(numbers, max_size=4).map(" ".join),
)


@settings(max_examples=300, deadline=5000)
@given(st.lists(st.tuples(st.sampled_from(PATHS), numbers, values), max_size=12), st.text(max_size=80))
def test_fuzz_guest_snapshot(lines, schedstat):
    text = "".join(p.format(n=n) + ":" + v.replace("\n", " ") + "\n" for p, n, v in lines)
    try:
        view = sysfs.parse_grep(text, {"proc/schedstat": schedstat})
    except UserError as e:
        one_line(str(e))
        return
    assert all(0 <= c < MAX_CPUS for c in view.cpus) and all(0 <= n < MAX_NODES for n in view.nodes)
    for cv in view.cpus.values():
        assert all(0 <= c < MAX_CPUS for lst in cv.lists.values() for c in lst)


# ---- import of what was read ------------------------------------------------------------------


def test_import_of_garbled_siblings_is_one_line(tmp_path):
    root = unpack(tmp_path)
    # CPU 0's siblings leave CPU 0 out: before, an IndexError in the importer.
    topo = root / "capture/sys/devices/system/cpu/cpu0/topology"
    for name in ("core_cpus_list", "thread_siblings_list"):
        p = topo / name
        if p.exists():
            p.write_text("1\n")
    # The mask twins beside the lists still say CPU 0: that disagreement is named first.
    if (topo / "thread_siblings").exists():
        with pytest.raises(UserError) as e:
            sysfs.read_capture(root)
        assert "cpu0/topology/" in str(e.value) and "the mask says CPUs 0" in one_line(str(e.value))
    # Garbled the same way in both forms, the importer names it.
    for name in ("core_cpus", "thread_siblings"):
        if (topo / name).exists():
            (topo / name).write_text("2\n")
    view = sysfs.read_capture(root)
    with pytest.raises(UserError) as e:
        importer.view_to_spec(view, "m", str(root))
    assert one_line(str(e.value)).startswith(f"import of {root}: groups.cores")


def test_import_cleans_the_model_name(tmp_path):
    root = unpack(tmp_path)
    info = root / "capture/proc/cpuinfo"
    info.write_text(info.read_text().replace("model name\t: ", "model name\t: \x7fodd\x1b[31m ", 1))
    text, _ = importer.view_to_spec(sysfs.read_capture(root), "m", str(root))
    assert '"?odd?[31m ' in text


def test_offline_cpu_is_still_seen(tmp_path):
    # Only the files parse_files() uses are read now; cpuN/online is one of them, so an
    # offline CPU (no topology directory) is still reported, not silently dropped.
    root = unpack(tmp_path)
    cpu = root / "capture/sys/devices/system/cpu"
    shutil.rmtree(cpu / "cpu1/topology")
    shutil.rmtree(cpu / "cpu1/cache", ignore_errors=True)
    (cpu / "cpu1/online").write_text("0\n")
    (cpu / "online").write_text("0\n")
    (root / "capture/sys/devices/system/node/node0/cpulist").write_text("0\n")
    _, notes = importer.view_to_spec(sysfs.read_capture(root), "m", str(root))
    assert any("CPUs 1 were offline" in n for n in notes), notes


def test_cli_import_and_capture_errors_are_one_line(tmp_path):
    from click.testing import CliRunner

    from lab.cli import main

    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    root = unpack(tmp_path)
    (root / TOPO).unlink()
    (root / TOPO).symlink_to(secret)
    r = CliRunner().invoke(main, ["topo", "import", str(root), "-o", str(tmp_path / "m.toml")])
    assert r.exit_code == 2 and "a symbolic link" in one_line(r.output.strip()) and SECRET[:6] not in r.output
    # An output folder that does not exist is refused with the arguments (cli.common.OUTPUT).
    r = CliRunner().invoke(main, ["topo", "import", str(HOST), "-o", str(tmp_path / "no/such/dir/m.toml")])
    assert r.exit_code == 2 and "no/such/dir: no such directory" in one_line(r.output.strip())
    r = CliRunner().invoke(main, ["topo", "capture", "-o", str(tmp_path / "no/such/dir/c.tar.gz")])
    assert r.exit_code == 2 and "no/such/dir: no such directory" in one_line(r.output.strip())
    assert not list(tmp_path.glob("**/*.tmp"))
