"""A topology spec (TOML under topologies/) read into the model, ``lab.topology.model``.

Two spec forms load into the same model:

* the *shape* form (``[topology]`` with counts and a ``numbering`` style), for
  regular machines written by hand;
* the *groups* form (``[groups]`` with sysfs-style cpulists), written by
  ``lab topo import`` so a captured machine keeps its real numbering.

Every error names the file and the field.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import arch as archs
from .. import cpulist, paths
from .. import levels as lv
from ..errors import UserError, nearest, unknown
from ..limits import (
    MAX_CPU_FAMILY,
    MAX_CPUS,
    MAX_FILE_BYTES,
    MAX_MEMORY_MB,
    MAX_NODES,
    read_file,
    show,
)
from .model import CACHE_LEAVES, NUMBERINGS, SHAPE_FIELDS, VENDORS, Cpu, Provenance, Shape, Topology


class SpecError(UserError):
    """A topology spec is wrong.  The message starts with 'file: field:'."""


TOP_KEYS = {"name", "description", "arch", "cpu", "topology", "groups", "numa", "caches", "provenance"}
CACHE_KEYS = {"snc", "per_thread", "split_llc", "sizes"}
CACHE_NAMES = ("L1d", "L1i", "L2")
# [caches] sizes: the levels lab's arm64 device tree describes, and the group each is
# one of (the tree gives each core its L1s and an L2, each LLC an L3).
SIZED_CACHES = {name: "llc" if name == "L3" else "core" for name in CACHE_LEAVES}
MAX_CACHE_KB = 4 * 1024 * 1024 - 1  # cache-size is a u32 of bytes in the device tree
CPU_KEYS = {"vendor", "model", "family", "gic", "capacity"}
SHAPE_KEYS = {*SHAPE_FIELDS, "numbering", "cpus"}
GROUP_KEYS = {*(x.key for x in lv.GROUPED), "numbering"}  # nodes, sockets, llcs, clusters, cores
NUMA_KEYS = {"distances", "memory_mb"}
PROV_KEYS = {"machine", "sources", "notes", "derived_from"}


def toml_str(s: str) -> str:
    """*s* as a TOML basic string, for the spec text lab writes (``lab topo import``,
    an hwloc synthetic topology)."""
    # A JSON string is a TOML basic string, except that TOML also wants DEL escaped.
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_type(v: Any) -> str:
    """What a TOML value is, in TOML's words (for messages)."""
    for t, name in ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"), (list, "an array"), (Mapping, "a table")):
        if isinstance(v, t):
            return name
    return "a date or time"


def _val(v: Any) -> str:
    """A TOML value for a one-line message: 'false', 'inf', "'0-7'", 'an array'."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, Mapping)):
        return _toml_type(v)
    return show(v)


class _Ctx:
    """Error helper: every message starts with 'file: field:'."""

    def __init__(self, where: str):
        self.where = where

    def err(self, fieldname: str, msg: str) -> SpecError:
        return SpecError(f"{self.where}: {fieldname}: {msg}")

    def table(self, data: Mapping, key: str, required: bool = True) -> Mapping:
        v = data.get(key)
        if v is None:
            if required:
                raise self.err(key, "missing table")
            return {}
        if not isinstance(v, Mapping):
            raise self.err(key, f"must be a table, not {_toml_type(v)}")
        return v

    def keys(self, data: Mapping, allowed: set[str], prefix: str) -> None:
        for k in data:
            if k not in allowed:
                if len(k) > 40 or not k.isprintable():
                    raise self.err(f"{prefix}{show(k, 40)}", "unknown key")
                close = nearest(k, sorted(allowed), 1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise self.err(f"{prefix}{k}", f"unknown key{hint}")

    def whole(self, v: Any, fieldname: str, lo: int, hi: int, what: str = "") -> int:
        """*v* as an int in [lo, hi]: TOML booleans, floats (1e12, inf, nan) and strings
        are refused, not converted."""
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.err(fieldname, f"must be a whole number, not {_val(v)}")
        if v < lo:
            raise self.err(fieldname, f"must be at least {lo}, not {v}")
        if v > hi:
            raise self.err(fieldname, f"must be at most {hi}{what}, not {_val(v)}")
        return v

    def pos_int(
        self, data: Mapping, key: str, prefix: str, default: int | None = None, hi: int = MAX_CPUS
    ) -> int:
        v = data.get(key, default)
        if v is None:
            raise self.err(f"{prefix}{key}", "missing")
        return self.whole(v, f"{prefix}{key}", 1, hi, f" (lab supports {MAX_CPUS} CPUs)")

    def string(
        self, data: Mapping, key: str, prefix: str, default: str | None = None, one_line: bool = False
    ) -> str:
        v = data.get(key, default)
        if v is None:
            raise self.err(f"{prefix}{key}", "missing")
        if not isinstance(v, str):
            raise self.err(f"{prefix}{key}", f"must be a string, not {_val(v)}")
        if one_line:
            # Names and models go into one-line messages and table cells.
            if len(v) > 200:
                raise self.err(f"{prefix}{key}", f"must be at most 200 characters, not {len(v)}")
            if not v.isprintable():
                raise self.err(f"{prefix}{key}", f"must be one line of printable text, not {_val(v)}")
        return v

    def cpulist(self, text: Any, fieldname: str) -> list[int]:
        if isinstance(text, list):
            # The list form ([0, 1, 2]): the same ids a cpulist string may hold.
            if len(text) > MAX_CPUS:
                raise self.err(fieldname, f"lists {len(text)} CPUs, more than the {MAX_CPUS} lab supports")
            cpus = [
                self.whole(x, f"{fieldname}[{i}]", 0, MAX_CPUS - 1, f" (lab supports {MAX_CPUS} CPUs)")
                for i, x in enumerate(text)
            ]
        elif isinstance(text, str):
            try:
                cpus = cpulist.parse(text)
            except ValueError as e:
                raise self.err(fieldname, str(e)) from None
        else:
            raise self.err(fieldname, f"must be a cpulist string like '0-7,16-23', not {_val(text)}")
        if not cpus:
            raise self.err(fieldname, "empty cpulist")
        seen: set[int] = set()
        for c in cpus:
            if c in seen:
                raise self.err(fieldname, f"CPU {c} listed twice")
            seen.add(c)
        return cpus


def _dirs(directory: Path | None) -> list[Path]:
    return [directory] if directory is not None else paths.topology_dirs()


def catalog_names(directory: Path | None = None) -> list[str]:
    """The topology names in *directory*, else in the user's folders and lab's catalog."""
    return sorted({p.stem for d in _dirs(directory) for p in d.glob("*.toml")})


def resolve(name_or_path: str | Path, directory: Path | None = None) -> Path:
    """A catalog name or a file path -> the spec file.  Names are looked up in *directory*,
    else in the user's folders ($LAB_TOPOLOGIES or the settings file) and then lab's
    catalog.  Unknown names suggest the nearest."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or "/" in str(name_or_path):
        if not p.exists():
            raise UserError(f"{p}: no such topology file")
        return p
    for d in _dirs(directory):
        cand = d / f"{name_or_path}.toml"
        if cand.exists():
            return cand
    if p.exists() and p.is_file():
        return p
    raise unknown("topology", str(name_or_path), catalog_names(directory))


def load(name_or_path: str | Path, directory: Path | None = None) -> Topology:
    """Load and validate a spec by catalog name or path."""
    path = resolve(name_or_path, directory)
    where = _display(path)
    # A FIFO or device named as a spec is refused, not read (reading a FIFO waits forever).
    data = read_file(path, MAX_FILE_BYTES, "a topology spec", where=where)
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: not UTF-8 text") from None
    return loads(raw, where=where, default_name=path.stem)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def loads(text: str, where: str = "<spec>", default_name: str = "spec") -> Topology:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{where}: TOML syntax: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise SpecError(f"{where}: TOML syntax: arrays or tables nested too deeply") from None
    except ValueError:
        # tomllib turns digits into int() unchecked: Python refuses more than 4300 digits.
        raise SpecError(f"{where}: TOML syntax: a number with thousands of digits") from None
    return from_dict(data, where=where, default_name=default_name)


def from_dict(data: Mapping[str, Any], where: str = "<spec>", default_name: str = "spec") -> Topology:
    ctx = _Ctx(where)
    ctx.keys(data, TOP_KEYS, "")
    name = ctx.string(data, "name", "", default_name, one_line=True)
    arch = ctx.string(data, "arch", "", "x86_64")
    if arch not in archs.NAMES:
        raise ctx.err("arch", f"must be one of {', '.join(archs.NAMES)}, not {show(arch)}")
    cpu_t = ctx.table(data, "cpu")
    ctx.keys(cpu_t, CPU_KEYS, "cpu.")
    vendor = ctx.string(cpu_t, "vendor", "cpu.").lower()
    if vendor not in VENDORS:
        raise ctx.err("cpu.vendor", f"must be one of {', '.join(VENDORS)}, not {show(vendor)}")
    model = ctx.string(cpu_t, "model", "cpu.", "", one_line=True)
    family = cpu_t.get("family")
    if family is not None:
        ctx.whole(family, "cpu.family", 0, MAX_CPU_FAMILY, f" ({MAX_CPU_FAMILY:#x}: CPUID's base and extended family)")
    if vendor == "amd" and family is None:
        raise ctx.err("cpu.family", "required for AMD CPUs (family 0x17+ changes node_reclaim_distance)")

    has_shape = "topology" in data
    has_groups = "groups" in data
    if has_shape == has_groups:
        raise ctx.err("topology", "give exactly one of [topology] (counts) or [groups] (cpulists)")

    shape: Shape | None  # the groups form has none when the machine is irregular
    if has_shape:
        cpus, shape, numbering, has_clusters = _from_shape(ctx, ctx.table(data, "topology"))
    else:
        cpus, shape, numbering, has_clusters = _from_groups(ctx, ctx.table(data, "groups"))

    node_ids = _node_order(cpus)
    numa = ctx.table(data, "numa", required=False)
    ctx.keys(numa, NUMA_KEYS, "numa.")
    distances = _distances(ctx, numa.get("distances"), len(node_ids))
    memory = _memory(ctx, numa.get("memory_mb", 512), len(node_ids))

    prov = ctx.table(data, "provenance", required=False)
    ctx.keys(prov, PROV_KEYS, "provenance.")
    sources = prov.get("sources", [])
    if isinstance(sources, str):
        sources = [sources]
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise ctx.err("provenance.sources", "must be a list of strings")
    provenance = Provenance(
        machine=ctx.string(prov, "machine", "provenance.", ""),
        sources=tuple(sources),
        notes=ctx.string(prov, "notes", "provenance.", ""),
        derived_from=ctx.string(prov, "derived_from", "provenance.", ""),
    )
    gic = cpu_t.get("gic")
    if gic is not None:
        if arch != "arm64":
            raise ctx.err("cpu.gic", "only arm64 machines have a GIC version")
        if isinstance(gic, bool) or gic not in (2, 3) or not isinstance(gic, int):
            raise ctx.err("cpu.gic", f"must be 2 or 3, not {_val(gic)}")
    if vendor != "generic" and vendor not in archs.get(arch).vendors:
        raise ctx.err("cpu.vendor", f"an {arch} machine cannot have vendor {show(vendor)}")
    caches_t = ctx.table(data, "caches", required=False)
    snc, per_thread = _caches(ctx, caches_t, cpus, arch)
    split_llc = caches_t.get("split_llc", False)
    if not isinstance(split_llc, bool):
        raise ctx.err("caches.split_llc", f"must be true or false, not {_val(split_llc)}")
    dmips = _capacity(ctx, cpu_t.get("capacity"), cpus, arch)
    cache_kb = _cache_sizes(ctx, caches_t.get("sizes"), cpus, arch)

    return Topology(
        name=name,
        arch=arch,
        vendor=vendor,
        model=model,
        family=family,
        cpus=tuple(cpus),
        node_ids=node_ids,
        distances=distances,
        memory_mb=memory,
        numbering=numbering,
        shape=shape,
        has_clusters=has_clusters,
        provenance=provenance,
        path=where,
        description=ctx.string(data, "description", "", ""),
        gic=gic,
        dmips_mhz=dmips,
        snc=snc,
        per_thread=per_thread,
        split_llc=split_llc,
        cache_kb=cache_kb,
    )


def _caches(ctx: _Ctx, t: Mapping, cpus: list[Cpu], arch: str) -> tuple[bool, tuple[str, ...]]:
    ctx.keys(t, CACHE_KEYS, "caches.")
    snc = t.get("snc", False)
    if not isinstance(snc, bool):
        raise ctx.err("caches.snc", f"must be true or false, not {_val(snc)}")
    if snc:
        if arch != "x86_64":
            raise ctx.err("caches.snc", "sub-NUMA clustering is an x86 (Intel) mode")
        per_socket: dict[int, set[int]] = {}
        for c in cpus:
            per_socket.setdefault(c.socket, set()).add(c.node)
        if any(len(n) < 2 for n in per_socket.values()):
            raise ctx.err("caches.snc", "needs several nodes in every socket (the L3 spans them)")
        per_node: dict[int, set[int]] = {}
        for c in cpus:
            per_node.setdefault(c.node, set()).add(c.llc)
        if any(len(x) > 1 for x in per_node.values()):
            raise ctx.err("caches.snc", "needs one LLC per node (each node's part of the socket's L3)")
    raw = t.get("per_thread", [])
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ctx.err("caches.per_thread", f"must be a list of cache names like [\"L2\"], not {_val(raw)}")
    for x in raw:
        if x not in CACHE_NAMES:
            raise ctx.err("caches.per_thread", f"{show(x)}: cache names are {', '.join(CACHE_NAMES)}")
    if raw and max(c.thread for c in cpus) == 0:
        raise ctx.err("caches.per_thread", "caches private to each SMT thread need SMT (threads_per_core > 1)")
    return snc, tuple(sorted(set(raw)))


MAX_DMIPS_MHZ = 1 << 20  # a u32 in the device tree; far above any real core's


def _capacity(ctx: _Ctx, raw: Any, cpus: list[Cpu], arch: str) -> tuple[tuple[int, int], ...]:
    """[cpu] capacity = { "0-3" = 250, "4-5" = 620, "6-7" = 1024 }: every CPU's
    capacity-dmips-mhz, once."""
    if raw is None:
        return ()
    f = "cpu.capacity"
    if not isinstance(raw, Mapping) or not raw:
        raise ctx.err(f, 'must be a table of cpulist -> capacity-dmips-mhz, e.g. { "0-3" = 446, "4-7" = 1024 }')
    if arch != "arm64":
        raise ctx.err(
            f,
            "per-CPU capacity reaches the guest through the arm64 device tree (capacity-dmips-mhz); "
            "QEMU has no way to give x86 CPUs different capacities (hybrid core types)",
        )
    ids = {c.id for c in cpus}
    out: dict[int, int] = {}
    for k, v in raw.items():
        group = ctx.cpulist(k, f"{f}.{show(k, 30)}")
        ctx.whole(v, f"{f}.{show(k, 30)}", 1, MAX_DMIPS_MHZ)
        for c in group:
            if c not in ids:
                raise ctx.err(f"{f}.{show(k, 30)}", f"CPU {c} is not a CPU of this machine")
            if c in out:
                raise ctx.err(f"{f}.{show(k, 30)}", f"CPU {c} is given a capacity twice")
            out[c] = v
    missing = sorted(ids - set(out))
    if missing:
        # Linux ignores every capacity-dmips-mhz when one CPU lacks it.
        raise ctx.err(f, f"CPU {missing[0]} has no capacity ({len(missing)} CPUs missing): give every CPU one")
    return tuple(sorted(out.items()))


def parse_size_kb(v: Any) -> int | None:
    """A cache size as sysfs writes it ("512K") or in M/G ("4M"), in KiB; None if it is not one."""
    if not isinstance(v, str) or len(v) < 2 or v[-1] not in "KMG" or not v[:-1].isdigit():
        return None
    return int(v[:-1]) << {"K": 0, "M": 10, "G": 20}[v[-1]]


def _cache_sizes(ctx: _Ctx, raw: Any, cpus: list[Cpu], arch: str) -> tuple[tuple[str, tuple[tuple[int, int], ...]], ...]:
    """[caches] sizes = { L1d = "64K", L2 = { "0-3" = "128K", "4-7" = "512K" }, L3 = "4M" }:
    a level's one size for every CPU, or a table of cpulist -> size covering every CPU once.
    The CPUs that share a cache (a core's threads for L1 and L2, an LLC's for L3) share
    its size."""
    if raw is None:
        return ()
    f = "caches.sizes"
    example = '{ L2 = { "0-3" = "128K", "4-7" = "512K" }, L3 = "4M" }'
    if not isinstance(raw, Mapping) or not raw:
        raise ctx.err(f, f"must be a table of cache name -> size, e.g. {example}")
    if arch != "arm64":
        raise ctx.err(
            f,
            "per-level cache sizes reach the guest through the arm64 device tree; an x86 guest's come "
            "from QEMU's CPU model (CPUID leaf 4), one per level",
        )
    out = []
    ids = [c.id for c in cpus]
    for name, v in raw.items():
        fn = f"{f}.{show(name, 30)}"
        if name not in SIZED_CACHES:
            raise ctx.err(fn, f"cache names are {', '.join(SIZED_CACHES)}")
        per: dict[int, int] = {}
        pairs = [(None, v)] if not isinstance(v, Mapping) else list(v.items())
        for k, size in pairs:
            fk = fn if k is None else f"{fn}.{show(k, 30)}"
            kb = parse_size_kb(size)
            if kb is None or not 1 <= kb <= MAX_CACHE_KB:
                raise ctx.err(fk, f'must be a size like "512K" or "4M" (1K to 4G-1K), not {_val(size)}')
            group = ids if k is None else ctx.cpulist(k, fk)
            for c in group:
                if c not in ids:
                    raise ctx.err(fk, f"CPU {c} is not a CPU of this machine")
                if c in per:
                    raise ctx.err(fk, f"CPU {c} is given an {name} size twice")
                per[c] = kb
        missing = [c for c in ids if c not in per]
        if missing:
            raise ctx.err(fn, f"CPU {missing[0]} has no {name} size ({len(missing)} CPUs missing): give every CPU one")
        level = SIZED_CACHES[name]
        first: dict[object, int] = {}
        for cpu in cpus:
            key = cpu.core if level == "core" else cpu.llc
            other = first.setdefault(key, cpu.id)
            if per[other] != per[cpu.id]:
                raise ctx.err(
                    fn,
                    f"CPUs {other} and {cpu.id} share an {name} (one {'core' if level == 'core' else 'LLC'}) "
                    f"but are given {per[other]}K and {per[cpu.id]}K",
                )
        out.append((name, tuple(sorted(per.items()))))
    return tuple(sorted(out))


def _node_order(cpus: list[Cpu]) -> tuple[int, ...]:
    seen: dict[int, None] = {}
    for c in sorted(cpus, key=lambda c: c.index):
        seen.setdefault(c.node, None)
    return tuple(seen)


def _distances(ctx: _Ctx, raw: Any, n: int) -> tuple[tuple[int, ...], ...]:
    if raw is None:
        if n == 1:
            return ((10,),)
        raise ctx.err("numa.distances", f"missing: give the full {n} x {n} matrix")
    if not isinstance(raw, list) or len(raw) != n:
        got = f"{len(raw)} rows" if isinstance(raw, list) else _toml_type(raw)
        raise ctx.err("numa.distances", f"must be {n} x {n} (one row per node), got {got}")
    rows = []
    for i, row in enumerate(raw):
        if not isinstance(row, list) or len(row) != n:
            got = f"{len(row)}" if isinstance(row, list) else _toml_type(row)
            raise ctx.err(f"numa.distances[{i}]", f"row must have {n} entries, not {got}")
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ctx.err(f"numa.distances[{i}][{j}]", f"must be a whole number, not {_val(v)}")
            if i == j and v != 10:
                raise ctx.err(f"numa.distances[{i}][{j}]", f"the diagonal must be 10 (local), not {v}")
            if i != j and v <= 10:
                raise ctx.err(f"numa.distances[{i}][{j}]", f"a remote distance must be more than 10, not {v}")
            if v > 255:
                raise ctx.err(f"numa.distances[{i}][{j}]", f"distances fit in a byte (ACPI SLIT), not {v}")
        rows.append(tuple(row))
    return tuple(rows)


def _memory(ctx: _Ctx, raw: Any, n: int) -> tuple[int, ...]:
    if isinstance(raw, int) and not isinstance(raw, bool):
        vals = [raw] * n
    elif isinstance(raw, list) and len(raw) == n:
        vals = raw
    else:
        raise ctx.err(
            "numa.memory_mb", f"must be a whole number (MiB per node) or a list of {n}, not {_val(raw)}"
        )
    for i, v in enumerate(vals):
        if isinstance(v, bool) or not isinstance(v, int) or v < 64:
            raise ctx.err("numa.memory_mb", f"node {i}: at least 64 MiB per node, not {_val(v)}")
        if v > MAX_MEMORY_MB:
            raise ctx.err("numa.memory_mb", f"node {i}: {v} MiB is more than the {MAX_MEMORY_MB} MiB (1 TiB) a guest may have")
    total = sum(vals)
    if total > MAX_MEMORY_MB:
        raise ctx.err(
            "numa.memory_mb", f"{total} MiB in all nodes is more than the {MAX_MEMORY_MB} MiB (1 TiB) a guest may have"
        )
    return tuple(vals)


# ---- shape form --------------------------------------------------------------------------


def _from_shape(ctx: _Ctx, t: Mapping) -> tuple[list[Cpu], Shape, str, bool]:
    p = "topology."
    ctx.keys(t, SHAPE_KEYS, p)
    sockets = ctx.pos_int(t, "sockets", p)
    nps = ctx.pos_int(t, "nodes_per_socket", p, 1)
    spn = ctx.pos_int(t, "sockets_per_node", p, 1)
    if nps > 1 and spn > 1:
        raise ctx.err(f"{p}sockets_per_node", "a node cannot both split and span sockets")
    if sockets % spn:
        raise ctx.err(f"{p}sockets_per_node", f"{sockets} sockets do not divide into nodes of {spn}")
    llcs = ctx.pos_int(t, "llcs_per_node", p, 1)
    clusters = ctx.pos_int(t, "clusters_per_llc", p, 1)
    cores = ctx.pos_int(t, "cores_per_cluster", p)
    threads = ctx.pos_int(t, "threads_per_core", p, 1)
    has_clusters = "clusters_per_llc" in t and clusters > 1
    shape = Shape(sockets, nps, spn, llcs, clusters, cores, threads)
    # Each count is at most MAX_CPUS, so the product is a small int: checked before any
    # list of that length is made.
    if shape.cpus > MAX_CPUS:
        raise ctx.err(
            "topology",
            f"{shape.cpus} CPUs ({sockets} sockets x {shape.cores_per_socket} cores x {threads} threads), "
            f"more than the {MAX_CPUS} lab supports",
        )
    if shape.nodes > MAX_NODES:
        raise ctx.err(f"{p}nodes_per_socket", f"{shape.nodes} nodes, more than the {MAX_NODES} Linux supports")
    numbering = ctx.string(t, "numbering", p, "linear")
    if numbering not in NUMBERINGS:
        raise ctx.err(f"{p}numbering", f"must be one of {', '.join(NUMBERINGS)}, not {_val(numbering)}")
    n = shape.cpus
    ids = _number(ctx, shape, numbering, t.get("cpus"))
    if numbering != "explicit" and "cpus" in t:
        raise ctx.err(f"{p}cpus", "only with numbering = 'explicit'")

    cpus: list[Cpu] = []
    idx = 0
    for s in range(sockets):
        for nl in range(nps):
            node = s // spn if spn > 1 else s * nps + nl
            for ll in range(llcs):
                if spn > 1:
                    llc = s * llcs + ll
                else:
                    llc = (s * nps + nl) * llcs + ll
                for cl in range(clusters):
                    cluster = llc * clusters + cl
                    for co in range(cores):
                        core = cluster * cores + co
                        for th in range(threads):
                            cpus.append(Cpu(ids[idx], idx, s, node, llc, cluster, core, th))
                            idx += 1
    assert idx == n
    return cpus, shape, numbering, has_clusters


def _number(ctx: _Ctx, shape: Shape, numbering: str, explicit: Any) -> list[int]:
    """Map canonical index -> CPU id for a numbering style."""
    n, t = shape.cpus, shape.threads_per_core
    ncores = n // t
    if numbering == "linear":
        return list(range(n))
    if numbering == "smt-last":
        if t == 1:
            return list(range(n))
        return [(i % t) * ncores + i // t for i in range(n)]
    if numbering == "socket-interleaved":
        # Socket s's k-th core is core number k*S + s (socket 0 even, socket 1 odd for
        # S=2); SMT siblings follow all first threads, as on the Ice Lake of seed 000
        # (cpu8's L2 is shared with 72 on 2 x 32C/64T).
        S = shape.sockets
        cps = shape.cores_per_socket
        out = []
        for i in range(n):
            core, th = divmod(i, t)
            s, k = divmod(core, cps)
            out.append(th * ncores + k * S + s)
        return out
    # explicit
    if explicit is None:
        raise ctx.err("topology.cpus", "numbering = 'explicit' needs cpus = [...] (ids in canonical order)")
    if not isinstance(explicit, list):
        raise ctx.err("topology.cpus", f"must be a list of CPU ids, not {_val(explicit)}")
    if len(explicit) != n:
        raise ctx.err("topology.cpus", f"must list {n} CPU ids (one per CPU of the shape), got {len(explicit)}")
    seen: set[int] = set()
    for i, x in enumerate(explicit):
        ctx.whole(x, f"topology.cpus[{i}]", 0, MAX_CPUS - 1, f" (lab supports {MAX_CPUS} CPUs)")
        if x in seen:
            raise ctx.err("topology.cpus", f"CPU {x} listed twice")
        seen.add(x)
    return list(explicit)


# ---- groups form -------------------------------------------------------------------------


def _from_groups(ctx: _Ctx, t: Mapping) -> tuple[list[Cpu], Shape | None, str, bool]:
    p = "groups."
    ctx.keys(t, GROUP_KEYS, p)
    nodes, all_cpus = _group_nodes(ctx, t, p)
    lists = _group_lists(ctx, t, p, all_cpus)
    sockets, llcs, clusters, cores = lists["socket"], lists["llc"], lists["cluster"], lists["core"]
    assert sockets is not None and llcs is not None and cores is not None

    node_of = {c: n for n, cs in nodes.items() for c in cs}
    sock_of = {c: i for i, g in enumerate(sockets) for c in g}
    llc_of = {c: i for i, g in enumerate(llcs) for c in g}
    core_of = {c: i for i, g in enumerate(cores) for c in g}
    has_clusters = clusters is not None and any(
        len(g) > len(cores[core_of[g[0]]]) for g in clusters
    )
    if clusters is None:
        clusters = llcs
    clu_of = {c: i for i, g in enumerate(clusters) for c in g}

    # Nesting: core in cluster in LLC in node-and-socket.
    _nest(ctx, f"{p}cores", cores, clu_of, "cluster" if has_clusters else "LLC", p + ("clusters" if has_clusters else "llcs"))
    _nest(ctx, f"{p}clusters", clusters, llc_of, "LLC", f"{p}llcs")
    _nest(ctx, f"{p}llcs", llcs, node_of, "node", f"{p}nodes")
    _nest(ctx, f"{p}llcs", llcs, sock_of, "socket", f"{p}sockets")
    node_in_socket = _nodes_and_sockets_nest(ctx, p, nodes, sockets, node_of, sock_of)

    cpus = _canonical_cpus(
        all_cpus, nodes, node_of, (sockets, sock_of), (llcs, llc_of), (clusters, clu_of), (cores, core_of)
    )
    shape = _regular_shape(cpus, node_in_socket)
    numbering = _groups_numbering(ctx, t, p, shape, cpus)
    return cpus, shape, numbering, has_clusters


def _group_nodes(ctx: _Ctx, t: Mapping, p: str) -> tuple[dict[int, list[int]], set[int]]:
    """The groups form's nodes table (node id -> its CPUs) and every CPU it lists, each
    CPU in one node; refuses ids that are not plain whole numbers and more nodes or CPUs
    than lab supports."""
    nodes_raw = t.get("nodes")
    if not isinstance(nodes_raw, Mapping) or not nodes_raw:
        raise ctx.err(f"{p}nodes", 'must be a table of node id -> cpulist, e.g. { 0 = "0-7" }')
    if len(nodes_raw) > MAX_NODES:
        raise ctx.err(f"{p}nodes", f"{len(nodes_raw)} nodes, more than the {MAX_NODES} Linux supports")
    nodes: dict[int, list[int]] = {}
    total = 0
    for k, v in nodes_raw.items():
        # TOML keys are strings; int() would take ' 1', '-0', '1_0' and '٣' too.
        if not (k.isascii() and k.isdigit() and (k == "0" or k[0] != "0")):
            raise ctx.err(f"{p}nodes.{show(k, 30)}", "node ids are whole numbers like 0 or 12")
        if len(k) > 4 or int(k) >= MAX_NODES:
            raise ctx.err(f"{p}nodes.{show(k, 30)}", f"node ids go up to {MAX_NODES - 1}")
        nodes[int(k)] = ctx.cpulist(v, f"{p}nodes.{k}")
        total += len(nodes[int(k)])
        if total > MAX_CPUS:
            raise ctx.err(f"{p}nodes", f"more than the {MAX_CPUS} CPUs lab supports")
    return nodes, _partition(ctx, f"{p}nodes", {f"node {k}": v for k, v in nodes.items()}, None)


def _group_list(ctx: _Ctx, t: Mapping, p: str, key: str, required: bool) -> list[list[int]] | None:
    """The groups form's list *key* of cpulists, or None when it is absent and not
    *required*; bounded to the CPUs lab supports as it is read."""
    raw = t.get(key)
    if raw is None:
        if required:
            raise ctx.err(f"{p}{key}", "missing list of cpulists")
        return None
    if not isinstance(raw, list) or not raw:
        raise ctx.err(f"{p}{key}", "must be a non-empty list of cpulists")
    out, n = [], 0
    for i, v in enumerate(raw):
        out.append(ctx.cpulist(v, f"{p}{key}[{i}]"))
        # Bounded as it is read: a million copies of '0-4095' stop here, not in memory.
        n += len(out[-1])
        if n > MAX_CPUS:
            raise ctx.err(f"{p}{key}", f"the groups list more than the {MAX_CPUS} CPUs lab supports")
    return out


def _group_lists(ctx: _Ctx, t: Mapping, p: str, all_cpus: set[int]) -> dict[str, list[list[int]] | None]:
    """Every level's list of groups but the nodes' (level name -> groups, None for an
    optional level the spec leaves out), read large to small, then each checked to split
    the nodes' CPUs, every CPU in exactly one group."""
    listed = [x for x in reversed(lv.GROUPED) if not x.real_ids]
    lists = {x.name: _group_list(ctx, t, p, x.key, not x.optional) for x in listed}
    for x in listed:
        if (groups := lists[x.name]) is not None:
            _partition(ctx, f"{p}{x.key}", {f"{x.key}[{i}]": g for i, g in enumerate(groups)}, all_cpus)
    return lists


def _nodes_and_sockets_nest(
    ctx: _Ctx, p: str, nodes: dict[int, list[int]], sockets: list[list[int]], node_of: dict[int, int],
    sock_of: dict[int, int],
) -> bool:
    """Whether nodes nest in sockets (True) or sockets in nodes (False); refuses nodes and
    sockets that overlap without one nesting in the other."""
    node_in_socket = all(len({sock_of[c] for c in cs}) == 1 for cs in nodes.values())
    socket_in_node = all(len({node_of[c] for c in g}) == 1 for g in sockets)
    if not node_in_socket and not socket_in_node:
        raise ctx.err(f"{p}nodes", "nodes and sockets overlap without one nesting in the other")
    return node_in_socket


_Level = tuple[list[list[int]], dict[int, int]]  # a level's groups, and each CPU's group index in them


def _canonical_cpus(
    all_cpus: set[int], nodes: dict[int, list[int]], node_of: dict[int, int],
    sockets: _Level, llcs: _Level, clusters: _Level, cores: _Level,
) -> list[Cpu]:
    """The CPUs in canonical order (by socket, node, LLC, cluster, core, then id; each
    level's groups ranked by their lowest CPU id), numbered by those ranks, each CPU's
    thread its place in its core."""

    def rank(groups: list[list[int]]) -> dict[int, int]:
        order = sorted(range(len(groups)), key=lambda i: min(groups[i]))
        return {gi: r for r, gi in enumerate(order)}

    (sock_g, sock_of), (llc_g, llc_of), (clu_g, clu_of), (core_g, core_of) = sockets, llcs, clusters, cores
    sr, lr, clr, cor = rank(sock_g), rank(llc_g), rank(clu_g), rank(core_g)
    node_rank = {n: r for r, n in enumerate(sorted(nodes, key=lambda n: min(nodes[n])))}

    def order_key(c: int):
        return (
            sr[sock_of[c]],
            node_rank[node_of[c]],
            lr[llc_of[c]],
            clr[clu_of[c]],
            cor[core_of[c]],
            c,
        )

    ordered = sorted(all_cpus, key=order_key)
    thread_no: dict[int, int] = {}
    for g in core_g:
        for th, c in enumerate(sorted(g)):
            thread_no[c] = th
    return [
        Cpu(c, i, sr[sock_of[c]], node_of[c], lr[llc_of[c]], clr[clu_of[c]], cor[core_of[c]], thread_no[c])
        for i, c in enumerate(ordered)
    ]


def _groups_numbering(ctx: _Ctx, t: Mapping, p: str, shape: Shape | None, cpus: list[Cpu]) -> str:
    """The numbering style the groups form's CPU ids follow: 'explicit' on an irregular
    machine, else the style whose ids they are (imports of a Zen3 read 'smt-last'),
    'explicit' when none; a given numbering must be one lab knows."""
    numbering = t.get("numbering", "explicit")
    if not isinstance(numbering, str) or numbering not in NUMBERINGS:
        raise ctx.err(f"{p}numbering", f"must be one of {', '.join(NUMBERINGS)}, not {_val(numbering)}")
    if shape is None:
        return "explicit"
    # Name the style when the ids follow one (imports of a Zen3 read 'smt-last').
    ids = [c.id for c in cpus]
    for style in ("linear", "smt-last", "socket-interleaved"):
        if _number(ctx, shape, style, None) == ids:
            return style
    return "explicit"


def _partition(
    ctx: _Ctx, fieldname: str, groups: dict[str, list[int]], universe: set[int] | None
) -> set[int]:
    owner: dict[int, str] = {}
    for gname, cs in groups.items():
        for c in cs:
            if c in owner:
                raise ctx.err(fieldname, f"CPU {c} is in both {owner[c]} and {gname}")
            owner[c] = gname
    got = set(owner)
    if universe is not None:
        missing = sorted(universe - got)
        if missing:
            raise ctx.err(fieldname, f"CPU {missing[0]} is in no group ({len(missing)} CPUs missing)")
        extra = sorted(got - universe)
        if extra:
            raise ctx.err(fieldname, f"CPU {extra[0]} is in no node")
    return got


def _nest(ctx: _Ctx, fieldname: str, inner: list[list[int]], outer_of: dict[int, int], outer_name: str, outer_field: str) -> None:
    for i, g in enumerate(inner):
        outs = {outer_of[c] for c in g}
        if len(outs) > 1:
            raise ctx.err(
                f"{fieldname}[{i}]",
                f"group {cpulist.format(g)} straddles {len(outs)} {outer_name}s of {outer_field}",
            )


def _regular_shape(cpus: list[Cpu], node_in_socket: bool) -> Shape | None:
    def counts(parent, child) -> set[int]:
        m: dict[int, set[int]] = {}
        for c in cpus:
            m.setdefault(parent(c), set()).add(child(c))
        return {len(v) for v in m.values()}

    sockets = len({c.socket for c in cpus})
    per = [
        counts(lambda c: c.socket, lambda c: c.node),
        counts(lambda c: c.node, lambda c: c.socket),
        counts(lambda c: (c.node, c.socket), lambda c: c.llc),
        counts(lambda c: c.llc, lambda c: c.cluster),
        counts(lambda c: c.cluster, lambda c: c.core),
        counts(lambda c: c.core, lambda c: c.thread),
    ]
    if any(len(s) != 1 for s in per):
        return None
    nps, spn, llcs, clusters, cores, threads = (next(iter(s)) for s in per)
    shape = Shape(sockets, nps, spn, llcs, clusters, cores, threads)
    # Canonical indices must enumerate like the shape form does (so QEMU's order matches).
    return shape if shape.cpus == len(cpus) else None




def flatten_clusters(topo: Topology) -> Topology | None:
    """*topo* without its cluster level (one cluster per LLC, every CPU, id and node kept),
    when that makes it regular, else None.  arm64's -smp builds only equal clusters, but
    the cluster level of an arm64 guest is its device tree's cpu-map, which lab writes:
    a machine whose only irregular level is its clusters (a DynamIQ phone's 4 + 2 + 2
    core types) boots with this shape and the real clusters in the tree."""
    if topo.shape is not None or not topo.has_clusters:
        return None
    nodes = {n: list(topo.node_cpus(n)) for n in topo.node_ids}
    node_of = {c: n for n, cs in nodes.items() for c in cs}

    def level(name: str):
        groups = [list(g) for g in topo.groups(name)]
        return groups, {c: i for i, g in enumerate(groups) for c in g}

    llcs = level("llc")
    cpus = _canonical_cpus(set(topo.cpu_ids), nodes, node_of, level("socket"), llcs, llcs, level("core"))
    node_in_socket = all(len(topo.node_sockets[n]) == 1 for n in topo.node_ids)
    shape = _regular_shape(cpus, node_in_socket)
    if shape is None:
        return None
    numbering = _groups_numbering(_Ctx(topo.path or topo.name), {}, "groups.", shape, cpus)
    return replace(topo, cpus=tuple(cpus), shape=shape, has_clusters=False, numbering=numbering)


def catalog() -> list[Topology]:
    return [load(n) for n in catalog_names()]
