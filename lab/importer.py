"""A captured machine (sysfs files) -> a topology spec, and shrinking a spec to a -mini.

Import keeps the real numbering, node cpulists, LLC / cluster / SMT groups and
distance matrix by writing the *groups* form of the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from . import arch as archs
from . import cpulist, expect, topology
from . import levels as lv
from .errors import UserError
from .host import Host
from .render import qemu
from .sysfs import MachineView
from .topology.spec import toml_str

MINI_MAX_CPUS = 32


def _one_line(s: str, n: int = 200) -> str:
    """A captured name (a CPU model from /proc/cpuinfo) as the one printable line a spec's
    model must be: it is data from the machine, so it is cleaned, not refused."""
    return "".join(ch if ch.isprintable() else "?" for ch in s[:n])


def cache_size_notes(view: MachineView, cpus: list[int]) -> list[str]:
    """A cache level whose size differs between CPUs (a big.LITTLE SoC's clusters, two
    sockets with different L3s): named, since lab gives the guest one size per level
    (x86: the QEMU CPU model's; arm64: lab's device tree's), so the guest does not see
    the difference.  Nothing is said of a level whose sizes the capture lacks."""
    out = []
    kinds = sorted({(c.level, c.type) for cpu in cpus for c in view.cpus[cpu].caches})
    for level, kind in kinds:
        by_size: dict[int, list[int]] = {}
        for cpu in cpus:
            for c in view.cpus[cpu].caches:
                if (c.level, c.type) == (level, kind) and c.size_kb is not None:
                    by_size.setdefault(c.size_kb, []).append(cpu)
        if len(by_size) > 1:
            name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
            sizes = ", ".join(f"{kb}K on CPUs {cpulist.format(sorted(cs))}" for kb, cs in sorted(by_size.items()))
            out.append(
                f"{name} sizes differ between CPUs ({sizes}): not reproduced, the guest's {name} has one size "
                "(x86: the QEMU CPU model's; arm64: lab's device tree's)"
            )
    return out


def view_to_spec(view: MachineView, name: str, source: str) -> tuple[str, list[str]]:
    """TOML text (groups form) for a captured machine, and the notes made on the way."""
    notes: list[str] = list(view.notes)
    online, cpus = _online_cpus(view, source, notes)
    nodes, cpu_nodes = _cpu_nodes(view, online, cpus, source, notes)
    dist = _distance_rows(view, cpu_nodes, source)
    pkg_of, sockets = _sockets(view, cpus)
    cores = _groups_by(cpus, online, lambda c: view.cpus[c].siblings("core") or (c,))
    node_of = {c: n for n in cpu_nodes for c in nodes[n]}
    llcs, snc, split = _llcs(view, cpus, online, node_of, pkg_of, notes)
    clusters = _clusters(view, cpus, online, cores, llcs)
    per_thread = _per_thread_caches(view, cpus, cores)
    notes.extend(_per_thread_notes(per_thread))
    if cpu_nodes != list(range(len(cpu_nodes))):
        notes.append(
            f"node ids {', '.join(map(str, cpu_nodes))} are sparse: the guest's nodes are 0-{len(cpu_nodes) - 1} "
            "in the same order (QEMU numbers nodes densely) and lab translates them back, like CPU ids"
        )
    model = _one_line(view.model or "")
    vendor = (view.vendor or "generic").lower()
    if vendor not in topology.VENDORS:
        vendor = "generic"
    arch = (archs.from_vendor(vendor) or archs.X86_64).name
    sizes = _captured_sizes(view, cpus, cores, llcs, notes) if arch == "arm64" else {}
    if arch != "arm64":
        notes.extend(cache_size_notes(view, cpus))
    lines = [
        f"# Imported by `lab topo import` from {source}",
        f"name = {toml_str(name)}",
        f"description = {toml_str((model or 'captured machine') + f', {len(cpus)} CPUs')}",
        f"arch = {toml_str(arch)}",
        "",
        "[cpu]",
        f"vendor = {toml_str(vendor)}",
        f"model = {toml_str(model)}",
    ]
    lines += _capacity_lines(view, cpus, arch, notes)
    lines += _family_lines(view, vendor, notes)
    lines += ["", "[groups]", "nodes = { " + ", ".join(f'"{n}" = "{cpulist.format(nodes[n])}"' for n in cpu_nodes) + " }"]
    lines += _glist("sockets", sockets)
    lines += _glist("llcs", llcs)
    if clusters is not None:
        lines += _glist("clusters", clusters)
    lines += _glist("cores", cores)
    lines += _import_caches_lines(snc, split, per_thread, sizes)
    lines += ["", "[numa]", "distances = ["]
    for dist_row in dist:
        lines.append("  [" + ", ".join(map(str, dist_row)) + "],")
    lines += ["]", "memory_mb = 512", "", "[provenance]"]
    lines.append(f"machine = {toml_str(model or 'captured machine')}")
    lines.append(f"sources = [{toml_str('lab topo capture: ' + source)}]")
    if notes:
        lines.append(f"notes = {toml_str('; '.join(notes))}")
    text = "\n".join(lines) + "\n"
    # Validate what we wrote: an import that does not load is a bug here, not the user's.
    topology.loads(text, where=f"import of {source}", default_name=name)
    return text, notes


def _online_cpus(view: MachineView, source: str, notes: list[str]) -> tuple[set[int], list[int]]:
    """The online CPU ids, and those of them the import keeps (online, with topology
    files, sorted); notes the offline CPUs and holes in the numbering."""
    online = set(view.online) or set(view.cpus)
    offline = sorted(set(view.cpus) - online)
    if offline:
        notes.append(f"CPUs {cpulist.format(offline)} were offline and are left out")
    seen_ids = set(view.cpus) | online
    holes = sorted(set(range(max(seen_ids) + 1)) - seen_ids) if seen_ids else []
    if holes:
        notes.append(
            f"CPU ids {cpulist.format(holes)} do not exist on this machine (holes in the numbering): "
            "the spec keeps the kernel's ids and lab translates the guest's dense ones"
        )
    cpus = sorted(c for c in online if c in view.cpus and view.cpus[c].package is not None)
    if not cpus:
        raise UserError(f"{source}: no online CPU with topology files")
    return online, cpus


def _cpu_nodes(
    view: MachineView, online: set[int], cpus: list[int], source: str, notes: list[str]
) -> tuple[dict[int, tuple[int, ...]], list[int]]:
    """Each node's online CPUs (node id -> CPUs, every node) and the ids of the nodes that
    have CPUs, sorted; notes the nodes without CPUs, refuses a CPU in two nodes or none."""
    nodes = {n: tuple(c for c in view.nodes[n] if c in online) for n in sorted(view.nodes)}
    cpu_nodes = [n for n in sorted(nodes) if nodes[n]]
    memless = [n for n in sorted(nodes) if not nodes[n]]
    if memless:
        notes.append(f"nodes {', '.join(map(str, memless))} have no CPUs and are left out")
    owner: dict[int, int] = {}
    for n in cpu_nodes:
        for c in nodes[n]:
            if c in owner:
                raise UserError(
                    f"{source}: sys/devices/system/node/node{owner[c]}/cpulist and node{n}/cpulist both list CPU {c}"
                )
            owner[c] = n
    orphans = sorted(set(cpus) - set(owner))
    if orphans:
        raise UserError(f"{source}: CPU {orphans[0]} is in no node's cpulist")
    return nodes, cpu_nodes


def _distance_rows(view: MachineView, cpu_nodes: list[int], source: str) -> list[list[int]]:
    """The distance matrix between the nodes with CPUs (rows and columns in *cpu_nodes*'
    order), from each node's distance file, whose columns are all the machine's nodes."""
    all_nodes = sorted(view.distances) or sorted(view.nodes)
    dist = []
    for n in cpu_nodes:
        row = view.distances.get(n)
        if row is None:
            raise UserError(f"{source}: missing sys/devices/system/node/node{n}/distance")
        if len(row) != len(all_nodes):
            raise UserError(
                f"{source}: node{n}/distance has {len(row)} entries for {len(all_nodes)} nodes"
            )
        dist.append([row[all_nodes.index(m)] for m in cpu_nodes])
    return dist


def _groups_by(cpus: list[int], online: set[int], key: Callable[[int], Iterable[int]]) -> list[tuple[int, ...]]:
    """The distinct groups *key* gives *cpus* (online members only), each sorted, ordered
    by their lowest CPU."""
    # A CPU is always in its own group, even when a garbled capture's sibling list
    # leaves it out: the spec's validation then names the overlap.
    seen: dict[tuple[int, ...], None] = {}
    for c in cpus:
        g = {x for x in key(c) if x in online}
        g.add(c)
        seen.setdefault(tuple(sorted(g)), None)
    return sorted(seen, key=lambda g: g[0])


def _sockets(view: MachineView, cpus: list[int]) -> tuple[dict[int, int], list[tuple[int, ...]]]:
    """Each CPU's package id, and the packages' CPUs ordered by their lowest CPU."""
    pkg_of: dict[int, int] = {}
    for c in cpus:
        pkg = view.cpus[c].package
        assert pkg is not None  # _online_cpus keeps only CPUs with a package id
        pkg_of[c] = pkg
    by_pkg: dict[int, list[int]] = {}
    for c in cpus:
        by_pkg.setdefault(pkg_of[c], []).append(c)
    return pkg_of, sorted((tuple(v) for v in by_pkg.values()), key=lambda g: g[0])


def _llcs(
    view: MachineView, cpus: list[int], online: set[int], node_of: dict[int, int], pkg_of: dict[int, int],
    notes: list[str],
) -> tuple[list[tuple[int, ...]], bool, bool]:
    """The LLC groups as the kernel schedules on them (never crossing a node), whether the
    capture is sub-NUMA clustered (snc), and whether its LLCs crossing nodes were split
    otherwise (split_llc); notes which."""
    llc_level = view.llc_level
    if llc_level is None:
        notes.append("no cache information: one LLC per node and socket assumed")
        by_node_pkg: dict[tuple[int, int], list[int]] = {}
        for c in cpus:
            by_node_pkg.setdefault((node_of[c], pkg_of[c]), []).append(c)
        return _groups_by(cpus, online, lambda c: by_node_pkg[(node_of[c], pkg_of[c])]), False, False

    def llc_shared(c: int) -> tuple[int, ...]:
        cache = view.cpus[c].cache(llc_level)
        return cache.shared if cache else (c,)

    def llc(c: int) -> list[int]:
        # Like the kernel, an LLC never crosses a node (x86 topology_sane()).
        return [o for o in llc_shared(c) if node_of.get(o) == node_of[c]]

    llcs = _groups_by(cpus, online, llc)
    raw = _groups_by(cpus, online, llc_shared)
    if len(raw) == len(llcs):
        return llcs, False, False
    if _is_snc(raw, node_of, pkg_of, view.vendor):
        notes.append(
            f"sub-NUMA clustering: each L{llc_level} is a whole socket's, shared by its nodes; Linux "
            "schedules on its per-node parts (x86 match_llc()), and so does the guest: one "
            f"L{llc_level} per socket, nodes assigned per core"
        )
        return llcs, True, False
    notes.append(f"L{llc_level} groups crossing nodes were split at node boundaries")
    return llcs, False, True


def _clusters(
    view: MachineView, cpus: list[int], online: set[int], cores: list[tuple[int, ...]], llcs: list[tuple[int, ...]]
) -> list[tuple[int, ...]] | None:
    """The cluster groups from the capture's cluster sibling lists, or None when it has
    none or they are just the cores or just the LLCs (no level of its own)."""
    if not any(view.cpus[c].siblings("cluster") for c in cpus):
        return None
    cl = _groups_by(cpus, online, lambda c: view.cpus[c].siblings("cluster") or (c,))
    if set(cl) != set(cores) and set(cl) != set(llcs):
        return cl
    return None


def _per_thread_notes(per_thread: list[str]) -> list[str]:
    """One note per cache level private to each SMT thread."""
    return [
        f"{cache} is private to each SMT thread here"
        + (" (x86 builds its CLS level from the L2 siblings)" if cache == "L2" else "")
        for cache in per_thread
    ]


def _capacity_lines(view: MachineView, cpus: list[int], arch: str, notes: list[str]) -> list[str]:
    """The [cpu] table's capacity line when the CPUs' capacities differ (arm64 only: x86
    gets a note that the guest's CPUs are alike), and the note saying so."""
    caps = {c: view.cpus[c].capacity for c in cpus}
    if len({v for v in caps.values() if v is not None}) <= 1:
        return []
    if arch != "arm64" or any(v is None or v < 1 for v in caps.values()):
        notes.append(
            "CPUs of different capacities (hybrid core types): QEMU cannot give x86 CPUs different "
            "capacities, the guest's CPUs are alike"
            if arch != "arm64" else "cpu_capacity is missing or 0 for some CPUs: the guest's CPUs are alike"
        )
        return []
    by_cap: dict[int, list[int]] = {}
    for c, v in caps.items():
        assert v is not None
        by_cap.setdefault(v, []).append(c)
    pairs = sorted(by_cap.items(), key=lambda kv: min(kv[1]))
    notes.append(
        "CPUs of " + str(len(pairs)) + " capacities (" + ", ".join(f"{cpulist.format(cs)}: {v}" for v, cs in pairs)
        + "): the guest's device tree gives them as capacity-dmips-mhz, so its kernel builds SD_ASYM_CPUCAPACITY"
    )
    return ["capacity = { " + ", ".join(f'"{cpulist.format(cs)}" = {v}' for v, cs in pairs) + " }"]


def _family_lines(view: MachineView, vendor: str, notes: list[str]) -> list[str]:
    """The [cpu] table's family line: the capture's, or Zen's 0x17 assumed (and noted) for
    an AMD CPU whose family the capture lacks."""
    if view.family is not None:
        return [f"family = {view.family:#x}"]
    if vendor == "amd":
        notes.append("AMD CPU family not in the capture: 0x17 assumed")
        return ["family = 0x17  # not in the capture; assumed Zen"]
    return []


def _glist(key: str, gs: Iterable[tuple[int, ...]]) -> list[str]:
    """A [groups] list of cpulists, one a line."""
    return [f"{key} = [", *(f'  "{cpulist.format(g)}",' for g in gs), "]"]


def _import_caches_lines(snc: bool, split: bool, per_thread: list[str], sizes: dict[str, dict[int, int]]) -> list[str]:
    """The [caches] table of an import (after a blank line), or nothing when it has none."""
    if not (snc or per_thread or split or sizes):
        return []
    lines = ["", "[caches]"]
    if snc:
        lines.append("snc = true")
    if split:
        lines.append("split_llc = true")
    if per_thread:
        lines.append("per_thread = [" + ", ".join(toml_str(x) for x in per_thread) + "]")
    if sizes:
        lines.append(sizes_toml(sizes))
    return lines


def _captured_sizes(view: MachineView, cpus: list[int], cores, llcs, notes: list[str]) -> dict[str, dict[int, int]]:
    """An arm64 capture's cache sizes as the spec's [caches] sizes (the guest's device tree
    gives them): per level, every CPU's size, for the levels lab's tree describes and the
    capture sizes on every CPU; a level whose size differs inside a core (L1, L2) or an
    LLC (L3) is left at lab's default and named."""
    out: dict[str, dict[int, int]] = {}
    for name, (level, kind) in topology.CACHE_LEAVES.items():
        per = {
            c: x.size_kb
            for c in cpus
            for x in view.cpus[c].caches
            if (x.level, x.type) == (level, kind) and x.size_kb is not None
        }
        if len(per) != len(cpus):
            continue
        groups = llcs if name == "L3" else cores
        if any(len({per[c] for c in g}) > 1 for g in groups):
            notes.append(f"{name} sizes differ inside one {'LLC' if name == 'L3' else 'core'}: not reproduced, the guest's {name} has lab's default size")
            continue
        out[name] = per
    if any(len(set(per.values())) > 1 for per in out.values()):
        differ = [n for n, per in out.items() if len(set(per.values())) > 1]
        notes.append(f"{', '.join(differ)} sizes differ between CPUs: the guest's device tree gives each CPU its own")
    return out


def _size_text(kb: int) -> str:
    return f'"{kb >> 10}M"' if kb % 1024 == 0 else f'"{kb}K"'


def sizes_toml(sizes: dict[str, dict[int, int]]) -> str:
    """[caches] sizes = { L1d = "64K", L2 = { "0-3" = "128K", "4-7" = "512K" }, L3 = "4M" }."""
    parts = []
    for name in topology.CACHE_LEAVES:
        per = sizes.get(name)
        if not per:
            continue
        by: dict[int, list[int]] = {}
        for c, kb in sorted(per.items()):
            by.setdefault(kb, []).append(c)
        if len(by) == 1:
            parts.append(f"{name} = {_size_text(next(iter(by)))}")
        else:
            inner = ", ".join(f'"{cpulist.format(cs)}" = {_size_text(kb)}' for kb, cs in sorted(by.items(), key=lambda kv: min(kv[1])))
            parts.append(f"{name} = {{ {inner} }}")
    return "sizes = { " + ", ".join(parts) + " }"


def _is_snc(raw_llcs, node_of: dict[int, int], pkg_of: dict[int, int], vendor: str | None) -> bool:
    """Every cache-level LLC is a whole socket holding several nodes (Intel sub-NUMA
    clustering: the L3's sysfs lists span the socket; the scheduler's LLC is per node)."""
    if (vendor or "").lower() not in ("intel", "genuineintel"):
        return False
    by_pkg: dict[int, set[int]] = {}
    for c, p in pkg_of.items():
        by_pkg.setdefault(p, set()).add(c)
    for g in raw_llcs:
        pkgs = {pkg_of[c] for c in g}
        if len(pkgs) != 1 or set(g) != by_pkg[next(iter(pkgs))] or len({node_of[c] for c in g}) < 2:
            return False
    return True


def _per_thread_caches(view: MachineView, cpus: list[int], cores: list[tuple[int, ...]]) -> list[str]:
    """Cache levels below the LLC that each SMT thread has to itself (L1d, L1i, L2)."""
    core_of = {c: g for g in cores for c in g}
    if all(len(g) == 1 for g in cores):
        return []
    out = []
    for level, types, name in ((1, ("Data",), "L1d"), (1, ("Instruction",), "L1i"), (2, ("Unified", "Data"), "L2")):
        private = None
        for c in cpus:
            if len(core_of[c]) < 2:
                continue
            cache = next((x for x in view.cpus[c].caches if x.level == level and x.type in types), None)
            if cache is None:
                private = None
                break
            mine = set(cache.shared) & set(core_of[c])
            private = (private is not False) and mine <= {c}
            if not private:
                break
        if private:
            out.append(name)
    return out


def mini(topo: topology.Topology, name: str, max_cpus: int = MINI_MAX_CPUS) -> str:
    """A shape-keeping spec of at most *max_cpus* CPUs: same levels, sockets, nodes,
    distances, SMT and numbering style; the groups inside shrink, never below 2."""
    s = topo.shape
    if s is None:
        raise UserError(f"{topo.name}: --mini needs a regular machine (every group the same size)")
    counts = {
        "llcs_per_node": s.llcs_per_node,
        "clusters_per_llc": s.clusters_per_llc,
        "cores_per_cluster": s.cores_per_cluster,
    }

    def total() -> int:
        return topology.Shape(
            s.sockets,
            s.nodes_per_socket,
            s.sockets_per_node,
            counts["llcs_per_node"],
            counts["clusters_per_llc"],
            counts["cores_per_cluster"],
            s.threads_per_core,
        ).cpus

    order = ["cores_per_cluster", "llcs_per_node", "clusters_per_llc"]
    while total() > max_cpus:
        for key in order:
            if counts[key] > 2:
                counts[key] = max(2, counts[key] // 2)
                break
        else:
            raise UserError(
                f"{topo.name}: cannot keep the shape in {max_cpus} CPUs "
                f"({s.sockets} sockets x {topo.n_nodes} nodes x 2 of each level x {s.threads_per_core} threads "
                f"is {total()})"
            )
    numbering = topo.numbering if topo.numbering != "explicit" else "linear"
    lines = [
        f"# Shape-keeping mini of {topo.name}, made by `lab topo import --mini`",
        f"name = {toml_str(name)}",
        f"description = {toml_str(f'{topo.name} shrunk to {total()} CPUs')}",
        f"arch = {toml_str(topo.arch)}",
        "",
        "[cpu]",
        f"vendor = {toml_str(topo.vendor)}",
        f"model = {toml_str(topo.model)}",
    ]
    if topo.family is not None:
        lines.append(f"family = {topo.family:#x}")
    lines += [
        "",
        "[topology]",
        f"sockets = {s.sockets}",
        f"nodes_per_socket = {s.nodes_per_socket}",
        f"sockets_per_node = {s.sockets_per_node}",
        f"llcs_per_node = {counts['llcs_per_node']}",
        f"clusters_per_llc = {counts['clusters_per_llc']}",
        f"cores_per_cluster = {counts['cores_per_cluster']}",
        f"threads_per_core = {s.threads_per_core}",
        f"numbering = {toml_str(numbering)}",
        "",
        *_caches_table(topo, per_cpu=False),
        "[numa]",
        "distances = [",
        *["  [" + ", ".join(map(str, row)) + "]," for row in topo.distances],
        "]",
        f"memory_mb = {min(topo.memory_mb)}",
        "",
        "[provenance]",
        f"machine = {toml_str(topo.provenance.machine)}",
        f"derived_from = {toml_str(topo.name)}",
        f"sources = [{', '.join(toml_str(x) for x in topo.provenance.sources)}]",
    ]
    mini_notes = []
    if topo.numbering == "explicit":
        mini_notes.append("the full machine numbers CPUs explicitly; the mini numbers them linearly")
    if topo.uneven_cache_sizes:
        mini_notes.append(f"{', '.join(topo.uneven_cache_sizes)} sizes differ between the full machine's CPUs: the mini's are lab's defaults")
    if mini_notes:
        lines.append(f"notes = {toml_str('; '.join(mini_notes))}")
    text = "\n".join(lines) + "\n"
    # Real node ids may be sparse; the mini numbers nodes 0..n-1 in the same order.
    topology.loads(text, where=f"mini of {topo.name}", default_name=name)
    return text


def _mode(values: list[int]) -> int:
    """The most common of *values*; a tie goes to the larger (the nearest machine keeps
    the bigger part rather than drop CPUs the machine has)."""
    counts: dict[int, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return max(counts, key=lambda v: (counts[v], v))


def _per(topo: topology.Topology, parent, child) -> list[int]:
    m: dict[object, set] = {}
    for c in topo.cpus:
        m.setdefault(parent(c), set()).add(child(c))
    return [len(v) for v in m.values()]


def groups_text(topo: topology.Topology, name: str, header: str, clusters: bool = True, notes: str = "") -> str:
    """*topo* written in the groups form (its own CPU and node ids), optionally without its
    cluster level."""
    fmt = cpulist.format
    lines = [header, f"name = {toml_str(name)}", f"description = {toml_str(topo.description or topo.name)}",
             f"arch = {toml_str(topo.arch)}", "", "[cpu]", f"vendor = {toml_str(topo.vendor)}",
             f"model = {toml_str(topo.model)}"]  # fmt: skip
    if topo.family is not None:
        lines.append(f"family = {topo.family:#x}")
    if topo.dmips_mhz:
        by: dict[int, list[int]] = {}
        for c, v in topo.dmips_mhz:
            by.setdefault(v, []).append(c)
        lines.append("capacity = { " + ", ".join(f'"{fmt(cs)}" = {v}' for v, cs in sorted(by.items(), key=lambda kv: min(kv[1]))) + " }")
    lines += ["", "[groups]", "nodes = { " + ", ".join(f'"{n}" = "{fmt(topo.node_cpus(n))}"' for n in topo.node_ids) + " }"]
    for x in reversed(lv.GROUPED):  # large to small; the nodes are the table above
        if x.real_ids or (x.optional and not (clusters and x.name in topo.levels)):
            continue
        lines += [f"{x.key} = [", *[f'  "{fmt(g)}",' for g in topo.groups(x.name)], "]"]
    lines += ["", *_caches_table(topo), "[numa]", "distances = [", *["  [" + ", ".join(map(str, r)) + "]," for r in topo.distances], "]"]
    lines += [f"memory_mb = {min(topo.memory_mb)}", "", "[provenance]", f"machine = {toml_str(topo.provenance.machine)}",
              f"derived_from = {toml_str(topo.name)}",
              f"sources = [{', '.join(toml_str(x) for x in topo.provenance.sources)}]"]  # fmt: skip
    if notes:
        lines.append(f"notes = {toml_str(notes)}")
    return "\n".join(lines) + "\n"


def nearest(topo: topology.Topology, name: str) -> tuple[str, list[str]]:
    """The nearest machine QEMU can build to the irregular *topo* (TOML text) and what it
    changes, each named (the spec's notes carry them too).

    Clusters of different sizes in LLCs of one size become one cluster per LLC, keeping
    every CPU and its id (as the catalog's tensor-gs101 does); otherwise every level takes
    its most common count (a tie: the larger), numbered linearly."""
    why = topology.irregularities(topo)
    header = f"# The nearest machine lab can build to {topo.name}, made by `lab topo import --nearest`"
    if topo.has_clusters:
        text = groups_text(topo, name, header, clusters=False)
        flat = topology.loads(text, where=f"nearest of {topo.name}", default_name=name)
        if flat.shape is not None:
            changes = [f"{w}: the nearest has no cluster level (one cluster per LLC, every CPU and id kept)" for w in why]
            text = groups_text(topo, name, header, clusters=False, notes=_prov_notes(topo, changes))
            topology.loads(text, where=f"nearest of {topo.name}", default_name=name)
            return text, changes
    node_in_socket = all(len(topo.node_sockets[n]) == 1 for n in topo.node_ids)
    sockets = len(topo.groups("socket"))
    if node_in_socket:
        nps, spn = _mode(_per(topo, lambda c: c.socket, lambda c: c.node)), 1
        llcs = _mode(_per(topo, lambda c: (c.node, c.socket), lambda c: c.llc))
    else:
        nps, spn = 1, _mode(_per(topo, lambda c: c.node, lambda c: c.socket))
        while sockets % spn:
            spn -= 1
        llcs = _mode(_per(topo, lambda c: c.socket, lambda c: c.llc))
    clusters = _mode(_per(topo, lambda c: c.llc, lambda c: c.cluster)) if topo.has_clusters else 1
    cores = _mode(_per(topo, lambda c: c.cluster, lambda c: c.core))
    threads = _mode(_per(topo, lambda c: c.core, lambda c: c.thread))
    shape = topology.Shape(sockets, nps, spn, llcs, clusters, cores, threads)
    changes = [f"{w}: the nearest has {n} each" for w, n in zip(why, _counts_for(why, shape), strict=True)]
    if shape.cpus != topo.n_cpus:
        changes.append(f"{shape.cpus} CPUs instead of {topo.n_cpus}, numbered linearly: the capture's CPU ids are not kept")
    else:
        changes.append("CPU ids numbered linearly: the capture's are not kept")
    if shape.nodes == topo.n_nodes:
        dist = [list(r) for r in topo.distances]
        if list(topo.node_ids) != list(range(topo.n_nodes)):
            changes.append(f"nodes {', '.join(map(str, topo.node_ids))} are 0-{topo.n_nodes - 1} in the same order")
    else:
        dist = _nearest_distances(topo, shape)
        changes.append(f"{shape.nodes} nodes instead of {topo.n_nodes}: distances {sorted({d for r in dist for d in r})} "
                       "taken from the capture's (same socket, other socket)")  # fmt: skip
    if topo.dmips_mhz and shape.cpus != topo.n_cpus:
        changes.append("per-CPU capacities are not kept (the CPUs are not the capture's)")
    if topo.uneven_cache_sizes:
        changes.append(f"{', '.join(topo.uneven_cache_sizes)} sizes per CPU are not kept (the CPUs are not the capture's)")
    lines = [header, f"name = {toml_str(name)}",
             f"description = {toml_str(f'nearest buildable machine to {topo.name}: {shape.cpus} CPUs')}",
             f"arch = {toml_str(topo.arch)}", "", "[cpu]", f"vendor = {toml_str(topo.vendor)}",
             f"model = {toml_str(topo.model)}"]  # fmt: skip
    if topo.family is not None:
        lines.append(f"family = {topo.family:#x}")
    lines += ["", "[topology]", f"sockets = {sockets}", f"nodes_per_socket = {nps}", f"sockets_per_node = {spn}",
              f"llcs_per_node = {llcs}"]  # fmt: skip
    if topo.has_clusters:
        lines.append(f"clusters_per_llc = {clusters}")
    lines += [f"cores_per_cluster = {cores}", f"threads_per_core = {threads}", 'numbering = "linear"', "",
              *_caches_table(topo, per_cpu=False), "[numa]", "distances = [", *["  [" + ", ".join(map(str, r)) + "]," for r in dist], "]",
              f"memory_mb = {min(topo.memory_mb)}", "", "[provenance]", f"machine = {toml_str(topo.provenance.machine)}",
              f"derived_from = {toml_str(topo.name)}",
              f"sources = [{', '.join(toml_str(x) for x in topo.provenance.sources)}]",
              f"notes = {toml_str(_prov_notes(topo, changes))}"]  # fmt: skip
    text = "\n".join(lines) + "\n"
    topology.loads(text, where=f"nearest of {topo.name}", default_name=name)
    return text, changes


def _counts_for(why: list[str], shape: topology.Shape) -> list[int]:
    """The nearest's count for each irregularity (in irregularities()' words)."""
    out = []
    for w in why:
        child = w.split(" per ")[0]
        out.append({"nodes": shape.nodes_per_socket, "sockets": shape.sockets_per_node, "LLCs": shape.llcs_per_node,
                    "clusters": shape.clusters_per_llc, "cores": shape.cores_per_cluster,
                    "threads": shape.threads_per_core}.get(child, 0))  # fmt: skip
    return out


def _prov_notes(topo: topology.Topology, changes: list[str]) -> str:
    prior = f"{topo.provenance.notes}; " if topo.provenance.notes else ""
    return prior + "nearest buildable machine, differs from the capture: " + "; ".join(changes)


def _nearest_distances(topo: topology.Topology, shape: topology.Shape) -> list[list[int]]:
    """Distances for a nearest machine whose node count differs: the capture's smallest
    distance between nodes of one socket, and its most common between sockets."""
    same: list[int] = []
    other: list[int] = []
    for i, a in enumerate(topo.node_ids):
        for j, b in enumerate(topo.node_ids):
            if i == j:
                continue
            d = topo.distances[i][j]
            (same if set(topo.node_sockets[a]) & set(topo.node_sockets[b]) else other).append(d)
    near = min(same) if same else 11
    far = _mode(other) if other else 20
    n = shape.nodes
    sock = [i // shape.nodes_per_socket if shape.sockets_per_node == 1 else i for i in range(n)]
    return [[10 if i == j else (near if sock[i] == sock[j] else far) for j in range(n)] for i in range(n)]


def _caches_table(topo: topology.Topology, per_cpu: bool = True) -> list[str]:
    """The [caches] table of a spec lab writes from *topo*; *per_cpu* False where the CPUs
    are not *topo*'s (a mini, a renumbered nearest machine): sizes only where a level has
    one size on every CPU."""
    sizes = {n: dict(per) for n, per in topo.cache_kb if per_cpu or n not in topo.uneven_cache_sizes}
    if not (topo.snc or topo.per_thread or topo.split_llc or sizes):
        return []
    out = ["[caches]"]
    if topo.snc:
        out.append("snc = true")
    if topo.split_llc:
        out.append("split_llc = true")
    if topo.per_thread:
        out.append("per_thread = [" + ", ".join(toml_str(x) for x in topo.per_thread) + "]")
    if sizes:
        out.append(sizes_toml(sizes))
    return [*out, ""]


def not_reproduced(topo: topology.Topology, host: Host) -> tuple[list[str], str]:
    """What a boot of *topo* on *host* will not reproduce (the named deviations `lab
    verify` reports), or, when it cannot boot at all, why ('' otherwise)."""

    try:
        plan = qemu.plan(topo, host)
    except UserError as e:
        return [], str(e)
    return [f"{name} ({why})" for name, why in expect.deviations(topo, plan)], ""


def write(path: Path, text: str) -> None:
    if path.exists():
        raise UserError(f"{path}: exists; remove it or choose another -o")
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as e:
        raise UserError(f"{path}: cannot write: {e.strerror}") from None
