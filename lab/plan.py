"""A VM run's plan: what was asked (``VmOptions``), which kernel (``KernelRef``), and
everything decided about the VM (``VmPlan``).

``VmPlan`` is the one record of a run's plan: ``render.qemu.plan()`` makes it, the
backends boot it, it writes itself to the run directory's ``plan.json`` and reads
itself back, so a rechecked run sees the same types as a live one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from . import arch as arch_mod
from . import rundir
from .atomic import write_text
from .errors import UserError
from .topology import Topology, load

PLAN_FILE = rundir.PLAN
NUMBERING_FILE = rundir.NUMBERING
FORMAT = 2  # plan.json's layout; 1 (no "format" key) is still read


@dataclass(frozen=True)
class VmOptions:
    """The VM options every VM command takes (`lab boot|verify|run`, `lab topo render`),
    made once from the command line and passed whole."""

    kernel: str = "debian"  # a kernel spec: debian, a recipe, a store id or an image path
    accel: str = "auto"  # auto | kvm | tcg
    cpu_model: str = "auto"  # auto | intel | amd | a QEMU -cpu model
    tcg_threads: str = "auto"  # auto | single | multi
    bringup: str = "auto"  # auto | boot | hotplug
    append: str = ""  # more kernel command line, after lab's
    qemu: str = "auto"  # auto | system | lab | a QEMU binary (lab.emulators.choose)
    backend: str = "qemu"  # qemu | libvirt | vng: what runs the VM (lab.backends)
    connect: str = ""  # --backend libvirt: the libvirt URI ("" is qemu:///system)
    scheduler: str = ""  # NAME[:ARGS], a sched_ext BPF scheduler (lab.scheduler); "": the kernel's own

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VmOptions:
        known = {f.name for f in fields(cls)}
        return cls(**{k: str(v) for k, v in d.items() if k in known})

    @staticmethod
    def flag(name: str) -> str:
        """The command-line option of field *name* (`lab run`, `boot`, `verify`, `matrix`)."""
        return f"--{name.replace('_', '-')}"

    def to_args(self, *, always: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[str]:
        """These options as the command line that gives them back: every field that is
        not its default (and those in *always*), none in *skip*.  The one place options
        become argv again (a run's command file, the matrix's cells and CI jobs)."""
        out: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in skip or (value == f.default and f.name not in always):
                continue
            out += [self.flag(f.name), str(value)]
        return out

    @classmethod
    def from_args(cls, argv: list[str]) -> VmOptions:
        """The options a command line (as to_args() writes it) gives; other arguments are
        ignored, an option without its value is a UserError."""
        flags = {cls.flag(f.name): f.name for f in fields(cls)}
        got: dict[str, str] = {}
        i = 0
        while i < len(argv):
            a = argv[i]
            name, eq, val = a.partition("=")
            if name in flags:
                if not eq:
                    if i + 1 >= len(argv):
                        raise UserError(f"{name} needs a value")
                    val = argv[i + 1]
                    i += 1
                got[flags[name]] = val
            i += 1
        return cls(**got)


@dataclass(frozen=True)
class KernelRef:
    """Which kernel a run booted: enough to name it and find it again, not the files."""

    name: str
    id: str
    release: str
    arch: str
    image: str = ""  # the image path when the run was made

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], arch: str) -> KernelRef:
        return cls(
            name=str(d.get("name", "?")),
            id=str(d.get("id", "?")),
            release=str(d.get("release", "?")),
            arch=str(d.get("arch", arch)),
            image=str(d.get("image", "")),
        )


@dataclass(frozen=True)
class SchedulerRef:
    """Which sched_ext scheduler a run loaded (lab.scheduler.Scheduler.record())."""

    name: str
    ops: str
    args: tuple[str, ...]
    version: str
    id: str
    binary_sha256: str = ""
    kernel: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["args"] = list(self.args)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SchedulerRef:
        args = d.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError("scheduler.args must be a list of strings")
        return cls(
            name=str(d["name"]), ops=str(d.get("ops", "")), args=tuple(args), version=str(d.get("version", "")),
            id=str(d.get("id", "")), binary_sha256=str(d.get("binary_sha256", "")), kernel=str(d.get("kernel", "")),
        )


@dataclass(frozen=True)
class VmPlan:
    topo: Topology
    arch: str
    qemu: str
    qemu_version: tuple[int, int, int]
    accel: str
    accel_reason: str
    machine: str
    cpu_model: str
    cpu_vendor: str  # vendor the guest kernel sees: intel | amd | arm
    smp: str
    memory_mb: int
    numa_cpu_args: tuple[str, ...]
    guest_to_spec: tuple[int, ...]  # guest logical CPU -> spec CPU id
    guest_node_to_spec: tuple[int, ...]  # guest node -> spec node id
    guest_reclaim_distance: int
    cmdline_extra: tuple[str, ...]
    numbering_mode: str  # "native" (guest numbers as the spec) | "translated"
    notes: tuple[str, ...] = field(default_factory=tuple)
    dt_caches: bool = False  # arm64: boot with an edited device tree (caches, cpu order)
    tcg_threads: str = "multi"  # "single" | "multi" (MTTCG): see render.qemu.tcg_threading()
    bringup: str = "boot"  # "boot" (all CPUs at boot) | "hotplug" (maxcpus=boot_cpus, the agent onlines the rest)
    boot_cpus: int = 0  # with hotplug: how many CPUs come up at boot (see render.qemu.boot_cpus())
    kernel: KernelRef | None = None  # the kernel this plan boots (None: decided without one)
    options: VmOptions = field(default_factory=VmOptions)
    qemu_origin: str = "system"  # system | lab (built) | debian-backports (fetched) | path: lab.emulators.Emulator
    qemu_debian_version: str = ""  # the Debian package version of lab's fetched or built QEMU
    qemu_firmware: tuple[str, ...] = ()  # -L directories, searched before the QEMU's own default
    lpj: int = 0  # a preset loops_per_jiffy (lpj=) for every CPU, 0: none (render.qemu.preset_lpj)
    scheduler: SchedulerRef | None = None  # the sched_ext scheduler the guest loads (None: the kernel's own)

    @property
    def spec_to_guest(self) -> dict[int, int]:
        return {s: g for g, s in enumerate(self.guest_to_spec)}

    @property
    def console(self) -> str:
        return arch_mod.get(self.arch).console

    # ---- the guest's CPU numbering -------------------------------------------------------

    def guest_env(self) -> dict[str, str]:
        """What every guest gets in its environment: the guest->spec CPU and node maps
        (the spec id of guest CPU 0, 1, ...), which the guest's ``labcpu`` reads."""
        return {
            "LAB_CPU_MAP": ",".join(map(str, self.guest_to_spec)),
            "LAB_NODE_MAP": ",".join(map(str, self.guest_node_to_spec)),
            "LAB_NUMBERING": self.numbering_mode,
        }

    def numbering_note(self) -> str | None:
        """One line for whoever types CPU ids in the guest, when the guest numbers CPUs
        (or nodes) otherwise than the spec does: an example, and how to translate."""
        moved = [(g, s) for g, s in enumerate(self.guest_to_spec) if s != g]
        nodes = [(g, s) for g, s in enumerate(self.guest_node_to_spec) if s != g]
        if not moved and not nodes:
            return None
        name = self.topo.name
        if moved:
            g, s = min(moved)
            sib = next((x for x in sorted(self.guest_to_spec) if x != s and self.topo.cpu(x).core == self.topo.cpu(s).core), None)
            pair = f"{sib},{s}" if sib is not None else str(s)
            first = f"spec cpu{s} is guest cpu{g}"
            how = (
                f"in the guest, `labcpu {pair}` gives the guest ids of spec CPUs {pair} "
                f"(`taskset -c $(labcpu {pair}) CMD`), `labcpu -r LIST` the spec ids of guest CPUs"
            )
        else:
            g, s = min(nodes)
            first, how = f"spec node {s} is guest node {g}", "$LAB_NODE_MAP gives the spec id of each guest node"
        return (
            f"guest CPU ids differ from {name}'s ({self.topo.numbering} numbering): {first}; {how}; "
            "what the command prints is in the guest's numbering"
        )

    def numbering_record(self) -> dict[str, Any]:
        """numbering.json: which files of a run directory are in which numbering."""
        return {
            "numbering": self.numbering_mode,
            "spec_numbering": self.topo.numbering,
            "guest_to_spec": list(self.guest_to_spec),
            "guest_node_to_spec": list(self.guest_node_to_spec),
            "spec": [rundir.RESULTS, rundir.JUNIT, rundir.VERIFY, "what lab prints"],
            "guest": [f"{rundir.OUT}/", f"{rundir.GUEST}/", rundir.CONSOLE, rundir.AGENT_LOG,
                      "what a `lab boot -- CMD` command prints"],
            "note": (
                "guest_to_spec[g] is the spec's (the real machine's) id of guest CPU g. Files under "
                "'guest' are as the guest kernel wrote them (raw traces, step output, sysfs "
                "snapshot); lab translates them when it reads them, so every CPU id under "
                "'spec' is in the spec's numbering."
            ),
        }

    # ---- plan.json ---------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "topology": self.topo.name,
            "topology_file": self.topo.path,
            "kernel": self.kernel.to_dict() if self.kernel else None,
            "options": self.options.to_dict(),
            "arch": self.arch,
            "qemu": self.qemu,
            "qemu_version": list(self.qemu_version),
            "qemu_origin": self.qemu_origin,
            "qemu_debian_version": self.qemu_debian_version,
            "qemu_firmware": list(self.qemu_firmware),
            "accel": self.accel,
            "accel_reason": self.accel_reason,
            "machine": self.machine,
            "cpu_model": self.cpu_model,
            "cpu_vendor": self.cpu_vendor,
            "smp": self.smp,
            "memory_mb": self.memory_mb,
            "numa_cpu_args": list(self.numa_cpu_args),
            "tcg_threads": self.tcg_threads,
            "bringup": self.bringup,
            "boot_cpus": self.boot_cpus,
            "numbering": self.numbering_mode,
            "guest_to_spec": list(self.guest_to_spec),
            "guest_node_to_spec": list(self.guest_node_to_spec),
            "guest_node_reclaim_distance": self.guest_reclaim_distance,
            "cmdline_extra": list(self.cmdline_extra),
            "lpj": self.lpj,
            "dt_caches": self.dt_caches,
            "scheduler": self.scheduler.to_dict() if self.scheduler else None,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], topo: Topology, where: str = PLAN_FILE) -> VmPlan:
        """The plan *d* describes (as to_dict() wrote it, or an older plan.json: fields it
        lacks take what the topology says or their defaults), checked against *topo*: the
        CPU and node maps must be permutations of its ids, the numbers in range; anything
        else is a one-line UserError naming *where* and the field."""
        _check_fields(d, topo, where)
        try:
            arch = str(d.get("arch") or topo.arch)
            return cls(
                topo=topo,
                arch=arch,
                qemu=str(d.get("qemu") or arch_mod.get(arch).qemu),
                qemu_version=_version(d.get("qemu_version", (0, 0, 0))),
                accel=str(d.get("accel", "")),
                accel_reason=str(d.get("accel_reason", "")),
                machine=str(d.get("machine", "")),
                cpu_model=str(d.get("cpu_model", "")),
                cpu_vendor=str(d.get("cpu_vendor", "intel")),
                smp=str(d.get("smp", "")),
                memory_mb=int(d.get("memory_mb", sum(topo.memory_mb))),
                numa_cpu_args=tuple(map(str, d.get("numa_cpu_args", ()))),
                guest_to_spec=tuple(int(x) for x in d["guest_to_spec"]),
                guest_node_to_spec=tuple(int(x) for x in d["guest_node_to_spec"]),
                guest_reclaim_distance=int(d["guest_node_reclaim_distance"]),
                cmdline_extra=tuple(map(str, d.get("cmdline_extra", ()))),
                numbering_mode=str(d.get("numbering", "native")),
                notes=tuple(map(str, d.get("notes", ()))),
                dt_caches=bool(d.get("dt_caches", False)),
                tcg_threads=str(d.get("tcg_threads", "multi")),
                bringup=str(d.get("bringup", "boot")),
                boot_cpus=int(d.get("boot_cpus", topo.n_cpus)),
                kernel=KernelRef.from_dict(d["kernel"], arch) if isinstance(d.get("kernel"), dict) else None,
                options=VmOptions.from_dict(d.get("options") or {}),
                qemu_origin=str(d.get("qemu_origin", "system")),
                qemu_debian_version=str(d.get("qemu_debian_version", "")),
                qemu_firmware=tuple(map(str, d.get("qemu_firmware", ()))),
                lpj=int(d.get("lpj", 0)),
                scheduler=SchedulerRef.from_dict(d["scheduler"]) if isinstance(d.get("scheduler"), dict) else None,
            )
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            what = f"no field {e}" if isinstance(e, KeyError) else str(e)
            raise UserError(f"{where}: not a plan lab can read ({what})") from None

    def write(self, run_dir: Path, scenario: dict[str, Any] | None = None) -> Path:
        """plan.json, and numbering.json beside it (which files are in which numbering).
        *scenario*: what the run's scenario records beside its name (its parameters, or a
        data scenario's definition: Scenario.record()), as plan.json's ``scenario``."""

        d = self.to_dict()
        if scenario is not None:
            d["scenario"] = scenario
        out = write_text(run_dir / PLAN_FILE, json.dumps(d, indent=1) + "\n", "the run's plan")
        write_text(run_dir / NUMBERING_FILE, json.dumps(self.numbering_record(), indent=1) + "\n", "the run's numbering")
        return out

    @classmethod
    def read_with(cls, run_dir: Path, topo: Topology) -> VmPlan:
        """The plan a run directory recorded, on *topo* (a bundle's own spec), which must be
        the topology plan.json names."""
        path = run_dir / PLAN_FILE
        d = read_plan_json(path)
        if d.get("topology") != topo.name:
            raise UserError(f"{path}: the run was on {str(d.get('topology'))[:60]!r}, not on the topology given ({topo.name})")
        return cls.from_dict(d, topo, where=str(path))

    @classmethod
    def read(cls, run_dir: Path) -> VmPlan:
        """The plan a run directory recorded; its topology from the recorded spec file
        when that still exists, else from the catalog by name."""

        path = run_dir / PLAN_FILE
        if not path.is_file():
            raise UserError(f"{run_dir}: not a lab run directory (no {PLAN_FILE})")
        d = read_plan_json(path)
        if "topology" not in d:
            raise UserError(f"{path}: not a plan lab can read (no topology)")
        name = d["topology"]
        if not isinstance(name, str) or not name:
            raise UserError(f"{path}: field 'topology' must be a topology's name")
        # The spec file the run loaded, when it is still there and is that topology; else
        # the catalog's of that name.  A file of another machine is not read as this one.
        spec = d.get("topology_file")
        topo = None
        if isinstance(spec, str) and spec.endswith(".toml") and Path(spec).is_file():
            try:
                t = load(spec)
            except UserError:
                t = None
            topo = t if t is not None and t.name == name else None
        if topo is None:
            topo = load(name) if "/" not in name and not name.endswith(".toml") else None
        if topo is None:
            raise UserError(f"{path}: field 'topology' names {name[:80]!r}, which is not a topology in lab's catalog")
        return cls.from_dict(d, topo, where=str(path))


def read_plan_json(path: Path) -> dict[str, Any]:
    """plan.json as a JSON object, or a one-line UserError naming it."""
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a plan lab can read ({getattr(e, 'strerror', None) or e})") from None
    if not isinstance(d, dict):
        raise UserError(f"{path}: not a plan lab can read (not a JSON object)")
    return d


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_fields(d: dict[str, Any], topo: Topology, where: str) -> None:
    """plan.json's fields as lab reads them: a plan whose maps do not fit its topology would
    translate every CPU wrongly, silently."""

    def bad(field: str, what: str) -> UserError:
        return UserError(f"{where}: not a plan lab can read (field {field!r} {what})")

    for k in ("guest_to_spec", "guest_node_to_spec"):
        if k not in d:
            raise UserError(f"{where}: not a plan lab can read (no field {k!r})")
        if not isinstance(d[k], list) or not all(_is_int(x) for x in d[k]):
            raise bad(k, "must be a list of whole numbers")
    g2s, n2s = d["guest_to_spec"], d["guest_node_to_spec"]
    if sorted(g2s) != sorted(topo.cpu_ids):
        raise bad("guest_to_spec", f"must map each of the {topo.n_cpus} guest CPUs to a distinct CPU of {topo.name} "
                  f"(it has {len(g2s)} entries{'' if set(g2s) <= set(topo.cpu_ids) else ', some not CPUs of the topology'})")  # fmt: skip
    if sorted(n2s) != sorted(topo.node_ids):
        raise bad("guest_node_to_spec", f"must map each of the {topo.n_nodes} guest nodes to a distinct node of {topo.name}")
    for k, lo, hi in (("memory_mb", 1, 1 << 24), ("boot_cpus", 1, topo.n_cpus), ("guest_node_reclaim_distance", 0, 255)):
        if k in d and not (_is_int(d[k]) and lo <= d[k] <= hi):
            raise bad(k, f"must be a whole number from {lo} to {hi}, not {str(d[k])[:40]}")
    for k in ("options", "kernel"):
        if k in d and d[k] is not None and not isinstance(d[k], dict):
            raise bad(k, f"must be an object, not {type(d[k]).__name__}")
    for k in ("numa_cpu_args", "cmdline_extra", "notes"):
        if k in d and not (isinstance(d[k], list) and all(isinstance(x, str) for x in d[k])):
            raise bad(k, "must be a list of strings")
    qv = d.get("qemu_version", [0, 0, 0])
    if not (isinstance(qv, list) and all(_is_int(x) and 0 <= x < 1000 for x in qv)):
        raise bad("qemu_version", "must be a list of small whole numbers ([7, 2, 0])")


def _version(v: Any) -> tuple[int, int, int]:
    parts = [int(x) for x in v][:3]
    parts += [0] * (3 - len(parts))
    return (parts[0], parts[1], parts[2])
