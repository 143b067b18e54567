"""Stage real host tools (perf, hackbench, stress-ng, numactl) into an initramfs root.

Each tool is copied at its own path with every shared library it needs and the ELF
interpreter at the exact path its PT_INTERP names, so it runs in a busybox
initramfs that has no libc of its own.

Libraries are found the way ``ld.so`` finds them (DT_NEEDED, then DT_RPATH /
DT_RUNPATH with ``$ORIGIN``, then the ld.so.conf directories, then the system
directories), by reading the ELF files here rather than running ``ldd``: that
works on files of another architecture too, and runs no foreign code.  The unit
tests check the result against ``ldd``.

For the host's own architecture the tools are the host's.  A guest of another
architecture gets Debian's packages of its architecture (``debian_pkgs``: a private
apt fetches them with their library closure and unpacks them into a sysroot), and
the same resolver stages them from that sysroot, with that architecture's loader
(``Arch.loader``) and libraries.  ``LAB_GUEST_TOOLS=debian`` takes Debian's
packages for the host's architecture too (an x86 guest as an arm64 host would
stage it).
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import re
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import arch as archs
from ..arch import host_name as host_arch
from ..errors import UserError
from ..proc import PACKAGES, hint_package

log = logging.getLogger("lab.image.tools")

# The host tools staged by default (their Debian packages: proc.PACKAGES).
DEFAULT_TOOLS = ("perf", "hackbench", "stress-ng", "numactl")

# Libraries glibc dlopen()s itself rather than naming in DT_NEEDED: libgcc_s for
# unwinding on pthread_exit()/pthread_cancel() since glibc 2.34.  Staged whenever
# libc.so.6 is, if the host has them.
_DLOPENED_BY = {"libc.so.6": ("libgcc_s.so.1",)}


# --- ELF reading -------------------------------------------------------------

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB, DT_RPATH, DT_RUNPATH = 0, 1, 5, 15, 29


@dataclass(frozen=True)
class Elf:
    path: Path
    elfclass: int  # 1 = 32-bit, 2 = 64-bit
    machine: int
    interp: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]


class NotElf(Exception):
    pass


def read_elf(path: Path) -> Elf:
    """The dynamic-linking facts of one ELF file (NotElf if it is not one)."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        raise NotElf(str(path))
    elfclass, endian = data[4], "<" if data[5] == 1 else ">"
    if elfclass == 2:
        machine, phoff = struct.unpack_from(endian + "H12xQ", data, 18)
        phentsize, phnum = struct.unpack_from(endian + "HH", data, 54)
        ph_fmt, dyn_fmt = endian + "IIQQQQ", endian + "qQ"
    elif elfclass == 1:
        machine, phoff = struct.unpack_from(endian + "H8xI", data, 18)
        phentsize, phnum = struct.unpack_from(endian + "HH", data, 42)
        ph_fmt, dyn_fmt = endian + "IIIII", endian + "iI"
    else:
        raise NotElf(str(path))

    loads, dynamic, interp = [], None, None
    for i in range(phnum):
        fields = struct.unpack_from(ph_fmt, data, phoff + i * phentsize)
        if elfclass == 2:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = fields
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = fields
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
        elif p_type == PT_INTERP:
            interp = data[p_offset : p_offset + p_filesz].split(b"\0")[0].decode()

    needed_off: list[int] = []
    rpath_off = runpath_off = strtab = None
    if dynamic:
        step = struct.calcsize(dyn_fmt)
        off, size = dynamic
        for pos in range(off, off + size, step):
            tag, val = struct.unpack_from(dyn_fmt, data, pos)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                needed_off.append(val)
            elif tag == DT_STRTAB:
                strtab = val
            elif tag == DT_RPATH:
                rpath_off = val
            elif tag == DT_RUNPATH:
                runpath_off = val

    def string(offset: int | None) -> str:
        if offset is None or strtab is None:
            return ""
        for vaddr, foff, fsize in loads:  # DT_STRTAB is an address: map it to the file
            if vaddr <= strtab < vaddr + fsize:
                start = strtab - vaddr + foff + offset
                return data[start : data.index(b"\0", start)].decode()
        return ""

    def dirs(offset: int | None) -> tuple[str, ...]:
        return tuple(d for d in string(offset).split(":") if d)

    return Elf(
        path=Path(path),
        elfclass=elfclass,
        machine=machine,
        interp=interp,
        needed=tuple(string(o) for o in needed_off),
        rpath=dirs(rpath_off),
        runpath=dirs(runpath_off),
    )


# --- library resolution --------------------------------------------------------


def _ld_so_conf_dirs(sysroot: Path, conf: str = "/etc/ld.so.conf", seen=None) -> list[str]:
    seen = set() if seen is None else seen
    out: list[str] = []
    path = sysroot / conf.lstrip("/")
    if conf in seen or not path.is_file():
        return out
    seen.add(conf)
    for line in path.read_text(errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include "):
            for pattern in line.split()[1:]:
                if not pattern.startswith("/"):
                    pattern = str(Path(conf).parent / pattern)
                for inc in sorted(glob.glob(str(sysroot / pattern.lstrip("/")))):
                    guest = "/" + str(Path(inc).relative_to(sysroot))
                    out += _ld_so_conf_dirs(sysroot, guest, seen)
        else:
            out.append(line)
    return out


def system_dirs(arch: str) -> list[str]:
    """Where ld.so looks with no cache: Debian glibc's built-in search path."""
    triplet = archs.get(arch).triplet
    return [f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib"]


@dataclass(frozen=True)
class _Resolver:
    arch: str
    sysroot: Path

    def find(self, soname: str, needer: Elf, exe: Elf) -> tuple[str, str] | None:
        """(host path, guest path) of *soname* as needed by *needer* in program *exe*.

        Both are paths inside the sysroot; they differ only for a library that
        the host finds through ld.so.conf and the guest must find without it.
        """
        if "/" in soname:
            return (soname, soname) if self._compatible(soname, needer) else None
        dirs: list[str] = []
        if not needer.runpath:
            dirs += self._expand(needer.rpath, needer)
            if needer is not exe and not exe.runpath:
                dirs += self._expand(exe.rpath, exe)
        dirs += self._expand(needer.runpath, needer)
        conf = [d for d in _ld_so_conf_dirs(self.sysroot) if d not in dirs]
        system = system_dirs(self.arch)
        for d in [*dirs, *conf, *system]:
            cand = os.path.normpath(os.path.join(d, soname))
            if self._compatible(cand, needer):
                if d in conf and d not in system:
                    # Found through ld.so.cache on the host; the guest has no
                    # cache, so the library must go where ld.so looks anyway.
                    return cand, os.path.join(system[0], soname)
                return cand, cand
        return None

    def host(self, guest: str) -> Path:
        """The file at guest path *guest*, its symlinks followed inside the sysroot (an
        absolute link in an unpacked package names the guest's root, not the host's)."""
        return self.sysroot / self.real(guest).lstrip("/")

    def real(self, guest: str) -> str:
        """*guest* with every symlink resolved, as a guest path."""
        if self.sysroot == Path("/"):
            return os.path.realpath(guest)
        return _realpath_in(self.sysroot, guest)

    def _expand(self, dirs: tuple[str, ...], obj: Elf) -> list[str]:
        origin = "/" + str(obj.path.parent.relative_to(self.sysroot)).lstrip(".").lstrip("/")
        return [
            d.replace("$ORIGIN", origin)
            .replace("${ORIGIN}", origin)
            .replace("$LIB", "lib")
            .replace("${LIB}", "lib")
            for d in dirs
        ]

    def _compatible(self, guest: str, needer: Elf) -> bool:
        p = self.host(guest)
        if not p.is_file():
            return False
        try:
            e = read_elf(p)
        except (NotElf, struct.error, OSError):
            return False
        return e.elfclass == needer.elfclass and e.machine == needer.machine


def _realpath_in(sysroot: Path, guest: str, depth: int = 0) -> str:
    """realpath of guest path *guest* inside *sysroot* (absolute links are the sysroot's)."""
    if depth > 40:
        raise UserError(f"{sysroot}: too many levels of symbolic links at {guest}")
    parts = [x for x in guest.split("/") if x and x != "."]
    done = "/"
    for i, part in enumerate(parts):
        if part == "..":
            done = os.path.dirname(done.rstrip("/")) or "/"
            continue
        cand = os.path.join(done, part)
        host = sysroot / cand.lstrip("/")
        if host.is_symlink():
            target = os.readlink(host)
            target = target if target.startswith("/") else os.path.join(done, target)
            rest = "/".join(parts[i + 1 :])
            return _realpath_in(sysroot, os.path.join(target, rest) if rest else target, depth + 1)
        done = cand
    return os.path.normpath(done)


# --- the staging plan ----------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One path in the guest: a file copied from *source*, or a symlink to *link*."""

    guest: str
    source: Path | None = None
    link: str | None = None


def _missing(tool: str) -> UserError:
    return UserError(f"host tool '{tool}' not found ({hint_package(tool)})")


def _which(tool: str) -> Path:
    search = os.pathsep.join(
        [os.environ.get("PATH", ""), "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]
    )
    found = shutil.which(tool, path=search)
    if not found:
        raise _missing(tool)
    return Path(os.path.abspath(found))


_SYSROOT_BIN = ("/usr/bin", "/usr/sbin", "/bin", "/sbin")


def _which_in(resolver: _Resolver, tool: str) -> Path:
    """Guest path of *tool* in a sysroot of unpacked packages."""
    for d in _SYSROOT_BIN:
        guest = f"{d}/{tool}"
        if resolver.host(guest).is_file():
            return Path(guest)
    raise UserError(
        f"tool '{tool}': Debian's {resolver.arch} package {PACKAGES.get(tool, tool)} has no "
        f"{' or '.join(d + '/' + tool for d in _SYSROOT_BIN)}"
    )


def _version_key(path: Path) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", path.name.split("_", 1)[-1]))


def _real_binary(tool: str, path: Path, resolver: _Resolver | None = None) -> tuple[Path, list[Entry]]:
    """The ELF file behind guest path *path*, and the symlinks that make *path* reach it.

    Debian's linux-perf has shipped /usr/bin/perf as a shell wrapper that execs
    /usr/bin/perf_<major.minor> for the running kernel; a busybox guest would run
    the wrapper with the wrong uname.  Stage the newest perf_* and point perf at it.
    """
    resolver = resolver or _Resolver(host_arch(), Path("/"))
    head = resolver.host(str(path)).read_bytes()[:4]
    if head == b"\x7fELF":
        return path, []
    if head[:2] == b"#!":
        host_dir = resolver.host(str(path.parent))
        candidates = [
            path.parent / Path(p).name
            for p in glob.glob(str(host_dir / f"{tool}_*"))
            if resolver.host(str(path.parent / Path(p).name)).read_bytes()[:4] == b"\x7fELF"
        ]
        if candidates:
            real = max(candidates, key=_version_key)
            return real, [Entry(str(path), link=real.name)]
        raise UserError(
            f"{path} is a script and no {path.parent}/{tool}_* binary exists beside it; "
            f"reinstall the Debian package {PACKAGES.get(tool, tool)}"
        )
    raise UserError(f"{path} is not an ELF executable; lab can only stage ELF tools")


def from_debian(arch: str) -> bool:
    """Whether *arch*'s tools are Debian's packages of that arch (another arch than the
    host's, or LAB_GUEST_TOOLS=debian) rather than the host's own binaries."""
    return arch != host_arch() or os.environ.get("LAB_GUEST_TOOLS") == "debian"


def _check_arch(arch: str) -> None:
    if arch not in archs.NAMES:
        raise UserError(f"unknown arch '{arch}' (known: {', '.join(archs.NAMES)})")


def pack_entries(arch: str, tools: list[str] | tuple[str, ...], sysroot: Path | None = None) -> list[Entry]:
    """Everything ``stage_tools`` would put in the root, sorted by guest path.

    The tools come from *sysroot* when given, else from Debian's *arch* packages when
    ``from_debian(arch)``, else from the host.  An Entry's source is a host path."""
    _check_arch(arch)
    if sysroot is None and from_debian(arch):
        # deferred: CLI start (lab.image.debian_pkgs)
        from . import debian_pkgs

        sysroot = debian_pkgs.sysroot(arch, tuple(tools), DEFAULT_TOOLS)
    resolver = _Resolver(arch, Path(sysroot) if sysroot is not None else Path("/"))
    in_sysroot = resolver.sysroot != Path("/")
    entries: dict[str, Entry] = {}
    add_file = _entry_adder(resolver, entries)

    loader = archs.get(arch).loader
    for tool in tools:
        path = _which_in(resolver, tool) if in_sysroot else _which(tool)
        real, links = _real_binary(tool, path, resolver)
        exe = read_elf(resolver.host(str(real)))
        if exe.machine != archs.get(arch).elf_machine:
            raise UserError(f"{real} is not an {arch} binary (ELF machine {exe.machine})")
        add_file(str(real), str(real))
        for link in links:
            entries.setdefault(link.guest, link)
        if exe.interp:
            if in_sysroot and exe.interp != loader:
                raise UserError(f"{real} names the loader {exe.interp}; an {arch} glibc binary names {loader}")
            if not resolver.host(exe.interp).is_file():
                where = f" in Debian's {arch} packages ({resolver.sysroot})" if in_sysroot else ""
                raise UserError(f"{real} needs the ELF interpreter {exe.interp}, which is missing{where}")
            add_file(exe.interp, exe.interp)

        def missing(soname: str, obj: Elf, tool: str = tool, real: Path = real) -> UserError:
            if in_sysroot:
                return UserError(
                    f"{real} needs {soname} (via {obj.path.name}), which no {arch} package of "
                    f"{PACKAGES.get(tool, tool)}'s library closure ships ({resolver.sysroot})"
                )
            return UserError(
                f"{real} needs {soname} (via {obj.path}), which is not installed; "
                f"reinstall the Debian package {PACKAGES.get(tool, tool)}"
            )

        _add_libraries(resolver, exe, add_file, missing)
    return sorted(entries.values(), key=lambda e: e.guest)


def _add_libraries(
    resolver: _Resolver, exe: Elf, add_file: Callable[[str, str], None], missing: Callable[[str, Elf], UserError]
) -> None:
    """Add every shared library *exe* needs, transitively, as ld.so would find them
    (and the ones glibc dlopen()s itself); *missing* says why one cannot be found."""
    queue, done = [exe], set()
    while queue:
        obj = queue.pop()
        names = list(obj.needed)
        for n in obj.needed:
            names += [x for x in _DLOPENED_BY.get(n, ()) if resolver.find(x, obj, exe)]
        for soname in names:
            found = resolver.find(soname, obj, exe)
            if found is None:
                raise missing(soname, obj)
            host, guest = found
            if guest in done:
                continue
            done.add(guest)
            add_file(guest, host)
            queue.append(read_elf(resolver.host(host)))


def _entry_adder(resolver: _Resolver, entries: dict[str, Entry]) -> Callable[[str, str], None]:
    """add_file(guest, source_guest): one copy of each file, a symlink for a second name."""
    by_real: dict[str, str] = {}  # realpath -> guest path holding its content

    def add_file(guest: str, source_guest: str) -> None:
        if guest in entries:
            return
        real = resolver.real(source_guest)
        if real in by_real and by_real[real] != guest:
            # Same file under a second name (ld.so as PT_INTERP and as libc's
            # DT_NEEDED): one copy, and a relative symlink for the other name.
            rel = os.path.relpath(by_real[real], os.path.dirname(guest))
            entries[guest] = Entry(guest, link=rel)
            return
        by_real[real] = guest
        entries[guest] = Entry(guest, source=resolver.sysroot / real.lstrip("/"))

    return add_file


def library_entries(binary: Path, what: str) -> list[Entry]:
    """The ELF interpreter and the shared libraries a dynamically linked host binary
    needs (not the binary itself), as ``stage_tools`` stages a tool's: at the paths
    the guest's ld.so looks, sorted by guest path.  Only for a binary of the host's
    arch (its libraries are this host's); *what* names it in the one-line errors."""
    arch = host_arch()
    try:
        exe = read_elf(binary)
    except (NotElf, struct.error, OSError, ValueError):
        raise UserError(f"{what}: not an ELF file lab can read") from None
    if exe.machine != archs.get(arch).elf_machine:
        raise UserError(
            f"{what}: a dynamically linked binary for another arch (ELF machine {exe.machine}); lab packs a "
            f"dynamic binary's libraries from this {arch} host: link it -static"
        )
    resolver = _Resolver(arch, Path("/"))
    entries: dict[str, Entry] = {}
    add_file = _entry_adder(resolver, entries)
    if not exe.interp or not Path(exe.interp).is_file():
        raise UserError(
            f"{what}: a dynamically linked binary whose program interpreter {exe.interp!r} "
            "this host does not have; link it -static"
        )
    add_file(exe.interp, exe.interp)

    def missing(soname: str, obj: Elf) -> UserError:
        return UserError(f"{what}: needs {soname} (via {obj.path}), which is not installed on this host")

    _add_libraries(resolver, exe, add_file, missing)
    return sorted(entries.values(), key=lambda e: e.guest)


def unpackable(arch: str, tools: list[str] | tuple[str, ...]) -> str | None:
    """Why *tools* cannot be staged for an *arch* guest, or None when they can: known
    before anything boots (a scenario's requirements, ``lab boot --tools``).  For
    Debian's packages that is whether Debian has a package of the arch for each tool
    (lab's private package lists, fetched the first time); nothing is downloaded."""
    if not tools:
        return None
    _check_arch(arch)
    try:
        if from_debian(arch):
            # deferred: CLI start (lab.image.debian_pkgs)
            from . import debian_pkgs

            _, missing = debian_pkgs.resolve(arch, tuple(tools))
            return debian_pkgs.no_package(arch, missing) if missing else None
        pack_entries(arch, tools)
    except UserError as e:
        return str(e)
    return None


def stage_tools(root: Path, arch: str, tools: list[str] | tuple[str, ...]) -> list[str]:
    """Copy *tools* and their libraries into *root*; return the guest paths staged.

    Parent directories that already exist in *root* are used as they are (a
    ``lib -> usr/lib`` symlink made by the image builder is followed).
    """
    return place_entries(Path(root), pack_entries(arch, tools))


def place_entries(root: Path, entries: list[Entry]) -> list[str]:
    """Copy each entry (a file, or a symlink for a second name) to its guest path under
    *root*, replacing what is there; return the guest paths placed."""
    staged = []
    for e in entries:
        dest = root / e.guest.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        if e.link is not None:
            os.symlink(e.link, dest)
        else:
            assert e.source is not None  # an Entry is a symlink (link) or a file (source)
            shutil.copyfile(e.source, dest)
            os.chmod(dest, os.stat(e.source).st_mode & 0o7777)
        staged.append(e.guest)
    return staged


def tools_hash(arch: str, tools: list[str] | tuple[str, ...]) -> str:
    """The tools layer's cache key.  Host tools: sha256 over the guest path and content of
    everything ``stage_tools`` would stage.  Debian's packages: over the packages of the
    closure and their versions (what the layer is made from), without downloading them."""
    _check_arch(arch)
    h = hashlib.sha256(f"arch={arch}\ntools={','.join(tools)}\n".encode())
    if from_debian(arch) and tools:
        # deferred: CLI start (lab.image.debian_pkgs)
        from . import debian_pkgs

        pkgs, missing = debian_pkgs.resolve(arch, tuple(tools))
        if missing:
            raise UserError(debian_pkgs.no_package(arch, missing))
        h.update(f"debian {debian_pkgs.key(pkgs)}\n".encode())
        return h.hexdigest()
    for e in pack_entries(arch, tools):
        h.update(f"\n--- {e.guest}\n".encode())
        if e.link is not None:
            h.update(f"-> {e.link}".encode())
        else:
            assert e.source is not None  # an Entry is a symlink (link) or a file (source)
            with open(e.source, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()
