"""The guest's CPU numbering made usable: `labcpu` in the guest (run here under the
host's busybox, the same binary the guest gets), the one-line note `lab boot` prints,
numbering.json in the run directory, and the tools `lab boot` stages."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import cpulist, session, topology
from lab import host as host_mod
from lab.cli import main
from lab.cli.vm import boot_tools
from lab.image import tools as tools_mod
from lab.image.initramfs import GUEST
from lab.kernel.artifact import KernelArtifact
from lab.plan import NUMBERING_FILE, VmOptions
from lab.render import qemu

HOST = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test host")


def _session(name: str) -> session.Session:
    t = topology.load(name)
    k = KernelArtifact(name="fake", arch=t.arch, image=Path("/nonexistent/Image"), release="6.1.0", modules=None,
                       config=None, features=frozenset(), id="fake-1")  # fmt: skip
    return session.Session(qemu.plan(t, HOST, VmOptions(kernel="fake"), kernel_features=frozenset(), kernel=k.ref()), k)

BUSYBOX = shutil.which("busybox")
pytestmark = pytest.mark.skipif(BUSYBOX is None, reason="busybox missing: apt-get install busybox-static (scripts/setup.sh does)")


def labcpu(plan, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", **plan.guest_env()}
    return subprocess.run([BUSYBOX, "sh", str(GUEST / "labcpu"), *args], env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("name", ["zen3-2s-mini", "icelake-2s-mini", "xeon-2s22c-mini", "numa4-96-mini"])
def test_labcpu_translates_both_ways(name):
    plan = _session(name).plan
    t = plan.topo
    g2s = plan.guest_to_spec
    for n in t.node_ids:
        spec = t.node_cpus(n)
        guest = sorted(plan.spec_to_guest[c] for c in spec)
        # spec -> guest: what the guest's sysfs says node n holds ...
        r = labcpu(plan, cpulist.format(spec))
        assert r.returncode == 0 and r.stdout.strip() == cpulist.format(guest), r
        # ... and back: the guest's node cpulist in the spec's numbering.
        r = labcpu(plan, "-r", cpulist.format(guest))
        assert r.returncode == 0 and r.stdout.strip() == cpulist.format(spec), r
    # The whole map, one "spec guest" pair per guest CPU.
    r = labcpu(plan)
    assert [tuple(map(int, line.split())) for line in r.stdout.splitlines()] == [(s, g) for g, s in enumerate(g2s)]


def test_labcpu_on_smt_last_gives_the_spec_siblings():
    plan = _session("zen3-2s-mini").plan  # smt-last: cpu0's sibling is 16; QEMU's is 1
    assert labcpu(plan, "0,16").stdout.strip() == "0-1"
    assert labcpu(plan, "-r", "0-3").stdout.strip() == "0-1,16-17"


@pytest.mark.parametrize(
    "args, message",
    [(("32",), "spec CPU 32 is not in this topology"), (("-r", "32"), "guest CPU 32 does not exist"),
     (("0,x",), "not a cpulist"), (("3-1",), "backwards range 3-1")],
)  # fmt: skip
def test_labcpu_refuses_what_is_not_there(args, message):
    r = labcpu(_session("zen3-2s-mini").plan, *args)
    assert r.returncode == 2 and message in r.stderr and not r.stdout


def test_labcpu_without_a_map_says_so():
    r = subprocess.run([BUSYBOX, "sh", str(GUEST / "labcpu"), "0"], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert r.returncode == 2 and "LAB_CPU_MAP is unset" in r.stderr


def test_note_names_an_example_and_the_helper():
    note = _session("zen3-2s-mini").plan.numbering_note()
    assert note is not None
    assert "differ from zen3-2s-mini's (smt-last numbering): spec cpu16 is guest cpu1" in note
    assert "`labcpu 0,16`" in note and "labcpu -r" in note
    assert "\n" not in note


@pytest.mark.parametrize("name", ["numa4-96-mini", "kunpeng920-2s-mini"])
def test_no_note_when_the_guest_numbers_as_the_spec(name):
    assert _session(name).plan.numbering_note() is None


def test_run_directory_says_which_files_are_in_which_numbering(tmp_path):
    plan = _session("zen3-2s-mini").plan
    plan.write(tmp_path)
    rec = json.loads((tmp_path / NUMBERING_FILE).read_text())
    assert rec["numbering"] == "translated" and rec["spec_numbering"] == "smt-last"
    assert rec["guest_to_spec"][:4] == [0, 16, 1, 17]
    assert "out/" in rec["guest"] and "results.json" in rec["spec"]


def test_boot_stages_the_commands_own_tool(monkeypatch):
    host = tools_mod.host_arch()
    have = [t for t in tools_mod.DEFAULT_TOOLS if tools_mod.unpackable(host, [t]) is None]
    if not have:
        pytest.skip("no host tool installed (scripts/setup.sh installs them)")
    t = have[0]
    assert boot_tools(host, (), (t, "-h")) == (t,)
    assert boot_tools(host, (t,), (f"/usr/bin/{t}",)) == (t,)  # not twice
    assert boot_tools(host, (), ("cat", "/proc/cpuinfo")) == ()
    other = "arm64" if host == "x86_64" else "x86_64"
    from lab.image import debian_pkgs

    pkg = debian_pkgs.Package(debian_pkgs.package_of(t), "1.0-1", "admin", ())
    monkeypatch.setattr(debian_pkgs, "ensure_lists", lambda arch, refresh=False: None)
    monkeypatch.setattr(debian_pkgs, "apt_show", lambda arch: lambda names: {pkg.name: pkg})
    debian_pkgs.resolve.cache_clear()
    assert boot_tools(other, (), (t,)) == (t,)  # Debian's package of that arch
    monkeypatch.setattr(debian_pkgs, "apt_show", lambda arch: lambda names: {})
    debian_pkgs.resolve.cache_clear()
    assert boot_tools(other, (), (t,)) == ()  # no package there: the guest says not found
    debian_pkgs.resolve.cache_clear()


def test_boot_tools_with_no_package_of_the_arch_is_refused_before_anything(monkeypatch):
    from lab.image import debian_pkgs

    monkeypatch.setattr(session, "prepare", lambda *a, **k: pytest.fail("prepared a VM for tools it cannot pack"))
    monkeypatch.setattr(debian_pkgs, "ensure_lists", lambda arch, refresh=False: None)
    monkeypatch.setattr(debian_pkgs, "apt_show", lambda arch: lambda names: {})
    debian_pkgs.resolve.cache_clear()
    r = CliRunner().invoke(main, ["boot", "kunpeng920-2s-mini", "--tools", "numactl", "--", "true"])
    debian_pkgs.resolve.cache_clear()
    assert r.exit_code == 2, r.output
    assert r.output == f"lab: error: --tools: no Debian arm64 package for numactl (numactl) in {debian_pkgs.suite()}: cannot be packed for arm64 guests\n"


@pytest.mark.parametrize("bad", ["../numactl", "numactl,/bin/sh", "a b"])
def test_boot_tools_must_be_program_names(bad):
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--tools", bad, "--", "true"])
    assert r.exit_code == 2 and "is not a program name" in r.output, r.output



def test_every_guest_file_ships_in_the_wheel():
    """The initramfs takes GUEST_FILES from lab/guest/: a wheel without one (labcpu is new)
    would boot no guest at all."""
    import tomllib

    from lab.image.initramfs import GUEST_FILES

    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text()).get("tool", {}).get("setuptools", {}).get("package-data")
    if data is None:
        pytest.skip("pyproject.toml declares no package data (lab is not packaged as a tool from this tree)")
    shipped = set(data.get("lab.guest", []))
    assert {"init.sh", *(src.name for src in GUEST_FILES.values())} <= shipped, shipped
