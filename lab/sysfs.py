"""Reading a machine's topology as Linux shows it in sysfs.

The same reader serves three sources:

* a capture of a real machine (`lab topo capture`: a tarball or a directory of
  the sysfs files, possibly under one top folder);
* the guest's snapshot (the agent's ``sysfs.txt``: ``path:content`` lines from
  one ``grep -H ''`` over the same files, plus /proc/schedstat);
* the host itself (`lab topo capture` reads these paths).

It yields a ``MachineView`` with CPU ids and node ids as the kernel numbered them.
"""

from __future__ import annotations

import glob
import io
import lzma
import os
import re
import stat
import tarfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from . import cpulist, hwloc, lscpu
from . import levels as lv
from .errors import UserError
from .limits import (
    MAX_CAPTURE_BYTES,
    MAX_CAPTURE_FILES,
    MAX_CPU_FAMILY,
    MAX_CPUS,
    MAX_FILE_BYTES,
    MAX_NODES,
    MAX_TABLE_BYTES,
    Unreadable,
    kind,
    read_file,
    read_head,
    read_stream,
    show,
    size,
    too_big,
)

# ASCII digits only (\d would take any Unicode digit); ids are range-checked by _int().
CPU_RE = re.compile(r"sys/devices/system/cpu/cpu([0-9]+)/(.+)$")
NODE_RE = re.compile(r"sys/devices/system/node/node([0-9]+)/(cpulist|cpumap|distance)$")
DOMAIN_RE = re.compile(r"sys/kernel/debug/sched/domains/cpu([0-9]+)/domain([0-9]+)/(name|flags)$")
CACHE_RE = re.compile(r"cache/index([0-9]+)/(level|type|shared_cpu_list|shared_cpu_map|size)")
# cache/indexN/size as the kernel writes it (cacheinfo: "%uK"); M and G as other tools do
_SIZE = re.compile(r"([0-9]{1,9})\s*([KMG]?)", re.I)
_INT = re.compile(r"-?[0-9]{1,10}")


@dataclass(frozen=True)
class Cache:
    level: int
    type: str
    shared: tuple[int, ...]
    size_kb: int | None = None  # cache/indexN/size, when the capture has it


def cache_size_kb(text: str) -> int | None:
    """KiB from a cache size file ("32K", "1024K", "32M"); None for what is not one (an
    unreadable size is not a reason to refuse a capture: lab reproduces no cache size)."""
    m = _SIZE.fullmatch(text.strip())
    if not m or not m.group(2):  # a bare number says no unit: not guessed
        return None
    return int(m.group(1)) * {"K": 1, "M": 1024, "G": 1024 * 1024}[m.group(2).upper()]


@dataclass(frozen=True)
class Domain:
    level: int
    name: str
    span: tuple[int, ...]
    flags: tuple[str, ...]


@dataclass
class CpuView:
    id: int
    package: int | None = None
    die_id: int | None = None
    cluster_id: int | None = None
    core_id: int | None = None
    lists: dict[str, tuple[int, ...]] = field(default_factory=dict)  # thread_siblings, core_cpus, ...
    caches: list[Cache] = field(default_factory=list)
    domains: list[Domain] = field(default_factory=list)
    capacity: int | None = None  # cpu_capacity (arm64; differs on big.LITTLE machines)

    def siblings(self, level: str) -> tuple[int, ...] | None:
        """The CPUs of this CPU's group at *level* ('core': its SMT siblings, 'cluster',
        'socket', or 'die'), under any of the level's sysfs names (lab.levels)."""
        for n in lv.sysfs_lists(level):
            if n in self.lists:
                return self.lists[n]
        return None

    def cache(self, level: int) -> Cache | None:
        for c in self.caches:
            if c.level == level and c.type in ("Unified", "Data"):
                return c
        return None


@dataclass
class MachineView:
    cpus: dict[int, CpuView] = field(default_factory=dict)
    nodes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    distances: dict[int, tuple[int, ...]] = field(default_factory=dict)  # node -> row (in node order)
    online: tuple[int, ...] = ()
    vendor: str | None = None
    model: str | None = None
    family: int | None = None
    release: str | None = None
    cmdline: str | None = None
    # What reading the capture assumed (no node/ directory, no distances, ...): the
    # importer passes these on as notes.
    notes: list[str] = field(default_factory=list)

    @property
    def llc_level(self) -> int | None:
        levels = [c.level for v in self.cpus.values() for c in v.caches if c.type in ("Unified", "Data")]
        return max(levels) if levels else None

    def to_dict(self) -> dict:
        fmt = cpulist.format
        return {
            "release": self.release,
            "cmdline": self.cmdline,
            "cpu": {"vendor": self.vendor, "model": self.model, "family": self.family},
            "online": fmt(self.online),
            "nodes": {
                str(n): {"cpus": fmt(c), "distances": list(self.distances.get(n, ()))}
                for n, c in sorted(self.nodes.items())
            },
            "cpus": {
                str(i): {
                    "package": v.package,
                    "die_id": v.die_id,
                    "cluster_id": v.cluster_id,
                    "core_id": v.core_id,
                    **({"capacity": v.capacity} if v.capacity is not None else {}),
                    **{k: fmt(s) for k, s in sorted(v.lists.items())},
                    "caches": [
                        {"level": c.level, "type": c.type, "shared": fmt(c.shared)} for c in v.caches
                    ],
                    "domains": [
                        {"name": d.name, "span": fmt(d.span), "flags": list(d.flags)} for d in v.domains
                    ],
                }
                for i, v in sorted(self.cpus.items())
            },
        }


def _clean(text: str) -> str:
    # Real sysfs files may end in NUL bytes; captures made with cat keep them.
    return text.replace("\x00", "").strip()


def _strip_prefix(path: str) -> str | None:
    """'capture-host/sys/devices/...' -> 'sys/devices/...' (one top folder allowed)."""
    path = path.lstrip("./")
    for anchor in ("sys/", "proc/"):
        if path.startswith(anchor):
            return path
        i = path.find("/" + anchor)
        if i >= 0:
            return path[i + 1 :]
    return None


# Files whose size grows with the CPU count (limits.MAX_TABLE_BYTES); every other file
# parse_files() reads holds one value (limits.MAX_FILE_BYTES).
TABLE_FILES = frozenset({"proc/cpuinfo", "proc/schedstat"})
_SINGLE_FILES = frozenset(
    {"sys/devices/system/cpu/online", "proc/cmdline", "proc/sys/kernel/osrelease"}
)
_TOPOLOGY_IDS = ("physical_package_id", "die_id", "cluster_id", "core_id")
# Sibling files every kernel writes as hex masks; the *_list twins came later (and older
# tools, hwloc-gather-topology among them, copy only some): either form is read, and
# when a capture has both they must agree.
_TOPOLOGY_MASKS = frozenset(
    {"thread_siblings", "core_cpus", "core_siblings", "package_cpus", "cluster_cpus", "die_cpus"}
)


def wanted(path: str) -> bool:
    """Whether parse_files() uses the file at *path* ('sys/devices/...', as _strip_prefix
    leaves it): only those are read from a capture."""
    if path in TABLE_FILES or path in _SINGLE_FILES:
        return True
    if m := CPU_RE.match(path):
        rest = m.group(2)
        if rest.startswith("topology/"):
            key = rest[len("topology/") :]
            return key in _TOPOLOGY_IDS or key in _TOPOLOGY_MASKS or (key.endswith("_list") and "/" not in key)
        # cpuN/online: an offline CPU has no topology files, only this one.
        return rest in ("online", "cpu_capacity") or CACHE_RE.fullmatch(rest) is not None
    return NODE_RE.match(path) is not None or DOMAIN_RE.match(path) is not None


def file_limit(path: str) -> int:
    return MAX_TABLE_BYTES if path in TABLE_FILES else MAX_FILE_BYTES


class _Bad(ValueError):
    """A value in one file that cannot be used; parse_files() adds where it is."""


def _int(text: str, lo: int, hi: int, what: str) -> int:
    """A decimal int in [lo, hi] ('-1' where lo allows it): never int() on arbitrary text,
    which takes '1_0' and Unicode digits, and refuses 5000 digits in Python's words."""
    if _INT.fullmatch(text) is None:
        digits = text[1:] if text.startswith("-") else text
        why = "is out of range" if digits.isascii() and digits.isdigit() else "is not a whole number"
        raise _Bad(f"{what} {show(text)} {why}")
    v = int(text)
    if not lo <= v <= hi:
        raise _Bad(f"{what} {v} is out of range ({lo} to {hi})")
    return v


def _cpus(text: str) -> tuple[int, ...]:
    try:
        return tuple(cpulist.parse(text))
    except ValueError as e:
        raise _Bad(str(e)) from None


def _mask(text: str) -> tuple[int, ...]:
    try:
        return tuple(cpulist.parse_mask(text))
    except ValueError as e:
        raise _Bad(str(e)) from None


def _path_for_message(path: str) -> str:
    return path if len(path) <= 200 and path.isprintable() else show(path, 200)


def parse_files(files: dict[str, str], where: str = "capture") -> MachineView:
    """Build a MachineView from {relative path: content}.

    Every number is range-checked (CPU ids below MAX_CPUS, node ids below MAX_NODES) and
    every failure is a one-line UserError naming *where* and the file.
    """
    v = MachineView()
    cache_parts: dict[tuple[int, int], dict[str, str]] = {}
    dom_parts: dict[tuple[int, int], dict[str, object]] = {}
    masks: dict[tuple[int, str], tuple[tuple[int, ...], str]] = {}
    node_masks: dict[int, tuple[tuple[int, ...], str]] = {}
    for raw_path, raw in files.items():
        if raw_path == "uname":
            v.release = _clean(raw)
            continue
        path = _strip_prefix(raw_path)
        if path is None:
            continue
        try:
            _parse_one(v, path, raw, cache_parts, dom_parts, masks, node_masks)
        except _Bad as e:
            raise UserError(f"{where}: {_path_for_message(raw_path)}: {e}") from None

    # A mask stands in for its list when the list is missing; both must agree.
    for (cpu, key), (mask, raw_path) in sorted(masks.items()):
        lists = v.cpus[cpu].lists
        _agree(where, raw_path, mask, lists.get(f"{key}_list"), f"{key}_list")
        lists.setdefault(f"{key}_list", mask)
    for node, (mask, raw_path) in sorted(node_masks.items()):
        _agree(where, raw_path, mask, v.nodes.get(node), "cpulist")
        v.nodes.setdefault(node, mask)

    for (cpu, _idx), parts in sorted(cache_parts.items()):
        if "level" in parts and ("shared_cpu_list" in parts or "shared_cpu_map" in parts):
            try:
                level = _int(parts["level"], 0, 255, "cache level")
                listed = _cpus(parts["shared_cpu_list"]) if "shared_cpu_list" in parts else None
            except _Bad as e:
                raise UserError(f"{where}: {parts['dir']}: {e}") from None
            if "shared_cpu_map" in parts:
                try:
                    mapped = _mask(parts["shared_cpu_map"])
                except _Bad as e:
                    raise UserError(f"{where}: {parts['dir']}/shared_cpu_map: {e}") from None
                _agree(where, f"{parts['dir']}/shared_cpu_map", mapped, listed, "shared_cpu_list")
                listed = mapped if listed is None else listed
            assert listed is not None
            shared = listed
            v.cpus.setdefault(cpu, CpuView(cpu)).caches.append(
                Cache(level, parts.get("type", "Unified"), shared, cache_size_kb(parts["size"]) if "size" in parts else None)
            )
    for (cpu, lvl), dparts in sorted(dom_parts.items()):
        span = dparts.get("mask", ())
        assert isinstance(span, tuple)
        name, flags = dparts.get("name"), dparts.get("flags", "")
        v.cpus.setdefault(cpu, CpuView(cpu)).domains.append(
            Domain(lvl, name if isinstance(name, str) else f"domain{lvl}", span, tuple(str(flags).split()))
        )
    if not v.online and v.cpus:
        v.online = tuple(sorted(c for c, cv in v.cpus.items() if cv.package is not None))
    return v


def _agree(where: str, mask_path: str, mask: tuple[int, ...], listed: tuple[int, ...] | None, list_name: str) -> None:
    """A capture's mask file and its list twin must name the same CPUs."""
    if listed is not None and tuple(sorted(listed)) != tuple(sorted(mask)):
        raise UserError(
            f"{where}: {_path_for_message(mask_path)}: the mask says CPUs {cpulist.format(mask) or 'none'}, "
            f"{list_name} beside it says {cpulist.format(listed) or 'none'}: a capture of two moments or an edited one"
        )


def _parse_one(
    v: MachineView,
    path: str,
    raw: str,
    cache_parts: dict[tuple[int, int], dict[str, str]],
    dom_parts: dict[tuple[int, int], dict[str, object]],
    masks: dict[tuple[int, str], tuple[tuple[int, ...], str]],
    node_masks: dict[int, tuple[tuple[int, ...], str]],
) -> None:
    text = _clean(raw)
    if m := CPU_RE.match(path):
        cpu = _int(m.group(1), 0, MAX_CPUS - 1, "CPU")
        rest = m.group(2)
        cv = v.cpus.setdefault(cpu, CpuView(cpu))  # even for cpuN/online: offline CPUs show
        if rest.startswith("topology/"):
            key = rest[len("topology/") :]
            if key in _TOPOLOGY_IDS:
                # -1: the kernel's "unknown" (a cluster_id on a machine without clusters).
                ident = _int(text, -1, 2**31 - 1, key)
                if key == "physical_package_id":
                    cv.package = ident
                else:
                    setattr(cv, key, ident)
            elif key.endswith("_list"):
                cv.lists[key] = _cpus(text)
            elif key in _TOPOLOGY_MASKS:
                masks[(cpu, key)] = (_mask(text), path)
        elif rest == "cpu_capacity":
            cv.capacity = _int(text, 0, 1 << 20, "cpu_capacity")
        elif cm := CACHE_RE.fullmatch(rest):
            idx = _int(cm.group(1), 0, 63, "cache index")
            parts = cache_parts.setdefault((cpu, idx), {"dir": path.rsplit("/", 1)[0]})
            parts[cm.group(2)] = text
    elif m := NODE_RE.match(path):
        node = _int(m.group(1), 0, MAX_NODES - 1, "node")
        if m.group(2) == "cpulist":
            v.nodes[node] = _cpus(text)
        elif m.group(2) == "cpumap":
            node_masks[node] = (_mask(text), path)
        else:
            row = text.split()
            if len(row) > MAX_NODES:
                raise _Bad(f"{len(row)} distances, more than the {MAX_NODES} nodes Linux supports")
            v.distances[node] = tuple(_int(x, 0, 255, "distance") for x in row)
    elif m := DOMAIN_RE.match(path):
        key = (_int(m.group(1), 0, MAX_CPUS - 1, "CPU"), _int(m.group(2), 0, 63, "domain level"))
        dom_parts.setdefault(key, {})[m.group(3)] = text
    elif path == "sys/devices/system/cpu/online":
        v.online = _cpus(text)
    elif path == "proc/cpuinfo":
        _cpuinfo(v, raw)
    elif path == "proc/schedstat":
        _schedstat_spans(raw, dom_parts)
    elif path == "proc/cmdline":
        v.cmdline = text
    elif path == "proc/sys/kernel/osrelease":
        v.release = text


def _cpuinfo(v: MachineView, text: str) -> None:
    for line in text.splitlines():
        if ":" not in line:
            if not line.strip() and v.vendor:
                break
            continue
        k, _, val = line.partition(":")
        k, val = k.strip(), val.strip()
        if k == "vendor_id" and v.vendor is None:
            v.vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(val, val.lower())
        elif k == "model name" and v.model is None:
            v.model = val
        elif k == "cpu family" and v.family is None:
            v.family = _int(val, 0, MAX_CPU_FAMILY, "cpu family")
        elif k == "CPU implementer" and v.vendor is None:
            v.vendor = {"0x48": "hisilicon", "0x41": "arm", "0xc0": "ampere"}.get(val, "generic")


def _schedstat_spans(text: str, dom_parts: dict[tuple[int, int], dict[str, object]]) -> None:
    cpu = None
    for n, line in enumerate(text.splitlines(), 1):
        f = line.split()
        if not f:
            continue
        try:
            if f[0].startswith("cpu") and f[0][3:].isdigit():
                cpu = _int(f[0][3:], 0, MAX_CPUS - 1, "CPU")
            elif f[0].startswith("domain") and cpu is not None and len(f) > 1:
                level = _int(f[0][6:], 0, 63, "domain level")
                try:
                    span = tuple(cpulist.parse_mask(f[1]))
                except ValueError as e:
                    raise _Bad(str(e)) from None
                dom_parts.setdefault((cpu, level), {})["mask"] = span
        except _Bad as e:
            raise _Bad(f"line {n}: {e}") from None


def parse_grep(text: str, extra: dict[str, str] | None = None, where: str = "guest snapshot") -> MachineView:
    """Parse the agent's sysfs.txt ('/sys/...:content' per line)."""
    files: dict[str, list[str]] = {}
    for line in text.splitlines():
        path, sep, content = line.partition(":")
        if not sep:
            continue
        files.setdefault(path.lstrip("/"), []).append(content)
    merged = {p: "\n".join(c) for p, c in files.items()}
    merged.update(extra or {})
    return parse_files(merged, where=where)


def read_snapshot(directory: Path) -> MachineView:
    """The guest snapshot directory the agent wrote (guest/).

    What the guest wrote is data: its files are read only if they are regular files
    (a link is not followed) of bounded size.
    """
    sysfs = directory / "sysfs.txt"
    if not os.path.lexists(sysfs):
        raise UserError(f"{directory}: no sysfs.txt in the guest snapshot")

    def read(p: Path, limit: int) -> str:
        return read_file(p, limit, "a guest snapshot file", follow_symlinks=False).decode(errors="replace")

    extra = {}
    for name, key in (("schedstat", "proc/schedstat"), ("cpuinfo", "proc/cpuinfo"), ("cmdline", "proc/cmdline"), ("uname", "uname")):
        p = directory / name
        if os.path.lexists(p):
            extra[key] = read(p, file_limit(key))
    # schedstat must come after the domain names so spans attach to them.
    return parse_grep(read(sysfs, MAX_TABLE_BYTES), extra, where=f"guest snapshot {directory}")


REQUIRED = "sys/devices/system/cpu/cpuN/topology/physical_package_id and thread siblings files"


def read_capture(path: Path) -> MachineView:
    """A capture directory or tarball (.tar, .tar.gz, .tgz, .tar.xz), hwloc's XML
    (`lstopo --of xml`) or an `lscpu -e` table (lab.lscpu)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such capture") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}") from None
    links: list[str] = []
    notes: list[str] = []
    if stat.S_ISDIR(st.st_mode):
        files = _read_dir(path, links)
    elif stat.S_ISREG(st.st_mode):
        head = read_head(path, 4096, str(path))
        if hwloc.is_xml(head[:64]):
            files = hwloc.xml_files(read_file(path, MAX_TABLE_BYTES, "an hwloc XML", where=str(path)), str(path))
        elif lscpu.looks_like(head):
            text = read_file(path, MAX_TABLE_BYTES, "an lscpu -e table", where=str(path)).decode(errors="replace")
            files, notes = lscpu.files(text, str(path))
        else:
            files = _read_tar(path)
    else:
        raise UserError(f"{path}: {kind(st.st_mode)}, not a capture (a directory or a tarball)")
    view = capture_view(files, str(path), links)
    view.notes[:0] = notes
    return view


def capture_view(files: dict[str, str], path: str, links: list[str] | None = None) -> MachineView:
    """A capture's files ({path: content}, as read_capture() reads them) as a MachineView:
    what the files lack taken as the kernel would (one node, default distances), what
    contradicts itself refused naming *path* and the file."""
    view = parse_files(files, where=path)
    if not any(cv.package is not None for cv in view.cpus.values()):
        hint = f"; symbolic links are not followed ({links[0]})" if links else ""
        raise UserError(f"{path}: capture has no CPU topology files (needs {REQUIRED}){hint}")
    missing = [c for c in view.online if view.cpus.get(c) is None or view.cpus[c].siblings("core") is None]
    if missing:
        raise UserError(
            f"{path}: capture is missing topology/thread_siblings_list (or thread_siblings, core_cpus_list) "
            f"for CPU {missing[0]}"
        )
    if not view.nodes:
        # A kernel without CONFIG_NUMA (a laptop's, a phone's) has no node/ directory: it
        # is one node, as a NUMA kernel on such a machine shows it.
        with_topology = [c for c in view.online if view.cpus.get(c) and view.cpus[c].package is not None]
        view.nodes[0] = tuple(with_topology)
        view.distances.setdefault(0, (LOCAL_DISTANCE,))
        view.notes.append("no sys/devices/system/node/node*/cpulist (or cpumap) files: one node (a machine without NUMA)")
    nodes_with_cpus = [n for n, c in view.nodes.items() if c]
    if not view.distances:
        # The kernel's own defaults without a SLIT (include/linux/topology.h: LOCAL_DISTANCE,
        # REMOTE_DISTANCE), which is what numactl would show.
        ids = sorted(view.nodes)
        for n in ids:
            view.distances[n] = tuple(LOCAL_DISTANCE if m == n else REMOTE_DISTANCE for m in ids)
        if len(nodes_with_cpus) > 1:
            view.notes.append(
                f"no node*/distance files: the kernel's defaults assumed ({LOCAL_DISTANCE} local, "
                f"{REMOTE_DISTANCE} remote)"
            )
    for n in nodes_with_cpus:
        if n not in view.distances:
            raise UserError(f"{path}: capture is missing sys/devices/system/node/node{n}/distance")
    return view


# include/linux/topology.h: a node's distance to itself and to others without a SLIT.
LOCAL_DISTANCE = 10
REMOTE_DISTANCE = 20


class _Budget:
    """How many files and bytes a capture may still hand over (limits.MAX_CAPTURE_*)."""

    def __init__(self, where: Path, files: int = MAX_CAPTURE_FILES, nbytes: int = MAX_CAPTURE_BYTES):
        self.where, self.max_files, self.max_bytes = where, files, nbytes
        self.files, self.bytes = files, nbytes

    def take(self, n: int) -> None:
        self.files -= 1
        self.bytes -= n
        if self.files < 0:
            raise UserError(f"{self.where}: more than {self.max_files} files; not a topology capture")
        if self.bytes < 0:
            raise UserError(f"{self.where}: more than {size(self.max_bytes)} of files; not a topology capture")


def _read_dir(root: Path, links: list[str], budget: _Budget | None = None) -> dict[str, str]:
    """The wanted files under *root*, which must be regular files: a link (which could
    lead anywhere, and put the start of any readable file in an error message), a FIFO
    (which would block) or a device is refused, never opened."""
    budget = budget or _Budget(root)
    files: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):  # does not descend into links
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full) and len(links) < 1:
                links.append(os.path.relpath(full, root))
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            p = _strip_prefix(rel)
            if p is None or not wanted(p):
                continue
            where = f"{root}: {_path_for_message(rel)}"
            if os.path.islink(full):
                raise UserError(f"{where}: a symbolic link; a capture holds regular files (`lab topo capture` makes one)")
            data = read_file(full, file_limit(p), "one capture file", where=where, follow_symlinks=False)
            budget.take(len(data))
            files[rel] = data.decode(errors="replace")
    return files


_TAR_KINDS = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.DIRTYPE: "a directory",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
}


def _tar_mode(path: Path) -> Literal["r:gz", "r:bz2", "r:xz", "r:"]:
    """tarfile's mode for *path*, from its first bytes.  tarfile's own guessing ('r:*')
    tries xz on anything, and xz reads zero bytes as stream padding: a file of zeros was
    decompressed to its end before being found not to be a tarball."""
    with open(path, "rb") as f:
        head = f.read(6)
    if head.startswith(b"\x1f\x8b"):
        return "r:gz"
    if head.startswith(b"BZh"):
        return "r:bz2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "r:xz"
    return "r:"


def _read_tar(path: Path, budget: _Budget | None = None) -> dict[str, str]:
    """The wanted members of a tarball: regular members only, each within its limit, and
    the whole (members skipped too: skipping one in a compressed tarball decompresses it)
    within the capture's budget."""
    budget = budget or _Budget(path)
    files: dict[str, str] = {}
    try:
        if os.stat(path).st_size > MAX_CAPTURE_BYTES:
            raise too_big(str(path), MAX_CAPTURE_BYTES, "a capture")
        with tarfile.open(path, _tar_mode(path)) as tf:
            for m in tf:
                p = _strip_prefix(m.name)
                if p is None or not wanted(p):
                    budget.take(m.size if m.isfile() else 0)
                    continue
                where = f"{path}: {_path_for_message(m.name)}"
                if not m.isfile():
                    what = _TAR_KINDS.get(m.type, "not a regular file")
                    raise UserError(f"{where}: {what}; a capture holds regular files (`lab topo capture` makes one)")
                limit = file_limit(p)
                if m.size > limit:
                    raise too_big(where, limit, "one capture file")
                budget.take(m.size)
                fh = tf.extractfile(m)
                if fh is not None:
                    files[m.name] = read_stream(fh, limit, "one capture file", where).decode(errors="replace")
    except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"{path}: not a readable tarball: {msg}") from None
    return files


# ---- capture of this machine -------------------------------------------------------------

CAPTURE_GLOBS = (
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/present",
    "sys/devices/system/cpu/cpu[0-9]*/online",
    "sys/devices/system/cpu/cpu[0-9]*/cpu_capacity",
    "sys/devices/system/cpu/cpu[0-9]*/topology/*",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/level",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/type",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/shared_cpu_list",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/size",
    "sys/devices/system/node/online",
    "sys/devices/system/node/possible",
    "sys/devices/system/node/node[0-9]*/cpulist",
    "sys/devices/system/node/node[0-9]*/distance",
    "sys/kernel/debug/sched/domains/cpu[0-9]*/domain[0-9]*/name",
    "sys/kernel/debug/sched/domains/cpu[0-9]*/domain[0-9]*/flags",
    "proc/cpuinfo",
    "proc/schedstat",
    "proc/sys/kernel/osrelease",
)


def capture(out: Path, root: Path = Path("/"), top: str = "capture") -> int:
    """Write the topology files of the machine at *root* into a tarball.  Returns the file count."""

    if not str(out).endswith((".tar.gz", ".tgz", ".tar")):
        raise UserError(f"{out}: the capture is a tarball: name it .tar.gz")
    n = 0
    tmp = out.with_name(out.name + ".tmp")
    mode: Literal["w:gz", "w"] = "w:gz" if not str(out).endswith(".tar") else "w"
    try:
        with tarfile.open(tmp, mode) as tf:
            for pattern in CAPTURE_GLOBS:
                for p in sorted(glob.glob(str(root / pattern))):
                    rel = str(Path(p).relative_to(root))
                    try:
                        data = read_file(p, file_limit(rel), "one capture file")
                    except Unreadable:
                        continue  # unreadable (debugfs not mounted, not root): the rest still counts
                    info = tarfile.TarInfo(f"{top}/{rel}")
                    info.size = len(data)
                    info.mtime = int(time.time())
                    tf.addfile(info, io.BytesIO(data))
                    n += 1
        tmp.replace(out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{out}: cannot write: {e.strerror}") from None
    except UserError:
        tmp.unlink(missing_ok=True)
        raise
    return n
