"""Guest tools of another architecture from Debian's packages: the dependency closure,
the loader and libraries staged per arch from an unpacked sysroot, the cache keys, and
the one-line errors (a tool with no package of the arch, a refused download)."""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from lab import arch as archs
from lab.errors import InfraError, UserError
from lab.image import debian_pkgs, tools
from lab.image.tools import DEFAULT_TOOLS

# --- a minimal ELF writer: enough for read_elf (PT_LOAD, PT_INTERP, PT_DYNAMIC) ------------


def write_elf(path: Path, machine: int, interp: str | None = None, needed: tuple[str, ...] = ()) -> None:
    strtab = b"\0"
    offs = []
    for n in needed:
        offs.append(len(strtab))
        strtab += n.encode() + b"\0"
    nph = 3 if interp else 2
    interp_off = 64 + 56 * nph
    interp_b = (interp.encode() + b"\0") if interp else b""
    str_off = interp_off + len(interp_b)
    dyn_off = (str_off + len(strtab) + 7) & ~7
    dyn = b"".join(struct.pack("<qQ", 1, o) for o in offs) + struct.pack("<qQ", 5, str_off) + struct.pack("<qQ", 0, 0)
    total = dyn_off + len(dyn)
    hdr = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    hdr += struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 64, 0, 0, 64, 56, nph, 64, 0, 0)
    phs = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, total, total, 0x1000)
    phs += struct.pack("<IIQQQQQQ", 2, 6, dyn_off, dyn_off, dyn_off, len(dyn), len(dyn), 8)
    if interp:
        phs += struct.pack("<IIQQQQQQ", 3, 4, interp_off, interp_off, interp_off, len(interp_b), len(interp_b), 1)
    body = hdr + phs + interp_b + strtab
    body += bytes(dyn_off - len(body)) + dyn
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    path.chmod(0o755)


def fake_sysroot(root: Path, arch: str, *, interp: str | None = None, with_numa: bool = True) -> Path:
    """numactl as Debian's packages unpack it: /usr/bin/numactl, libnuma in /usr/lib/<triplet>
    behind a relative symlink, libc in /lib/<triplet>, and the loader at the arch's PT_INTERP
    path as an *absolute* symlink (the sysroot's, not the host's)."""
    a = archs.get(arch)
    lib, usrlib = f"lib/{a.triplet}", f"usr/lib/{a.triplet}"
    ld_name = os.path.basename(a.loader)
    write_elf(root / lib / ld_name, a.elf_machine)
    (root / a.loader.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    if a.loader != f"/{lib}/{ld_name}":
        os.symlink(f"/{lib}/{ld_name}", root / a.loader.lstrip("/"))
    write_elf(root / lib / "libc.so.6", a.elf_machine, needed=(ld_name,))
    if with_numa:
        write_elf(root / usrlib / "libnuma.so.1.0.0", a.elf_machine, needed=("libc.so.6",))
        os.symlink("libnuma.so.1.0.0", root / usrlib / "libnuma.so.1")
    write_elf(root / "usr/bin/numactl", a.elf_machine, interp=interp or a.loader, needed=("libnuma.so.1", "libc.so.6"))
    return root


@pytest.mark.parametrize("arch", archs.NAMES)
def test_loader_and_libraries_per_arch(tmp_path, arch):
    a = archs.get(arch)
    root = fake_sysroot(tmp_path / "sysroot", arch)
    entries = {e.guest: e for e in tools.pack_entries(arch, ["numactl"], sysroot=root)}
    ld = f"/lib/{a.triplet}/{os.path.basename(a.loader)}"
    assert a.loader in entries  # at the exact PT_INTERP path
    assert set(entries) == {a.loader, ld, "/usr/bin/numactl", f"/lib/{a.triplet}/libc.so.6", f"/usr/lib/{a.triplet}/libnuma.so.1"} - (
        {ld} if a.loader == ld else set()
    )
    # one copy of ld.so, at the PT_INTERP path; libc's DT_NEEDED name links to it
    assert entries[a.loader].source == root / ld.lstrip("/")
    if a.loader != ld:
        assert entries[ld].link == os.path.relpath(a.loader, os.path.dirname(ld))
    # Sources are the sysroot's files, never the host's (the absolute link resolved inside)
    assert entries[f"/usr/lib/{a.triplet}/libnuma.so.1"].source == root / f"usr/lib/{a.triplet}/libnuma.so.1.0.0"
    for e in entries.values():
        assert e.source is None or str(e.source).startswith(str(root))


def test_loader_choice_is_the_arch_s():
    assert archs.get("arm64").loader == "/lib/ld-linux-aarch64.so.1"
    assert archs.get("x86_64").loader == "/lib64/ld-linux-x86-64.so.2"


def test_a_binary_naming_another_loader_is_refused(tmp_path):
    root = fake_sysroot(tmp_path, "arm64", interp="/lib64/ld-linux-x86-64.so.2")
    with pytest.raises(UserError, match="names the loader /lib64/ld-linux-x86-64.so.2; an arm64 glibc binary names /lib/ld-linux-aarch64.so.1"):
        tools.pack_entries("arm64", ["numactl"], sysroot=root)


def test_a_library_outside_the_closure_is_named(tmp_path):
    root = fake_sysroot(tmp_path, "arm64", with_numa=False)
    with pytest.raises(UserError, match=r"needs libnuma\.so\.1 \(via numactl\), which no arm64 package of numactl's library closure ships"):
        tools.pack_entries("arm64", ["numactl"], sysroot=root)


def test_a_tool_missing_from_its_package_is_named(tmp_path):
    root = fake_sysroot(tmp_path, "arm64")
    with pytest.raises(UserError, match="tool 'hackbench': Debian's arm64 package rt-tests has no /usr/bin/hackbench"):
        tools.pack_entries("arm64", ["hackbench"], sysroot=root)


# --- the dependency closure ---------------------------------------------------------------

SHOW = """Package: stress-ng
Version: 0.15.06-2
Architecture: arm64
Section: devel
Depends: libc6 (>= 2.36), libegl1, libjpeg62-turbo (>= 1.3.1) | libjpeg-virtual, perl:any,
 zlib1g (>= 1:1.1.4)

Package: stress-ng
Version: 0.14.00-1
Section: devel
Depends: libold0

Package: libc6
Version: 2.36-9+deb12u14
Section: libs
Pre-Depends: libgcc-s1

Package: libgcc-s1
Version: 12.2.0-14
Section: libs
Depends: gcc-12-base (= 12.2.0-14), libc6 (>= 2.35)

Package: gcc-12-base
Version: 12.2.0-14
Section: libs

Package: libegl1
Version: 1.6.0-1
Section: libs
Depends: libegl-mesa0, libglvnd0 (= 1.6.0-1)

Package: libegl-mesa0
Version: 22.3.6-1
Section: libs
Depends: libc6

Package: libglvnd0
Version: 1.6.0-1
Section: libs

Package: libjpeg62-turbo
Version: 1:2.1.5-2
Section: libs

Package: perl
Version: 5.36.0-7
Section: perl
Depends: perl-base, libperl5.36

Package: zlib1g
Version: 1:1.2.13.dfsg-1
Section: libs

Package: numactl
Version: 2.0.16-1
Section: admin
Depends: libc6 (>= 2.34), libnuma1 [arm64] (>= 2.0.15-1)

Package: libnuma1
Version: 2.0.16-1
Section: libs
Depends: libc6
SHA256: 5f0b2f6b2a0c1d1e0f4c3b6a4f5d7e8c9b0a1f2e3d4c5b6a7980f1e2d3c4b5a6
"""


def fake_show(calls: list[list[str]] | None = None):
    stanzas = debian_pkgs.parse_show(SHOW)

    def show(names: list[str]) -> dict[str, debian_pkgs.Package]:
        if calls is not None:
            calls.append(list(names))
        return {n: stanzas[n] for n in names if n in stanzas}

    return show


def test_parse_show_takes_the_candidate_and_the_fields():
    got = debian_pkgs.parse_show(SHOW)
    assert got["stress-ng"].version == "0.15.06-2"  # the first stanza: apt's candidate
    assert got["stress-ng"].depends == (("libc6",), ("libegl1",), ("libjpeg62-turbo", "libjpeg-virtual"), ("perl",), ("zlib1g",))
    assert got["libc6"].depends == (("libgcc-s1",),)  # Pre-Depends count
    assert got["numactl"].depends == (("libc6",), ("libnuma1",))
    assert got["libnuma1"].sha256 == "5f0b2f6b2a0c1d1e0f4c3b6a4f5d7e8c9b0a1f2e3d4c5b6a7980f1e2d3c4b5a6"
    assert debian_pkgs.parse_depends("a (>= 1) | b:any, c [amd64] <!nocheck>") == (("a", "b"), ("c",))


def test_closure_follows_libraries_only():
    calls: list[list[str]] = []
    got, missing = debian_pkgs.closure(["stress-ng", "numactl", "no-such-tool"], fake_show(calls))
    assert missing == ["no-such-tool"]
    assert sorted(got) == [
        "gcc-12-base", "libc6", "libegl-mesa0", "libegl1", "libgcc-s1", "libglvnd0",
        "libjpeg62-turbo", "libnuma1", "numactl", "stress-ng", "zlib1g",
    ]  # fmt: skip
    # perl is no library: neither it nor what it needs is unpacked
    assert "perl" not in got and "libperl5.36" not in got
    assert got["libjpeg62-turbo"].version == "1:2.1.5-2"
    # one apt-cache call per level of the tree, nothing asked twice
    asked = [n for c in calls for n in c]
    assert len(asked) == len(set(asked))
    assert len(calls) <= 5


def test_closure_of_a_tool_with_no_package():
    got, missing = debian_pkgs.closure(["linux-perf"], fake_show())
    assert got == {} and missing == ["linux-perf"]


# --- cache keys ---------------------------------------------------------------------------


def P(name: str, version: str) -> debian_pkgs.Package:
    return debian_pkgs.Package(name, version, "libs", ())


def test_key_is_the_package_versions():
    a = [P("stress-ng", "0.15.06-2"), P("libc6", "2.36-9")]
    assert debian_pkgs.key(a) == debian_pkgs.key(list(reversed(a)))
    assert debian_pkgs.key(a) != debian_pkgs.key([P("stress-ng", "0.15.06-3"), P("libc6", "2.36-9")])
    assert debian_pkgs.key(a) != debian_pkgs.key(a[:1])


@pytest.fixture
def fake_apt(monkeypatch, tmp_path):
    """Lab's private apt replaced by SHOW (no lists, no network), cache under tmp_path."""
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(debian_pkgs, "ensure_lists", lambda arch, refresh=False: None)
    monkeypatch.setattr(debian_pkgs, "apt_show", lambda arch: fake_show())
    debian_pkgs.resolve.cache_clear()
    yield
    debian_pkgs.resolve.cache_clear()


def test_tools_hash_is_keyed_by_package_versions(fake_apt, monkeypatch):
    other = "arm64" if tools.host_arch() == "x86_64" else "x86_64"
    h = tools.tools_hash(other, ["stress-ng"])
    assert h == tools.tools_hash(other, ["stress-ng"])
    assert h != tools.tools_hash(other, ["numactl"])
    bumped = SHOW.replace("Version: 2.36-9+deb12u14", "Version: 2.36-9+deb12u15")
    monkeypatch.setattr(debian_pkgs, "apt_show", lambda arch: lambda names: {n: p for n, p in debian_pkgs.parse_show(bumped).items() if n in names})
    debian_pkgs.resolve.cache_clear()
    assert tools.tools_hash(other, ["stress-ng"]) != h  # a new libc6 is a new layer


def test_host_arch_uses_debian_packages_on_request(monkeypatch):
    assert tools.from_debian("arm64" if tools.host_arch() == "x86_64" else "x86_64")
    assert not tools.from_debian(tools.host_arch())
    monkeypatch.setenv("LAB_GUEST_TOOLS", "debian")
    assert tools.from_debian(tools.host_arch())


# --- bad input ----------------------------------------------------------------------------


def test_a_tool_with_no_package_of_the_arch_is_named(fake_apt):
    other = "arm64" if tools.host_arch() == "x86_64" else "x86_64"
    deb = archs.get(other).debian
    why = tools.unpackable(other, ["numactl", "perf"])
    assert why == f"no Debian {deb} package for perf (linux-perf) in {debian_pkgs.suite()}: cannot be packed for {other} guests"
    assert tools.unpackable(other, ["numactl", "stress-ng"]) is None
    with pytest.raises(UserError, match=r"^tool 'lab-nothing': lab knows no Debian package that ships it$"):
        tools.tools_hash(other, ["lab-nothing"])


def test_an_unknown_arch_is_named():
    with pytest.raises(UserError, match="unknown arch 'mips'"):
        tools.unpackable("mips", ["perf"])
    with pytest.raises(UserError, match="unknown arch 'mips'"):
        tools.tools_hash("mips", ["perf"])


def test_a_refused_download_is_one_line_naming_package_and_arch(fake_apt, monkeypatch):
    def run(argv, **kw):
        assert "download" in argv
        err = (
            "Err:1 http://deb.debian.org/debian bookworm/main arm64 libnuma1 arm64 2.0.16-1\n  404  Not Found\n"
            "E: Failed to fetch http://deb.debian.org/debian/pool/main/n/numactl/libnuma1_2.0.16-1_arm64.deb  404  Not Found\n"
        )
        return subprocess.CompletedProcess(argv, 100, b"", err.encode())

    monkeypatch.setattr(debian_pkgs.proc, "run", run)
    pkgs = [P("numactl", "2.0.16-1"), P("libnuma1", "2.0.16-1")]
    with pytest.raises(UserError) as e:
        debian_pkgs.download("arm64", pkgs)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("apt-get download libnuma1:arm64 (2.0.16-1) refused: E: Failed to fetch")
    assert e.value.exit_code == 2


def test_a_refused_download_keeps_the_debs_that_came_whole(fake_apt, monkeypatch):
    body = b"numactl's deb"
    pkgs = [
        debian_pkgs.Package("numactl", "2.0.16-1", "admin", (), hashlib.sha256(body).hexdigest()),
        debian_pkgs.Package("libnuma1", "2.0.16-1", "libs", (), hashlib.sha256(b"never came").hexdigest()),
    ]

    def run(argv, cwd=None, **kw):
        (Path(cwd) / "numactl_2.0.16-1_arm64.deb").write_bytes(body)
        err = "E: Failed to fetch http://deb.debian.org/debian/pool/main/n/numactl/libnuma1_2.0.16-1_arm64.deb  404  Not Found\n"
        return subprocess.CompletedProcess(argv, 100, b"", err.encode())

    monkeypatch.setattr(debian_pkgs.proc, "run", run)
    with pytest.raises(UserError, match=r"^apt-get download libnuma1:arm64 \(2.0.16-1\) refused: "):
        debian_pkgs.download("arm64", pkgs)
    debs = debian_pkgs.base("arm64") / "debs"
    assert sorted(p.name for p in debs.glob("*.deb")) == ["numactl_2.0.16-1.deb"]  # fetched once, not again


def test_a_download_is_checked_against_the_archive_sha256(fake_apt, monkeypatch):
    """Each .deb apt-get download leaves must carry the SHA256 the package lists give it
    (emulators._verified_deb, as QEMU's fetch checks): a damaged one never enters the
    cache of debs a sysroot is unpacked from."""
    good = b"libnuma1's deb"
    pkg = debian_pkgs.Package("libnuma1", "2.0.16-1", "libs", (), hashlib.sha256(good).hexdigest())
    body = {"deb": b"damaged"}

    def run(argv, cwd=None, **kw):
        assert "download" in argv and "libnuma1=2.0.16-1" in argv
        (Path(cwd) / "libnuma1_2.0.16-1_arm64.deb").write_bytes(body["deb"])
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    monkeypatch.setattr(debian_pkgs.proc, "run", run)
    with pytest.raises(InfraError, match=r"^apt-get download gave no libnuma1 2.0.16-1 with the archive's SHA256 in "):
        debian_pkgs.download("arm64", [pkg])
    assert not list((debian_pkgs.base("arm64") / "debs").glob("*.deb"))
    body["deb"] = good
    [deb] = debian_pkgs.download("arm64", [pkg])
    assert deb == debian_pkgs.base("arm64") / "debs" / "libnuma1_2.0.16-1.deb" and deb.read_bytes() == good


# --- the real thing: Debian's mirror, lab's private apt ------------------------------------


@pytest.mark.network
def test_debian_numactl_for_the_other_arch_is_staged(tmp_path):
    other = "arm64" if tools.host_arch() == "x86_64" else "x86_64"
    a = archs.get(other)
    debian_pkgs.resolve.cache_clear()
    staged = tools.stage_tools(tmp_path, other, ["numactl"])
    assert a.loader in staged and "/usr/bin/numactl" in staged
    assert tools.read_elf(tmp_path / "usr/bin/numactl").machine == a.elf_machine
    assert tools.read_elf(tmp_path / "usr/bin/numactl").interp == a.loader
    assert any(p.endswith("/libnuma.so.1") for p in staged)
    assert any(p.endswith("/libc.so.6") for p in staged)
    root = debian_pkgs.sysroot(other, ("numactl",), DEFAULT_TOOLS)
    meta = (root / ".lab-packages.json").read_text()
    assert '"numactl"' in meta and '"libc6"' in meta


def test_one_sysroot_serves_every_subset_of_the_default_tools(fake_apt, monkeypatch):
    """The sysroot is unpacked from the closure of the tools asked for and every default one
    Debian has for the arch: numactl alone and stress-ng alone share it."""
    unpacked: list[list[str]] = []

    def download(arch, pkgs):
        unpacked.append(sorted(p.name for p in pkgs))
        return []

    monkeypatch.setattr(debian_pkgs, "download", download)
    a = debian_pkgs.sysroot("arm64", ("numactl",), DEFAULT_TOOLS)
    b = debian_pkgs.sysroot("arm64", ("stress-ng",), DEFAULT_TOOLS)
    assert a == b and len(unpacked) == 1  # made once
    # SHOW has numactl and stress-ng (no linux-perf, no rt-tests): both closures, once
    assert unpacked[0] == sorted(
        ["numactl", "libnuma1", "libc6", "libgcc-s1", "gcc-12-base", "stress-ng", "libegl1", "libegl-mesa0",
         "libglvnd0", "libjpeg62-turbo", "zlib1g"]
    )  # fmt: skip
    with pytest.raises(UserError, match=r"^no Debian arm64 package for perf \(linux-perf\)"):
        debian_pkgs.sysroot("arm64", ("perf",), DEFAULT_TOOLS)


def _deb(tmp_path: Path, name: str, files: dict[str, str | Path]) -> Path:
    """A tiny .deb (dpkg-deb --build) holding *files*: text, or a symlink's target (a Path)."""
    d = tmp_path / f"pkg-{name}"
    (d / "DEBIAN").mkdir(parents=True)
    (d / "DEBIAN" / "control").write_text(f"Package: {name}\nVersion: 1\nArchitecture: arm64\nMaintainer: x <x@x>\nDescription: x\n")
    for rel, content in files.items():
        f = d / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            f.symlink_to(content)
        else:
            f.write_text(content)
    out = tmp_path / f"{name}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(d), str(out)], check=True, capture_output=True)
    return out


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is Debian's")
def test_dev_root_unpacks_the_closure_with_its_absolute_links_made_relative(fake_apt, monkeypatch, tmp_path):
    """A cross build's libraries (lab.scheduler): the packages by name and their library
    closure, unpacked apart from the guest tools' roots, a -dev package's absolute
    ``libz.so -> /lib/...`` pointing at the library beside it, not the host's."""
    debs = {
        "zlib1g": _deb(tmp_path, "zlib1g", {"lib/aarch64-linux-gnu/libz.so.1": "arm64 libz"}),
        "numactl": _deb(tmp_path, "numactl", {"usr/lib/aarch64-linux-gnu/libz.so": Path("/lib/aarch64-linux-gnu/libz.so.1"),
                                              "usr/include/zlib.h": "/* zlib */"}),
    }  # fmt: skip
    asked: list[str] = []

    def download(arch, pkgs):
        asked.extend(p.name for p in pkgs)
        return [debs.get(p.name, debs["zlib1g"]) for p in pkgs]

    monkeypatch.setattr(debian_pkgs, "download", download)
    root = debian_pkgs.dev_root("arm64", ("numactl",))
    assert root.name.startswith("dev-") and root.parent.name == "roots"
    assert sorted(asked) == ["gcc-12-base", "libc6", "libgcc-s1", "libnuma1", "numactl"]
    link = root / "usr" / "lib" / "aarch64-linux-gnu" / "libz.so"
    assert os.readlink(link) == "../../../lib/aarch64-linux-gnu/libz.so.1" and link.read_text() == "arm64 libz"
    assert debian_pkgs.dev_root("arm64", ("numactl",)) == root and len(asked) == 5  # made once
    with pytest.raises(UserError, match=r"^no Debian arm64 package nosuch-dev in \w+: cannot build for arm64$"):
        debian_pkgs.dev_root("arm64", ("nosuch-dev",))
