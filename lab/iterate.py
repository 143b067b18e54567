"""The developer's loop: their own kernel tree, built out of tree, judged by a scenario.

``tree_kernel()`` builds the working tree with a recipe's config (the tree is
mirrored into lab's cache and built there with O=, incrementally, with ccache;
the tree itself is never written).  ``fingerprint()`` tells when the tree
changed, for ``lab run --watch``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

from . import arch as archs
from . import atomic, proc
from .errors import BuildError, UserError
from .kernel import build as kbuild
from .kernel import recipe as krecipe
from .kernel.source import git_dirty


def check_tree(tree: Path, arch: str | None = None) -> Path:
    """*tree* is a kernel source tree lab can build for *arch* out of tree, or a
    UserError says what it is instead."""
    tree = tree.expanduser().resolve()
    if not tree.is_dir():
        raise UserError(f"--kernel-tree {tree}: no such directory")
    missing = [f for f in ("Makefile", "Kconfig", "kernel/sched/fair.c") if not (tree / f).exists()]
    if missing:
        raise UserError(f"--kernel-tree {tree}: not a kernel tree (no {missing[0]})")
    builds = [a.name for a in archs.ARCHES.values() if (tree / "arch" / a.kernel_arch / "Kconfig").is_file()]
    if arch is not None and arch not in builds:
        have = ", ".join(sorted(builds)) or "neither " + " nor ".join(archs.NAMES)
        raise UserError(
            f"--kernel-tree {tree}: no arch/{archs.get(arch).kernel_arch}/Kconfig, so it cannot build {arch} kernels "
            f"(the topology is {arch}; the tree builds {have})"
        )
    if (tree / ".config").exists() or (tree / "include" / "config" / "auto.conf").exists():
        configured = _config_arch(tree / ".config")
        what = f" for {configured}" if configured else ""
        raise UserError(
            f"--kernel-tree {tree}: the tree is configured in place{what} (.config); an out-of-tree build "
            "refuses such a tree: run `make mrproper` there (lab keeps its own config and objects)"
        )
    return tree


def _config_arch(config: Path) -> str | None:
    try:
        text = config.read_text(errors="replace")
    except OSError:
        return None
    lines = set(text.splitlines())
    # lab's arches, then the 32-bit ones a tree may be configured for.
    for sym, arch in (*((a.kconfig, a.name) for a in archs.ARCHES.values()), ("X86_32", "i386"), ("ARM", "arm")):
        if f"CONFIG_{sym}=y" in lines:
            return arch
    return None


def default_recipe(arch: str) -> str:
    return archs.get(arch).recipe


def describe(tree: Path) -> dict[str, str]:
    """What code is being judged: git describe and a hash of the uncommitted diff."""
    info = {"tree": str(tree)}
    if (tree / ".git").exists():
        d = proc.run(["git", "-C", tree, "describe", "--always", "--dirty", "--tags"], check=False)
        info["git_describe"] = d.stdout.decode().strip() if d.returncode == 0 else "?"

        digest, new = git_dirty(tree)
        info["diff_sha256"] = digest or "clean"
        if new:
            info["untracked_files"] = str(new)
    else:
        info["git_describe"] = "(not a git tree)"
        info["diff_sha256"] = fingerprint(tree)[:16]
    return info


def tree_version(tree: Path) -> str | None:
    """'6.12' from the tree's top Makefile (VERSION, PATCHLEVEL), or None."""
    try:
        head = (tree / "Makefile").read_text(errors="replace")[:2000]
    except OSError:
        return None
    v = re.search(r"^VERSION\s*=\s*(\d+)\s*$", head, re.M)
    p = re.search(r"^PATCHLEVEL\s*=\s*(\d+)\s*$", head, re.M)
    return f"{v.group(1)}.{p.group(1)}" if v and p else None


def recipe_for_tree(tree: Path, arch: str) -> str:
    """The recipe a tree is built with when --recipe is not given: the one of the tree's
    own kernel line (a 6.12 tree: lab-6.12 / lab-6.12-arm64), else the arch's default.
    lab-6.1's config and patches on a 6.12 tree would judge the wrong config."""

    ver = tree_version(tree)
    default = default_recipe(arch)
    if ver:
        for name in (f"lab-{ver}", f"lab-{ver}-{arch}"):
            if name in krecipe.names() and krecipe.load(name).arch == arch:
                return name
    return default


def tree_recipe(tree: Path, arch: str, recipe_name: str | None = None):
    """The recipe that builds *tree*: the named recipe with the tree as its source."""

    name = recipe_name or recipe_for_tree(tree, arch)
    r = krecipe.load(name)
    if r.arch != arch:
        raise UserError(f"--recipe {name} builds {r.arch}, the topology is {arch}")
    # One work directory (mirror + objects) per tree, so rebuilds are incremental.
    variant = "tree-" + hashlib.sha256(str(tree).encode()).hexdigest()[:8]
    return dataclasses.replace(r, source=str(tree), variant=variant)


def tree_kernel(tree: Path, arch: str, recipe_name: str | None = None, progress=None):
    """Build *tree* with the recipe's config, patches and fragments; returns the artifact."""

    tree = check_tree(tree, arch)
    r = tree_recipe(tree, arch, recipe_name)
    try:
        return kbuild.build(r, progress=progress or kbuild._noop)
    except BuildError as e:
        # gcc names the files it compiled in lab's mirror of the tree: relative to the
        # object directory ("../src/kernel/sched/fair.c", as kbuild passes them with O=)
        # or absolute.  Name the developer's own files instead, which their editor opens.
        work = kbuild.work_dir(r)
        raise BuildError(own_paths(str(e), work, tree), own_paths(e.detail, work, tree), e.log) from None


def own_paths(text: str, work: Path, tree: Path) -> str:
    """*text* with paths into the mirror under *work* rewritten into *tree*."""
    mirror = work / "src"
    text = text.replace(f"{mirror}/", f"{tree}/")
    rel = os.path.relpath(mirror, work / "obj")  # "../src"
    return re.sub(rf"(?<![\w./-]){re.escape(rel)}/", f"{tree}/", text)


def _verdict_file(tree: Path, arch: str, recipe_name: str | None) -> Path:
    return kbuild.work_dir(tree_recipe(tree, arch, recipe_name)) / "last-verdict.json"


def save_verdict(tree: Path, arch: str, recipe_name: str | None, outcome, info: dict) -> None:
    """Remember the tree's latest verdict, so a later broken build can say which
    verdict still stands (and where its evidence is)."""

    f = _verdict_file(tree, arch, recipe_name)
    f.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "status": outcome.status, "scenario": outcome.scenario, "topology": outcome.topology,
        "kernel": outcome.kernel, "run_dir": str(outcome.run_dir) if outcome.run_dir else None,
        "git_describe": info.get("git_describe"), "diff_sha256": info.get("diff_sha256"),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }  # fmt: skip
    atomic.write_text(f, json.dumps(doc, indent=1), "the tree's last verdict")


def last_verdict(tree: Path, arch: str, recipe_name: str | None) -> dict | None:
    """The verdict saved by the last run on *tree* (any scenario), or None."""

    try:
        return json.loads(_verdict_file(tree, arch, recipe_name).read_text())
    except (OSError, ValueError, UserError):
        return None


def describe_verdict(v: dict) -> str:
    return (
        f"{v['status']} for {v['scenario']} on {v['topology']} at {v.get('git_describe')} "
        f"(diff {v.get('diff_sha256')}, {v.get('when')}); run dir {v.get('run_dir')}"
    )


def forget_tree(tree: Path, arch: str, recipe_name: str | None = None) -> None:
    """Remove the work directory (mirror and objects, ~1.7 GB) kept for *tree*."""

    shutil.rmtree(kbuild.work_dir(tree_recipe(tree.expanduser().resolve(), arch, recipe_name)), ignore_errors=True)


def fingerprint(tree: Path) -> str:
    """Changes whenever a source file under *tree* changes."""
    h = hashlib.sha256()
    if (tree / ".git").exists():
        head = proc.run(["git", "-C", tree, "rev-parse", "HEAD"], check=False).stdout
        status = proc.run(["git", "-C", tree, "status", "--porcelain=v1", "-z", "--untracked-files=normal"], check=False).stdout
        h.update(head + b"\0" + status)
        for entry in status.split(b"\0"):
            if len(entry) > 3:
                f = tree / entry[3:].decode(errors="surrogateescape")
                try:
                    st = f.stat()
                    h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
                except OSError:
                    h.update(b"gone:" + entry)
        return h.hexdigest()
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for n in sorted(filenames):
            if n.endswith((".c", ".h", ".S", "Makefile", "Kconfig", ".rs", ".lds")):
                try:
                    st = os.stat(os.path.join(dirpath, n))
                except OSError:
                    continue
                h.update(f"{dirpath}/{n}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def verdict_changes(before, after) -> list[str]:
    """What changed between two RunOutcomes: statuses and figures, one line each."""
    if before is None:
        return []
    out = []
    if before.status != after.status:
        out.append(f"verdict {before.status} -> {after.status}")
    old = {e.name: e for e in before.expectations}
    for e in after.expectations:
        o = old.get(e.name)
        if o is None:
            out.append(f"new: {e.name} {e.status}")
            continue
        if o.ok != e.ok:
            out.append(f"{e.name}: {o.status} -> {e.status}")
        for k, v in e.figures.items():
            if o.figures.get(k) != v:
                out.append(f"{e.name}: {k} {o.figures.get(k)} -> {v}")
    return out
