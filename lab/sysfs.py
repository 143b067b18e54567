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

import io
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from . import cpulist
from .errors import UserError

CPU_RE = re.compile(r"sys/devices/system/cpu/cpu(\d+)/(.+)$")
NODE_RE = re.compile(r"sys/devices/system/node/node(\d+)/(cpulist|distance)$")
DOMAIN_RE = re.compile(r"sys/kernel/debug/sched/domains/cpu(\d+)/domain(\d+)/(name|flags)$")
CACHE_RE = re.compile(r"cache/index(\d+)/(level|type|shared_cpu_list)$")


@dataclass(frozen=True)
class Cache:
    level: int
    type: str
    shared: tuple[int, ...]


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

    def siblings(self, kind: str) -> tuple[int, ...] | None:
        """'thread', 'cluster', 'die', 'package' sibling lists, under any of their sysfs names."""
        names = {
            "thread": ("thread_siblings_list", "core_cpus_list"),
            "cluster": ("cluster_cpus_list",),
            "die": ("die_cpus_list",),
            "package": ("package_cpus_list", "core_siblings_list"),
        }[kind]
        for n in names:
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


def parse_files(files: dict[str, str], where: str = "capture") -> MachineView:
    """Build a MachineView from {relative path: content}."""
    v = MachineView()
    cache_parts: dict[tuple[int, int], dict[str, str]] = {}
    dom_parts: dict[tuple[int, int], dict[str, str]] = {}
    for raw_path, raw in files.items():
        if raw_path == "uname":
            v.release = _clean(raw)
            continue
        path = _strip_prefix(raw_path)
        if path is None:
            continue
        text = _clean(raw)
        try:
            if m := CPU_RE.match(path):
                cpu = int(m.group(1))
                rest = m.group(2)
                cv = v.cpus.setdefault(cpu, CpuView(cpu))
                if rest.startswith("topology/"):
                    key = rest[len("topology/") :]
                    if key == "physical_package_id":
                        cv.package = int(text)
                    elif key in ("die_id", "cluster_id", "core_id"):
                        setattr(cv, key, int(text))
                    elif key.endswith("_list"):
                        cv.lists[key] = tuple(cpulist.parse(text))
                elif cm := CACHE_RE.search(rest):
                    cache_parts.setdefault((cpu, int(cm.group(1))), {})[cm.group(2)] = text
            elif m := NODE_RE.match(path):
                node = int(m.group(1))
                if m.group(2) == "cpulist":
                    v.nodes[node] = tuple(cpulist.parse(text))
                else:
                    v.distances[node] = tuple(int(x) for x in text.split())
            elif m := DOMAIN_RE.match(path):
                dom_parts.setdefault((int(m.group(1)), int(m.group(2))), {})[m.group(3)] = text
            elif path == "sys/devices/system/cpu/online":
                v.online = tuple(cpulist.parse(text))
            elif path == "proc/cpuinfo":
                _cpuinfo(v, raw)
            elif path == "proc/schedstat":
                _schedstat_spans(v, raw, dom_parts)
            elif path == "proc/cmdline":
                v.cmdline = text
            elif path in ("proc/sys/kernel/osrelease", "uname"):
                v.release = text
        except ValueError as e:
            raise UserError(f"{where}: {raw_path}: cannot parse {text[:60]!r}: {e}") from None

    for (cpu, _idx), parts in sorted(cache_parts.items()):
        if "level" in parts and "shared_cpu_list" in parts:
            v.cpus.setdefault(cpu, CpuView(cpu)).caches.append(
                Cache(int(parts["level"]), parts.get("type", "Unified"), tuple(cpulist.parse(parts["shared_cpu_list"])))
            )
    for (cpu, lvl), parts in sorted(dom_parts.items()):
        span = tuple(cpulist.parse_mask(parts["mask"])) if "mask" in parts else ()
        v.cpus.setdefault(cpu, CpuView(cpu)).domains.append(
            Domain(lvl, parts.get("name", f"domain{lvl}"), span, tuple(parts.get("flags", "").split()))
        )
    if not v.online and v.cpus:
        v.online = tuple(sorted(c for c, cv in v.cpus.items() if cv.package is not None))
    return v


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
            v.family = int(val)
        elif k == "CPU implementer" and v.vendor is None:
            v.vendor = {"0x48": "hisilicon", "0x41": "arm", "0xc0": "ampere"}.get(val, "generic")


def _schedstat_spans(v: MachineView, text: str, dom_parts: dict) -> None:
    cpu = None
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0].startswith("cpu") and f[0][3:].isdigit():
            cpu = int(f[0][3:])
        elif f[0].startswith("domain") and cpu is not None and len(f) > 1:
            dom_parts.setdefault((cpu, int(f[0][6:])), {})["mask"] = f[1]


def parse_grep(text: str, extra: dict[str, str] | None = None) -> MachineView:
    """Parse the agent's sysfs.txt ('/sys/...:content' per line)."""
    files: dict[str, list[str]] = {}
    for line in text.splitlines():
        path, sep, content = line.partition(":")
        if not sep:
            continue
        files.setdefault(path.lstrip("/"), []).append(content)
    merged = {p: "\n".join(c) for p, c in files.items()}
    merged.update(extra or {})
    return parse_files(merged, where="guest snapshot")


def read_snapshot(directory: Path) -> MachineView:
    """The guest snapshot directory the agent wrote (guest/)."""
    sysfs = directory / "sysfs.txt"
    if not sysfs.exists():
        raise UserError(f"{directory}: no sysfs.txt in the guest snapshot")
    extra = {}
    for name, key in (("schedstat", "proc/schedstat"), ("cpuinfo", "proc/cpuinfo"), ("cmdline", "proc/cmdline"), ("uname", "uname")):
        p = directory / name
        if p.exists():
            extra[key] = p.read_text(errors="replace")
    # schedstat must come after the domain names so spans attach to them.
    return parse_grep(sysfs.read_text(errors="replace"), extra)


REQUIRED = "sys/devices/system/cpu/cpuN/topology/physical_package_id and *_list files"


def read_capture(path: Path) -> MachineView:
    """A capture directory or tarball (.tar, .tar.gz, .tgz, .tar.xz)."""
    if not path.exists():
        raise UserError(f"{path}: no such capture")
    files: dict[str, str] = {}
    if path.is_dir():
        for p in path.rglob("*"):
            if p.is_file():
                rel = str(p.relative_to(path))
                if _strip_prefix(rel) is not None:
                    try:
                        files[rel] = p.read_bytes().decode(errors="replace")
                    except OSError:
                        continue
    else:
        try:
            with tarfile.open(path) as tf:
                for m in tf.getmembers():
                    if m.isfile() and _strip_prefix(m.name) is not None:
                        fh = tf.extractfile(m)
                        if fh is not None:
                            files[m.name] = fh.read().decode(errors="replace")
        except (tarfile.TarError, OSError, EOFError) as e:
            raise UserError(f"{path}: not a readable tarball: {str(e).splitlines()[0]}") from None
    view = parse_files(files, where=str(path))
    if not any(cv.package is not None for cv in view.cpus.values()):
        raise UserError(f"{path}: capture has no CPU topology files (needs {REQUIRED})")
    missing = [c for c in view.online if view.cpus.get(c) is None or view.cpus[c].siblings("thread") is None]
    if missing:
        raise UserError(
            f"{path}: capture is missing topology/thread_siblings_list (or core_cpus_list) for CPU {missing[0]}"
        )
    if not view.nodes:
        raise UserError(f"{path}: capture has no sys/devices/system/node/node*/cpulist files")
    nodes_with_cpus = [n for n, c in view.nodes.items() if c]
    for n in nodes_with_cpus:
        if n not in view.distances:
            raise UserError(f"{path}: capture is missing sys/devices/system/node/node{n}/distance")
    return view


# ---- capture of this machine -------------------------------------------------------------

CAPTURE_GLOBS = (
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/present",
    "sys/devices/system/cpu/cpu[0-9]*/online",
    "sys/devices/system/cpu/cpu[0-9]*/topology/*",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/level",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/type",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/shared_cpu_list",
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
    import glob
    import time

    if not str(out).endswith((".tar.gz", ".tgz", ".tar")):
        raise UserError(f"{out}: the capture is a tarball: name it .tar.gz")
    n = 0
    tmp = out.with_name(out.name + ".tmp")
    mode: Literal["w:gz", "w"] = "w:gz" if not str(out).endswith(".tar") else "w"
    with tarfile.open(tmp, mode) as tf:
        for pattern in CAPTURE_GLOBS:
            for p in sorted(glob.glob(str(root / pattern))):
                try:
                    data = Path(p).read_bytes()
                except OSError:
                    continue  # unreadable (debugfs not mounted, not root): the rest still counts
                rel = str(Path(p).relative_to(root))
                info = tarfile.TarInfo(f"{top}/{rel}")
                info.size = len(data)
                info.mtime = int(time.time())
                tf.addfile(info, io.BytesIO(data))
                n += 1
    tmp.replace(out)
    return n
