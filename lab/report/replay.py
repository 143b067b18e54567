"""`lab report replay`: rerun a bundle's scenario on its topology and kernel.

The kernel is got or rebuilt from the bundle's identity: Debian's prebuilt kernel
(whatever version this host has, the difference noted), a recipe rebuilt from the
recipe, fragments and patches the bundle carries (lab's store reuses a build with the
same inputs), or the kernel the user names with ``kernel=`` (a --kernel-tree run's
kernel was the developer's tree, which a bundle carries as a describe and a diff).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import emulators, rundir, runner, session, topology
from .. import host as host_mod
from .. import progress as progress_mod
from .. import scenario as sc
from ..errors import UserError
from ..kernel import build as kbuild
from ..kernel import recipe as krecipe
from ..kernel import resolve
from ..paths import runs_dir
from ..plan import VmOptions
from . import fidelity
from .bundle import Bundle, extract


@dataclass
class Replay:
    bundle: Bundle
    before: dict[str, Any]  # the bundle's results.json
    after: Any  # runner.RunOutcome
    notes: list[str] = field(default_factory=list)


def open_bundle(path: Path, target: Path | None = None) -> Bundle:
    """Extract *path* into *target*, or into a new directory in lab's runs folder."""

    if target is None:
        # Their own folder: an opened bundle is not a run directory (tools that glob the
        # runs folder for runs never meet one).
        base = runs_dir() / "bundles"
        base.mkdir(parents=True, exist_ok=True)
        stem = path.name.removesuffix(".gz").removesuffix(".tar").removesuffix(".tgz")
        target = base / f"{time.strftime('%Y%m%d-%H%M%S')}-{stem[:40]}"
        n = 1
        while target.exists():
            n += 1
            target = target.with_name(f"{target.name.rsplit('~', 1)[0]}~{n}")
    return extract(path, target)


def results_of(b: Bundle) -> dict[str, Any]:
    p = b.run_dir / rundir.RESULTS
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{p}: the bundle's results cannot be read ({e})") from None
    if not isinstance(d, dict):
        raise UserError(f"{p}: the bundle's results are not a JSON object")
    return d


def kernel_spec(b: Bundle, override: str | None, progress=None) -> tuple[str, list[str]]:
    """The --kernel that gets or rebuilds the bundle's kernel here, and notes on what differs."""

    k = b.kernel
    kind = k.get("kind")
    arch = b.manifest.get("arch") or _plan(b).get("arch", "x86_64")
    notes: list[str] = []
    prog = progress_mod.of(progress)
    if override:
        try:  # a name lab does not know is refused before anything starts
            resolve(override, arch, build=False)
        except UserError:  # a recipe of this arch not built yet is built by the run
            if override not in krecipe.names() or krecipe.load(override).arch != arch:
                raise
        return override, [f"kernel given on the command line: {override} (the bundle's: {k.get('name')} {k.get('release')})"]
    if kind == "debian":
        try:
            have = resolve("debian", arch, build=False)
        except UserError:  # not fetched here yet
            have = resolve("debian", arch, build=True, progress=prog)  # a step of its own
        ver = have.metadata.get("inputs", {}).get("version")
        if have.release != k.get("release") or (k.get("version") and ver != k.get("version")):
            notes.append(f"Debian kernel differs: the bundle ran {k.get('package')} {k.get('version')} ({k.get('release')}), "
                         f"this host has {have.metadata.get('inputs', {}).get('package')} {ver} ({have.release})")
        return have.id, notes
    if kind == "recipe":
        kdir = b.root / "kernel" / "kernels"
        name = str(k.get("recipe") or k.get("name"))
        if not (kdir / name / "recipe.toml").is_file():
            raise UserError(f"{b.root}: the bundle's kernel is recipe {name} but it carries no kernel/kernels/{name}/recipe.toml")

        r = krecipe.load(name, kernels_dir=kdir)
        art = kbuild.lookup_built(r)
        if art is None:
            with prog.step("kernel", f"building {name} from the bundle's recipe"):
                art = kbuild.build(r, progress=prog.callback())
        want = k.get("config_sha256")
        got = art.metadata.get("hashes", {}).get("config_sha256")
        if want and got and want != got:
            notes.append(f"the rebuilt kernel's .config differs from the bundle's (sha256 {got[:12]} vs {want[:12]}): see kernel/config")
        return art.id, notes
    tree = k.get("tree") or {}
    if kind == "tree":
        raise UserError(
            f"the bundle's kernel was built from a kernel tree ({tree.get('git_describe')}, uncommitted diff "
            f"{tree.get('diff_sha256')}; kernel/tree.diff holds the diff when it was still there): build that tree "
            "and give --kernel IMAGE|STORE-ID"
        )
    raise UserError(f"the bundle's kernel is an image file ({k.get('name')}, {k.get('release')}): give --kernel IMAGE with the same kernel")


def qemu_notes_before(plan: dict[str, Any], arch: str, progress=None) -> list[str]:
    """A bundle that ran on Debian's bookworm-backports QEMU: fetch it here when lab has
    no fetched QEMU of that Debian version (the archive serves its current one only),
    and say so when the version got is another."""

    want = str(plan.get("qemu_debian_version") or "")
    if plan.get("qemu_origin") != "debian-backports" or not want:
        return []
    have = [e for e in emulators.built() if e.origin == "debian-backports" and e.arch == arch]
    if any(e.debian_version == want for e in have):
        return []
    ems, _ = emulators.fetch(progress=progress)
    host_mod.probe.cache_clear()  # the host's QEMUs changed: probe them again
    got = next((e.debian_version for e in ems if e.arch == arch), "")
    if got == want:
        return [f"fetched the bundle's QEMU {want} from Debian's bookworm-backports"]
    return [f"the bundle ran on Debian's QEMU {want}; bookworm-backports now serves {got}, fetched for this replay"]


def qemu_notes_after(plan: dict[str, Any], now: Any) -> list[str]:
    """One line when the replay's QEMU is not the bundle's (version, origin, package)."""
    was = (".".join(map(str, plan.get("qemu_version") or ())), str(plan.get("qemu_origin") or "system"), str(plan.get("qemu_debian_version") or ""))
    got = (".".join(map(str, now.qemu_version)), now.qemu_origin, now.qemu_debian_version)
    if was == got or not was[0]:
        return []
    say = lambda v: f"{v[0]} ({v[1]}{', ' + v[2] if v[2] else ''})"  # noqa: E731
    return [f"QEMU differs: the bundle ran {say(was)}, this replay {say(got)}"]


def fidelity_notes(b: Bundle, plan: dict[str, Any], before: dict[str, Any], now: Any) -> list[str]:
    """Where this host's conditions differ from the bundle's (lab.report.fidelity): the
    bundle's host cores from its run's timing, else its host.json; the bundle's stamp."""

    timing = t if isinstance(t := before.get("timing"), dict) else {}
    cpus = timing.get("host_cpus")
    if cpus is None:
        try:
            host = json.loads((b.root / "host.json").read_text())
            cpus = host.get("host_cpus") if isinstance(host, dict) else None
        except (OSError, ValueError):
            cpus = None
    now_plan = {"accel": now.accel, "qemu_version": list(now.qemu_version), "cpu_model": now.cpu_model}
    out = fidelity.replay_differences(plan, cpus, now_plan, os.cpu_count() or 1)
    stamp = b.manifest.get("fidelity")
    if isinstance(stamp, dict) and stamp.get("judgement"):
        out.append(f"the bundle's fidelity: {stamp.get('judgement')}")
    return out


def _plan(b: Bundle) -> dict[str, Any]:
    try:
        d = json.loads((b.run_dir / rundir.PLAN).read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{b.run_dir}/{rundir.PLAN}: the bundle's plan cannot be read ({e})") from None
    return d if isinstance(d, dict) else {}


def scenario_of(b: Bundle, trust: bool = False, say=None) -> tuple[Any, str]:
    """The scenario to replay *b* with, and a note saying which it is.  A bundle's scenario
    is Python: it runs on this host only with *trust* (the user read it and said so).
    Without it lab replays its own scenario of the same name (saying whether its source is
    the bundle's, byte for byte), and refuses when it has none, naming the file and its
    sha256 to read before trusting it."""

    scen_file = b.file("scenario")
    name = b.manifest.get("scenario_name")
    digest = b.sha256("scenario")
    rec = _plan(b).get("scenario")
    if isinstance(rec, dict) and rec.get("kind") == "data" and rec.get("name") == name:
        # A data scenario (TOML, --workload): its definition is in the run's plan.json, data
        # that imports nothing, so it needs no --trust.
        return sc.from_run(name, f"{b.root}/manifest.json: scenario_name", rec), (
            f"scenario {name}: the data scenario the bundle's plan.json defines ({len(rec.get('commands') or [])} command(s))"
        )
    s, which = _python_scenario(b, trust, say, scen_file, name, digest, sc)
    if isinstance(rec, dict) and rec.get("name") == s.name and isinstance(rec.get("params"), dict) and s.params:
        s.set_params(rec["params"], where=f"{b.run_dir}/plan.json: params")
        which += f"; parameters {' '.join(f'{k}={sc.fmt_param(v)}' for k, v in s.p.items())}"
    return s, which


def _python_scenario(b: Bundle, trust: bool, say, scen_file, name, digest, sc) -> tuple[Any, str]:
    if trust:
        if scen_file is None:
            raise UserError(f"{b.root}: the bundle carries no scenario source to trust")
        which = f"the bundle's own scenario {scen_file.relative_to(b.root)} (sha256 {digest}), run with --trust"
        if say is not None:  # what will run, said before it is imported
            say(f"replay: {which}")
        return sc.load_file(scen_file), which
    if not isinstance(name, str) or name not in sc.names():
        what = f"scenario/{scen_file.name} (sha256 {digest})" if scen_file is not None else "no scenario source"
        raise UserError(
            f"{b.root}: the bundle's scenario {str(name)[:60]!r} is not one of lab's, and the bundle carries {what}: "
            "a scenario is Python that would run on this host; read it, then replay with --trust"
        )
    own = sc.load_recorded(name, f"{b.root}/{'manifest.json'}: scenario_name")
    mine = hashlib.sha256(Path(own.path).read_bytes()).hexdigest()
    if scen_file is not None and mine == digest:
        return own, f"scenario {name}: lab's own, the same source as the bundle's (sha256 {digest[:16]})"
    theirs = f"the bundle's scenario/{scen_file.name} (sha256 {digest[:16]})" if scen_file is not None else "the bundle carries none"
    return own, (f"scenario {name}: lab's own ({own.path}, sha256 {mine[:16]}), not {theirs}; "
                 "--trust runs the bundle's instead")  # fmt: skip


def replay(b: Bundle, kernel: str | None = None, progress=None, trust: bool = False) -> Replay:
    """Rerun bundle *b*: same topology spec, VM options and scenario (lab's own of that
    name unless *trust*: scenario_of()); the kernel from kernel_spec().  Returns the
    bundle's results next to the new outcome."""

    before = results_of(b)
    topo_file = b.file("topology")
    if topo_file is None:
        raise UserError(f"{b.root}: the bundle carries no topology spec; it cannot be replayed")
    topo = topology.load(topo_file)
    plan = _plan(b)
    if plan.get("topology") != topo.name:
        raise UserError(f"{b.root}: the bundle's topology spec is {topo.name}, but its run was on {str(plan.get('topology'))[:60]!r}")
    s, which = scenario_of(b, trust, say=progress.note if progress is not None else None)
    opts = VmOptions.from_dict(plan.get("options") or {})
    spec, notes = kernel_spec(b, kernel, progress=progress)
    opts = dataclasses.replace(opts, kernel=spec)
    notes += qemu_notes_before(plan, topo.arch, progress=progress)
    if progress is not None and not trust:  # once the input is known good: bad input is one line alone
        progress.note(f"replay: {which}")
    sess = session.prepare(topo, opts, progress=progress)
    notes += qemu_notes_after(plan, sess.plan)
    notes += fidelity_notes(b, plan, before, sess.plan)
    if progress is not None:
        with progress.step("replay", f"{s.name} on {topo.name} ({sess.kernel.name})"):
            after = runner.run_once(s, sess, on_event=lambda t, line: progress.update(line.removeprefix("lab: ")))
    else:
        after = runner.run_once(s, sess)
    return Replay(b, before, after, [which, *notes])
