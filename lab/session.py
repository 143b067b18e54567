"""What every VM command does first: topology + kernel + host -> a plan and a run directory."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from . import backends, rundir
from . import host as host_mod
from . import scheduler as scheduler_mod
from .backends import base
from .errors import UserError, storage_error
from .kernel import resolve
from .kernel.artifact import KernelArtifact
from .paths import runs_dir, topology_dirs
from .plan import SchedulerRef, VmOptions, VmPlan
from .progress import Progress
from .render import qemu as render
from .rundir import RunDir
from .scheduler import Scheduler
from .topology import Topology

ARGV: list[str] | None = None  # set by the CLI: the arguments of this `lab` invocation


@dataclass(frozen=True)
class Session:
    """A decided VM: the plan (the record written to plan.json) and the kernel's files."""

    plan: VmPlan
    kernel: KernelArtifact
    runs: Path | None = None  # where its run directories go (--runs); None: paths.runs_dir()
    scheduler: Scheduler | None = None  # the sched_ext scheduler the guest loads (plan.scheduler records it)
    skip: str = ""  # why the run cannot be made on this kernel (a SKIP before booting)

    @property
    def topo(self) -> Topology:
        return self.plan.topo

    @property
    def options(self) -> VmOptions:
        return self.plan.options

    @property
    def kernel_label(self) -> str:
        return self.kernel.name

    @property
    def cluster_level(self) -> bool:
        """Whether the guest kernel builds a CLS level (CONFIG_SCHED_CLUSTER)."""
        val = self.kernel.config_value("SCHED_CLUSTER")
        if val is None:
            return self.topo.arch == "x86_64"
        return val == "y"


def prepare(
    topo: Topology, options: VmOptions, *, build: bool = True, progress: Progress | None = None, runs: Path | None = None,
    artifact: KernelArtifact | None = None,
) -> Session:
    """Resolve the kernel *options* name (building or fetching it if *build*, a step of
    *progress*; *artifact*: a kernel already built outside lab's store, e.g. by vng) and
    decide the VM for *topo* on this host; its run directories go to *runs* (else the
    default, paths.runs_dir())."""

    if build:  # a run will follow: its folder must be usable before a build or fetch
        runs_folder(runs)
    h = host_mod.probe()
    kernel = artifact or resolve(options.kernel, topo.arch, build=build, progress=progress)
    if kernel.arch != topo.arch:
        raise UserError(f"kernel {kernel.name} is {kernel.arch}, topology {topo.name} is {topo.arch}")
    plan = render.plan(topo, h, options, kernel_features=features(kernel), kernel=kernel.ref())
    sched, skip = None, ""
    spec = scheduler_mod.parse_spec(options.scheduler) if options.scheduler else None
    if spec is not None:
        skip = scheduler_mod.skip_reason(kernel) or ""
        if not skip:
            if build:
                sched = scheduler_mod.resolve(spec, kernel, progress=progress)
            else:
                sched = scheduler_mod.find_built(spec, kernel)
            if sched is not None:
                plan = dataclasses.replace(plan, scheduler=SchedulerRef.from_dict(sched.record(spec.args)))
                if not sched.ops:
                    plan = dataclasses.replace(plan, notes=(*plan.notes, (
                        f"scheduler {sched.name}: lab found no ops name in {spec.path}, so the guest's agent "
                        "accepts whichever sched_ext scheduler is enabled as this one"
                    )))
            else:
                plan = dataclasses.replace(plan, notes=(*plan.notes, f"scheduler {spec.name} is not built yet for {kernel.label}"))
    return Session(for_backend(plan, kernel), kernel, runs, scheduler=sched, skip=skip)


def for_backend(plan: VmPlan, kernel: KernelArtifact | None = None) -> VmPlan:
    """*plan* as its backend runs it: refused naming what the backend cannot express
    (and the version that can), notes for what it runs differently (Backend.adapt)."""

    return base.get(plan.options.backend).adapt(plan, kernel)


def features(kernel: KernelArtifact) -> frozenset[str]:
    """What the kernel can do that the plan depends on: the recipe's declared features,
    plus CPU hotplug when its config says so (Debian's and lab's kernels have it), and
    its HZ ("hz=250")."""
    out = set(kernel.features)
    if kernel.config_value("HOTPLUG_CPU") == "y":
        out.add("cpu_hotplug")
    hz = kernel.config_value("HZ")
    if hz and hz.isdigit():
        out.add(f"hz={hz}")  # its tick rate: what a preset lpj= is counted in (render.qemu.preset_lpj)
    return frozenset(out)


def runs_folder(base: Path | None = None) -> Path:
    """The runs folder (*base*, else the default), made if needed: a bad one is refused
    before anything is built or booted."""
    base = runs_dir(base)
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # disk trouble, or LAB_RUNS names a file or a path through one
        why = f"runs folder {base} (--runs, LAB_RUNS or the settings file's runs): cannot be made: {e.strerror}"
        raise storage_error(e, "the runs folder", base) or UserError(why) from None
    return base


def new_run_dir(kind: str, topo: Topology, kernel_label: str, base: Path | None = None) -> Path:
    base = runs_folder(base)
    name = rundir.label(kind, topo.name, kernel_label)
    d, n = base / name, 1
    while True:  # mkdir is the test: two lab processes never share a run directory
        try:
            d.mkdir()
            break
        except FileExistsError:
            n += 1
            d = base / f"{name}-{n}"
        except OSError as e:
            err = storage_error(e, "a run directory", d)
            if err is None:
                raise
            raise err from None
    # Every run directory starts with the lab command that reproduces it.
    args = ARGV if ARGV is not None else sys.argv[1:]
    with _removed_on_failure(d):
        RunDir(d).write_command(args)
    return d


def open_run(kind: str, s: Session, scenario: dict | None = None) -> Path:
    """A new run directory for *s*, holding the command that reproduces it and the plan
    (with *scenario*, the scenario's record: its parameters or its definition)."""
    d = new_run_dir(kind, s.topo, s.kernel_label, s.runs)
    with _removed_on_failure(d):
        s.plan.write(d, scenario)
    return d


@contextlib.contextmanager
def _removed_on_failure(run_dir: Path) -> Iterator[None]:
    """A run directory that could not get its command and plan is removed: it holds
    nothing yet, and a run directory without its plan is one nothing can read."""
    try:
        yield
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise


def dry_run_argv(s: Session) -> list[str]:
    """The QEMU argv a boot of *s* runs (in its run directory)."""
    # deferred: CLI start (lab.backends.qemu)
    from .backends import qemu as backend

    return backend.dry_run_argv(s.plan, s.kernel)


def dry_run(s: Session) -> str:
    """What a boot of *s* starts with its backend: the QEMU argv (run in the run
    directory), the libvirt domain XML or the vng command ($RUN_DIR: the run directory)."""

    return backends.dry_run(s.plan, s.kernel)


def topology_arg(topo: Topology) -> str:
    """What names *topo* to another lab process, whatever its working directory: its
    catalog name, or its spec file's absolute path."""

    path = Path(topo.path).resolve() if topo.path else None
    if path is None or any(path == (d / f"{topo.name}.toml").resolve() for d in topology_dirs()):
        return topo.name
    return str(path)


def run_argv(scenario: str, topo: Topology, options: VmOptions, *, runs_per_verdict: int = 1) -> list[str]:
    """The `lab run` arguments that repeat one run another command made (a run of `lab
    compare` or `lab bisect`): what its run directory's ``command`` file says."""

    argv = ["run", scenario, "--topology", topology_arg(topo), *options.to_args(always=("kernel",))]
    return [*argv, "--runs-per-verdict", str(runs_per_verdict)]


@contextlib.contextmanager
def command(argv: list[str]) -> Iterator[None]:
    """Run directories made in the block record ``lab *argv*`` as their command."""
    global ARGV
    saved, ARGV = ARGV, list(argv)
    try:
        yield
    finally:
        ARGV = saved
