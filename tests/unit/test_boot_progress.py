"""Progress of the long steps without a VM: a kernel fetched or built on demand by
`lab run`/`verify`/`boot` (session.prepare used to drop the callback), and a boot's
stages moved on by the agent's lines.  With a guest: tests/vm (test_agent_log_vm,
test_verify_vm)."""

import io
from pathlib import Path

import pytest

from lab import host as host_mod
from lab import progress, session, topology
from lab.backends import qemu as backend
from lab.kernel import build as kbuild
from lab.kernel import recipe as krecipe
from lab.kernel import store
from lab.kernel.artifact import KernelArtifact
from lab.plan import VmOptions
from lab.render import qemu

HOST = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test host")


def _kernel(arch: str = "x86_64", name: str = "fake") -> KernelArtifact:
    return KernelArtifact(name=name, arch=arch, image=Path("/nonexistent/bzImage"), release="6.1.0-fake", modules=None,
                          config=None, features=frozenset(), id="fake-1")  # fmt: skip


@pytest.fixture
def plain(monkeypatch):
    monkeypatch.setattr(progress, "SLOW_S", 0.0)  # every step says when it ended
    out = io.StringIO()
    return progress.PlainProgress(out), out


def _lines(out: io.StringIO) -> list[str]:
    return [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]


def test_a_debian_kernel_fetched_on_demand_is_a_step(monkeypatch, plain):
    p, out = plain
    monkeypatch.setattr(host_mod, "probe", lambda: HOST)
    monkeypatch.setattr(store, "entries", lambda: [])  # not fetched yet

    def fetch(arch, refresh=False, name="debian", progress=None):
        progress.update("apt-get download linux-image-6.1.0-99-amd64")
        return _kernel(arch, "debian")

    import lab.kernel as kernel_mod

    monkeypatch.setattr(kernel_mod, "fetch_debian", fetch)
    monkeypatch.setattr(progress, "_PLAIN_UPDATE_EVERY_S", 0.0)
    s = session.prepare(topology.load("zen3-2s-mini"), VmOptions(kernel="debian"), progress=p)
    assert s.kernel.name == "debian"
    lines = _lines(out)
    assert lines[0] == "fetch: Debian's x86_64 kernel (debian; apt-get download, once)"
    assert lines[1] == "fetch: apt-get download linux-image-6.1.0-99-amd64"
    assert lines[2].startswith("fetch: done (")


def test_a_recipe_built_on_demand_is_a_step_fed_by_the_build(monkeypatch, plain):
    p, out = plain
    monkeypatch.setattr(host_mod, "probe", lambda: HOST)
    monkeypatch.setattr(progress, "_PLAIN_UPDATE_EVERY_S", 0.0)
    monkeypatch.setattr(kbuild, "lookup_built", lambda r: None)

    def build(r, progress):
        progress("CC", "kernel/sched/fair.o")
        return _kernel()

    monkeypatch.setattr(kbuild, "build", build)
    name = "lab-6.1" if "lab-6.1" in krecipe.names() else pytest.skip("no lab-6.1 recipe")
    session.prepare(topology.load("zen3-2s-mini"), VmOptions(kernel=name), progress=p)
    assert _lines(out)[:2] == ["build: kernel lab-6.1 (once; later runs reuse it)", "build: CC: kernel/sched/fair.o"]
    assert _lines(out)[2].startswith("build: done (")


def _stages(job: backend.GuestJob, p: progress.Progress) -> backend.Stages:
    t = topology.load("zen3-2s-mini")
    plan = qemu.plan(t, HOST, VmOptions(kernel="fake"), kernel_features=frozenset())
    return backend.Stages(p, plan, _kernel(), job)


AGENT = ["lab: ready uptime=3.1", "lab: snapshot uptime=3.9", "lab: job start uptime=4.0",
         "lab: step stream start uptime=4.1", "lab: step stream rc=0 uptime=9.0", "lab: done rc=0 uptime=9.2",
         "lab: sent bytes=10240 tar=0"]  # fmt: skip


def test_a_scenario_boot_is_boot_snapshot_workload_results(plain):
    p, out = plain
    with _stages(backend.GuestJob("#!/bin/sh\n"), p) as st:
        for line in AGENT:
            st.said(line)
    starts = [x for x in _lines(out) if not x.split(": ", 1)[-1].startswith("done (")]
    names = [x.split(":")[0] for x in starts]
    assert names[0] == "boot" and starts[0] == "boot: zen3-2s-mini, 32 vCPUs, fake (6.1.0-fake), tcg"
    assert [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n] == ["boot", "snapshot", "workload", "results"]
    assert [x.split(":")[0] for x in _lines(out) if ": done (" in x] == ["boot", "snapshot", "workload", "results"]


def test_a_command_boot_has_no_snapshot_and_is_called_command(plain):
    p, out = plain
    with _stages(backend.GuestJob("#!/bin/sh\n", {"LAB_SNAPSHOT": "0"}, label="command"), p) as st:
        for line in AGENT:
            st.said(line)
    names = [x.split(":")[0] for x in _lines(out) if ": done (" in x]
    assert names == ["boot", "command", "results"]


def test_a_lost_guest_ends_its_step(plain):
    p, out = plain
    with pytest.raises(RuntimeError), _stages(backend.GuestJob(), p) as st:
        st.said("lab: ready uptime=1.0")
        raise RuntimeError("lost")
    assert _lines(out)[-1].startswith("snapshot: done (") and not p._steps


def test_an_image_layer_made_once_is_a_step_and_a_cached_one_is_silent(monkeypatch, tmp_path, plain):
    from lab.image import initramfs

    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    p, out = plain

    def fill(root: Path) -> None:
        (root / "hello").write_text("hi\n")

    first = initramfs.cached_tree_layer("workloads", "k1", fill, p)
    assert _lines(out)[0] == "image: the guest's workloads layer (once)" and _lines(out)[1].startswith("image: done (")
    n = len(out.getvalue())
    assert initramfs.cached_tree_layer("workloads", "k1", fill, p) == first
    assert len(out.getvalue()) == n  # cached: nothing to say


def test_the_agents_log_is_read_whole_across_a_rollover(tmp_path):
    """libvirt's virtlogd renames a file channel to .0 at 2 MiB and starts a new file:
    the lines lab had not read yet from the old file come first, none lost or repeated."""
    p = qemu.plan(topology.load("zen3-2s-mini"), HOST, VmOptions(kernel="fake"), kernel_features=frozenset())
    log = tmp_path / "agent.log"
    log.write_bytes(b"lab: one\nlab: tw")
    said = backend.AgentLog(log, p, tmp_path / "console.log")
    said.read(0.1)
    with open(log, "ab") as f:
        f.write(b"o\nlab: three\n" + b"x" * 100 + b"\n")  # written, then the file rolls over
    log.rename(tmp_path / "agent.log.0")
    log.write_bytes(b"lab: four\nlab: ready uptime=1.0\n")
    said.read(0.2)
    assert [line for _, line in said.events] == ["lab: one", "lab: two", "lab: three", "x" * 100, "lab: four", "lab: ready uptime=1.0"]
    assert said.ready_s == 0.2
    said.read(0.3)  # nothing new: nothing repeated
    assert len(said.events) == 6


def _lost_then(tmp_path, monkeypatch, second_says: list[str]):
    """_boot() with a fake QEMU: the first boot is lost (console and registers written,
    the agent silent), the second says *second_says* and ends."""
    from lab.errors import LostGuest
    from lab.render import qemu as render_q

    p = qemu.plan(topology.load("zen3-2s-mini"), HOST, VmOptions(kernel="fake"), kernel_features=frozenset())
    files = render_q.boot_files(p, Path("/nonexistent/vmlinux"))
    notes: list[str] = []
    said = backend.AgentLog(tmp_path / files.agent_log, p, tmp_path / files.console)
    said.on_note = notes.append
    calls = []

    def run_qemu(argv, run_dir, said, lost, mon, *, ready_within, finish_within):
        calls.append(len(calls) + 1)
        (run_dir / files.console).write_text(f"console of boot {len(calls)}\n")
        if len(calls) == 1:
            (run_dir / "lost.registers").write_text("CPU#0 RIP=ffffffff81108630\n")
            raise LostGuest("guest never reported ready within 126s; the agent said nothing", "tail")
        (run_dir / files.agent_log).write_text("".join(f"{x}\n" for x in second_says))
        said.read(1.0)
        if not said.events:
            raise LostGuest("guest never reported ready within 126s; the agent said nothing", "tail")
        return 0

    monkeypatch.setattr(backend, "_run_qemu", run_qemu)
    monkeypatch.setattr(backend, "collect", lambda *a, **k: k.get("lost_boots"))
    return lambda: backend._boot(p, _kernel(), tmp_path, files, ["qemu"], tmp_path / files.console, said, 60), calls, notes


def test_a_tcg_boot_lost_before_the_agent_spoke_is_booted_once_more_and_kept(tmp_path, monkeypatch):
    boot, calls, notes = _lost_then(tmp_path, monkeypatch, ["lab: ready uptime=3.1", "lab: done rc=0 uptime=4"])
    lost = boot()
    assert calls == [1, 2]
    assert lost == ["guest never reported ready within 126s; the agent said nothing"]
    assert (tmp_path / "console.log.boot1").read_text() == "console of boot 1\n"
    assert (tmp_path / "lost.registers.boot1").read_text().startswith("CPU#0")
    assert not (tmp_path / "lost.registers").exists()
    assert (tmp_path / "lost.boot1").read_text().startswith("guest never reported ready")
    assert notes == ["lost before /init (guest never reported ready within 126s; the agent said nothing); booting again"]


def test_a_boot_lost_twice_is_an_error_after_two_boots(tmp_path, monkeypatch):
    from lab.errors import LostGuest

    boot, calls, _ = _lost_then(tmp_path, monkeypatch, [])
    with pytest.raises(LostGuest, match="never reported ready"):
        boot()
    assert calls == [1, 2] and (tmp_path / "console.log.boot1").exists()


def test_a_boot_lost_after_the_agent_spoke_is_not_booted_again(tmp_path, monkeypatch):
    from lab.errors import LostGuest

    boot, _, _ = _lost_then(tmp_path, monkeypatch, [])

    def spoke_then_lost(argv, run_dir, said, lost, mon, **kw):
        (run_dir / "agent.log").write_text("lab: onlining cpu=9 uptime=2.0\n")
        said.read(1.0)
        raise LostGuest("guest never reported ready within 126s; the agent's last word ...")

    monkeypatch.setattr(backend, "_run_qemu", spoke_then_lost)
    with pytest.raises(LostGuest):
        boot()
    assert not (tmp_path / "console.log.boot1").exists()
