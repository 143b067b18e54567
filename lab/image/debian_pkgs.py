"""Debian's own packages of a guest's architecture, as a sysroot the tool stager reads.

A guest of another architecture than the host's cannot run the host's perf or
stress-ng.  Debian builds them for every architecture, so lab takes Debian's:

- apt runs with a private sources list, package lists, cache and (empty) dpkg
  status under ``<cache>/guest-tools/<arch>/apt`` and the guest's Debian
  architecture as apt's only one: the system's apt state is never read for
  packages nor changed (the same private-apt machinery as ``lab qemu build``'s
  source fetch, ``emulators._apt_options``);
- the packages' dependency closure is resolved from their ``Depends`` /
  ``Pre-Depends`` with ``apt-cache show``: a tool's own package always, and of its
  dependencies the libraries (Section ``libs``): what the binaries' DT_NEEDED can
  name.  perl, python3 and the like are followed no further: the stager checks
  every library a binary needs is in the tree, and says which one is not;
- each package is fetched once (``apt-get download NAME=VERSION``) into
  ``debs/``, checked against the SHA256 its package list gives
  (``emulators._verified_deb``, as QEMU's fetch checks), and the closure is
  unpacked with ``dpkg-deb -x`` into ``roots/<key>``, *key* a hash of the
  packages and their versions.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import arch as archs
from .. import lock, paths, proc
from ..emulators import DebPackage, _apt_options, _verified_deb
from ..errors import InfraError, UserError

MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEFAULT_SUITE = "bookworm"
FOLLOWED_SECTIONS = ("libs", "oldlibs")  # a dependency in these is followed (shared libraries)
LISTS_MAX_AGE_S = 7 * 86400  # package lists older than this are refreshed before resolving
FORMAT = 1  # bump when what a root holds changes for the same packages


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    section: str
    depends: tuple[tuple[str, ...], ...]  # each group: alternatives, first preferred
    sha256: str = ""  # the archive's, as its Packages index says: a download is checked against it

    @property
    def spec(self) -> str:
        return f"{self.name}={self.version}"


def suite() -> str:
    """The host's Debian release (its packages' libc matches what lab knows), else bookworm."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return DEFAULT_SUITE
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, re.M)
    return m[1] if m else DEFAULT_SUITE


def base(arch: str) -> Path:
    archs.get(arch)
    d = paths.cache_dir() / "guest-tools" / arch
    d.mkdir(parents=True, exist_ok=True)
    return d


def sources_list(release: str) -> str:
    signed = f" [signed-by={KEYRING}]" if os.path.isfile(KEYRING) else ""
    return "".join(
        f"deb{signed} {url} {s} main\n"
        for url, s in ((MIRROR, release), (MIRROR, f"{release}-updates"), (SECURITY_MIRROR, f"{release}-security"))
    )


def apt_options(arch: str) -> list[str]:
    """apt options for lab's private apt of *arch*: its own sources, lists, cache and
    dpkg status, and Debian's *arch* as the only architecture."""

    apt = base(arch) / "apt"
    deb = archs.get(arch).debian
    return [
        *_apt_options(apt),
        "-o", f"Dir::State::status={apt / 'status'}",
        "-o", f"APT::Architecture={deb}",
        "-o", f"APT::Architectures={deb}",
        "-o", "Acquire::Languages=none",
        "-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
        "-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
    ]  # fmt: skip


def _lists_age(arch: str) -> float | None:
    lists = base(arch) / "apt" / "lists"
    stamps = [p.stat().st_mtime for p in lists.glob("*_Packages*")] if lists.is_dir() else []
    return time.time() - min(stamps) if stamps else None


def ensure_lists(arch: str, *, refresh: bool = False) -> None:
    """Lab's private package lists of *arch*: fetched when absent, stale or asked for."""
    apt = base(arch) / "apt"
    with lock.cache_lock(f"guest-tools-apt-{arch}", f"updating lab's {arch} package lists", timeout=1200):
        age = _lists_age(arch)
        if not refresh and age is not None and age < LISTS_MAX_AGE_S:
            return
        for d in ("lists/partial", "cache/archives/partial"):
            (apt / d).mkdir(parents=True, exist_ok=True)
        (apt / "status").touch()
        (apt / "sources.list").write_text(sources_list(suite()))
        cp = proc.run(["apt-get", *apt_options(arch), "-q", "update"], check=False, timeout=900)
        if cp.returncode != 0 or _lists_age(arch) is None:
            err = cp.stderr.decode(errors="replace").strip().splitlines()
            raise UserError(
                f"cannot fetch Debian's {archs.get(arch).debian} package lists from {MIRROR} "
                f"(apt-get update: {err[-1] if err else f'exit {cp.returncode}'})"
            )


# --- dependency closure -----------------------------------------------------------


def parse_depends(field: str) -> tuple[tuple[str, ...], ...]:
    """``a (>= 1) | b, c:any`` -> ((a, b), (c,)): names only, no versions or arch qualifiers."""
    groups = []
    for group in field.split(","):
        alts = []
        for alt in group.split("|"):
            alt = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alt).strip()
            name = alt.split(":", 1)[0].strip()
            if name:
                alts.append(name)
        if alts:
            groups.append(tuple(alts))
    return tuple(groups)


def parse_show(text: str) -> dict[str, Package]:
    """The stanzas of ``apt-cache show`` output, by package name (the first stanza of a
    name: apt-cache lists the candidate first)."""
    out: dict[str, Package] = {}
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        name = fields.get("Package")
        if not name or name in out or "Version" not in fields:
            continue
        deps = parse_depends(fields.get("Pre-Depends", "")) + parse_depends(fields.get("Depends", ""))
        out[name] = Package(name, fields["Version"], fields.get("Section", ""), deps, fields.get("SHA256", ""))
    return out


def followed(p: Package) -> bool:
    """A dependency worth unpacking: a shared library package (``libs``, also as
    ``contrib/libs``)."""
    return p.section.rsplit("/", 1)[-1] in FOLLOWED_SECTIONS


def closure(roots: Iterable[str], show: Callable[[list[str]], dict[str, Package]]) -> tuple[dict[str, Package], list[str]]:
    """The packages of *roots* and of their library dependencies, transitively, and the
    roots apt does not know.  *show* answers for a batch of names (``apt-cache show``):
    one call per level of the dependency tree.  Of alternatives the first apt knows is
    taken; a dependency apt knows under no name (virtual, or not of this arch) is left
    out, and the stager names any library that ends up missing."""
    known: dict[str, Package] = {}
    asked: set[str] = set()

    def ask(names: Iterable[str]) -> None:
        todo = sorted({n for n in names if n not in asked})
        if todo:
            asked.update(todo)
            known.update({k: v for k, v in show(todo).items() if k in todo})

    roots = list(dict.fromkeys(roots))
    ask(roots)
    missing = [r for r in roots if r not in known]
    chosen: dict[str, Package] = {}
    level = [r for r in roots if r in known]
    while level:
        for n in level:
            chosen[n] = known[n]
        ask(alt for n in level for group in known[n].depends for alt in group)
        nxt = []
        for n in level:
            for group in known[n].depends:
                pick = next((a for a in group if a in chosen), None) or next((a for a in group if a in known), None)
                if pick and pick not in chosen and pick not in nxt and followed(known[pick]):
                    nxt.append(pick)
        level = nxt
    return dict(sorted(chosen.items())), missing


def apt_show(arch: str) -> Callable[[list[str]], dict[str, Package]]:
    def show(names: list[str]) -> dict[str, Package]:
        cp = proc.run(["apt-cache", *apt_options(arch), "show", "--no-all-versions", *names], check=False, timeout=300)
        return parse_show(cp.stdout.decode(errors="replace"))

    return show


def package_of(tool: str) -> str:
    pkg = proc.PACKAGES.get(tool)
    if pkg is None:
        raise UserError(f"tool '{tool}': lab knows no Debian package that ships it")
    return pkg


@functools.cache
def resolve(arch: str, tools: tuple[str, ...]) -> tuple[tuple[Package, ...], tuple[str, ...]]:
    """(the closure of *tools*' packages for *arch*, the tools Debian has no *arch* package
    for); once per process."""
    ensure_lists(arch)
    pkgs = {t: package_of(t) for t in tools}
    got, missing = closure(pkgs.values(), apt_show(arch))
    return tuple(got.values()), tuple(t for t, p in pkgs.items() if p in missing)


def no_package(arch: str, tools: Iterable[str]) -> str:
    deb = archs.get(arch).debian
    names = ", ".join(f"{t} ({package_of(t)})" for t in tools)
    return f"no Debian {deb} package for {names} in {suite()}: cannot be packed for {arch} guests"


def key(pkgs: Iterable[Package]) -> str:
    """The cache key of a set of packages: their names and versions."""
    h = hashlib.sha256(f"format={FORMAT}\n".encode())
    for p in sorted(pkgs, key=lambda p: p.name):
        h.update(f"{p.spec}\n".encode())
    return h.hexdigest()


def _deb_path(arch: str, p: Package) -> Path:
    return base(arch) / "debs" / f"{p.name}_{p.version.replace(':', '%3a')}.deb"


def download(arch: str, pkgs: Iterable[Package]) -> list[Path]:
    """Each package's .deb, fetched once into lab's cache (``apt-get download``)."""
    pkgs = list(pkgs)
    debs = base(arch) / "debs"
    debs.mkdir(exist_ok=True)
    todo = [p for p in pkgs if not _deb_path(arch, p).is_file()]
    if todo:
        with tempfile.TemporaryDirectory(prefix=paths.tmp_prefix("debs"), dir=debs) as td:
            os.chmod(td, 0o777)  # apt-get download may drop privileges to _apt
            cp = proc.run(["apt-get", *apt_options(arch), "-q", "download", *(p.spec for p in todo)], cwd=td, check=False, timeout=1800)

            for p in todo:  # the one .deb of each, with the archive's SHA256 (QEMU's fetch checks the same)
                try:
                    got = _verified_deb(Path(td), DebPackage(p.name, p.version, p.sha256, 0, ""))
                except InfraError:
                    if cp.returncode == 0:
                        raise
                    continue  # a refused download: those that came whole are kept, the refusal said below
                os.replace(got, _deb_path(arch, p))
            if cp.returncode != 0:
                _refused(arch, todo, cp.stderr.decode(errors="replace"))
    return [_deb_path(arch, p) for p in pkgs]


def _refused(arch: str, todo: list[Package], stderr: str) -> None:
    deb = archs.get(arch).debian
    lines = [ln.strip() for ln in stderr.splitlines() if ln.startswith(("E:", "W:"))]
    for p in todo:
        # The .deb's file name (name_version_arch.deb) or apt's "Err: ... name arch version"
        said = next((ln for ln in lines if re.search(rf"(^|[/ ]){re.escape(p.name)}[_ ]", ln)), None)
        if said:
            raise UserError(f"apt-get download {p.name}:{deb} ({p.version}) refused: {said}")
    raise UserError(
        f"apt-get download of {todo[0].name}:{deb} ({todo[0].version}) and {len(todo) - 1} more refused: "
        + (lines[-1] if lines else "no reason given")
    )


def sysroot(arch: str, tools: tuple[str, ...], defaults: tuple[str, ...]) -> Path:
    """A directory holding *tools*' Debian packages for *arch* unpacked, with their library
    closure: made once per set of package versions.  It holds every tool lab stages by
    default too (*defaults*: those Debian has for *arch*), so one sysroot serves each
    subset of them (each tool set its own would unpack libc and friends again: 370 MB for
    five sets)."""
    _, missing = resolve(arch, tools)
    if missing:
        raise UserError(no_package(arch, missing))
    everything = tuple(sorted({*tools, *defaults}))
    pkgs, _ = resolve(arch, everything)
    return _unpacked(arch, pkgs, lambda: resolve(arch, everything)[0], "guest tools")


def dev_root(arch: str, packages: tuple[str, ...]) -> Path:
    """A directory holding Debian's *packages* of *arch* (by package name, e.g. the
    -dev packages whose static libraries and headers a cross-built program links
    with) unpacked, with their library closure; made once per set of versions, beside
    the guest tools' roots, by the same private apt (the system's is never touched)."""

    def pkgs_now() -> tuple[Package, ...]:
        ensure_lists(arch)
        got, missing = closure(packages, apt_show(arch))
        if missing:
            deb = archs.get(arch).debian
            raise UserError(f"no Debian {deb} package {', '.join(missing)} in {suite()}: cannot build for {arch}")
        return tuple(got.values())

    return _unpacked(arch, pkgs_now(), pkgs_now, "build libraries", prefix="dev-", relink=True)


def relink_absolute(root: Path) -> None:
    """Each symlink under *root* to an absolute path made relative, into *root* (a -dev
    package's ``libz.so -> /lib/<triplet>/libz.so.1`` points at the host's /lib, where
    no library of the arch is; a linker given ``-L<root>/usr/lib/<triplet>`` needs it
    to find the one beside it)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            link = Path(dirpath) / n
            if link.is_symlink():
                target = os.readlink(link)
                if target.startswith("/"):
                    link.unlink()
                    link.symlink_to(os.path.relpath(root / target.lstrip("/"), link.parent))


def _unpacked(
    arch: str, pkgs: tuple[Package, ...], again: Callable[[], tuple[Package, ...]], what: str, *,
    prefix: str = "", relink: bool = False,
) -> Path:
    """*pkgs* downloaded and unpacked into ``roots/<prefix><key>`` (once; *relink*: its
    absolute symlinks made relative, relink_absolute); *again* resolves them anew after
    the package lists are refreshed (a version the mirror replaced)."""
    root = base(arch) / "roots" / (prefix + key(pkgs)[:16])
    if (root / ".lab-packages.json").is_file():
        return root
    with lock.cache_lock(f"guest-tools-root-{root.name}", f"unpacking {arch} {what}", timeout=1800):
        if (root / ".lab-packages.json").is_file():
            return root
        try:
            debs = download(arch, pkgs)
        except UserError:
            # The lists may name versions the mirror has replaced: refresh once, resolve again.
            if _lists_age(arch) is not None and (_lists_age(arch) or 0) < 600:
                raise
            ensure_lists(arch, refresh=True)
            resolve.cache_clear()
            pkgs = again()
            debs = download(arch, pkgs)
            root = base(arch) / "roots" / (prefix + key(pkgs)[:16])
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=paths.tmp_prefix("root"), dir=root.parent))
        try:
            for d in debs:
                cp = proc.run(["dpkg-deb", "-x", str(d), str(tmp)], check=False, timeout=600)
                if cp.returncode != 0:
                    d.unlink(missing_ok=True)  # damaged: fetched again next time
                    raise InfraError(f"dpkg-deb -x {d.name} failed: {cp.stderr.decode(errors='replace').strip()}")
            if relink:
                relink_absolute(tmp)
            meta = {"arch": arch, "suite": suite(), "packages": {p.name: p.version for p in pkgs}}
            (tmp / ".lab-packages.json").write_text(json.dumps(meta, indent=1) + "\n")
            if root.exists():
                shutil.rmtree(root)
            os.rename(tmp, root)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return root
