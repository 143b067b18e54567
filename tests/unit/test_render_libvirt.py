"""libvirt rendering: golden domain XML per catalog topology (the same plan as the QEMU
argv), what libvirt 9.0 cannot express, and the vng command line.

Regenerate the golden files after an intended change with:
    LAB_REGEN=1 .venv/bin/pytest tests/unit/test_render_libvirt.py
and review the diff.
"""

import os
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner

from lab import cpulist, topology
from lab import host as host_mod
from lab.cli import main
from lab.errors import UserError
from lab.plan import VmOptions
from lab.render import libvirt, qemu, vng

HOST_72 = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test host")
HOST_KVM = host_mod.Host(arch="x86_64", cpus=64, qemu={"x86_64": (9, 2, 0), "arm64": (9, 2, 0)}, kvm=True, kvm_reason="ok")
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "libvirt"
LIBVIRT_90 = (9, 0, 0)


def plan(name, host=HOST_72, version=LIBVIRT_90, **opts):
    p = qemu.plan(topology.load(name), host, VmOptions(backend="libvirt", **opts))
    return libvirt.adapt(p, version)


def xml(p) -> str:
    files = qemu.boot_files(p, Path("/KERNEL"))
    return libvirt.domain_xml(p, files, name="lab-RUN", run_dir="/RUN", owner=(1000, 1000))


def render(name: str) -> str:
    try:
        p = plan(name)
    except UserError as e:
        return f"refused: {e}\n"
    return xml(p) + "".join(f"<!-- {n} -->\n" for n in p.notes)


@pytest.mark.parametrize("name", topology.catalog_names())
def test_golden_domain_xml(name):
    got = render(name)
    path = GOLDEN / f"{name}.xml"
    if os.environ.get("LAB_REGEN") == "1":
        path.write_text(got)
    assert path.exists(), f"no golden file {path}; run LAB_REGEN=1 pytest {__file__}"
    assert got == path.read_text(), f"{name}: domain XML changed; if intended, LAB_REGEN=1 and review the diff"


@pytest.mark.parametrize("name", [n for n in topology.catalog_names() if not render(n).startswith("refused")])
def test_domain_is_the_plans_machine(name):
    """Every vCPU in exactly its spec node, the spec's distances for every ordered pair,
    the -smp shape, and ACPI on for x86 (without it the guest reads every distance as 20);
    arm64 reads them from lab's device tree, and libvirt refuses ACPI there without UEFI."""
    t = topology.load(name)
    p = plan(name)
    dom = ET.fromstring(xml(p))
    if t.arch == "arm64":
        assert dom.find("features/acpi") is None and dom.find("os/dtb") is not None
    else:
        assert dom.find("features/acpi") is not None and dom.find("os/dtb") is None
    topo = dom.find("cpu/topology").attrib
    n = 1
    for k in ("sockets", "dies", "clusters", "cores", "threads"):
        n *= int(topo.get(k, 1))
    assert n == t.n_cpus == int(dom.find("vcpu").text)
    assert f"{t.n_cpus},sockets={topo['sockets']}" in p.smp
    seen = []
    cells = dom.findall("cpu/numa/cell")
    assert len(cells) == t.n_nodes
    for i, cell in enumerate(cells):
        guest = cpulist.parse(cell.get("cpus"))
        assert {t.cpus[g].node for g in guest} == {t.node_ids[i]}
        seen += guest
        got = [int(s.get("value")) for s in cell.findall("distances/sibling")]
        assert tuple(got) == tuple(t.distances[i])
    assert sorted(seen) == list(range(t.n_cpus))
    assert sum(int(c.get("memory")) for c in cells) == int(dom.find("memory").text)
    assert dom.find("os/cmdline").text == qemu.cmdline(p)  # one kernel command line for both backends
    ports = {c.find("target").get("name"): (c.get("type"), c.find("source").attrib) for c in dom.findall("devices/channel")}
    # The results go through a unix channel lab reads over libvirt's stream API: a file
    # channel goes through virtlogd, which cuts files at 2 MiB (see render.libvirt).
    assert ports == {"lab.log": ("file", {"path": "/RUN/agent.log"}), "lab.out": ("unix", {"mode": "bind"})}


def test_arm64_clusters_need_libvirt_10_1():
    with pytest.raises(UserError, match=r"kunpeng920-2s-mini: 4 clusters per socket need .*libvirt 10\.1\.0\+; this is libvirt 9\.0\.0 \(use --backend qemu, or Debian's libvirt 11\.3: apt-get install -t bookworm-backports libvirt-daemon-system\)$"):
        plan("kunpeng920-2s-mini")
    p = plan("kunpeng920-2s-mini", version=(10, 1, 0))
    dom = ET.fromstring(xml(p))
    assert dom.find("cpu/topology").attrib == {"sockets": "2", "dies": "1", "clusters": "4", "cores": "4", "threads": "1"}
    assert dom.find("os/type").get("arch") == "aarch64" and dom.find("features/gic").get("version") == "3"


def test_tcg_threading_is_named_when_libvirt_cannot_set_it():
    p = plan("zen3-2s-mini")  # 32 vCPUs on 2 host CPUs: the QEMU backend runs thread=single
    assert p.tcg_threads == "multi"
    assert any("libvirt cannot set TCG threading" in n for n in p.notes)


def test_tcg_threading_runs_as_planned_through_lab_s_wrapper():
    p = libvirt.adapt(qemu.plan(topology.load("zen3-2s-mini"), HOST_72, VmOptions(backend="libvirt")), LIBVIRT_90, tcg_wrapper=True)
    assert p.tcg_threads == "single" and not any("TCG threading" in n for n in p.notes)
    files = qemu.boot_files(p, Path("/KERNEL"))
    dom = ET.fromstring(libvirt.domain_xml(p, files, name="lab-RUN", run_dir="/RUN", emulator="/var/tmp/lab-0/qemu-tcg-x"))
    assert dom.findtext("devices/emulator") == "/var/tmp/lab-0/qemu-tcg-x"
    assert "thread=single" in dom.findtext("description")
    assert ET.fromstring(xml(p)).find("devices/emulator") is None  # none asked for: libvirt's default


def test_the_wrapper_is_used_only_where_libvirtd_can_see_it():
    """lab writes the wrapper on this host: a libvirtd here (any transport) runs it, one on
    another host gets QEMU's default threading and the note saying so."""
    import socket

    from lab import session
    from lab.backends import libvirt as backend

    assert backend.is_local("qemu:///system") and backend.is_local("qemu+unix:///system")
    assert backend.is_local("qemu+ssh://root@127.0.0.1:2222/system?keyfile=/k&no_verify=1")
    assert backend.is_local(f"qemu+ssh://{socket.gethostname()}/system")
    assert not backend.is_local("qemu+ssh://root@build-7.example.org/system")
    topo = topology.load("zen3-2s-mini")
    here = session.for_backend(qemu.plan(topo, HOST_72, VmOptions(backend="libvirt")))
    far = session.for_backend(qemu.plan(topo, HOST_72, VmOptions(backend="libvirt", connect="qemu+ssh://far.example/system")))
    assert here.tcg_threads == "single" and not any("TCG threading" in n for n in here.notes)
    assert far.tcg_threads == "multi" and any("libvirt cannot set TCG threading" in n for n in far.notes)


def _wrapper(tmp_path, binary, threads="single") -> Path:
    w = tmp_path / "wrapper"
    w.write_text(libvirt.tcg_wrapper_script(binary, threads))
    w.chmod(0o755)
    return w


def _wrapped_argv(tmp_path, threads, *argv):
    """The argv the wrapper execs, through a stand-in QEMU that prints its arguments."""
    import subprocess

    fake = tmp_path / "qemu system"  # a space in the path: quoted
    fake.write_text('#!/bin/sh\nfor a do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    return subprocess.run([str(_wrapper(tmp_path, str(fake), threads)), *argv], capture_output=True, text=True, check=True).stdout.splitlines()


def test_the_wrapper_adds_tcg_threading_to_libvirt_s_accel_only(tmp_path):
    argv = ["-name", "guest=a b", "-accel", "tcg", "-machine", "none,accel=kvm:tcg", "-append", "x -accel tcg y", "tcg"]
    want = ["-name", "guest=a b", "-accel", "tcg,thread=single", "-machine", "none,accel=kvm:tcg", "-append", "x -accel tcg y", "tcg"]
    assert _wrapped_argv(tmp_path, "single", *argv) == want
    assert _wrapped_argv(tmp_path, "single", "-accel", "tcg,tb-size=64") == ["-accel", "tcg,tb-size=64,thread=single"]
    assert _wrapped_argv(tmp_path, "single", "-accel", "tcg,thread=multi") == ["-accel", "tcg,thread=multi"]
    assert _wrapped_argv(tmp_path, "single", "-accel", "kvm") == ["-accel", "kvm"]
    assert _wrapped_argv(tmp_path, "single") == []  # libvirt's capability probe passes no -accel


def test_the_wrapper_really_makes_qemu_run_one_tcg_thread(tmp_path):
    """The real QEMU through the wrapper: 8 vCPUs on one TCG thread, as -accel tcg,thread=single."""
    import shutil
    import subprocess
    import time

    binary = shutil.which("qemu-system-x86_64")
    if binary is None:
        pytest.skip("qemu-system-x86_64 missing (scripts/setup.sh installs it)")

    def threads(path):
        p = subprocess.Popen([path, "-name", "t,debug-threads=on", "-accel", "tcg", "-smp", "8", "-m", "64", "-nodefaults", "-display", "none", "-S"])
        try:
            time.sleep(1.5)
            vcpus = [t for t in Path(f"/proc/{p.pid}/task").iterdir() if "TCG" in (t / "comm").read_text()]
            return len(vcpus), Path(f"/proc/{p.pid}/exe").resolve()
        finally:
            p.kill()
            p.wait()

    assert threads(binary)[0] == 8  # QEMU's default: MTTCG, one thread per vCPU
    n, exe = threads(str(_wrapper(tmp_path, binary)))
    assert n == 1 and exe == Path(binary).resolve()  # exec'd: libvirt's pid is QEMU's


def test_kvm_domain_passes_the_host_cpu():
    p = plan("zen3-2s-mini", host=HOST_KVM)
    dom = ET.fromstring(xml(p))
    assert dom.get("type") == "kvm" and dom.find("cpu").get("mode") == "host-passthrough"


def test_arm64_tcg_domain_gets_qemus_max_cpu_as_the_qemu_backend_does():
    """libvirt's CPU map has no "max" model and no pauth or sme feature: the domain asks
    for mode="maximum" (-cpu max) and QEMU's -cpu comes verbatim after it (the last wins)."""
    p = plan("tensor-gs101")
    dom = ET.fromstring(xml(p))
    cpu = dom.find("cpu")
    assert cpu.get("mode") == "maximum" and cpu.find("model") is None and cpu.find("feature") is None
    q = "{http://libvirt.org/schemas/domain/qemu/1.0}"
    args = [a.get("value") for a in dom.iter(f"{q}arg")]
    assert args[args.index("-cpu") + 1] == qemu.ARM_MODEL == "max,pauth=off,sve=off,sme=off"
    # An arm model libvirt knows, with only SVE options, stays libvirt's own element.
    p2 = plan("tensor-gs101", cpu_model="cortex-a72")
    dom2 = ET.fromstring(xml(p2))
    assert dom2.find("cpu/model").text == "cortex-a72" and not list(dom2.iter(f"{q}arg"))


def test_render_cli_libvirt_and_vng():
    r = CliRunner().invoke(main, ["topo", "render", "zen3-2s-mini", "--format", "libvirt"])
    assert r.exit_code == 0, r.output
    dom = ET.fromstring(r.stdout)
    assert dom.find("cpu/topology").attrib == {"sockets": "2", "dies": "4", "cores": "2", "threads": "2"}
    r = CliRunner().invoke(main, ["topo", "render", "zen3-2s-mini", "--format", "vng"])
    assert r.exit_code == 0, r.output
    assert "--cpus 32,sockets=2,dies=4,cores=2,threads=2" in r.stdout


def test_render_cli_refuses_what_libvirt_cannot_express():
    r = CliRunner().invoke(main, ["topo", "render", "kunpeng920-2s-mini", "--format", "libvirt"])
    assert r.exit_code == 2
    assert r.output.startswith("lab: error: kunpeng920-2s-mini: 4 clusters per socket") and "libvirt 10.1.0+" in r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_connect_goes_with_the_libvirt_backend():
    r = CliRunner().invoke(main, ["verify", "zen3-2s-mini", "--connect", "qemu:///system"])
    assert r.exit_code == 2 and "--connect qemu:///system: a libvirt URI, for --backend libvirt" in r.output


def test_unreachable_uri_is_one_line():
    uri = "qemu+unix:///system?socket=/nonexistent/lab-test.sock"
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--backend", "libvirt", "--connect", uri, "--", "true"])
    assert r.exit_code == 2, r.output
    line = r.output.strip().splitlines()[-1]
    assert line.startswith(f"lab: error: cannot connect to libvirt at {uri}: ") and "/nonexistent/lab-test.sock" in line


# ---- vng ---------------------------------------------------------------------------------


def test_vng_argv_carries_the_whole_topology():
    p = vng.adapt(qemu.plan(topology.load("numa4-96-mini"), HOST_72, VmOptions(backend="vng")))
    a = vng.argv(p, qemu.boot_files(p, Path("/KERNEL")), run_dir="/RUN", agent="sh /RUN/vng-agent.sh")
    t = p.topo
    assert a[a.index("--cpus") + 1] == p.smp
    numa = [a[i + 1] for i, x in enumerate(a) if x == "--numa"]
    assert len(numa) == t.n_nodes
    for i, spec in enumerate(numa):
        mem, *cpus = spec.split(",")
        guest = cpulist.parse(",".join(c.removeprefix("cpus=") for c in cpus))
        assert mem == f"{t.memory_mb[i]}M" and {t.cpus[g].node for g in guest} == {t.node_ids[i]}
    dist = {a[i + 1] for i, x in enumerate(a) if x == "--numa-distance"}
    assert dist == {f"{i},{j}={t.distances[i][j]}" for i in range(t.n_nodes) for j in range(t.n_nodes) if i != j}
    opts = next(x for x in a if x.startswith("--qemu-opts=")).removeprefix("--qemu-opts=")
    assert opts.startswith(f"-cpu {p.cpu_model} ") and "name=lab.log" in opts and "name=lab.out" in opts
    append = a[a.index("--append") + 1]
    assert "console=" not in append and "rdinit=" not in append and "panic=-1" in append
    assert a[-2:] == ["--exec", "sh /RUN/vng-agent.sh"]


def test_vng_refuses_arm64():
    p = qemu.plan(topology.load("kunpeng920-2s-mini"), HOST_72, VmOptions(backend="vng"))
    with pytest.raises(UserError, match="--backend vng boots the host's root file system"):
        vng.adapt(p)


def test_vng_agent_unpacks_layers_in_order():
    s = vng.agent_script([Path("/c/base.cpio"), Path("/r/job.cpio")])
    assert s.index("/c/base.cpio") < s.index("/r/job.cpio") < s.index("exec chroot /tmp/lab-root /init")


def test_vng_build_adds_labs_fragments():
    a = vng.build_argv([Path("/k/lab.config"), Path("/k/lab-x86_64.config")], vng="vng", jobs=2)
    assert a == ["vng", "--build", "--skip-modules", "--config", "/k/lab.config", "--config", "/k/lab-x86_64.config", "--jobs", "2"]


def test_vng_refuses_a_kernel_without_9p():
    p = qemu.plan(topology.load("zen3-2s-mini"), HOST_72, VmOptions(backend="vng"))
    cfg = dict.fromkeys(vng.VNG_NEEDS, "y") | {"9P_FS": "n", "NET_9P": "n"}
    with pytest.raises(UserError, match=r"has no CONFIG_NET_9P, CONFIG_9P_FS \(y or m\)"):
        vng.adapt(p, cfg)
    assert vng.adapt(p, dict.fromkeys(vng.VNG_NEEDS, "m")).topo is p.topo  # modules: vng's initramfs loads them
    assert vng.adapt(p, dict.fromkeys(vng.VNG_NEEDS)).topo is p.topo  # no config to read: vng will say


def test_vng_built_config_is_checked_against_labs_fragments(tmp_path):
    """vng's own minimal config has SCHED_MC off: a build where lab's fragment did not
    stick is named, symbol and fragment line."""
    from lab.backends.vng import config_problems

    frag = tmp_path / "lab.config"
    frag.write_text("CONFIG_SCHED_MC=y\nCONFIG_NUMA=y\n# CONFIG_DEBUG_PREEMPT is not set\n")
    built = tmp_path / ".config"
    built.write_text("# CONFIG_SCHED_MC is not set\nCONFIG_NUMA=y\n")
    assert config_problems(built, [frag]) == [f"CONFIG_SCHED_MC is n, {frag}:1 asks y"]
    built.write_text("CONFIG_SCHED_MC=y\nCONFIG_NUMA=y\n")
    assert config_problems(built, [frag]) == []


def test_vng_kernel_tree_refuses_recipe():
    tree = Path(__file__).resolve().parents[1] / "fixtures" / "fakelinux"
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--kernel-tree", str(tree), "--backend", "vng", "--recipe", "lab-6.1"])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("lab: error: --recipe builds with lab's build; with --backend vng the tree is built by vng --build")


def test_interactive_console_is_qemu_only():
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--backend", "vng"])
    assert r.exit_code == 2, r.output
    assert r.output.strip().splitlines()[-1] == (
        "lab: error: an interactive console is --backend qemu only; give a command after -- with --backend vng"
    )


def test_boot_dry_run_prints_the_domain(tmp_path):
    r = CliRunner().invoke(main, ["boot", "xeon-2s22c-mini", "--backend", "libvirt", "--dry-run"])
    assert r.exit_code == 0, r.output
    dom = ET.fromstring(r.stdout)
    assert dom.find("os/initrd").text == "$RUN_DIR/initrd.cpio" and dom.find("features/acpi") is not None


HOST_10 = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (10, 0, 13), "arm64": (10, 0, 13)}, kvm=False, kvm_reason="test host")


def test_x86_clusters_libvirt_refuses_and_vng_runs_lab_s_qemu_with_the_smp_cache():
    """QEMU makes an x86 cluster a module with its L2 (-smp modules=, -machine smp-cache):
    libvirt's domain XML has neither, so it refuses naming the way that works; vng gets
    the plan's QEMU (a lab-built one: vng's --qemu) and the smp-cache merged into its
    own -machine."""
    with pytest.raises(UserError, match=r"jacobsville-24c-mini: x86 clusters need QEMU's -smp modules= and -machine smp-cache, which libvirt's domain XML cannot express \(libvirt 9\.0\.0\); use --backend qemu"):
        plan("jacobsville-24c-mini", HOST_10)
    built = "/cache/lab/qemu/store/10.0.13-x/bin/qemu-system-x86_64"
    p = qemu.plan(topology.load("jacobsville-24c-mini"), HOST_10, VmOptions(backend="vng"))
    from dataclasses import replace

    p = vng.adapt(replace(p, qemu=built))
    a = vng.argv(p, qemu.boot_files(p, Path("/KERNEL")), run_dir="/RUN", agent="sh /RUN/vng-agent.sh")
    assert a[a.index("--qemu") + 1] == built and a[a.index("--cpus") + 1] == "12,sockets=1,modules=3,cores=4,threads=1"
    opts = next(x for x in a if x.startswith("--qemu-opts="))
    assert "-machine smp-cache.0.cache=l2,smp-cache.0.topology=module" in opts
    # The system's QEMU is vng's own pick from PATH (its --qemu wants a path).
    p72 = vng.adapt(qemu.plan(topology.load("xeon-2s22c-mini"), HOST_72, VmOptions(backend="vng")))
    a = vng.argv(p72, qemu.boot_files(p72, Path("/KERNEL")), run_dir="/RUN")
    assert "--qemu" not in a and "-machine" not in next(x for x in a if x.startswith("--qemu-opts="))


def _schemas_or_skip():
    """libvirt 11.3's domain schemas (`lab qemu fetch --libvirt-schemas`; setup.sh --test
    fetches them, so in CI this never skips) and xmllint (libxml2-utils)."""
    import shutil

    from lab import emulators

    got = emulators.libvirt_schemas()
    why = None
    if shutil.which("xmllint") is None:
        why = "xmllint missing: apt-get install libxml2-utils (scripts/setup.sh does)"
    elif got is None:
        why = "libvirt 11.3's schemas not fetched: lab qemu fetch --libvirt-schemas (scripts/setup.sh --test does)"
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return got


def _validates(rng: Path, doc: str, tmp_path: Path) -> tuple[bool, str]:
    import subprocess

    f = tmp_path / "domain.xml"
    f.write_text(doc)
    cp = subprocess.run(["xmllint", "--noout", "--relaxng", str(rng), str(f)], capture_output=True, text=True, timeout=120)
    return cp.returncode == 0, (cp.stderr or cp.stdout).strip().splitlines()[0] if (cp.stderr or cp.stdout).strip() else ""


LIBVIRT_113 = (11, 3, 0)


@pytest.mark.parametrize("name", topology.catalog_names())
def test_domain_xml_is_valid_for_libvirt_11_3(name, tmp_path):
    """Issue 32 item 5: Debian's bookworm-backports libvirt 11.3 (what lets --backend libvirt
    boot arm64 clusters) accepts every domain lab writes for it, the clusters ones too:
    checked against that libvirt's own RELAX NG schemas, without installing it."""
    version, folder = _schemas_or_skip()
    assert version.startswith("11.3"), version
    host10 = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (10, 0, 2), "arm64": (10, 0, 2)}, kvm=False, kvm_reason="test host")
    try:
        p = plan(name, host=host10, version=LIBVIRT_113)
    except UserError as e:  # x86 clusters: QEMU's modules, which no libvirt version has
        assert "domain XML cannot express" in str(e) and topology.load(name).has_clusters, e
        return
    ok, why = _validates(folder / "domain.rng", xml(p), tmp_path)
    assert ok, f"{name}: libvirt 11.3's schema refuses lab's domain: {why}"


def test_libvirt_9_0s_schema_refuses_the_clusters_domain_11_3_takes(tmp_path):
    """Both sides: the system's libvirt 9.0 schema refuses <topology clusters=...> (why
    lab refuses arm64 clusters on 9.0), 11.3's accepts the same document."""
    _, folder = _schemas_or_skip()
    system = Path("/usr/share/libvirt/schemas/domain.rng")
    if not system.is_file():
        pytest.skip("the system's libvirt schemas are missing (libvirt0)")
    doc = xml(plan("kunpeng920-2s-mini", version=LIBVIRT_113))
    assert 'clusters="4"' in doc
    assert _validates(folder / "domain.rng", doc, tmp_path)[0]
    ok, why = _validates(system, doc, tmp_path)
    assert not ok and why, "libvirt 9.0's schema took a clusters topology"
