"""The QEMUs lab can boot with: the system's (Debian 12: 7.2), the one lab fetched from
Debian 12's bookworm-backports archive (``lab qemu fetch``: QEMU 10, prebuilt by Debian),
the ones lab built from Debian trixie's source package (``lab qemu build``, the fallback),
and which one a topology needs.

QEMU 7.2 cannot express everything a real machine has: x86 guests stop at 255 vCPUs under
TCG (x2APIC emulation came in 9.0), x86 clusters need 9.1.  Debian's archive serves
trixie's source packages (QEMU 10.0), so lab builds the QEMU it needs from Debian's own
source, on the machine it runs on, with nothing from anywhere else:

- the source comes through apt with a private sources list, state and cache directory
  under lab's cache (``-o Dir::Etc::SourceList=...``): the system's apt configuration is
  never read for sources nor changed;
- Debian 12's meson (1.0.1) is older than QEMU 10 needs (>= 1.5), so meson comes from
  PyPI into a private virtualenv beside the build;
- only the system emulators lab boots are built (x86_64, aarch64), with nothing lab's
  guests do not use (no display, audio, network back ends, tools or user-mode
  emulators), through ccache;
- firmware is the system's (Debian's seabios and qemu-system-data: ``--firmwarepath``),
  because Debian's source package (``+ds``) carries no prebuilt firmware;
- the result goes into ``<cache>/qemu/store/<version>-<sha12>`` by content, with
  ``metadata.json`` (version, Debian version, configure arguments, build time).

``lab qemu fetch`` takes Debian's own binary packages instead (seconds, not 83 minutes of
compiling): ``apt-get download`` with the same kind of private sources list, lists, cache
and an empty dpkg status of its own, ``dpkg -x`` into a staging directory in the store,
its libraries checked with ``ldd``, then renamed whole into ``<cache>/qemu/store/
<version>-<sha12>`` (origin ``debian-backports``, each package's version and SHA256).
Its firmware (bookworm-backports' seabios, QEMU 10's own ROMs) stays in the entry:
every boot on it passes ``-L`` for those directories, so the system's 7.2 and its
firmware are left as they are.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import arch as arch_mod
from . import lock, paths, proc
from .atomic import write_text
from .errors import InfraError, UserError
from .limits import sha256_file
from .progress import Progress, of

SUITE = "trixie"  # the Debian release whose qemu source package lab builds
SOURCE_PACKAGE = "qemu"
MESON = "meson>=1.5,<1.9"  # QEMU 10.0's floor; Debian 12 ships 1.0.1
FIRMWARE_PATH = "/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu"  # Debian's own
TARGETS = {"x86_64": "x86_64-softmmu", "arm64": "aarch64-softmmu"}
BUILD_PACKAGES = ("binutils", "ninja-build", "libglib2.0-dev", "libfdt-dev", "libpixman-1-dev", "zlib1g-dev", "dpkg-dev", "pkg-config", "ccache")
# Everything a lab guest does not use: fewer objects, fewer dependencies to have.
CONFIGURE_OFF = (
    "docs", "tools", "user", "werror", "gtk", "sdl", "vnc", "opengl", "spice", "curl", "gnutls", "nettle",
    "gcrypt", "libusb", "usb-redir", "capstone", "slirp", "xen", "rust", "guest-agent", "install-blobs",
    "pa", "alsa", "jack", "pipewire", "oss", "sndio", "dbus-display", "virglrenderer", "libiscsi", "libnfs",
    "rbd", "glusterfs", "seccomp", "vhost-user-blk-server", "fuse", "libssh", "bpf", "af-xdp", "download",
)  # fmt: skip


@dataclass(frozen=True)
class Emulator:
    """One QEMU system emulator binary."""

    arch: str  # lab's arch name: x86_64 | arm64
    path: str  # the binary: a name on PATH for the system's, an absolute path for lab's
    version: tuple[int, int, int]
    origin: str  # "system" | "lab" (built) | "debian-backports" (fetched) | "path"
    entry: str = ""  # lab's store entry id
    firmware: tuple[str, ...] = ()  # directories QEMU must search first (-L), absolute
    debian_version: str = ""  # the Debian package's version, for lab's store entries

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version))

    def describe(self) -> dict:
        d: dict = {"arch": self.arch, "path": self.path, "version": self.version_str, "origin": self.origin, "entry": self.entry}
        if self.debian_version:
            d["debian_version"] = self.debian_version
        if self.firmware:
            d["firmware"] = list(self.firmware)
        return d

    @property
    def in_store(self) -> bool:
        """One of lab's own (built or fetched), as ``--qemu lab`` means."""
        return self.origin in STORE_ORIGINS


def root() -> Path:
    d = paths.cache_dir() / "qemu"
    d.mkdir(parents=True, exist_ok=True)
    return d


def store() -> Path:
    d = root() / "store"
    d.mkdir(parents=True, exist_ok=True)
    return d


def parse_version(text: str) -> tuple[int, int, int] | None:
    m = re.search(r"version (\d+)\.(\d+)(?:\.(\d+))?", text)
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def binary_version(path: str) -> tuple[int, int, int] | None:
    """What ``PATH --version`` says, or None when there is no such binary."""
    found = shutil.which(path)
    if not found:
        return None
    cp = proc.run([found, "--version"], check=False, timeout=20)
    return parse_version(cp.stdout.decode(errors="replace"))


def system(arch: str) -> Emulator | None:
    name = arch_mod.get(arch).qemu
    v = binary_version(name)
    return Emulator(arch, name, v, "system") if v else None


STORE_ORIGINS = ("lab", "debian-backports")


def built() -> list[Emulator]:
    """lab's own QEMUs (built and fetched), newest version first."""
    out = []
    for d in sorted(store().iterdir()):
        meta = d / "metadata.json"
        if d.name.startswith(paths.TMP_PREFIX) or not meta.is_file():
            continue
        try:
            m = json.loads(meta.read_text())
            version = tuple(int(x) for x in m["version"].split("."))
        except (OSError, ValueError, KeyError, AttributeError):
            continue
        origin = "debian-backports" if m.get("origin") == "debian-backports" else "lab"
        firmware = tuple(str(d / f) for f in m.get("firmware", ()))
        for a, rel in m.get("binaries", {}).items():
            p = d / rel
            if p.is_file() and len(version) == 3:
                e = Emulator(a, str(p), (version[0], version[1], version[2]), origin, d.name, firmware, str(m.get("debian_version", "")))
                out.append((str(m.get("built") or m.get("fetched") or ""), e))
    # Newest version first; of the same version, the latest build or fetch.
    return [e for _, e in sorted(out, key=lambda x: (x[1].version, x[0]), reverse=True)]


def available(arch: str) -> list[Emulator]:
    """Every QEMU for *arch*: the system's first, then lab's, newest first."""
    s = system(arch)
    return ([s] if s else []) + [e for e in built() if e.arch == arch]


# --- building -------------------------------------------------------------------------


def _apt_options(base: Path, *, private_status: bool = False) -> list[str]:
    """apt-get options that use only lab's private sources list, lists and cache;
    *private_status*: and an empty dpkg status of lab's own instead of the system's
    (apt then sees only the private archive's packages, none installed)."""
    opts = [
        "-o", f"Dir::Etc::SourceList={base / 'sources.list'}",
        "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={base / 'lists'}",
        "-o", f"Dir::Cache={base / 'cache'}",
        "-o", "APT::Sandbox::User=root",
    ]  # fmt: skip
    if private_status:
        opts += ["-o", f"Dir::State={base / 'state'}", "-o", f"Dir::State::status={base / 'state' / 'status'}"]
    return opts


def missing_build_packages() -> list[str]:
    """The Debian packages the build needs that are not installed."""
    out = []
    for p in BUILD_PACKAGES:
        cp = proc.run(["dpkg-query", "-W", "-f=${Status}", p], check=False)
        if b"ok installed" not in cp.stdout:
            out.append(p)
    return out


def fetch_source(progress: Progress | None = None, mirror: str = "http://deb.debian.org/debian") -> Path:
    """Debian trixie's qemu source, unpacked under lab's cache (once per version)."""
    p = of(progress)
    base = root() / "apt"
    for d in ("lists/partial", "cache/archives/partial"):
        (base / d).mkdir(parents=True, exist_ok=True)
    (base / "sources.list").write_text(f"deb-src {mirror} {SUITE} main\n")
    opts = _apt_options(base)
    with p.step("qemu source", f"apt-get update ({SUITE} deb-src, private lists)"):
        proc.run(["apt-get", *opts, "update"], timeout=600)
    cp = proc.run(["apt-cache", *opts, "showsrc", SOURCE_PACKAGE], timeout=120)
    versions = re.findall(r"^Version: (\S+)", cp.stdout.decode(errors="replace"), re.M)
    if not versions:
        raise InfraError(f"Debian {SUITE} has no source package {SOURCE_PACKAGE} (apt-cache showsrc found none)")
    deb_version = versions[0]
    src_root = root() / "src"
    src_root.mkdir(exist_ok=True)
    tree = src_root / f"qemu-{deb_version.replace(':', '_')}"
    if (tree / "VERSION").is_file():
        return tree
    with lock.cache_lock(f"qemu-source-{deb_version}", f"unpacking qemu {deb_version}", timeout=3600):
        if (tree / "VERSION").is_file():
            return tree
        dl = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix("qemu-dl"), dir=src_root))
        try:
            with p.step("qemu source", f"apt-get source {SOURCE_PACKAGE}={deb_version}"):
                proc.run(["apt-get", *opts, "source", "--download-only", f"{SOURCE_PACKAGE}={deb_version}"], cwd=dl, timeout=1800)
                dsc = next(dl.glob("*.dsc"))
                proc.run(["dpkg-source", "--no-check", "-x", dsc.name, "tree"], cwd=dl, timeout=1800)
            os.rename(dl / "tree", tree)
            (tree / ".lab-debian-version").write_text(deb_version + "\n")
        finally:
            shutil.rmtree(dl, ignore_errors=True)
    return tree


def configure_args(prefix: Path, python: Path, archs: tuple[str, ...]) -> list[str]:
    return [
        f"--python={python}",
        f"--target-list={','.join(TARGETS[a] for a in archs)}",
        f"--prefix={prefix}",
        "--cc=ccache gcc",
        f"--firmwarepath={FIRMWARE_PATH}",
        "--enable-fdt=system",
        *(f"--disable-{f}" for f in CONFIGURE_OFF),
    ]


def build(*, jobs: int | None = None, progress: Progress | None = None, archs: tuple[str, ...] = ("x86_64", "arm64")) -> list[Emulator]:
    """Build Debian trixie's QEMU for *archs* into lab's store; reuse an identical build."""
    p = of(progress)
    missing = missing_build_packages()
    if missing:
        raise UserError(f"lab qemu build needs Debian packages that are not installed: apt-get install {' '.join(missing)}")
    tree = fetch_source(p)
    deb_version = (tree / ".lab-debian-version").read_text().strip()
    version = (tree / "VERSION").read_text().strip()
    work = root() / "work" / tree.name
    with lock.cache_lock(f"qemu-build-{tree.name}", f"building qemu {deb_version}", timeout=3 * 3600):
        venv = root() / "meson-venv"
        if not (venv / "bin" / "meson").is_file():
            with p.step("meson", f"pip install '{MESON}' into {venv} (Debian 12's meson is 1.0.1)"):
                proc.run(["python3", "-m", "venv", str(venv)], timeout=300)
                proc.run([str(venv / "bin" / "pip"), "install", "-q", MESON], timeout=900)
        stage = work / "stage"
        bdir = work / "build"
        args = configure_args(stage, venv / "bin" / "python3", archs)
        stamp = bdir / ".lab-configure"
        if not stamp.is_file() or stamp.read_text() != json.dumps(args):
            shutil.rmtree(bdir, ignore_errors=True)
            bdir.mkdir(parents=True)
            with p.step("configure", f"qemu {version}: {', '.join(TARGETS[a] for a in archs)}"):
                proc.run([str(tree / "configure"), *args], cwd=bdir, timeout=1800)
            stamp.write_text(json.dumps(args))
        t0 = time.monotonic()
        with p.step("build", f"qemu {version} (ninja)"):
            _ninja(bdir, jobs or os.cpu_count() or 1, p)
            shutil.rmtree(stage, ignore_errors=True)
            proc.run(["ninja", "-C", str(bdir), "install"], timeout=1800)
        build_s = time.monotonic() - t0
        return _publish(stage, version, deb_version, args, archs, build_s)


def _ninja(bdir: Path, jobs: int, p: Progress) -> None:
    """ninja, its output to lab-build.log in the build directory and its [N/M] counter
    to *p*; stopped with its children if lab is interrupted."""
    log_path = bdir / "lab-build.log"

    def on_line(line: str) -> None:
        m = re.match(r"\[(\d+)/(\d+)\] (?:\S+ )?(\S+)$", line.rstrip())
        if m:
            p.update(f"{m[1]}/{m[2]} {m[3]}")

    rc = proc.logged(["ninja", "-C", str(bdir), f"-j{jobs}"], log_path, on_line)
    if rc != 0:
        err = InfraError(f"ninja failed (exit {rc}) building QEMU; full log: {log_path}")
        err.detail = proc.tail(log_path.read_text(errors="replace"), 15)
        raise err


def strip(binary: Path) -> None:
    """Drop the debug info and symbols a binary does not run with (QEMU's build keeps -g:
    79 MB for qemu-system-x86_64, 27 MB stripped); the code is the same."""
    proc.run(["strip", "--strip-unneeded", str(binary)], timeout=300)


def _publish(stage: Path, version: str, deb_version: str, args: list[str], archs: tuple[str, ...], build_s: float) -> list[Emulator]:
    bins = {a: Path("bin") / arch_mod.get(a).qemu for a in archs}
    for a in archs:
        strip(stage / bins[a])  # before hashing: the store's id names what it holds
    h = hashlib.sha256()
    for a in archs:
        with open(stage / bins[a], "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    entry = f"{version}-{h.hexdigest()[:12]}"
    final = store() / entry
    if not final.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix(entry), dir=store()))
        try:
            (tmp / "bin").mkdir()
            for a in archs:
                shutil.copy2(stage / bins[a], tmp / bins[a])
            meta = {
                "version": version, "debian_version": deb_version, "suite": SUITE, "configure": args,
                "binaries": {a: str(bins[a]) for a in archs}, "build_s": round(build_s, 1),
                "sizes": {a: (tmp / bins[a]).stat().st_size for a in archs}, "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }  # fmt: skip
            (tmp / "metadata.json").write_text(json.dumps(meta, indent=1) + "\n")
            os.chmod(tmp, 0o755)
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return [e for e in built() if e.entry == entry]


# --- fetching Debian's prebuilt QEMU from bookworm-backports ---------------------------

BACKPORTS = "bookworm-backports"
MIRROR = "http://deb.debian.org/debian"  # what Debian 12's own sources name
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"  # debian-archive-keyring, always installed
# The emulators lab boots, the files they share (qemu-system-common) and their firmware:
# qemu-system-data (QEMU 10's ROMs: linuxboot_dma.bin, kvmvapic.bin, ...) and the seabios
# qemu-system-x86 10 depends on (>> 1.16.3-1~; bookworm has 1.16.2).  Not ipxe-qemu: its
# option ROMs are for network cards, and lab's guests have none (-nodefaults, no -nic).
FETCH_PACKAGES = ("qemu-system-x86", "qemu-system-arm", "qemu-system-common", "qemu-system-data", "seabios")
FETCH_BINARIES = {"x86_64": "usr/bin/qemu-system-x86_64", "arm64": "usr/bin/qemu-system-aarch64"}
FETCH_FIRMWARE = ("usr/share/qemu", "usr/share/seabios")  # -L, in this order, before the system's
FETCH_TIMEOUT = 900.0


@dataclass(frozen=True)
class DebPackage:
    """One binary package as the archive's Packages index describes it."""

    name: str
    version: str
    sha256: str
    size: int
    filename: str  # pool/main/q/qemu/...deb
    depends: str = ""

    def describe(self) -> dict:
        return {"version": self.version, "sha256": self.sha256, "size": self.size, "filename": self.filename}


def parse_packages(text: str) -> dict[str, DebPackage]:
    """`apt-cache show` records, the first one of each package (apt lists the candidate
    first) that can be downloaded (has a Filename)."""
    out: dict[str, DebPackage] = {}
    for rec in re.split(r"\n\s*\n", text):
        f: dict[str, str] = {}
        for m in re.finditer(r"^([A-Za-z0-9-]+): ?(.*(?:\n[ \t].*)*)", rec, re.M):
            f[m[1]] = m[2].strip()
        name = f.get("Package")
        if not name or name in out or "Filename" not in f or "Version" not in f or "SHA256" not in f:
            continue
        try:
            size = int(f.get("Size", "0"))
        except ValueError:
            size = 0
        out[name] = DebPackage(name, f["Version"], f["SHA256"], size, f["Filename"], f.get("Depends", ""))
    return out


def _depends_within(pkgs: dict[str, DebPackage]) -> list[str]:
    """The Depends among *pkgs* themselves that their versions do not satisfy (the
    archive caught mid-update: a qemu-system-x86 without its qemu-system-common)."""
    bad = []
    for p in pkgs.values():
        for group in p.depends.split(","):
            alts = [a.strip() for a in group.split("|")]
            for alt in alts:
                m = re.match(r"^([a-z0-9.+-]+)(?::\S+)?(?:\s*\((<<|<=|=|>=|>>)\s*([^)]+)\))?$", alt)
                if not m or m[1] not in pkgs:
                    continue
                if m[2]:
                    ops = {"<<": "lt", "<=": "le", "=": "eq", ">=": "ge", ">>": "gt"}
                    cp = proc.run(["dpkg", "--compare-versions", pkgs[m[1]].version, ops[m[2]], m[3].strip()], check=False)
                    if cp.returncode != 0:
                        bad.append(f"{p.name} needs {alt}, the archive has {m[1]} {pkgs[m[1]].version}")
    return bad


def _unreachable(mirror: str, why: str) -> UserError:
    return UserError(
        f"Debian's {BACKPORTS} archive at {mirror} could not be read ({why}); `lab qemu build` builds QEMU 10 "
        "from Debian's source instead (lab qemu fetch --mirror URL names another Debian mirror)"
    )


def fetch_index(base: Path, mirror: str, names: tuple[str, ...] = FETCH_PACKAGES) -> dict[str, DebPackage]:
    """apt-get update of bookworm-backports alone into *base* (lab's private lists), and
    the packages lab fetches as it lists them.  Nothing of the system's apt is read for
    sources or state, nor written."""
    for d in ("lists/partial", "cache/archives/partial", "state"):
        (base / d).mkdir(parents=True, exist_ok=True)
    status = base / "state" / "status"
    if not status.is_file():
        status.write_text("")
    signed = f" [signed-by={KEYRING}]" if Path(KEYRING).is_file() else ""

    write_text(base / "sources.list", f"deb{signed} {mirror} {BACKPORTS} main\n", "lab's private apt sources list")
    opts = _apt_options(base, private_status=True)
    # --error-on=any: apt-get update otherwise exits 0 when the archive refuses the connection.
    cp = proc.run(["apt-get", "-q", *opts, "--error-on=any", "update"], check=False, timeout=600)
    if cp.returncode != 0:
        err = [ln for ln in (cp.stderr + cp.stdout).decode(errors="replace").splitlines() if ln.startswith(("E:", "Err:", "W:"))]
        raise _unreachable(mirror, (err[0][2:].strip() if err else proc.tail(cp.stderr or cp.stdout, 1)) or f"apt-get update exit {cp.returncode}")
    cp = proc.run(["apt-cache", *opts, "show", *names], check=False, timeout=120)
    pkgs = parse_packages(cp.stdout.decode(errors="replace"))
    missing = [n for n in names if n not in pkgs]
    if missing:
        raise _unreachable(mirror, f"it lists no {', '.join(missing)} for this architecture")
    return pkgs


def _verified_deb(dl: Path, pkg: DebPackage) -> Path:
    """The one .deb of *pkg* apt-get download left in *dl*, with the archive's SHA256."""
    found = list(dl.glob(f"{pkg.name}_*.deb"))
    if len(found) != 1 or sha256_file(found[0]) != pkg.sha256:
        raise InfraError(f"apt-get download gave no {pkg.name} {pkg.version} with the archive's SHA256 in {dl}")
    return found[0]


def entry_id(version: str, pkgs: dict[str, DebPackage]) -> str:
    """The store entry of a fetch: QEMU's version and the packages' own SHA256s."""
    h = hashlib.sha256("".join(f"{n} {pkgs[n].sha256}\n" for n in sorted(pkgs)).encode())
    return f"{version}-{h.hexdigest()[:12]}"


def upstream_version(debian_version: str) -> str:
    """1:10.0.2+ds-2+deb13u1~bpo12+1 -> 10.0.2"""
    v = debian_version.split(":", 1)[-1]
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", v)
    if not m:
        raise InfraError(f"Debian's qemu-system-x86 version {debian_version!r} does not start with a QEMU version")
    return f"{m[1]}.{m[2]}.{m[3] or 0}"


def missing_libraries(binary: Path) -> list[str]:
    """The shared libraries *binary* needs that this system lacks, as ldd names them."""
    cp = proc.run(["ldd", str(binary)], check=False, timeout=60)
    out = (cp.stdout + cp.stderr).decode(errors="replace")
    return sorted({m[1] for m in re.finditer(r"^\s*(\S+) => not found", out, re.M)})


def _not_installed(depends: list[str]) -> list[str]:
    """Of the Debian packages named in *depends* (Depends strings), those not installed."""
    names = sorted({re.split(r"[\s(:]", alt.strip(), maxsplit=1)[0] for d in depends for g in d.split(",") for alt in g.split("|")[:1] if alt.strip()})
    names = [n for n in names if n and n not in FETCH_PACKAGES]
    if not names:
        return []
    cp = proc.run(["dpkg-query", "-W", "-f=${Package} ${Status}\n", *names], check=False, timeout=60)
    ok = {ln.split()[0] for ln in cp.stdout.decode(errors="replace").splitlines() if ln.endswith("ok installed")}
    return [n for n in names if n not in ok]


def fetch(*, progress: Progress | None = None, mirror: str = MIRROR) -> tuple[list[Emulator], bool]:
    """Debian bookworm-backports' QEMU (x86_64 and aarch64 system emulators, firmware)
    into lab's store, whole or not at all.  Returns its emulators and whether this call
    fetched it (False: the store had the same packages already)."""
    p = of(progress)
    mirror = mirror.rstrip("/")
    base = root() / "apt-backports"
    with lock.cache_lock("qemu-fetch", f"fetching QEMU from Debian {BACKPORTS}", timeout=FETCH_TIMEOUT):
        t0 = time.monotonic()
        for d in (store(), root()):  # what a fetch killed half-way left (its pid is gone)
            paths.clean_stale(d)
        with p.step("qemu fetch", f"apt-get update ({BACKPORTS} at {mirror}, private lists)"):
            pkgs = fetch_index(base, mirror)
        bad = _depends_within(pkgs)
        if bad:
            raise InfraError(f"Debian's {BACKPORTS} is inconsistent right now ({bad[0]}); try again later, or `lab qemu build`")
        deb_version = pkgs["qemu-system-x86"].version
        version = upstream_version(deb_version)
        entry = entry_id(version, pkgs)
        if (store() / entry / "metadata.json").is_file():
            return [e for e in built() if e.entry == entry], False
        dl = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix("qemu-debs"), dir=root()))
        stage = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix(entry), dir=store()))
        try:
            with p.step("qemu fetch", f"apt-get download {len(pkgs)} packages (QEMU {deb_version})"):
                cp = proc.run(["apt-get", "-q", *_apt_options(base, private_status=True), "download",
                               *(f"{n}={pkgs[n].version}" for n in FETCH_PACKAGES)], cwd=dl, check=False, timeout=FETCH_TIMEOUT)  # fmt: skip
                if cp.returncode != 0:
                    raise _unreachable(mirror, proc.tail(cp.stderr or cp.stdout, 1) or f"apt-get download exit {cp.returncode}")
            debs = {n: _verified_deb(dl, pkgs[n]) for n in FETCH_PACKAGES}
            with p.step("qemu fetch", f"dpkg -x into {stage.name}"):
                for n in FETCH_PACKAGES:
                    proc.run(["dpkg", "-x", str(debs[n]), str(stage)], timeout=600)
            for rel in FETCH_BINARIES.values():
                b = stage / rel
                if not b.is_file():
                    raise InfraError(f"Debian's {BACKPORTS} packages have no {rel}")
                lost = missing_libraries(b)
                if lost:
                    pk = _not_installed([pkgs[n].depends for n in FETCH_PACKAGES])
                    how = f"apt-get install {' '.join(pk)}" if pk else "Debian 12's libraries are older than it needs"
                    raise UserError(f"{b.name} from {BACKPORTS} needs libraries this system lacks: {', '.join(lost)} ({how})")
                got = binary_version(str(b))
                if got is None or ".".join(map(str, got)) != version:
                    raise InfraError(f"{rel} from {BACKPORTS} says version {got}, its package {deb_version}")
            fetch_s = time.monotonic() - t0
            meta = {
                "version": version, "origin": "debian-backports", "debian_version": deb_version, "suite": BACKPORTS,
                "mirror": mirror, "packages": {n: pkgs[n].describe() for n in FETCH_PACKAGES},
                "binaries": dict(FETCH_BINARIES), "firmware": list(FETCH_FIRMWARE), "fetch_s": round(fetch_s, 1),
                "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }  # fmt: skip
            (stage / "metadata.json").write_text(json.dumps(meta, indent=1) + "\n")
            os.chmod(stage, 0o755)
            try:
                os.rename(stage, store() / entry)
            except OSError:
                if not (store() / entry).is_dir():
                    raise
        finally:
            shutil.rmtree(dl, ignore_errors=True)
            shutil.rmtree(stage, ignore_errors=True)
    return [e for e in built() if e.entry == entry], True


# --- libvirt's domain schemas from the same archive ------------------------------------

LIBVIRT_SCHEMA_PACKAGE = "libvirt-common"  # /usr/share/libvirt/schemas/*.rng


def libvirt_schemas() -> tuple[str, Path] | None:
    """The newest fetched libvirt's domain schemas: (its Debian version, the folder holding
    domain.rng), or None."""
    base = root() / "libvirt-schemas"
    found = sorted((d for d in base.glob("*") if (d / "domain.rng").is_file() and (d / "version").is_file()), reverse=True)
    return (found[0].joinpath("version").read_text().strip(), found[0]) if found else None


def fetch_libvirt_schemas(*, progress: Progress | None = None, mirror: str = MIRROR) -> tuple[str, Path]:
    """bookworm-backports' libvirt domain schemas (RELAX NG, from libvirt-common) into lab's
    cache, so lab's domain XML is checked against the libvirt that has <topology
    clusters=...> (11.3) without installing it: the system's libvirt stays.  Whole or not
    at all, through the same private apt lists as fetch()."""
    p = of(progress)
    mirror = mirror.rstrip("/")
    base = root() / "apt-backports"
    with lock.cache_lock("qemu-fetch", f"fetching libvirt's schemas from Debian {BACKPORTS}", timeout=FETCH_TIMEOUT):
        with p.step("libvirt schemas", f"apt-get update ({BACKPORTS} at {mirror}, private lists)"):
            pkg = fetch_index(base, mirror, (LIBVIRT_SCHEMA_PACKAGE,))[LIBVIRT_SCHEMA_PACKAGE]
        opts = _apt_options(base, private_status=True)
        dest = root() / "libvirt-schemas" / pkg.version.replace("~", "_").replace(":", "_")
        if (dest / "domain.rng").is_file():
            return pkg.version, dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        paths.clean_stale(dest.parent)
        dl = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix("libvirt-debs"), dir=root()))
        stage = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix(dest.name), dir=dest.parent))
        try:
            with p.step("libvirt schemas", f"apt-get download {LIBVIRT_SCHEMA_PACKAGE}={pkg.version}"):
                cp = proc.run(["apt-get", "-q", *opts, "download", f"{LIBVIRT_SCHEMA_PACKAGE}={pkg.version}"], cwd=dl,
                              check=False, timeout=FETCH_TIMEOUT)  # fmt: skip
                if cp.returncode != 0:
                    raise _unreachable(mirror, proc.tail(cp.stderr or cp.stdout, 1) or f"apt-get download exit {cp.returncode}")
            deb = _verified_deb(dl, pkg)
            unpacked = dl / "x"
            proc.run(["dpkg", "-x", str(deb), str(unpacked)], timeout=600)
            rng = unpacked / "usr" / "share" / "libvirt" / "schemas"
            if not (rng / "domain.rng").is_file():
                raise InfraError(f"{deb.name} has no usr/share/libvirt/schemas/domain.rng")
            for f in rng.glob("*.rng"):
                shutil.copy2(f, stage / f.name)
            (stage / "version").write_text(pkg.version + "\n")
            os.chmod(stage, 0o755)
            try:
                os.rename(stage, dest)
            except OSError:
                if not (dest / "domain.rng").is_file():
                    raise
        finally:
            shutil.rmtree(dl, ignore_errors=True)
            shutil.rmtree(stage, ignore_errors=True)
        return pkg.version, dest


# --- choosing -------------------------------------------------------------------------


def choose(cands: list[Emulator], arch: str, choice: str, need: tuple[int, int, int] | None, why: str) -> Emulator:
    """The QEMU a boot uses, from the candidates *cands* the host was probed for (the
    system's first, then lab's newest first; render stays a function of the probed host).
    *choice*: ``auto`` (the system's when it can express the machine, else the newest
    of lab's own, fetched or built, that can), ``system``, ``lab`` (lab's newest), or a
    path (looked at here).  *need*: the oldest version that can express the machine,
    *why* says for what."""
    get = "`lab qemu fetch` gets Debian's QEMU 10 from bookworm-backports (or `lab qemu build` builds it)"
    if choice == "auto":
        if not cands:
            binary = arch_mod.get(arch).qemu
            raise UserError(f"{binary} not found ({proc.hint_package(binary)}), and lab has no QEMU of its own ({get})")
        for c in cands:
            if need is None or c.version >= need:
                return c
        have = ", ".join(f"{c.version_str} ({c.origin})" for c in cands)
        assert need is not None
        raise UserError(
            f"{why}: needs QEMU {'.'.join(map(str, need))} or newer (here: {have}); {get}"
        )
    if choice in ("system", "lab"):
        mine = [c for c in cands if (c.in_store if choice == "lab" else c.origin == choice)]
        if not mine:
            if choice == "lab":
                raise UserError(f"--qemu lab: lab has no QEMU of its own for {arch}; {get}")
            binary = arch_mod.get(arch).qemu
            raise UserError(f"--qemu system: {binary} not found ({proc.hint_package(binary)})")
        e = mine[0]
    else:
        e = _from_path(arch, choice)
    if need is not None and e.version < need:
        raise UserError(
            f"{why}: needs QEMU {'.'.join(map(str, need))} or newer; --qemu {choice} is {e.version_str}"
            + ("" if choice == "lab" else f"; {get}")
        )
    return e


def _from_path(arch: str, choice: str) -> Emulator:
    p = Path(choice).expanduser()
    if not (p.is_file() and os.access(p, os.X_OK)):
        raise UserError(f"--qemu {choice}: not an executable file (give auto, system, lab or a QEMU binary)")
    v = binary_version(str(p.resolve()))
    if v is None:
        raise UserError(f"--qemu {choice}: `{p} --version` does not say a QEMU version")
    return Emulator(arch, str(p.resolve()), v, "path")
