"""hwloc's descriptions of a machine, as lab reads captures.

* ``lstopo --of xml`` (hwloc 1.x and 2.x XML): turned into the sysfs files a capture of
  the same machine would hold, so one reader (lab.sysfs) checks and imports both;
* hwloc's synthetic strings (``"pack:2 numa:2 l3:4 core:8 pu:2"``, as ``lstopo -i``
  takes them): turned into a shape-form spec.

Only Python's own XML parser is used (expat: no external entities are fetched, and it
refuses entity expansion blow-ups).  Every error is one line naming the file and what
in it is wrong.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from . import cpulist, topology
from .errors import UserError
from .limits import MAX_CPUS, MAX_NODES, show
from .topology.spec import toml_str

_CACHE_TYPES = {"0": "Unified", "1": "Data", "2": "Instruction"}
# hwloc 2.x cache object types -> (level, sysfs type); L1Cache is a data (or unified) L1.
_CACHES_V2 = {
    "L1Cache": (1, None),
    "L1iCache": (1, "Instruction"),
    "L2Cache": (2, None),
    "L2iCache": (2, "Instruction"),
    "L3Cache": (3, None),
    "L3iCache": (3, "Instruction"),
    "L4Cache": (4, None),
}


def is_xml(head: bytes) -> bool:
    h = head.lstrip()
    return h.startswith(b"<?xml") or h.startswith(b"<topology") or h.startswith(b"<!DOCTYPE topology")


class _Bad(ValueError):
    pass


def _cpuset(text: str | None, what: str) -> list[int]:
    """hwloc's bitmap text: 32-bit words, most significant first, each '0x...' and
    possibly shortened ('0x0'); '0xf...f,' in front means 'and every CPU above'."""
    if text is None:
        raise _Bad(f"{what} has no cpuset")
    words = text.strip().split(",")
    if words and words[0] == "0xf...f":
        raise _Bad(f"{what}: cpuset {show(text)} is infinite")
    if len(words) > MAX_CPUS // 32 + 1:
        raise _Bad(f"{what}: cpuset {show(text)} is wider than the {MAX_CPUS} CPUs lab supports")
    value = 0
    for w in words:
        w = w.strip()
        if not (w.startswith("0x") and 2 < len(w) <= 10):
            raise _Bad(f"{what}: cpuset {show(text)} is not hwloc's 0x... words")
        try:
            value = (value << 32) | int(w[2:], 16)
        except ValueError:
            raise _Bad(f"{what}: cpuset {show(text)} is not hex") from None
    if value.bit_length() > MAX_CPUS:
        raise _Bad(f"{what}: cpuset {show(text)} sets CPU {value.bit_length() - 1}: ids go up to {MAX_CPUS - 1}")
    return [i for i, ch in enumerate(bin(value)[:1:-1]) if ch == "1"]


def _index(obj: ET.Element, what: str, hi: int) -> int:
    raw = obj.get("os_index")
    if raw is None or not raw.isascii() or not raw.isdigit() or len(raw) > 10 or int(raw) > hi:
        raise _Bad(f"{what}: os_index {show(raw)} is not a whole number up to {hi}")
    return int(raw)


def _walk(obj: ET.Element, ancestors: tuple[ET.Element, ...]) -> Iterator[tuple[ET.Element, tuple[ET.Element, ...]]]:
    yield obj, ancestors
    for child in obj.findall("object"):
        yield from _walk(child, (*ancestors, obj))


def _infos(obj: ET.Element) -> dict[str, str]:
    return {i.get("name", ""): i.get("value", "") for i in obj.findall("info")}


def xml_files(data: bytes, where: str) -> dict[str, str]:
    """The sysfs files ({path: content}) of the machine an hwloc XML describes."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise UserError(f"{where}: not hwloc XML: {e}") from None
    if root.tag != "topology":
        raise UserError(f"{where}: not hwloc XML: the root element is <{show(root.tag, 30)}>, not <topology>")
    try:
        return _files(root, where)
    except _Bad as e:
        raise UserError(f"{where}: {e}") from None


def _files(root: ET.Element, where: str) -> dict[str, str]:
    top = root.find("object")
    if top is None:
        raise _Bad("no <object> in <topology>")
    f: dict[str, str] = {}
    nodes: dict[int, list[int]] = {}
    node_order: list[int] = []  # NUMANodes in document (logical) order, for hwloc 1.x distances
    pus: list[int] = []
    vendor: dict[str, str] = {}
    base = "sys/devices/system/cpu"
    for obj, anc in _walk(top, ()):
        t = obj.get("type", "")
        if t == "NUMANode":
            n = _index(obj, "NUMANode", MAX_NODES - 1)
            if n in nodes:
                raise _Bad(f"NUMANode os_index {n} appears twice")
            nodes[n] = _cpuset(obj.get("cpuset"), f"NUMANode {n}")
            node_order.append(n)
        elif t in ("Package", "Socket") and not vendor:
            vendor = _infos(obj)
        elif t == "PU":
            cpu = _index(obj, "PU", MAX_CPUS - 1)
            if cpu in pus:
                raise _Bad(f"PU os_index {cpu} appears twice")
            pus.append(cpu)
            if _cpuset(obj.get("cpuset"), f"PU {cpu}") != [cpu]:
                raise _Bad(f"PU {cpu}: its cpuset {show(obj.get('cpuset'))} is not CPU {cpu}")
            _pu_files(f, f"{base}/cpu{cpu}", cpu, anc)
    if not pus:
        raise _Bad("no PU objects: not a machine's topology")
    f[f"{base}/online"] = cpulist.format(pus)
    for n, cpus in nodes.items():
        f[f"sys/devices/system/node/node{n}/cpulist"] = cpulist.format(cpus)
    for n, row in _distances(root, node_order).items():
        f[f"sys/devices/system/node/node{n}/distance"] = " ".join(map(str, row))
    if vendor or top.findall("info"):
        info = {**_infos(top), **vendor}
        lines = [f"vendor_id\t: {info['CPUVendor']}"] if "CPUVendor" in info else []
        if "CPUFamilyNumber" in info:
            lines.append(f"cpu family\t: {info['CPUFamilyNumber']}")
        if "CPUModel" in info:
            lines.append(f"model name\t: {info['CPUModel']}")
        if info.get("Architecture") == "aarch64" and "CPUVendor" not in info:
            lines.append("CPU implementer\t: " + {"HiSilicon": "0x48", "Ampere": "0xc0"}.get(info.get("CPUVendor", ""), "0x41"))
        f["proc/cpuinfo"] = "processor\t: 0\n" + "\n".join(lines) + "\n\n"
    return f


def _pu_files(f: dict[str, str], d: str, cpu: int, anc: tuple[ET.Element, ...]) -> None:
    pkg = next((a for a in reversed(anc) if a.get("type") in ("Package", "Socket")), None)
    core = next((a for a in reversed(anc) if a.get("type") == "Core"), None)
    cluster = next(
        (a for a in reversed(anc) if a.get("type") == "Group" and (a.get("subtype") or "").lower() == "cluster"), None
    )
    f[f"{d}/topology/physical_package_id"] = str(_index(pkg, "Package", 2**31 - 1) if pkg is not None else 0)
    if core is not None:
        f[f"{d}/topology/core_id"] = str(_index(core, "Core", 2**31 - 1))
        f[f"{d}/topology/thread_siblings_list"] = cpulist.format(_cpuset(core.get("cpuset"), f"the Core of PU {cpu}"))
    else:
        f[f"{d}/topology/thread_siblings_list"] = str(cpu)  # no Core level: a PU is a core
    if pkg is not None:
        f[f"{d}/topology/core_siblings_list"] = cpulist.format(_cpuset(pkg.get("cpuset"), f"the Package of PU {cpu}"))
    if cluster is not None:
        f[f"{d}/topology/cluster_cpus_list"] = cpulist.format(_cpuset(cluster.get("cpuset"), f"the cluster of PU {cpu}"))
    idx = 0
    for a in reversed(anc):
        t = a.get("type", "")
        if t in _CACHES_V2:
            level, typ = _CACHES_V2[t]
            typ = typ or _CACHE_TYPES.get(a.get("cache_type", "0"), "Unified")
        elif t == "Cache":  # hwloc 1.x
            depth = a.get("depth", "")
            if not (depth.isascii() and depth.isdigit() and len(depth) < 3):
                raise _Bad(f"a Cache above PU {cpu}: depth {show(depth)} is not a cache level")
            level, typ = int(depth), _CACHE_TYPES.get(a.get("cache_type", "0"), "Unified")
        else:
            continue
        c = f"{d}/cache/index{idx}"
        f[f"{c}/level"] = str(level)
        f[f"{c}/type"] = typ
        f[f"{c}/shared_cpu_list"] = cpulist.format(_cpuset(a.get("cpuset"), f"the L{level} cache of PU {cpu}"))
        idx += 1


def _distances(root: ET.Element, node_order: list[int]) -> dict[int, list[int]]:
    """Node id -> its row of distances (in node id order, as the kernel writes them)."""
    ids = sorted(node_order)
    for d in root.iter("distances2"):  # hwloc 2.x
        if d.get("type") != "NUMANode":
            continue
        idx_el, val_el = d.find("indexes"), d.find("u64values")
        if idx_el is None or val_el is None:
            raise _Bad("<distances2> without <indexes> and <u64values>")
        try:
            idx = [int(x) for x in (idx_el.text or "").split()]
            vals = [int(x) for x in (val_el.text or "").split()]
        except ValueError:
            raise _Bad("<distances2>: indexes and values are whole numbers") from None
        if d.get("indexing", "os") != "os":
            idx = [node_order[i] for i in idx if 0 <= i < len(node_order)]
        return _rows(idx, vals, ids, "<distances2>")
    for d in root.iter("distances"):  # hwloc 1.x: logical NUMANode order, latencies relative to a base
        n = len(node_order)
        try:
            base = float(d.get("latency_base", "1"))
            vals = [round(float(x.get("value", "")) * base) for x in d.findall("latency")]
        except ValueError:
            raise _Bad("<distances>: latencies are numbers") from None
        return _rows(node_order, vals, ids, "<distances>") if len(vals) == n * n else {}
    return {}


def _rows(idx: list[int], vals: list[int], ids: list[int], what: str) -> dict[int, list[int]]:
    n = len(idx)
    if len(vals) != n * n or sorted(idx) != ids:
        raise _Bad(f"{what}: {len(vals)} values for {n} nodes (the NUMANodes are {cpulist.format(ids)})")
    m = {(idx[i], idx[j]): vals[i * n + j] for i in range(n) for j in range(n)}
    return {a: [m[(a, b)] for b in ids] for a in ids}


# ---- synthetic strings ------------------------------------------------------------------

_SYNTH_TYPES = {
    "machine": "machine", "pack": "package", "package": "package", "socket": "package",
    "numa": "numa", "node": "numa", "numanode": "numa", "die": "die",
    "l3": "l3", "l3cache": "l3", "l2": "l2", "l2cache": "l2", "l1": "l1", "l1d": "l1", "l1cache": "l1",
    "l1i": "l1i", "l1icache": "l1i", "group": "group", "core": "core", "pu": "pu",
}  # fmt: skip


def synth_spec(text: str, name: str, arch: str = "x86_64") -> tuple[str, list[str]]:
    """A shape-form spec (TOML text) for an hwloc synthetic string, and notes.

    Levels from the top: [machine:1] [numa:N] pack:S [die:1] [numa:N] [l3:L] [l2:K] [l1...]
    [core:C] pu:T.  A NUMA level above the packages is nodes spanning sockets; an L2 holding
    several cores is a cluster; L1s and a die level of 1 say nothing the shape form needs."""

    where = f"synthetic topology {show(text, 80)}"
    levels: list[tuple[str, int]] = []
    for item in text.split():
        kind, sep, count = item.partition(":")
        key = _SYNTH_TYPES.get(kind.lower())
        if key is None or not sep:
            raise UserError(f"{where}: {show(item, 30)}: expected type:count with a type of {', '.join(sorted(set(_SYNTH_TYPES.values())))}")
        if not (count.isascii() and count.isdigit() and 0 < len(count) < 6 and int(count) > 0):
            raise UserError(f"{where}: {show(item, 30)}: the count must be a whole number from 1 (attributes like (memory=...) are not read)")
        if any(k == key for k, _ in levels):
            raise UserError(f"{where}: {show(item, 30)}: {kind} appears twice")
        levels.append((key, int(count)))
    if not levels or levels[-1][0] != "pu":
        raise UserError(f"{where}: the last level must be pu:N (hwloc's processing units)")
    order = [k for k, _ in levels]
    counts = dict(levels)
    for k in ("machine", "die", "group"):
        if counts.get(k, 1) != 1:
            raise UserError(f"{where}: {k}:{counts[k]}: lab's shape form has no {k} level (give {k}:1 or leave it out)")
    ranks = ["machine", "numa_above", "package", "die", "numa", "l3", "l2", "l1", "l1i", "core", "pu"]
    pos = []
    seen_pkg = False
    for k in order:
        if k == "package":
            seen_pkg = True
        key = "numa_above" if k == "numa" and not seen_pkg else k
        key = "machine" if k == "group" else key
        pos.append(ranks.index(key))
    if pos != sorted(pos):
        raise UserError(f"{where}: levels out of order: lab reads [machine] [numa] pack [die] [numa] [l3] [l2] [l1] [core] pu")
    pkg = counts.get("package", 1)
    numa = counts.get("numa", 1)
    above = "numa" in order and "package" in order and order.index("numa") < order.index("package")
    sockets = numa * pkg if above else pkg
    threads = counts["pu"]
    cores_per_l2 = 1
    for k in ("l1", "l1i", "core"):
        cores_per_l2 *= counts.get(k, 1)
    if "core" not in order:
        cores_per_l2, threads = cores_per_l2 * threads, 1  # no core level: each PU is a core
    l2 = counts.get("l2", 1)
    clusters = l2 if cores_per_l2 > 1 else 1
    cores = cores_per_l2 if clusters > 1 else cores_per_l2 * l2
    notes = []
    if "l2" in order and cores_per_l2 > 1:
        notes.append(f"an L2 shared by {cores_per_l2} cores is a cluster")
    nodes = numa if above else pkg * numa
    dist = [[10 if i == j else 20 for j in range(nodes)] for i in range(nodes)]
    if nodes > 1:
        notes.append("a synthetic topology has no distances: the kernel's defaults (10 local, 20 remote)")
    vendor = "generic"
    lines = [
        f"# Made by `lab topo synth {text}` (an hwloc synthetic topology)",
        f"name = {toml_str(name)}",
        f"description = {toml_str(f'hwloc synthetic {text}')}",
        f"arch = {toml_str(arch)}",
        "",
        "[cpu]",
        f"vendor = {toml_str(vendor)}",
        f"model = {toml_str('hwloc synthetic')}",
        "",
        "[topology]",
        f"sockets = {sockets}",
        f"nodes_per_socket = {1 if above else numa}",
        f"sockets_per_node = {pkg if above else 1}",
        f"llcs_per_node = {counts.get('l3', 1)}",
    ]
    if clusters > 1:
        lines.append(f"clusters_per_llc = {clusters}")
    lines += [
        f"cores_per_cluster = {cores}",
        f"threads_per_core = {threads}",
        'numbering = "linear"',
        "",
        "[numa]",
        "distances = [",
        *("  " + json.dumps(row) + "," for row in dist),
        "]",
        "memory_mb = 512",
        "",
        "[provenance]",
        f"machine = {toml_str('hwloc synthetic ' + text)}",
        f"sources = [{toml_str('hwloc synthetic topology: ' + text)}]",
    ]
    if notes:
        lines.append(f"notes = {toml_str('; '.join(notes))}")
    out = "\n".join(lines) + "\n"
    topology.loads(out, where=where, default_name=name)  # what lab cannot hold is refused here, by field
    return out, notes
