"""`lab topo diff` without a VM (issue 34 item 5): a capture against a recorded guest
snapshot, compared in the capture's numbering by lab.topodiff.compare()."""

from __future__ import annotations

import re
from pathlib import Path

from lab import cpulist, host, importer, sysfs, topodiff, topology
from lab.render import qemu
from lab.sysfs import MachineView

HOST = host.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")
RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
# zen3-2s-mini (smt-last numbering: the guest's CPU g is spec CPU guest_to_spec[g]) as
# Debian's 6.1 saw it, with its sched-domain tree (debugfs names and flags, schedstat spans).
ZEN3 = RUNS / "llc-spread-pinned-zen3-2s-mini-debian-main-works" / "guest"
G2S = [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31]


def capture_of_real_machine(tmp_path: Path, edit=None) -> Path:
    """The capture the real zen3-2s-mini would give: the recorded guest's files with every
    CPU id renumbered into the spec's (the real machine's) numbering.  Masks are left out
    (captures may hold lists only); schedstat's spans are rewritten as masks of real ids."""
    root = tmp_path / "capture"
    ren = lambda text: cpulist.format(sorted(G2S[c] for c in cpulist.parse(text)))  # noqa: E731
    for line in (ZEN3 / "sysfs.txt").read_text().splitlines():
        path, _, content = line.partition(":")
        m = re.match(r"/sys/devices/system/cpu/cpu([0-9]+)/(.*)$", path) or re.match(
            r"/sys/kernel/debug/sched/domains/cpu([0-9]+)/(.*)$", path
        )
        if path.endswith(("_cpus", "_siblings", "cpumap", "shared_cpu_map")):
            continue
        if m:
            path = path.replace(f"cpu{m[1]}/", f"cpu{G2S[int(m[1])]}/", 1)
        if path.endswith(("_list", "cpulist", "/online", "/possible")):
            content = ren(content)
        if edit:
            path, content = edit(path, content)
        f = root / path.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(content + "\n")
    out = []
    for line in (ZEN3 / "schedstat").read_text().splitlines():
        f = line.split()
        if f and f[0].startswith("cpu"):
            out.append(f"cpu{G2S[int(f[0][3:])]} " + " ".join(f[1:]))
        elif f and f[0].startswith("domain"):
            span = sorted(G2S[c] for c in cpulist.parse_mask(f[1]))
            out.append(f"{f[0]} {sum(1 << c for c in span):08x} " + " ".join(f[2:]))
        else:
            out.append(line)
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc" / "schedstat").write_text("\n".join(out) + "\n")
    (root / "proc" / "cpuinfo").write_text((ZEN3 / "cpuinfo").read_text())
    return root


def diff_of(cap_dir: Path, guest_edit=None) -> topodiff.Diff:
    view = sysfs.read_capture(cap_dir)
    text, _ = importer.view_to_spec(view, "zen3-capture", str(cap_dir))
    topo = topology.loads(text, default_name="zen3-capture")
    plan = qemu.plan(topo, HOST)
    guest = sysfs.read_snapshot(ZEN3)
    if guest_edit:
        guest_edit(guest)
    return topodiff.compare(view, topo, plan, guest)


def test_the_guest_is_the_captured_machine(tmp_path):
    d = diff_of(capture_of_real_machine(tmp_path))
    assert d.ok, d.differences
    whats = [r.what for r in d.rows]
    assert whats[:5] == ["CPUs", "node 0 CPUs", "node 1 CPUs", "node 0 distances", "node 1 distances"]
    assert {"SMT siblings", "packages", "clusters", "LLC groups (L3)", "sched-domain tree", "sched-domain flags"} <= set(whats)
    rows = {r.what: r for r in d.rows}
    # In the capture's numbering: smt-last, CPU 0's sibling is 16.
    assert rows["SMT siblings"].capture.startswith("16 groups: 0,16 | 1,17")
    assert rows["sched-domain tree"].capture == "CPU 0: SMT 0,16 > MC 0-1,16-17 > DIE 0-7,16-23 > NUMA 0-31"
    assert all(r.status == "same" for r in d.rows)
    text = "\n".join(topodiff.render_text(d, "t"))
    assert text.endswith("identical: the guest sees the captured machine")


def test_each_difference_is_named(tmp_path):
    def edit(path, content):
        if path.endswith("node/node0/distance"):
            return path, "10 21"
        if path.endswith("node/node1/distance"):
            return path, "21 10"
        return path, content

    def guest_edit(g):  # a guest kernel that lost guest CPU 1's (spec CPU 16's) SMT sibling
        g.cpus[1].lists["thread_siblings_list"] = (1,)
        g.cpus[1].lists.pop("core_cpus_list", None)

    # The capture's distances are 21 where the recorded guest (booted from the catalog's
    # zen3-2s-mini) saw 32, and one guest CPU lost its sibling.
    d = diff_of(capture_of_real_machine(tmp_path, edit), guest_edit)
    assert not d.ok
    named = {r.what: r for r in d.differences}
    assert set(named) >= {"node 0 distances", "node 1 distances"}, named
    assert named["node 0 distances"].capture == "10 21" and named["node 0 distances"].guest == "10 32"
    smt = named["SMT siblings"]
    assert smt.why == "CPU 16: capture 0,16, guest 16; 1 CPUs differ", smt
    lines = topodiff.render_text(d, "t")
    assert any(line.startswith("  node 0 distances:") for line in lines), lines
    assert f"{len(d.differences)} differences:" in lines


def test_known_deviation_listed_apart(tmp_path):
    """A capture whose L3 spans both nodes of a socket (not SNC: AMD): the importer splits it
    at node boundaries and names it; the diff shows it as known, not as a difference."""
    view = sysfs.read_capture(capture_of_real_machine(tmp_path))
    for cv in view.cpus.values():
        sock = tuple(o for o, ov in view.cpus.items() if ov.package == cv.package)
        cv.caches = [sysfs.Cache(x.level, x.type, sock) if x.level == 3 else x for x in cv.caches]
        cv.lists.pop("cluster_cpus_list", None)
        cv.domains = []  # the synthetic guest below has no tree either
    # Two nodes per socket, so the socket-wide L3 crosses nodes.
    view.nodes = {0: (0, 1, 2, 3, 16, 17, 18, 19), 1: (4, 5, 6, 7, 20, 21, 22, 23), 2: (8, 9, 10, 11, 24, 25, 26, 27), 3: (12, 13, 14, 15, 28, 29, 30, 31)}
    view.distances = {0: (10, 12, 32, 32), 1: (12, 10, 32, 32), 2: (32, 32, 10, 12), 3: (32, 32, 12, 10)}
    text, notes = importer.view_to_spec(view, "x", "x")
    topo = topology.loads(text)
    assert topo.split_llc
    plan = qemu.plan(topo, HOST)
    # The guest: a snapshot of the spec as QEMU builds it (the same groups, translated).
    guest = _guest_of(topo, plan, view)
    d = topodiff.compare(view, topo, plan, guest)
    llc = next(r for r in d.rows if r.what.startswith("LLC groups"))
    assert llc.status == "known" and "node" in llc.why, llc
    assert "LLC crossing nodes" in [n for n, _ in d.deviations]
    assert d.ok, d.differences


def _guest_of(topo: topology.Topology, plan, real: MachineView) -> MachineView:
    """What a faithful guest of *topo* shows, in the guest's numbering."""
    s2g = {s: g for g, s in enumerate(plan.guest_to_spec)}
    v = MachineView()
    for c in topo.cpus:
        g = s2g[c.id]
        rv = real.cpus[c.id]
        core = tuple(sorted(s2g[x] for x in topo.group_of("core", c.id)))
        llc = tuple(sorted(s2g[x] for x in topo.group_of("llc", c.id)))
        cl = tuple(sorted(s2g[x] for x in topo.group_of("cluster" if topo.has_clusters else "core", c.id)))
        v.cpus[g] = sysfs.CpuView(g, rv.package, lists={"thread_siblings_list": core, "cluster_cpus_list": cl},
                                  caches=[sysfs.Cache(3, "Unified", llc)])  # fmt: skip
    v.online = tuple(range(topo.n_cpus))
    for i, n in enumerate(topo.node_ids):
        v.nodes[i] = tuple(sorted(s2g[x] for x in topo.node_cpus(n)))
        v.distances[i] = topo.distances[i]
    return v


def test_bad_capture_is_one_line(tmp_path):
    import pytest

    from lab.errors import UserError

    bad = capture_of_real_machine(tmp_path, lambda p, c: (p, "x") if p.endswith("node/node1/distance") else (p, c))
    with pytest.raises(UserError) as e:
        diff_of(bad)
    assert "node1/distance" in str(e.value) and "\n" not in str(e.value)


def _phone(tmp_path: Path, arch_vendor: str = "ARM"):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _synth_sysfs as ss

    m = ss.build(cores_per_cluster=8)
    m.vendor = arch_vendor
    f = ss.files(m, "list")
    for c in range(8):
        f[f"sys/devices/system/cpu/cpu{c}/cpu_capacity"] = "1024\n" if c >= 6 else ("620\n" if c >= 4 else "250\n")
    view = sysfs.read_capture(ss.write(f, tmp_path / "phone"))
    text, _ = importer.view_to_spec(view, "phone", "cap")
    topo = topology.loads(text)
    plan = qemu.plan(topo, HOST)
    return view, topo, plan


def test_capacities_side_by_side(tmp_path):
    """A big.LITTLE capture: the guest's cpu_capacity per CPU against the capture's."""
    view, topo, plan = _phone(tmp_path)
    guest = _guest_of(topo, plan, view)
    for g, s in enumerate(plan.guest_to_spec):
        guest.cpus[g].capacity = topo.capacities[s]
    d = topodiff.compare(view, topo, plan, guest, cluster_level=False)
    row = next(r for r in d.rows if r.what == "CPU capacities")
    assert row.capture == "0-3: 250 | 4-5: 620 | 6-7: 1024" and row.status == "same", row
    guest.cpus[5].capacity = 1024
    row = next(r for r in topodiff.compare(view, topo, plan, guest).rows if r.what == "CPU capacities")
    assert row.status == "differs" and row.guest == "CPU 5: 1024; 1 CPUs differ", row


def test_x86_hybrid_capacities_are_a_known_deviation(tmp_path):
    view, topo, plan = _phone(tmp_path, "GenuineIntel")
    assert not topo.capacities
    d = topodiff.compare(view, topo, plan, _guest_of(topo, plan, view))
    row = next(r for r in d.rows if r.what == "CPU capacities")
    assert row.status == "known" and "x86" in row.why, row
    assert d.ok
