"""`lscpu -e` output as a capture: the text a reporter pastes, turned into the sysfs files
the kernel would show, so the same reader (sysfs.capture_view) and importer build the
same view as from a sysfs capture.

The table (util-linux lscpu, `-e` or `-e=CPU,NODE,SOCKET,CORE,CACHE,ONLINE`) has a header
line of column names and one line per CPU:

    CPU NODE SOCKET CORE L1d:L1i:L2:L3 ONLINE    MAXMHZ   MINMHZ
      0    0      0    0 0:0:0:0          yes 3900.0000 800.0000

CPU, SOCKET and CORE are needed; NODE (absent on a kernel without NUMA: one node),
CLUSTER, the cache column (its header names the caches, its values each cache's id) and
ONLINE are read when present; the rest (MHZ, ADDRESS, ...) is ignored.  "-" is what
lscpu prints for what it does not know (an offline CPU's fields).  lscpu has no CPU
vendor or model and no NUMA distances: the view says so in its notes.  Every value is
range-checked; a bad one is one line naming the line and the column.
"""

from __future__ import annotations

import re

from . import cpulist
from .errors import UserError
from .limits import MAX_CPUS, MAX_NODES, show

# Columns lab reads; the others are left alone.
_CPU, _NODE, _SOCKET, _CORE, _CLUSTER, _ONLINE = "CPU", "NODE", "SOCKET", "CORE", "CLUSTER", "ONLINE"
_CACHE_NAME = re.compile(r"L[0-9][a-z]?")
_WORD = re.compile(r"[A-Za-z0-9:_%-]+")
_NUM = re.compile(r"[0-9]{1,10}")


def looks_like(head: bytes) -> bool:
    """Whether a file's first bytes are an `lscpu -e` table (its header line)."""
    text = head.decode(errors="replace").lstrip("\ufeff")
    first = next((line for line in text.splitlines() if line.strip()), "")
    cols = first.split()
    return bool(cols) and cols[0] == _CPU and (_SOCKET in cols or _CORE in cols)


def _cache_levels(col: str) -> list[tuple[str, int, str]] | None:
    """'L1d:L1i:L2:L3' -> [(name, level, type)], or None when *col* is not a cache column."""
    names = col.split(":")
    if not all(_CACHE_NAME.fullmatch(n) for n in names):
        return None
    out = []
    for n in names:
        kind = {"d": "Data", "i": "Instruction"}.get(n[2:], "Unified")
        out.append((n, int(n[1]), kind))
    return out


class _Where:
    def __init__(self, source: str):
        self.source = source

    def err(self, line: int, col: str, msg: str) -> UserError:
        return UserError(f"{self.source}: line {line}, column {col}: {msg}")


def _num(w: _Where, line: int, col: str, text: str, hi: int) -> int | None:
    if text == "-":
        return None
    if _NUM.fullmatch(text) is None:
        raise w.err(line, col, f"{show(text, 40)} is not a whole number (or '-')")
    v = int(text)
    if v > hi:
        raise w.err(line, col, f"{v} is out of range (0 to {hi})")
    return v


def files(text: str, source: str) -> tuple[dict[str, str], list[str]]:
    """The sysfs files ({relative path: content}) an `lscpu -e` table stands for, and the
    notes to pass on (what lscpu does not show)."""
    w = _Where(source)
    lines = text.lstrip("\ufeff").splitlines()
    head_at, header = _header(w, lines)
    cache_col, caches = _cache_column(header)
    rows = _rows(w, lines, head_at, header, cache_col, caches)
    on = sorted(c for c, r in rows.items() if r["online"])
    if not on:
        raise UserError(f"{source}: no CPU is online (the ONLINE column says no for every line)")
    has = set(header)
    out = _cpu_files(rows, on, _CLUSTER in has)
    out.update(_cache_files(rows, on, caches))
    if _NODE in has:
        out.update(_node_files(rows, on))
    return out, _notes(rows, on, _NODE in has, cache_col)


def _header(w: _Where, lines: list[str]) -> tuple[int, list[str]]:
    """The header line's index and its column names, checked: words lscpu could print,
    none twice, CPU, SOCKET and CORE among them."""
    head_at = next((i for i, line in enumerate(lines) if line.strip()), None)
    if head_at is None:
        raise UserError(f"{w.source}: empty; an `lscpu -e` table starts with its header line (CPU NODE SOCKET CORE ...)")
    header = lines[head_at].split()
    for col in header:
        if _WORD.fullmatch(col) is None or len(col) > 40:
            raise w.err(head_at + 1, show(col, 40), "not a column lscpu -e prints")
    if len(set(header)) != len(header):
        dup = next(c for c in header if header.count(c) > 1)
        raise w.err(head_at + 1, dup, "the column is named twice")
    for need in (_CPU, _SOCKET, _CORE):
        if need not in header:
            raise UserError(
                f"{w.source}: line {head_at + 1}: no {need} column; lab needs CPU, SOCKET and CORE "
                "(`lscpu -e=CPU,NODE,SOCKET,CORE,CACHE,ONLINE`)"
            )
    return head_at, header


def _cache_column(header: list[str]) -> tuple[str | None, list[tuple[str, int, str]]]:
    """The cache column's name (the last one that names caches, None without one) and the
    caches it names."""
    caches: list[tuple[str, int, str]] = []
    cache_col = None
    for col in header:
        lv = _cache_levels(col)
        if lv is not None:
            cache_col, caches = col, lv
    return cache_col, caches


def _rows(
    w: _Where, lines: list[str], head_at: int, header: list[str], cache_col: str | None,
    caches: list[tuple[str, int, str]],
) -> dict[int, dict[str, object]]:
    """CPU number -> its row (line, socket, core, node, cluster, online, cache ids), one
    per non-blank line under the header; refuses a CPU listed twice and a table with none."""
    idx = {c: i for i, c in enumerate(header)}
    # Columns whose values may hold spaces (MODELNAME) would shift every column after them.
    last_free = header[-1] == "MODELNAME"
    rows: dict[int, dict[str, object]] = {}
    for n, raw in enumerate(lines[head_at + 1 :], head_at + 2):
        if not raw.strip():
            continue
        vals = raw.split()
        if last_free and len(vals) >= len(header):
            vals = [*vals[: len(header) - 1], " ".join(vals[len(header) - 1 :])]
        if len(vals) != len(header):
            col = header[len(vals)] if len(vals) < len(header) else f"{len(header) + 1} (past the last, {header[-1]})"
            raise w.err(n, col, f"{len(vals)} values for the header's {len(header)} columns")
        cpu = _num(w, n, _CPU, vals[idx[_CPU]], MAX_CPUS - 1)
        if cpu is None:
            raise w.err(n, _CPU, "'-' is not a CPU number")
        if cpu in rows:
            raise w.err(n, _CPU, f"CPU {cpu} is listed twice (line {rows[cpu]['line']} too)")
        rows[cpu] = _row(w, n, cpu, {col: vals[i] for col, i in idx.items()}, cache_col, caches)
    if not rows:
        raise UserError(f"{w.source}: an `lscpu -e` header with no CPU lines under it")
    return rows


def _row(
    w: _Where, n: int, cpu: int, vals: dict[str, str], cache_col: str | None, caches: list[tuple[str, int, str]]
) -> dict[str, object]:
    """Line *n*'s values (column -> text) read and range-checked: an online CPU needs its
    socket and core (and node, when the table has a NODE column)."""
    row: dict[str, object] = {"line": n}
    row["socket"] = _num(w, n, _SOCKET, vals[_SOCKET], 2**31 - 1)
    row["core"] = _num(w, n, _CORE, vals[_CORE], 2**31 - 1)
    row["node"] = _num(w, n, _NODE, vals[_NODE], MAX_NODES - 1) if _NODE in vals else None
    row["cluster"] = _num(w, n, _CLUSTER, vals[_CLUSTER], 2**31 - 1) if _CLUSTER in vals else None
    online = True
    if _ONLINE in vals:
        v = vals[_ONLINE].lower()
        if v not in ("yes", "no", "y", "n", "-"):
            raise w.err(n, _ONLINE, f"{show(vals[_ONLINE], 40)} is not yes or no")
        online = v in ("yes", "y")
    row["online"] = online
    if online and (row["socket"] is None or row["core"] is None):
        col = _SOCKET if row["socket"] is None else _CORE
        raise w.err(n, col, f"'-' for online CPU {cpu}: lab needs its socket and core")
    if online and _NODE in vals and row["node"] is None:
        raise w.err(n, _NODE, f"'-' for online CPU {cpu}: lab needs its node")
    ids: list[int | None] = []
    if cache_col is not None:
        text_ids = vals[cache_col]
        parts = text_ids.split(":") if text_ids != "-" else ["-"] * len(caches)
        if len(parts) != len(caches):
            raise w.err(n, cache_col, f"{show(text_ids, 40)} has {len(parts)} cache ids for the header's {len(caches)}")
        for (name, _lvl, _t), part in zip(caches, parts, strict=True):
            ids.append(_num(w, n, f"{cache_col} ({name})", part, 2**31 - 1))
    row["caches"] = ids
    return row


_BASE = "sys/devices/system/cpu"


def _cpu_files(rows: dict[int, dict[str, object]], on: list[int], has_clusters: bool) -> dict[str, str]:
    """The CPUs' online files and, for each online CPU, its topology/ files: package and
    core ids, SMT and package sibling lists, the cluster's when the table has CLUSTER."""
    out = {f"{_BASE}/online": cpulist.format(on)}

    def same(key) -> dict[int, str]:
        groups: dict[object, list[int]] = {}
        for c in on:
            groups.setdefault(key(rows[c]), []).append(c)
        return {c: cpulist.format(g) for g in groups.values() for c in g}

    threads = same(lambda r: (r["socket"], r["core"]))
    packages = same(lambda r: r["socket"])
    clusters = same(lambda r: (r["socket"], r["cluster"])) if has_clusters else {}
    for c, r in rows.items():
        out[f"{_BASE}/cpu{c}/online"] = "1" if r["online"] else "0"
        if not r["online"]:
            continue
        t = f"{_BASE}/cpu{c}/topology"
        out[f"{t}/physical_package_id"] = str(r["socket"])
        out[f"{t}/core_id"] = str(r["core"])
        out[f"{t}/thread_siblings_list"] = threads[c]
        out[f"{t}/core_siblings_list"] = packages[c]
        if c in clusters and r["cluster"] is not None:
            out[f"{t}/cluster_cpus_list"] = clusters[c]
    return out


def _cache_files(rows: dict[int, dict[str, object]], on: list[int], caches: list[tuple[str, int, str]]) -> dict[str, str]:
    """Each online CPU's cache/index<i>/ files (level, type, shared_cpu_list: the CPUs of
    the same cache id) for the caches whose id the table gives."""
    out: dict[str, str] = {}
    for i, (_name, level, kind) in enumerate(caches):
        shared: dict[int, list[int]] = {}
        for c in on:
            cid = rows[c]["caches"][i]  # type: ignore[index]
            if cid is not None:
                shared.setdefault(cid, []).append(c)
        for cs in shared.values():
            for c in cs:
                d = f"{_BASE}/cpu{c}/cache/index{i}"
                out[f"{d}/level"] = str(level)
                out[f"{d}/type"] = kind
                out[f"{d}/shared_cpu_list"] = cpulist.format(cs)
    return out


def _node_files(rows: dict[int, dict[str, object]], on: list[int]) -> dict[str, str]:
    """Each node's cpulist file (its online CPUs), by node id."""
    nodes: dict[int, list[int]] = {}
    for c in on:
        node = rows[c]["node"]
        assert isinstance(node, int)
        nodes.setdefault(node, []).append(c)
    return {f"sys/devices/system/node/node{node}/cpulist": cpulist.format(cs) for node, cs in sorted(nodes.items())}


def _notes(rows: dict[int, dict[str, object]], on: list[int], has_nodes: bool, cache_col: str | None) -> list[str]:
    """What the table does not show: vendor and model always, NUMA distances on a machine
    of several nodes, caches without a cache column."""
    notes = ["from `lscpu -e`, which shows no CPU vendor or model (imported as a generic x86_64 CPU: set [cpu] vendor "
             "and model in the spec)"]  # fmt: skip
    if has_nodes and len({rows[c]["node"] for c in on}) > 1:
        notes.append("`lscpu -e` shows no NUMA distances (`numactl -H` on the machine does)")
    if cache_col is None:
        notes.append("no cache column in the `lscpu -e` table (add CACHE to -e=...)")
    return notes
