"""The developer's loop (`lab run --kernel-tree [--watch]`): build their tree, run the
scenario, say what changed since the last verdict; under --watch, again on every change.

A build that fails says which verdict still stands (the last one for this tree, from
this loop or an earlier one).  What the developer sees is the caller's (``LoopView``:
the CLI prints it); this module decides.  The tree is built by lab (lab.iterate, with a
recipe) or, for a backend that builds trees itself (Capabilities.builds_tree, vng), by
that backend.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

from . import iterate, runner, session
from . import watch as watch_mod
from .backends import base
from .errors import LabError, UserError
from .plan import VmOptions
from .progress import Progress
from .scenario import Scenario
from .topology import Topology


class LoopView(Protocol):
    """What the developer sees of the loop, besides the runs themselves."""

    def judged(self, info: dict[str, str], build_s: float, edit_to_verdict_s: float, changes: list[str]) -> None:
        """A verdict: the tree judged (*info*: iterate.describe()), the loop's times, and
        what changed since the last verdict (iterate.verdict_changes())."""

    def error(self, e: LabError, info: dict[str, str], previous: dict[str, Any] | None) -> None:
        """Under --watch, an error (a build that failed, a lost guest) and the verdict that
        still stands for the tree (None: none yet); the loop goes on."""

    def watching(self, tree: Path, mode: str, why: str) -> None:
        """Waiting for the tree to change: by inotify, or polling (*why*)."""

    def rebuilding(self, changed: list[str]) -> None:
        """The tree changed (*changed*: the files seen, [] when it changed while lab was busy)."""


Run = Callable[[session.Session, dict[str, str]], list[runner.RunOutcome]]


def tree_loop(
    s: Scenario, topo: Topology, vm: VmOptions, tree: Path, recipe: str | None, *, watch: bool, run: Run, view: LoopView,
    progress: Progress, repeat: int = 1, per_verdict: int = 1, runs: Path | None = None,
) -> int:  # fmt: skip
    """Build *tree*, *run* the scenario on it (the caller's runs: *repeat* runs, or the
    majority of up to *per_verdict*), save and show the verdict; with *watch*, again on
    every change until Ctrl-C.  Returns the exit status of the last verdict (or error).
    Without *watch* an error is raised, with the verdict that still stands in its detail."""
    tree = iterate.check_tree(tree, topo.arch)
    iterate.tree_recipe(tree, topo.arch, recipe)  # a bad --recipe is refused before any work
    backend = base.get(vm.backend)
    own_build = cast("base.TreeBuilder", backend) if backend.CAPABILITIES.builds_tree else None
    if own_build is not None and recipe:
        raise UserError(f"--recipe builds with lab's build; with --backend {vm.backend} the tree is built by {own_build.TREE_BUILD}")
    last = None
    fp = iterate.fingerprint(tree)
    while True:
        info = iterate.describe(tree)
        t0 = time.monotonic()
        try:
            with progress.step("build", f"{tree} ({info.get('git_describe')}, diff {info.get('diff_sha256')})"):
                if own_build is not None:  # the backend's own build (vng's: its config + lab's fragments, checked)
                    art = own_build.build_tree(tree, topo.arch)
                else:
                    art = iterate.tree_kernel(tree, topo.arch, recipe, progress=progress.callback())
            build_s = time.monotonic() - t0
            sess = session.prepare(topo, dataclasses.replace(vm, kernel=art.id), runs=runs, progress=progress,
                                   artifact=art if own_build is not None else None)  # fmt: skip
            outs = run(sess, info)
            edit_to_verdict = time.monotonic() - t0
            for o in outs:  # the loop's own figures go into each run's results.json too
                o.timing.update(build_s=round(build_s, 2), edit_to_verdict_s=round(edit_to_verdict, 2))
                if o.run_dir:
                    runner.write_results(o, o.run_dir)
            o = standing(outs, repeat, per_verdict)
            view.judged(info, build_s, edit_to_verdict, iterate.verdict_changes(last, o))
            if o.status in runner.JUDGED:
                iterate.save_verdict(tree, topo.arch, recipe, o, info)
                last = o
            rc = runner.EXIT[o.status]
        except LabError as e:
            prev = iterate.last_verdict(tree, topo.arch, recipe)
            if not watch:
                if prev is not None:  # printed after the error and its evidence
                    e.detail = (e.detail.rstrip() + "\n" if e.detail else "") + (
                        f"previous verdict for this tree kept: {iterate.describe_verdict(prev)}"
                    )
                raise
            view.error(e, info, prev)
            rc = e.exit_code
        if not watch:
            return rc
        try:
            fp, changed = watch_mod.wait_for_change(
                tree, lambda: iterate.fingerprint(tree), fp, on_mode=lambda mode, why: view.watching(tree, mode, why)
            )
        except KeyboardInterrupt:
            return rc
        view.rebuilding(changed)


def standing(outs: list[runner.RunOutcome], repeat: int, per_verdict: int) -> runner.RunOutcome:
    """The run that stands for the tree: the worst of --repeat runs, or of the majority
    verdict's runs one that agrees with the majority (an ERROR stands when one ran)."""
    if repeat > 1 or per_verdict == 1:
        return max(outs, key=lambda x: runner.SEVERITY.get(x.status, 3))
    v = runner.majority(outs, per_verdict)
    return next((o for o in reversed(outs) if o.status == v.status), outs[-1])
