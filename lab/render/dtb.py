"""Device-tree editing for arm64 guests: caches and CPU numbering.

QEMU 7.2's virt machine puts sockets and clusters in the device tree's cpu-map
but describes no caches, so an arm64 guest finds only the private L1 its CLIDR
reports, and the scheduler's MC level cannot span the LLC.  lab dumps the tree
QEMU generates (``-machine ...,dumpdtb=``), gives every cpu node a
``next-level-cache`` to a per-core L2 whose ``next-level-cache`` is one L3 per
LLC of the spec, gives each cpu node the spec's ``capacity-dmips-mhz`` when its CPUs
differ (big.LITTLE), and boots with ``-dtb``.  Cache sizes are the spec's ``[caches] sizes``
where it gives them (a DynamIQ phone's core types each with their own L1 and L2), else
512K per L2 and 1M per core for an L3; L1 sizes go on the cpu nodes (``d-cache-size``,
``i-cache-size``), which is where Linux's cacheinfo reads a level-1 leaf's size from.  The order of the cpu nodes sets
Linux's logical CPU numbers, so the nodes are also reordered into the spec's
numbering.

``edit()`` is a pure function of the decompiled tree (dtc -O dts) and the
topology; the QEMU and dtc calls live in ``build()``.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import proc
from ..errors import InfraError, UserError
from ..topology import Topology, flatten_clusters

L2_SIZE = 512 * 1024
L3_SIZE_PER_CORE = 1024 * 1024
LINE = 64


def _block_end(text: str, start: int) -> int:
    """Index just past the '};' closing the block whose '{' is at or after *start*."""
    i = text.index("{", start)
    depth = 0
    while i < len(text):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                j = text.index(";", i) + 1
                return j
        i += 1
    raise ValueError("unbalanced braces in the device tree")


CPU_RE = re.compile(r"^(\t+)cpu@([0-9]+) \{\n", re.M)  # QEMU names them by cpu index, in decimal


def edit(dts: str, topo: Topology, *, caches: bool = True, renumber: bool = True, cpu_map: Topology | None = None) -> str:
    """Add the spec's cache hierarchy and reorder cpu nodes into the spec's numbering.
    *topo* is the machine QEMU built (its CPUs in QEMU's order); *cpu_map*, when given,
    is the spec whose clusters the cpu-map gets instead of QEMU's (clusters of different
    sizes, which -smp cannot build: render.qemu._buildable())."""
    m = re.search(r"^\tcpus \{\n", dts, re.M)
    if m is None:
        raise ValueError("no /cpus node in the device tree")
    cpus_end = _block_end(dts, m.start())
    inner_end = dts.rindex("\t};", m.start(), cpus_end)  # the line closing /cpus
    body = dts[m.end() : inner_end]
    # Split /cpus into its cpu@N blocks (kept whole) and the rest.
    blocks: list[tuple[int, str]] = []
    rest: list[str] = []
    pos = 0
    for cm in CPU_RE.finditer(body):
        if cm.start() < pos:
            continue
        rest.append(body[pos : cm.start()])
        end = _block_end(body, cm.start())
        blocks.append((int(cm.group(2)), body[cm.start() : end]))
        pos = end
    rest.append(body[pos:])
    if len(blocks) != topo.n_cpus:
        raise ValueError(f"the device tree has {len(blocks)} cpu nodes, the topology {topo.n_cpus} CPUs")
    # QEMU writes cpu nodes in its cpu index order, which is the spec's canonical order.
    blocks.sort(key=lambda b: b[0])
    phandles = [int(x, 16) for x in re.findall(r"phandle = <0x([0-9a-f]+)>;", dts)]
    next_ph = max(phandles, default=0x8000) + 1
    indent = CPU_RE.search(body).group(1)  # type: ignore[union-attr]

    new_blocks: list[tuple[int, str]] = []
    cache_nodes: list[str] = []
    if caches:
        l3_ph: dict[int, int] = {}
        llc_cores: dict[int, int] = {}
        for c in topo.cpus:
            llc_cores.setdefault(c.llc, 0)
            if c.thread == 0:
                llc_cores[c.llc] += 1
        for llc in sorted({c.llc for c in topo.cpus}):
            l3_ph[llc] = next_ph
            next_ph += 1
            first = next(c.id for c in topo.cpus if c.llc == llc)
            size = _kb(topo, "L3", first) or L3_SIZE_PER_CORE * llc_cores[llc]
            cache_nodes.append(_cache_node(indent, f"l3-cache{llc}", 3, l3_ph[llc], None, size))
        l2_ph: dict[int, int] = {}
        for c in topo.cpus:
            if c.core not in l2_ph:
                l2_ph[c.core] = next_ph
                next_ph += 1
                size = _kb(topo, "L2", c.id) or L2_SIZE
                cache_nodes.append(_cache_node(indent, f"l2-cache{c.core}", 2, l2_ph[c.core], l3_ph[c.llc], size))
    dmips = dict(topo.dmips_mhz)
    for (_idx, block), c in zip(blocks, topo.cpus, strict=True):
        inner = indent + "\t"
        if caches:
            block = block.replace(
                "\n", f"\n{inner}next-level-cache = <0x{l2_ph[c.core]:x}>;\n", 1
            )
        if caches:
            for name, prefix in (("L1i", "i-"), ("L1d", "d-")):
                size = _kb(topo, name, c.id)
                if size:
                    block = block.replace("\n", "\n" + "".join(f"{inner}{p}\n" for p in _size_props(prefix, size)), 1)
        if dmips:
            # Linux's arch_topology reads it for every CPU (or for none) and builds
            # SD_ASYM_CPUCAPACITY from the differences: a big.LITTLE machine's capacities.
            block = block.replace("\n", f"\n{inner}capacity-dmips-mhz = <0x{dmips[c.id]:x}>;\n", 1)
        new_blocks.append((c.id, block))
    if renumber:
        new_blocks.sort(key=lambda b: b[0])
    others = "".join(rest)
    if cpu_map is not None:
        phandle_of = {c.id: _phandle(b) for (_i, b), c in zip(blocks, topo.cpus, strict=True)}
        others = _replace_cpu_map(others, cpu_map, phandle_of, indent)
    new_body = others.rstrip("\n") + "\n\n" + "\n\n".join(b for _, b in new_blocks) + "\n"
    if cache_nodes:
        new_body += "\n" + "\n".join(cache_nodes)
    return dts[: m.end()] + new_body + dts[inner_end:]


def _phandle(block: str) -> int:
    m = re.search(r"phandle = <0x([0-9a-f]+)>;", block)
    if m is None:
        raise ValueError("a cpu node without a phandle")
    return int(m.group(1), 16)


def _replace_cpu_map(text: str, spec: Topology, phandle_of: dict[int, int], indent: str) -> str:
    """*text* (the /cpus node's children other than the cpu nodes) with its cpu-map
    written from *spec*: socketN > clusterN > coreN (> threadN), numbered from 0 inside
    each parent in CPU-id order, as Linux's parse_socket()/parse_cluster() read it."""
    m = re.search(r"^(\t+)cpu-map \{\n", text, re.M)
    if m is None:
        raise ValueError("no cpu-map in QEMU's /cpus node")
    end = _block_end(text, m.start())
    i0 = m.group(1)
    lines = [f"{i0}cpu-map {{"]
    for si, sock in enumerate(sorted(spec.groups("socket"), key=min)):
        lines += ["", f"{i0}\tsocket{si} {{"]
        clusters = sorted((g for g in spec.groups("cluster") if g[0] in sock), key=min)
        for ki, cl in enumerate(clusters):
            lines += ["", f"{i0}\t\tcluster{ki} {{"]
            cores = sorted((g for g in spec.groups("core") if g[0] in cl), key=min)
            for ci, core in enumerate(cores):
                lines += ["", f"{i0}\t\t\tcore{ci} {{"]
                if len(core) == 1:
                    lines.append(f"{i0}\t\t\t\tcpu = <0x{phandle_of[core[0]]:x}>;")
                else:
                    for ti, c in enumerate(sorted(core)):
                        lines += [f"{i0}\t\t\t\tthread{ti} {{", f"{i0}\t\t\t\t\tcpu = <0x{phandle_of[c]:x}>;", f"{i0}\t\t\t\t}};"]
                lines.append(f"{i0}\t\t\t}};")
            lines.append(f"{i0}\t\t}};")
        lines.append(f"{i0}\t}};")
    lines.append(f"{i0}}};")
    return text[: m.start()] + "\n".join(lines) + text[end:]


def _kb(topo: Topology, name: str, cpu: int) -> int:
    """The spec's size of CPU *cpu*'s cache *name* in bytes, 0 where it gives none."""
    kb = topo.cache_size_kb(name, cpu)
    return kb * 1024 if kb else 0


def _size_props(prefix: str, size: int) -> list[str]:
    """A cache's size, line size and sets (16 ways assumed), with *prefix* "" for a cache
    node's own, "d-"/"i-" for a cpu node's level-1 caches."""
    return [
        f"{prefix}cache-size = <0x{size:x}>;",
        f"{prefix}cache-line-size = <0x{LINE:x}>;",
        f"{prefix}cache-sets = <0x{max(1, size // (LINE * 16)):x}>;",
    ]


def _cache_node(indent: str, name: str, level: int, phandle: int, next_ph: int | None, size: int) -> str:
    i2 = indent + "\t"
    lines = [
        f"{indent}{name} {{",
        f'{i2}compatible = "cache";',
        f"{i2}cache-level = <{level}>;",
        f"{i2}cache-unified;",
        *(i2 + p for p in _size_props("", size)),
    ]
    if next_ph is not None:
        lines.append(f"{i2}next-level-cache = <0x{next_ph:x}>;")
    lines += [f"{i2}phandle = <0x{phandle:x}>;", f"{indent}}};", ""]
    return "\n".join(lines)


def build(qemu_argv: list[str], topo: Topology, out: Path) -> Path:
    """Dump QEMU's device tree for *qemu_argv*, edit it, compile it to *out*.  A spec
    whose clusters differ in size boots as render.qemu planned it, one cluster per LLC,
    with the spec's clusters written into the cpu-map."""
    argv = list(qemu_argv)
    try:
        i = argv.index("-machine")
    except ValueError as e:
        raise InfraError("no -machine in the QEMU argv") from e
    raw = out.with_suffix(".qemu.dtb")
    # QEMU runs in out.parent (below): name the dump relative to it, as the argv names
    # every other run file (a relative run directory would otherwise be taken twice).
    argv[i + 1] += f",dumpdtb={raw.name}"
    # Drop the devices and chardevs: they do not change the tree's CPUs and caches.
    proc.run(_strip_io(argv), cwd=out.parent, timeout=120)  # the argv names run files relative to it
    dts = proc.run(["dtc", "-q", "-I", "dtb", "-O", "dts", str(raw)], timeout=60).stdout.decode()
    built = flatten_clusters(topo) if topo.shape is None else None
    try:
        edited = edit(dts, built, cpu_map=topo) if built is not None else edit(dts, topo)
    except ValueError as e:
        raise UserError(f"{topo.name}: cannot add caches to QEMU's device tree: {e}") from None
    src = out.with_suffix(".dts")
    src.write_text(edited)
    proc.run(["dtc", "-q", "-I", "dts", "-O", "dtb", "-o", str(out), str(src)], timeout=60)
    return out


def _strip_io(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for j, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in ("-chardev", "-device", "-serial") and j + 1 < len(argv):
            skip = True
            continue
        out.append(a)
    return out + ["-serial", "none"]
