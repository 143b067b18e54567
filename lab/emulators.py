"""The QEMUs lab can boot with: the system's (Debian 12: 7.2) and the ones lab built from
Debian trixie's source package (``lab qemu build``), and which one a topology needs.

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
from .errors import InfraError, UserError
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
    origin: str  # "system" | "lab" | "path"
    entry: str = ""  # lab's store entry id

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version))

    def describe(self) -> dict:
        return {"arch": self.arch, "path": self.path, "version": self.version_str, "origin": self.origin, "entry": self.entry}


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


def built() -> list[Emulator]:
    """lab's built QEMUs, newest version first."""
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
        for a, rel in m.get("binaries", {}).items():
            p = d / rel
            if p.is_file() and len(version) == 3:
                out.append((str(m.get("built", "")), Emulator(a, str(p), (version[0], version[1], version[2]), "lab", d.name)))
    # Newest version first; of the same version, the latest build.
    return [e for _, e in sorted(out, key=lambda x: (x[1].version, x[0]), reverse=True)]


def available(arch: str) -> list[Emulator]:
    """Every QEMU for *arch*: the system's first, then lab's, newest first."""
    s = system(arch)
    return ([s] if s else []) + [e for e in built() if e.arch == arch]


# --- building -------------------------------------------------------------------------


def _apt_options(base: Path) -> list[str]:
    """apt-get options that use only lab's private sources list, lists and cache."""
    return [
        "-o", f"Dir::Etc::SourceList={base / 'sources.list'}",
        "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={base / 'lists'}",
        "-o", f"Dir::Cache={base / 'cache'}",
        "-o", "APT::Sandbox::User=root",
    ]  # fmt: skip


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


# --- choosing -------------------------------------------------------------------------


def required(topo, accel: str) -> tuple[tuple[int, int, int] | None, str]:
    """The oldest QEMU that can express *topo* under *accel*, and for what (None: any).
    The version gates themselves live with the renderer (render.qemu.QEMU_*)."""
    from .render import qemu as r

    if topo.arch != "x86_64":
        if topo.has_clusters:
            return r.QEMU_ARM_CLUSTERS, f"{topo.name}: arm64 clusters need -smp clusters="
        return None, ""
    if topo.has_clusters:
        return r.QEMU_X86_CLUSTERS, f"{topo.name}: x86 clusters (-smp modules= with an L2 per module through -machine smp-cache)"
    if accel == "tcg" and topo.shape is not None:
        if topo.n_cpus > 255:
            return r.QEMU_TCG_X2APIC, f"{topo.name}: {topo.n_cpus} vCPUs need x2APIC, which TCG emulates from QEMU 9.0"
        top = r.max_apic_id(topo)
        if top > 254:
            return r.QEMU_TCG_X2APIC, (
                f"{topo.name}: its highest APIC ID would be {top} (QEMU packs socket/die/core/thread ids in "
                "power-of-two fields); above 254 needs x2APIC, which TCG emulates from QEMU 9.0"
            )
    if topo.shape is not None and topo.shape.llcs_per_socket > 1:
        return r.QEMU_X86_DIES, f"{topo.name}: several LLCs per socket need -smp dies="
    return None, ""


def choose(cands: list[Emulator], arch: str, choice: str, need: tuple[int, int, int] | None, why: str) -> Emulator:
    """The QEMU a boot uses, from the candidates *cands* the host was probed for (the
    system's first, then lab's newest first; render stays a function of the probed host).
    *choice*: ``auto`` (the system's when it can express the machine, else the newest
    lab-built one that can), ``system``, ``lab``, or a path (looked at here).  *need*: the
    oldest version that can express the machine, *why* says for what."""
    if choice == "auto":
        if not cands:
            binary = arch_mod.get(arch).qemu
            raise UserError(f"{binary} not found ({proc.hint_package(binary)}), and lab has built no QEMU (lab qemu build)")
        for c in cands:
            if need is None or c.version >= need:
                return c
        have = ", ".join(f"{c.version_str} ({c.origin})" for c in cands)
        assert need is not None
        raise UserError(
            f"{why}: needs QEMU {'.'.join(map(str, need))} or newer (here: {have}); "
            "`lab qemu build` builds Debian trixie's QEMU 10 into lab's cache"
        )
    if choice in ("system", "lab"):
        mine = [c for c in cands if c.origin == choice]
        if not mine:
            if choice == "lab":
                raise UserError(f"--qemu lab: lab has built no QEMU for {arch}; run `lab qemu build`")
            binary = arch_mod.get(arch).qemu
            raise UserError(f"--qemu system: {binary} not found ({proc.hint_package(binary)})")
        e = mine[0]
    else:
        e = _from_path(arch, choice)
    if need is not None and e.version < need:
        raise UserError(
            f"{why}: needs QEMU {'.'.join(map(str, need))} or newer; --qemu {choice} is {e.version_str}"
            + ("" if choice == "lab" else "; `lab qemu build` builds Debian trixie's QEMU 10")
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
