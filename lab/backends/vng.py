"""Boot a plan through virtme-ng (vng), run a job, collect.

vng boots the kernel with the host's root file system shared read-only (9p) and runs a
command in it.  lab's command unpacks lab's initramfs layers into a tmpfs and runs
lab's agent there as init (render.vng.agent_script): the job, the workloads and the
agent are the ones the QEMU backend boots, and the results come back on lab's own
virtio-serial ports (added with --qemu-opts), so everything after the VM ends is the
QEMU backend's (guest.collect).  vng's own output (its console included) goes to
console.log.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from .. import iterate, paths, proc
from ..errors import BuildError, InfraError, LostGuest, UserError
from ..kernel import recipe as krecipe
from ..kernel.artifact import KernelArtifact
from ..kernel.config import merge, read_config
from ..plan import VmPlan
from ..progress import Progress
from ..progress import of as progress_of
from ..render import qemu as render_qemu
from ..render import vng as render
from . import guest
from .base import Capabilities

# vng's guest init (systemd-tmpfiles, udev, mounts over 9p) before lab's agent, under TCG.
VNG_BOOT_EXTRA_S = 120


def vng_bin() -> Path:
    """vng from lab's own environment (pip's virtme-ng), else from PATH."""
    here = Path(sys.executable).parent / "vng"
    if here.exists():
        return here
    found = shutil.which("vng")
    if found is None:
        raise UserError("--backend vng needs virtme-ng (pip install virtme-ng; sh scripts/setup.sh installs it)")
    return Path(found)


def _env(vng: Path) -> dict[str, str]:
    # vng runs virtme-run by name: it must be on PATH beside vng.
    return {"PATH": f"{vng.parent}{os.pathsep}{os.environ.get('PATH', '')}"}


NAME = "vng"
CAPABILITIES = Capabilities(builds_tree=True, run_dir_named=True)
TREE_BUILD = "vng --build (vng's config + lab's fragments)"  # build_tree()


def adapt(plan: VmPlan, kernel: KernelArtifact | None = None) -> VmPlan:
    """*plan* as vng runs it, checked against the kernel's config (None: no kernel yet)."""
    config = {sym: kernel.config_value(sym) for sym in render.VNG_NEEDS} if kernel is not None else None
    return render.adapt(plan, config)


def dry_run(plan: VmPlan, kernel: KernelArtifact) -> str:
    return shlex.join(dry_run_argv(plan, kernel))


def dry_run_argv(plan: VmPlan, kernel: KernelArtifact) -> list[str]:
    files = render_qemu.boot_files(plan, Path(kernel.image))
    return render.argv(plan, files, vng=str(vng_bin()), agent="sh $RUN_DIR/vng-agent.sh")


def boot(
    plan: VmPlan,
    kernel: KernelArtifact,
    run_dir: Path,
    job: guest.GuestJob | None = None,
    *,
    timeout: float = 600,
    on_event: Callable[[float, str], None] | None = None,
    progress: Progress | None = None,
) -> guest.BootResult:
    """Run *plan* through vng, run *job* in it, wait, collect (a step of *progress*).
    Always stops vng and its QEMU."""
    with progress_of(progress).step("boot", f"{plan.topo.name} through virtme-ng"):
        return _boot(plan, kernel, run_dir, job, timeout=timeout, on_event=on_event)


def _boot(
    plan: VmPlan, kernel: KernelArtifact, run_dir: Path, job: guest.GuestJob | None, *, timeout: float,
    on_event: Callable[[float, str], None] | None,
) -> guest.BootResult:  # fmt: skip
    vng = vng_bin()
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    # vng boots the bzImage itself (its initramfs loads the kernel's modules): no PVH vmlinux.
    files = replace(render_qemu.boot_files(plan, Path(kernel.image)), monitor=None, dtb=None)
    assert files.console and files.agent_log and files.results
    for f in (files.console, files.agent_log, files.results):
        (run_dir / f).unlink(missing_ok=True)
    layers = guest.initrd_layers(run_dir / files.initrd, plan, kernel, job or guest.GuestJob())
    (run_dir / "vng-agent.sh").write_text(render.agent_script(layers))
    argv = render.argv(plan, files, vng=str(vng), run_dir=run_dir, agent=f"sh {shlex.quote(str(run_dir / 'vng-agent.sh'))}")
    (run_dir / "vng.argv").write_text(shlex.join(argv) + "\n")
    console = run_dir / files.console
    said = guest.AgentLog(run_dir / files.agent_log, plan, console, on_event)

    def lost(what: str) -> LostGuest:
        return LostGuest(f"{what}{said.last_word()} (vng's output: {console})", guest.console_tail(console))

    t0 = time.monotonic()
    with open(console, "wb") as out:
        p = None
        try:
            with proc.signals_held():
                p = proc.popen(
                    argv, cwd=run_dir, env=_env(vng), stdin=guest.subprocess_devnull(), stdout=out, stderr=out,
                    start_new_session=True, preexec_fn=guest.die_with_parent,
                )  # fmt: skip
            guest.watch(
                p.poll, p.pid, said, lost, ready_within=guest.boot_timeout(plan) + VNG_BOOT_EXTRA_S, finish_within=timeout
            )
        finally:
            if p is not None:
                proc.stop_group(p)
    wall = time.monotonic() - t0
    if said.ready_s is None:
        tail = guest.console_tail(console, 5).splitlines()
        raise InfraError(f"vng ended before lab's agent started: {tail[-1] if tail else 'no output'} (vng's output: {console})")
    return guest.collect(plan, run_dir, files, said, argv, wall)


# ---- --kernel-tree: the developer's tree built by `vng --build` -------------------------


def tree_out(tree: Path) -> Path:
    """Where `vng --build` puts *tree*'s objects (O=): lab's cache, one per tree, so
    rebuilds are incremental and the tree itself is never written."""

    return paths.cache_dir() / "vng-build" / hashlib.sha256(str(tree).encode()).hexdigest()[:12]


def config_problems(config: Path, fragments: list[Path] | tuple[Path, ...]) -> list[str]:
    """What the built *config* lacks of *fragments*' requests, one line each, naming the
    fragment line: vng's own minimal config has SCHED_MC off, and a symbol whose
    dependencies vng's config does not meet silently stays off."""

    got = read_config(config)
    return [
        f"CONFIG_{r.name} is {got.get(r.name, 'n')}, {r.where} asks {r.value}"
        for r in merge(fragments).values()
        if got.get(r.name, "n") != r.value
    ]


def build_tree(tree: Path, arch: str, *, jobs: int | None = None) -> KernelArtifact:
    """Build *tree* through `vng --build` (vng's config + lab's fragments, O= in lab's
    cache), check that every symbol lab's fragments ask for stuck, and return the kernel."""

    if arch != "x86_64":
        raise UserError(f"--backend vng builds and boots x86_64 kernels only (the topology is {arch})")
    tree = iterate.check_tree(tree, arch)
    fragments = krecipe.load(iterate.default_recipe(arch)).all_fragments()[:2]  # lab.config, lab-x86_64.config
    out = tree_out(tree)
    out.mkdir(parents=True, exist_ok=True)
    vng = vng_bin()
    argv = [*render.build_argv(fragments, vng=str(vng), jobs=jobs or os.cpu_count()), f"O={out}"]
    log = out / "vng-build.log"
    with open(log, "wb") as f:
        rc = proc.run(argv, cwd=tree, env=_env(vng), capture=False, check=False, stdout=f, stderr=f).returncode
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-20:]
        raise BuildError(f"vng --build failed (exit {rc}) in {tree} (log: {log})", "\n".join(tail), str(log))
    problems = config_problems(out / ".config", fragments)
    if problems:
        raise BuildError(
            f"vng --build: {len(problems)} of lab's config requests did not stick, first: {problems[0]} "
            f"(config: {out / '.config'})",
            "\n".join(problems),
        )
    release = (out / "include" / "config" / "kernel.release").read_text().strip()
    return KernelArtifact(
        name=f"vng:{tree.name}", arch=arch, image=out / "arch" / "x86" / "boot" / "bzImage", release=release,
        modules=None, config=out / ".config", features=frozenset(), id=f"vng-{out.name}-{release}",
    )  # fmt: skip
