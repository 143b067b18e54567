"""Which QEMU a boot uses (lab.emulators): the system's where it can express the machine,
lab's built QEMU where it cannot, --qemu to override; lab's store of built QEMUs; the
build's apt options never touch the system's apt configuration."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lab import emulators, topology
from lab import host as host_mod
from lab.emulators import Emulator
from lab.errors import UserError
from lab.plan import VmOptions
from lab.render import qemu as render_qemu
from lab.render.qemu import plan

LAB10 = Emulator("x86_64", "/cache/qemu/store/10.0.13-abc/bin/qemu-system-x86_64", (10, 0, 13), "lab", "10.0.13-abc")
LAB10_ARM = Emulator("arm64", "/cache/qemu/store/10.0.13-abc/bin/qemu-system-aarch64", (10, 0, 13), "lab", "10.0.13-abc")
BARE = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")
BUILT = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test",
                      built=(LAB10, LAB10_ARM))  # fmt: skip
CLUSTERS = """
[cpu]
vendor = "intel"
[topology]
sockets = 1
clusters_per_llc = 2
cores_per_cluster = 2
"""


@pytest.mark.parametrize(
    ("name", "host", "want"),
    [
        ("zen3-2s-mini", BARE, ("qemu-system-x86_64", (7, 2, 0))),  # 7.2 can: the system's
        ("zen3-2s-mini", BUILT, ("qemu-system-x86_64", (7, 2, 0))),  # a built one does not displace it
        ("zen3-2s", BUILT, (LAB10.path, (10, 0, 13))),  # 256 vCPUs under TCG: x2APIC, 9.0+
        ("kunpeng920-2s-mini", BUILT, ("qemu-system-aarch64", (7, 2, 0))),  # arm64 clusters: 7.0+
    ],
)
def test_auto_takes_the_system_qemu_where_it_can_express_the_machine(name, host, want):
    p = plan(topology.load(name), host)
    assert (p.qemu, p.qemu_version) == want
    lab_note = [n for n in p.notes if n.startswith("QEMU ")]
    assert bool(lab_note) == (want[0] == LAB10.path)
    if lab_note:
        assert "needs 9.0.0+" in lab_note[0] and LAB10.path in lab_note[0]


def test_x86_clusters_take_the_built_qemu_and_7_2_alone_refuses_naming_the_command():
    t = topology.loads(CLUSTERS)
    with pytest.raises(UserError, match=r"x86 clusters \(-smp modules= with an L2 per module through -machine smp-cache\): needs QEMU 9\.2\.0 or newer \(here: 7\.2\.0 \(system\)\); `lab qemu fetch` gets Debian's QEMU 10 from bookworm-backports \(or `lab qemu build` builds it\)"):
        plan(t, BARE)
    e = emulators.choose(BUILT.emulators("x86_64"), "x86_64", "auto", *render_qemu.required_qemu(t, "tcg"))
    assert e == LAB10


def test_qemu_option_overrides_and_is_refused_when_it_cannot_express_the_machine(tmp_path):
    mini, full = topology.load("zen3-2s-mini"), topology.load("zen3-2s")
    assert plan(mini, BUILT, VmOptions(qemu="lab")).qemu == LAB10.path
    assert plan(mini, BUILT, VmOptions(qemu="system")).qemu == "qemu-system-x86_64"
    with pytest.raises(UserError, match=r"--qemu system is 7\.2\.0; `lab qemu fetch` .*`lab qemu build`"):
        plan(full, BUILT, VmOptions(qemu="system"))
    with pytest.raises(UserError, match=r"--qemu lab: lab has no QEMU of its own for x86_64; `lab qemu fetch` .*`lab qemu build`"):
        plan(mini, BARE, VmOptions(qemu="lab"))
    fake = tmp_path / "qemu-system-x86_64"
    fake.write_text("#!/bin/sh\necho 'QEMU emulator version 9.2.1 (v9.2.1)'\n")
    fake.chmod(0o755)
    p = plan(full, BARE, VmOptions(qemu=str(fake)))
    assert (p.qemu, p.qemu_version) == (str(fake), (9, 2, 1))
    silent = tmp_path / "not-qemu"
    silent.write_text("#!/bin/sh\necho hello\n")
    silent.chmod(0o755)
    with pytest.raises(UserError, match="does not say a QEMU version"):
        plan(mini, BARE, VmOptions(qemu=str(silent)))


def test_store_lists_whole_entries_only(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    good = emulators.store() / "10.0.13-0123456789ab"
    (good / "bin").mkdir(parents=True)
    for b in ("qemu-system-x86_64", "qemu-system-aarch64"):
        (good / "bin" / b).write_text("")
    (good / "metadata.json").write_text(json.dumps({"version": "10.0.13", "binaries": {
        "x86_64": "bin/qemu-system-x86_64", "arm64": "bin/qemu-system-aarch64"}}))  # fmt: skip
    half = emulators.store() / f".tmp-{os.getpid()}-10.0.13-x"  # a build still publishing
    half.mkdir()
    (half / "metadata.json").write_text(json.dumps({"version": "10.0.13", "binaries": {}}))
    broken = emulators.store() / "9.2.0-ffffffffffff"
    broken.mkdir()
    (broken / "metadata.json").write_text("{not json")
    got = emulators.built()
    assert {(e.arch, e.version, e.origin, e.entry) for e in got} == {
        ("x86_64", (10, 0, 13), "lab", good.name), ("arm64", (10, 0, 13), "lab", good.name)}  # fmt: skip


def test_the_build_reads_only_labs_private_apt_sources(tmp_path):
    opts = emulators._apt_options(tmp_path)
    pairs = dict(o.split("=", 1) for o in opts if o != "-o")
    assert pairs["Dir::Etc::SourceList"] == str(tmp_path / "sources.list")
    assert pairs["Dir::Etc::SourceParts"] == "/dev/null"  # not /etc/apt/sources.list.d
    assert pairs["Dir::State::Lists"].startswith(str(tmp_path))
    assert pairs["Dir::Cache"].startswith(str(tmp_path))
    assert not any("/etc/apt" in v for v in pairs.values())


def test_configure_builds_only_labs_emulators_with_system_firmware(tmp_path):
    args = emulators.configure_args(tmp_path / "stage", tmp_path / "py", ("x86_64", "arm64"))
    assert "--target-list=x86_64-softmmu,aarch64-softmmu" in args
    assert "--cc=ccache gcc" in args
    assert f"--firmwarepath={emulators.FIRMWARE_PATH}" in args
    assert "--disable-download" in args and "--disable-user" in args


def test_strip_keeps_the_program_and_drops_its_debug_info(tmp_path):
    """lab qemu build strips what it publishes (QEMU's build keeps -g); a binary built
    with -g here stands for it."""
    import shutil
    import subprocess

    if not shutil.which("gcc") or not shutil.which("strip"):
        pytest.skip("gcc and strip (binutils) are not installed")
    src = tmp_path / "p.c"
    src.write_text('#include <stdio.h>\nstatic int f(int x) { return x * 7; }\nint main(void) { printf("%d\\n", f(6)); return 0; }\n')
    exe = tmp_path / "p"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(exe), str(src)], check=True)
    before = exe.stat().st_size
    assert b".debug_info" in exe.read_bytes()
    emulators.strip(exe)
    assert exe.stat().st_size < before and b".debug_info" not in exe.read_bytes()
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "42\n"


def test_of_two_builds_of_one_version_the_latest_is_taken(tmp_path, monkeypatch):
    import json

    monkeypatch.setattr(emulators, "store", lambda: tmp_path)
    for entry, built in (("10.0.13-aaaa", "2026-11-23T18:00:00Z"), ("10.0.13-bbbb", "2026-11-23T23:00:00Z")):
        (tmp_path / entry / "bin").mkdir(parents=True)
        (tmp_path / entry / "bin" / "qemu-system-x86_64").write_text("")
        (tmp_path / entry / "metadata.json").write_text(json.dumps(
            {"version": "10.0.13", "binaries": {"x86_64": "bin/qemu-system-x86_64"}, "built": built}))
    assert [e.entry for e in emulators.built()] == ["10.0.13-bbbb", "10.0.13-aaaa"]  # not the name's order


# --- lab qemu fetch: Debian bookworm-backports' QEMU 10 ------------------------------

FETCHED_VERSION = "1:10.0.2+ds-2+deb13u1~bpo12+1"


def _fake_deb(name: str) -> bytes:
    return f"not really a .deb: {name}\n".encode()


def _show(pkgs=emulators.FETCH_PACKAGES, version=FETCHED_VERSION, sha=None) -> str:
    """`apt-cache show` as the archive would answer it, one record per package."""
    import hashlib

    recs = []
    for n in pkgs:
        v = "1.16.3-2~bpo12+1" if n == "seabios" else version
        h = (sha or {}).get(n) or hashlib.sha256(_fake_deb(n)).hexdigest()
        dep = {"qemu-system-x86": f"libc6 (>= 2.34), libfdt1 (>= 1.6.1), qemu-system-common (= {version}), seabios (>> 1.16.3-1~), ipxe-qemu"}.get(n, "libc6")
        recs.append(f"Package: {n}\nVersion: {v}\nDepends: {dep}\nFilename: pool/main/{n}_{v}.deb\nSize: 10\nSHA256: {h}\n")
    return "\n".join(recs)


class FakeApt:
    """proc.run for lab qemu fetch: apt-get update/download, apt-cache show, dpkg -x, ldd,
    answered here; every argv kept.  *fail*: {"update": (rc, stderr)} etc."""

    def __init__(self, fail=None, ldd_missing=(), show=None):
        self.calls: list[list[str]] = []
        self.fail = fail or {}
        self.ldd_missing = ldd_missing
        self.show = show if show is not None else _show()

    def __call__(self, argv, *, cwd=None, check=True, timeout=None, **kw):
        import subprocess
        from pathlib import Path

        argv = [str(a) for a in argv]
        self.calls.append(argv)

        def done(rc=0, out=b"", err=b""):
            if check and rc:
                from lab.errors import InfraError

                raise InfraError(f"command failed (exit {rc}): {argv[0]}")
            return subprocess.CompletedProcess(argv, rc, out, err)

        verb = argv[-1] if argv[0] == "apt-get" and argv[-1] == "update" else next(
            (a for a in argv[1:] if a in ("download", "show", "-x", "--compare-versions")), argv[0])
        if verb in self.fail:
            rc, err = self.fail[verb]
            return done(rc, b"", err.encode())
        if verb == "update":
            return done()
        if verb == "show":
            return done(0, self.show.encode())
        if verb == "download":
            for spec in argv[argv.index("download") + 1:]:
                n, v = spec.split("=", 1)
                (Path(cwd) / f"{n}_{v.replace(':', '%3a')}_amd64.deb").write_bytes(_fake_deb(n))
            return done()
        if verb == "-x":
            deb, dest = Path(argv[-2]), Path(argv[-1])
            n = deb.name.split("_")[0]
            if n in ("qemu-system-x86", "qemu-system-arm"):
                b = dest / emulators.FETCH_BINARIES["x86_64" if n.endswith("x86") else "arm64"]
                b.parent.mkdir(parents=True, exist_ok=True)
                b.write_text("#!/bin/sh\necho 'QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)'\n")
                b.chmod(0o755)
            if n == "qemu-system-data":
                (dest / "usr/share/qemu").mkdir(parents=True, exist_ok=True)
                (dest / "usr/share/qemu/kvmvapic.bin").write_bytes(b"rom")
            if n == "seabios":
                (dest / "usr/share/seabios").mkdir(parents=True, exist_ok=True)
                (dest / "usr/share/seabios/bios-256k.bin").write_bytes(b"bios")
            return done()
        if verb == "--compare-versions":
            return subprocess.run(argv, capture_output=True)  # dpkg's own rule
        if argv[0] == "ldd":
            lines = "".join(f"\t{lib} => not found\n" for lib in self.ldd_missing) + "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6\n"
            return done(0, lines.encode())
        if argv[0] == "dpkg-query":
            return done(0, b"".join(f"{n} install ok installed\n".encode() for n in argv[3:] if n != "libfdt1"))
        if argv[0].endswith(("qemu-system-x86_64", "qemu-system-aarch64")):  # --version: the fake script
            return subprocess.run(argv, capture_output=True)
        raise AssertionError(f"unexpected command {argv}")


@pytest.fixture
def fake_apt(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(emulators.shutil, "which", lambda p: p if p.startswith("/") else None)
    fake = FakeApt()
    monkeypatch.setattr(emulators.proc, "run", fake)
    return fake


def _store_names():
    return sorted(p.name for p in emulators.store().iterdir())


def test_fetch_uses_only_labs_private_apt_state_and_downloads_nothing_into_the_system(fake_apt):
    ems, fetched = emulators.fetch(mirror="http://mirror.example/debian")
    assert fetched and {e.arch for e in ems} == {"x86_64", "arm64"}
    base = str(emulators.root() / "apt-backports")
    apt = [c for c in fake_apt.calls if c[0] in ("apt-get", "apt-cache")]
    assert [c[-1] if c[-1] in ("update",) else next(a for a in c if a in ("show", "download")) for c in apt] == ["update", "show", "download"]
    for c in apt:
        pairs = dict(o.split("=", 1) for o in c if "::" in o and "=" in o)
        assert pairs["Dir::Etc::SourceList"] == base + "/sources.list"
        assert pairs["Dir::Etc::SourceParts"] == "/dev/null"
        for k in ("Dir::State::Lists", "Dir::Cache", "Dir::State", "Dir::State::status"):
            assert pairs[k].startswith(base), (k, pairs)
        assert not any(w in c for w in ("install", "upgrade", "remove", "source"))
        assert not any(("/etc/apt" in a or "/var/lib/" in a or "/var/cache/" in a) for a in c), c
    assert "--error-on=any" in apt[0]  # else apt-get update exits 0 on a refused connection
    sources = (emulators.root() / "apt-backports" / "sources.list").read_text()
    assert sources.startswith("deb ") and sources.rstrip().endswith("http://mirror.example/debian bookworm-backports main")
    assert (emulators.root() / "apt-backports/state/status").read_text() == ""  # nothing installed, as apt sees it
    download = apt[2]
    assert download[download.index("download") + 1:] == [
        f"{n}={'1.16.3-2~bpo12+1' if n == 'seabios' else FETCHED_VERSION}" for n in emulators.FETCH_PACKAGES]


def test_fetch_publishes_one_whole_entry_with_its_packages_and_firmware(fake_apt):
    ems, _ = emulators.fetch()
    [entry] = _store_names()
    assert entry.startswith("10.0.2-") and len(entry) == len("10.0.2-") + 12
    d = emulators.store() / entry
    meta = json.loads((d / "metadata.json").read_text())
    assert meta["origin"] == "debian-backports" and meta["version"] == "10.0.2" and meta["debian_version"] == FETCHED_VERSION
    assert meta["suite"] == "bookworm-backports" and set(meta["packages"]) == set(emulators.FETCH_PACKAGES)
    import hashlib

    assert meta["packages"]["qemu-system-x86"]["sha256"] == hashlib.sha256(_fake_deb("qemu-system-x86")).hexdigest()
    assert meta["binaries"] == {"x86_64": "usr/bin/qemu-system-x86_64", "arm64": "usr/bin/qemu-system-aarch64"}
    assert meta["firmware"] == ["usr/share/qemu", "usr/share/seabios"] and meta["fetch_s"] >= 0
    x86 = next(e for e in ems if e.arch == "x86_64")
    assert x86 == Emulator("x86_64", str(d / "usr/bin/qemu-system-x86_64"), (10, 0, 2), "debian-backports", entry,
                           (str(d / "usr/share/qemu"), str(d / "usr/share/seabios")), FETCHED_VERSION)  # fmt: skip
    assert x86.in_store and x86.describe()["origin"] == "debian-backports"
    # The same packages again: nothing downloaded, the entry reused.
    n = len(fake_apt.calls)
    again, fetched = emulators.fetch()
    assert not fetched and again == ems and _store_names() == [entry]
    assert not any("download" in c for c in fake_apt.calls[n:])
    assert not list(emulators.root().glob(".tmp-*"))  # the downloaded .debs are gone


def test_an_unreachable_archive_is_one_line_naming_it_and_lab_qemu_build(fake_apt):
    fake_apt.fail["update"] = (100, "E: Failed to fetch http://127.0.0.1:9/debian/dists/bookworm-backports/InRelease  "
                                    "Could not connect to 127.0.0.1:9 (127.0.0.1). - connect (111: Connection refused)\n"
                                    "E: Some index files failed to download.\n")  # fmt: skip
    with pytest.raises(UserError) as e:
        emulators.fetch(mirror="http://127.0.0.1:9/debian")
    msg = str(e.value)
    assert "\n" not in msg and e.value.exit_code == 2
    assert "bookworm-backports archive at http://127.0.0.1:9/debian could not be read" in msg
    assert "Connection refused" in msg and "`lab qemu build`" in msg
    assert _store_names() == []


def test_a_refused_download_leaves_nothing_in_the_store(fake_apt):
    fake_apt.fail["download"] = (100, "E: Failed to fetch http://mirror/debian/pool/main/q/qemu/x.deb  403  Forbidden\n")
    with pytest.raises(UserError, match=r"could not be read \(E: Failed to fetch .*403  Forbidden\); `lab qemu build`"):
        emulators.fetch()
    assert _store_names() == [] and not list(emulators.root().glob(".tmp-*"))


def test_an_archive_without_the_packages_is_named(fake_apt):
    fake_apt.show = _show(pkgs=("qemu-system-x86", "qemu-system-common"))
    with pytest.raises(UserError, match=r"it lists no qemu-system-arm, qemu-system-data, seabios"):
        emulators.fetch()
    assert _store_names() == []


def test_a_download_other_than_the_archive_lists_is_refused(fake_apt):
    fake_apt.show = _show(sha={"seabios": "0" * 64})
    with pytest.raises(Exception, match=r"no seabios 1\.16\.3-2~bpo12\+1 with the archive's SHA256"):
        emulators.fetch()
    assert _store_names() == []


def test_missing_libraries_are_named_with_the_packages_that_have_them(fake_apt):
    fake_apt.ldd_missing = ("libfdt.so.1",)
    with pytest.raises(UserError) as e:
        emulators.fetch()
    assert str(e.value) == ("qemu-system-x86_64 from bookworm-backports needs libraries this system lacks: libfdt.so.1 "
                            "(apt-get install libfdt1)")  # fmt: skip
    assert _store_names() == []


def test_a_fetch_killed_half_way_is_cleaned_by_the_next(fake_apt):
    dead = emulators.store() / ".tmp-999999999-10.0.2-0123456789ab-x"  # no such pid
    (dead / "usr/bin").mkdir(parents=True)
    assert emulators.built() == []  # never listed
    emulators.fetch()
    assert not dead.exists() and len(_store_names()) == 1


def test_two_fetches_at_once_wait_for_the_cache_lock(fake_apt, monkeypatch):
    from lab import lock
    from lab.errors import InfraError

    monkeypatch.setenv("LAB_LOCK_TIMEOUT", "0.3")
    with lock.cache_lock("qemu-fetch", "fetching QEMU from Debian bookworm-backports"):
        import threading

        err: list[BaseException] = []
        t = threading.Thread(target=lambda: err.append(pytest.raises(InfraError, emulators.fetch).value))
        t.start()
        t.join()
    assert "waiting for another lab fetching QEMU" in str(err[0])
    assert not any(c[0] == "apt-get" for c in fake_apt.calls)  # it waited before touching apt


def test_auto_takes_the_fetched_qemu_where_7_2_cannot_and_boots_it_on_its_own_firmware(fake_apt):
    from lab.render import qemu as r

    ems, _ = emulators.fetch()
    host = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False,
                         kvm_reason="test", built=tuple(emulators.built()))  # fmt: skip
    x86 = next(e for e in ems if e.arch == "x86_64")
    assert plan(topology.load("zen3-2s-mini"), host).qemu == "qemu-system-x86_64"  # 7.2 can: the system's
    for name in ("zen3-2s", "jacobsville-24c-mini"):
        p = plan(topology.load(name), host)
        assert (p.qemu, p.qemu_version, p.qemu_origin) == (x86.path, (10, 0, 2), "debian-backports")
        assert any("from Debian bookworm-backports" in n for n in p.notes)
        d = p.to_dict()
        assert d["qemu_origin"] == "debian-backports" and d["qemu_debian_version"] == FETCHED_VERSION
        assert d["qemu_firmware"] == list(x86.firmware)
        files = r.BootFiles(kernel=Path("k"), initrd=Path("i"))
        a = r.argv(p, files)
        assert a[:9] == [x86.path, "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
                         "-L", x86.firmware[0], "-L", x86.firmware[1]]  # fmt: skip
        from lab.plan import VmPlan

        assert VmPlan.from_dict(d, p.topo) == p  # plan.json reads back whole
    from lab.render import vng

    opts = vng.qemu_opts(p, files, "RUN")  # --backend vng: the same firmware first
    assert opts[opts.index("-L"):opts.index("-L") + 4] == ["-L", x86.firmware[0], "-L", x86.firmware[1]]
    # The system's QEMU passes no -L: the system's firmware, argv unchanged.
    files = r.BootFiles(kernel=Path("k"), initrd=Path("i"))
    assert "-L" not in r.argv(plan(topology.load("zen3-2s-mini"), host), files)
    # --qemu lab means lab's own, fetched ones included.
    assert plan(topology.load("zen3-2s-mini"), host, VmOptions(qemu="lab")).qemu == x86.path


def test_fetch_cli_refuses_a_mirror_that_is_not_a_url_in_one_line():
    from click.testing import CliRunner

    from lab.cli import main

    r = CliRunner().invoke(main, ["qemu", "fetch", "--mirror", "deb.debian.org debian"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "expected an http:// or https:// URL" in r.output


@pytest.mark.network
def test_fetch_for_real_from_debian(tmp_path, monkeypatch):
    """The real thing: Debian's bookworm-backports into an empty cache, the binaries run
    and say QEMU 10 (about 23 MB; `pytest -m 'not network'` leaves it out offline)."""
    import time

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    t0 = time.monotonic()
    ems, fetched = emulators.fetch()
    took = time.monotonic() - t0
    assert fetched and {e.arch for e in ems} == {"x86_64", "arm64"}
    for e in ems:
        assert e.origin == "debian-backports" and e.version >= (10, 0, 0)
        assert emulators.binary_version(e.path) == e.version
        assert emulators.missing_libraries(Path(e.path)) == []
        assert (Path(e.firmware[1]) / "bios-256k.bin").is_file()
    print(f"fetched QEMU {ems[0].version_str} in {took:.1f}s")


@pytest.mark.network
def test_fetch_libvirt_schemas_for_real_into_their_own_folder(tmp_path, monkeypatch):
    """libvirt-common from bookworm-backports: its RELAX NG schemas land in lab's cache
    (domain.rng and what it includes), with the Debian version; a second fetch reuses them."""
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    assert emulators.libvirt_schemas() is None
    version, folder = emulators.fetch_libvirt_schemas()
    assert version.startswith("11.") and (folder / "domain.rng").is_file() and (folder / "domaincommon.rng").is_file()
    assert emulators.libvirt_schemas() == (version, folder)
    assert emulators.fetch_libvirt_schemas() == (version, folder)
    assert not [d for d in folder.parent.iterdir() if d != folder]  # nothing half-written left beside it


def test_a_refused_connection_fails_the_fetch_for_real_in_one_line(tmp_path, monkeypatch):
    """apt-get itself, against a port nothing listens on: `apt-get update` alone exits 0
    there (lab passes --error-on=any); lab says so in one line, exit 2, nothing stored."""
    import shutil as sh

    from click.testing import CliRunner

    from lab.cli import main

    if not sh.which("apt-get"):
        pytest.skip("no apt-get: not a Debian system")
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    r = CliRunner().invoke(main, ["qemu", "fetch", "--mirror", "http://127.0.0.1:9/debian"])
    assert r.exit_code == 2 and r.stdout == "", r.output
    last = r.stderr.splitlines()[-1]
    assert last.startswith("lab: error: Debian's bookworm-backports archive at http://127.0.0.1:9/debian could not be read (")
    assert "Connection refused" in last and "`lab qemu build`" in last and "Traceback" not in r.stderr
    store = tmp_path / "qemu" / "store"
    assert not store.exists() or list(store.iterdir()) == []
