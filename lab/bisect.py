"""`lab bisect`: the first commit of a kernel tree whose verdict on a scenario is FAIL.

``git bisect run`` drives the search; at each commit it runs lab's step (``python -m lab
bisect-step STATE``), which builds the commit with the --kernel-tree machinery
(lab.iterate: mirrored, out of tree, incremental, ccache), runs the scenario up to N
times and answers in git's terms (``exit_code``):

* PASS (a majority of the N runs) = good, 0; FAIL = bad, 1;
* a build that fails, or a recipe patch that does not apply there = skip, 125;
* ERROR (lost guest, incomplete data: nothing judged) = skip, 125, with the reason;
  INCONCLUSIVE (the emulation decided the outcome, or under --scheduler the scenario's
  claims are about the kernel's own scheduler) likewise, naming the cause.

The developer's tree is never written: the bisection runs in a clone lab owns
(``git clone --shared`` into lab's cache: it reads the developer's objects, writes only
its own files, and keeps its build objects between bisections).  Both ends are judged
before bisecting: a good end that fails, or a bad end that passes, is refused saying so.
Each judged commit is one JSON line in the bisection's ``steps.jsonl``, so the result
shows both sides' evidence.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import bisect_seq, iterate, lock, paths, proc, runner, session, topology
from . import progress as progress_mod
from . import scenario as sc
from .bisect_seq import overall_confidence, rate_text
from .errors import BuildError, InfraError, UserError
from .plan import VmOptions
from .progress import Progress

GOOD, BAD, SKIP = 0, 1, 125
STEPS = "steps.jsonl"
STATE = "bisect.json"


def exit_code(status: str) -> int:
    """git bisect run's answer for a verdict: PASS good, FAIL bad, anything else skip."""
    return {"PASS": GOOD, "FAIL": BAD}.get(status, SKIP)


@dataclass
class CommitStep:
    """One commit judged: its verdict from up to *of* runs, or why there is none."""

    sha: str
    subject: str
    status: str  # PASS | FAIL | INCONCLUSIVE | ERROR | BUILD (the build failed or a patch did not apply)
    reason: str = ""
    passed: int = 0
    failed: int = 0
    of: int = 1
    runs: list[dict[str, Any]] = field(default_factory=list)  # RunOutcome.to_dict() of each run
    kernel_id: str = ""
    build_s: float = 0.0
    wall_s: float = 0.0
    role: str = ""  # "good end", "bad end", or "" for a bisection step
    parent: str = ""  # the first parent's sha
    # lab bisect --confidence: the SPRT's record (bisect_seq.Sprt.to_dict(), or the ends'
    # rates for an end); None for the fixed majority, whose steps.jsonl lines stay as they were.
    seq: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        return exit_code(self.status)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["seq"] is None:
            del d["seq"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommitStep:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def describe(self) -> str:
        if self.status in ("PASS", "FAIL"):
            text = f"{self.status} in {self.passed if self.status == 'PASS' else self.failed} of {len(self.runs)} run(s)"
            conf = (self.seq or {}).get("confidence")
            if (self.seq or {}).get("method") == "sprt" and isinstance(conf, (int, float)):
                text += f", confidence {conf:.3f}"
            return text
        return f"{self.status}: {self.reason}"


# --- the developer's tree and lab's clone --------------------------------------------------


def _git(repo: Path, *args: str, check: bool = True, timeout: float = 600) -> str:
    return proc.run(["git", "-C", repo, *args], check=check, timeout=timeout).stdout.decode(errors="replace").strip()


def commit(tree: Path, rev: str, what: str) -> str:
    """The full sha of *rev* in *tree*, or a UserError naming the option."""
    cp = proc.run(["git", "-C", tree, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], check=False)
    sha = cp.stdout.decode().strip()
    if cp.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40,64}", sha):
        raise UserError(f"{what} {rev}: not a commit in {tree}")
    return sha


def check_kernel(tree: Path, sha: str, what: str) -> None:
    """The commit *sha* holds a kernel tree (read from git, nothing checked out)."""
    for f in ("Makefile", "Kconfig", "kernel/sched/fair.c"):
        if proc.run(["git", "-C", tree, "cat-file", "-e", f"{sha}:{f}"], check=False).returncode != 0:
            raise UserError(f"{what} {sha[:12]}: not a kernel tree there (no {f} in {tree} at that commit)")


def check_range(tree: Path, good: str, bad: str) -> None:
    """*good* must be an ancestor of *bad*, and not the same commit."""
    if good == bad:
        raise UserError(f"--good and --bad are the same commit ({good[:12]}): nothing to bisect")
    cp = proc.run(["git", "-C", tree, "merge-base", "--is-ancestor", good, bad], check=False)
    if cp.returncode != 0:
        raise UserError(f"--good {good[:12]} is not an ancestor of --bad {bad[:12]} in {tree}: git bisect needs a good commit before the bad one")


def check_tree(tree: Path) -> Path:
    """*tree* is a git kernel tree (its work tree may be dirty: only commits are judged)."""
    tree = tree.expanduser().resolve()
    if not tree.is_dir():
        raise UserError(f"--kernel-tree {tree}: no such directory")
    cp = proc.run(["git", "-C", tree, "rev-parse", "--show-toplevel"], check=False)
    if cp.returncode != 0:
        raise UserError(f"--kernel-tree {tree}: not a git repository (lab bisect needs the tree's history)")
    top = Path(cp.stdout.decode().strip())
    if top.resolve() != tree:
        raise UserError(f"--kernel-tree {tree}: give the top of the git tree ({top})")
    return tree


def workspace_name(tree: Path) -> str:
    return f"{_slug(tree.name)}-{hashlib.sha256(str(tree).encode()).hexdigest()[:8]}"


def workspace(tree: Path) -> Path:
    """lab's clone of *tree* for bisecting, made once per tree (its build objects are
    kept, so later bisections build incrementally).  ``--shared``: the clone reads the
    developer's object store and writes nothing there.  Callers hold the cache lock
    ``bisect-<workspace_name>``: one bisection per clone at a time."""
    dest = paths.cache_dir() / "bisect" / workspace_name(tree)
    if (dest / ".git").is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    paths.clean_stale(dest.parent)
    tmp = dest.parent / paths.tmp_prefix(dest.name)
    try:
        proc.run(["git", "clone", "--shared", "--no-checkout", "--quiet", tree, tmp], timeout=3600)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s)[:40] or "tree"


def checkout(clone: Path, sha: str) -> None:
    """*clone*'s work tree at *sha*, exactly (nothing left of another commit)."""
    _git(clone, "checkout", "--quiet", "--force", "--detach", sha, timeout=1800)
    _git(clone, "clean", "--quiet", "-fdx", timeout=1800)


def steps_left(clone: Path) -> int | None:
    """Roughly how many more steps the bisection in *clone* takes (git's estimate)."""
    goods = _git(clone, "for-each-ref", "--format=%(objectname)", "refs/bisect/good-*", check=False).split()
    out = _git(clone, "rev-list", "--bisect-vars", "refs/bisect/bad", "--not", *goods, check=False)
    m = re.search(r"^bisect_steps=(\d+)", out, re.M)
    return int(m[1]) if m else None


def subject(repo: Path, sha: str) -> str:
    return _git(repo, "show", "-s", "--format=%s", sha, check=False)


# --- judging one commit ---------------------------------------------------------------------


def judge(s, topo, vm, clone: Path, sha: str, runs: int, recipe: str | None, progress=None, role: str = "") -> CommitStep:
    """Build *clone* at *sha* and run *s* until a majority of up to *runs* runs decides.
    Never raises for what the commit does (a failed build, an ERROR): the CommitStep says it."""

    p = progress_mod.of(progress)
    t0 = time.monotonic()
    step, art = _build(clone, sha, topo, recipe, p, role, runs, t0)
    if art is None:
        return step
    sess = session.prepare(topo, dataclasses.replace(vm, kernel=art.id))
    outcomes: list = []
    while not outcomes or not runner.majority(outcomes, runs).decided:
        n = len(outcomes) + 1
        outcomes.append(_run(s, topo, vm, sess, art, clone, sha, p, f"run {n}/{runs}" if runs > 1 else "run", n))
    v = runner.majority(outcomes, runs)
    step.status, step.passed, step.failed = v.status, v.passed, v.failed
    step.runs = [o.to_dict() for o in outcomes]
    if v.status in ("ERROR", "INCONCLUSIVE"):
        err = next((o for o in outcomes if o.status == v.status), None)
        step.reason = err.message if err else "no majority"
    step.wall_s = round(time.monotonic() - t0, 1)
    return step


def _build(clone: Path, sha: str, topo, recipe: str | None, p, role: str, runs: int, t0: float):
    """*clone* checked out at *sha* and built: (the CommitStep so far, the kernel), or (the
    CommitStep saying why it did not build, None)."""

    checkout(clone, sha)
    step = CommitStep(sha, subject(clone, sha), "ERROR", of=runs, role=role, parent=_git(clone, "rev-parse", "--verify", "--quiet", f"{sha}^", check=False))
    try:
        with p.step("build", f"{sha[:12]} {step.subject}"):
            art = iterate.tree_kernel(clone, topo.arch, recipe, progress=p.callback())
    except BuildError as e:
        step.status, step.reason = "BUILD", " ".join(str(e).split())
        step.wall_s = round(time.monotonic() - t0, 1)
        return step, None
    except UserError as e:  # a recipe patch that does not apply to this commit
        step.status, step.reason = "BUILD", " ".join(str(e).split())
        step.wall_s = round(time.monotonic() - t0, 1)
        return step, None
    step.kernel_id, step.build_s = art.id, round(time.monotonic() - t0, 1)
    return step, art


def _run(s, topo, vm, sess, art, clone: Path, sha: str, p, label: str, n: int):
    """One run of *s* on the built kernel *art*: its RunOutcome."""

    info = {"git_describe": sha, "tree": str(clone)}
    argv = session.run_argv(s.name, topo, dataclasses.replace(vm, kernel=art.id))
    with p.step(label, f"{s.name} on {topo.name}"), session.command(argv):
        o = runner.run_once(s, sess, kernel_info=info, on_event=lambda t, line: p.update(f"{line.removeprefix('lab: ')} (+{t:.1f}s)"))
    p.note(f"  {sha[:12]} run {n}: {o.status}" + (f" ({o.message})" if o.message else "") + f"; {o.run_dir}")
    return o


# --- lab bisect --confidence: both ends measured, each step an SPRT (lab.bisect_seq) ---------


def measure_ends(s, topo, vm, clone: Path, good: str, bad: str, confidence: float, max_runs: int,
                 recipe: str | None, progress=None):  # fmt: skip
    """Build both ends and run them interleaved until their pass rates are told apart
    (bisect_seq.estimate_ends): (Ends, the good end's CommitStep, the bad end's CommitStep).  An end
    that does not build is an Ends refused as unjudged, its CommitStep saying why."""

    p = progress_mod.of(progress)
    built: dict[str, Any] = {}
    for role, sha in (("good end", good), ("bad end", bad)):
        t0 = time.monotonic()
        step, art = _build(clone, sha, topo, recipe, p, role, max_runs, t0)
        if art is None:
            ends = bisect_seq.Ends(confidence, max_runs, state="refused", unjudged=True,
                                   why=f"the {role} does not build: {step.reason}")  # fmt: skip
            return ends, step, None
        built[role] = (step, art, session.prepare(topo, dataclasses.replace(vm, kernel=art.id)), t0, sha, [])

    def runner_for(role: str):
        step, art, sess, _t0, sha, outcomes = built[role]

        def run() -> str:
            n = len(outcomes) + 1
            o = _run(s, topo, vm, sess, art, clone, sha, p, f"{role} run {n}", n)
            outcomes.append(o)
            return o.status

        return run

    ends = bisect_seq.estimate_ends(runner_for("good end"), runner_for("bad end"), confidence, max_runs)
    steps = []
    for role in ("good end", "bad end"):
        step, _art, _sess, t0, _sha, outcomes = built[role]
        passed, judged = ends.good_rate if role == "good end" else ends.bad_rate
        step.passed, step.failed = passed, judged - passed
        step.runs = [o.to_dict() for o in outcomes]
        bad_run = next((o for o in outcomes if o.status not in bisect_seq.JUDGED), None)
        want = "PASS" if role == "good end" else "FAIL"
        step.status = bad_run.status if bad_run else want if ends.state == "ready" else ("PASS" if passed * 2 > judged else "FAIL")
        step.reason = bad_run.message if bad_run else ""
        step.seq = {"method": "ends", **ends.to_dict()}
        step.wall_s = round(time.monotonic() - t0, 1)
        steps.append(step)
    return ends, steps[0], steps[1]


def judge_seq(s, topo, vm, clone: Path, sha: str, rule: dict[str, Any], recipe: str | None, progress=None) -> CommitStep:
    """Build *clone* at *sha* and run *s* until the SPRT of *rule* (p_good, p_bad,
    confidence, max_runs: lab bisect's state) decides; a step it cannot decide in
    max_runs runs is UNDECIDED (skipped) with its rates.  Never raises for what the
    commit does."""

    p = progress_mod.of(progress)
    t0 = time.monotonic()
    max_runs = int(rule["max_runs"])
    step, art = _build(clone, sha, topo, recipe, p, "", max_runs, t0)
    if art is None:
        return step
    sess = session.prepare(topo, dataclasses.replace(vm, kernel=art.id))
    outcomes: list = []

    def run() -> str:
        n = len(outcomes) + 1
        outcomes.append(_run(s, topo, vm, sess, art, clone, sha, p, f"run {n} (of up to {max_runs})", n))
        return outcomes[-1].status

    t = bisect_seq.judge_step(run, float(rule["p_good"]), float(rule["p_bad"]), float(rule["confidence"]), max_runs)
    step.status, step.passed, step.failed = t.status, t.passed, t.failed
    step.runs = [o.to_dict() for o in outcomes]
    step.seq = t.to_dict()
    if t.status == bisect_seq.UNDECIDED:
        step.reason = t.reason()
    elif t.status not in bisect_seq.JUDGED:
        step.reason = outcomes[-1].message if outcomes else ""
    step.wall_s = round(time.monotonic() - t0, 1)
    return step


def confidence_of(steps: list[CommitStep]) -> tuple[float, int] | None:
    """The first bad commit's confidence from the SPRT steps (bisect_seq.overall_confidence)
    and how many decisions it multiplies; None when the bisection was not sequential."""

    seq = [st for st in steps if not st.role and st.seq]
    if not any(st.seq for st in steps):
        return None
    confs = [st.seq.get("confidence") if st.seq and st.exit_code != SKIP else None for st in seq]
    return overall_confidence(confs), sum(c is not None for c in confs)


def record(log: Path, step: CommitStep) -> None:
    """Append *step* to the bisection's steps.jsonl (one line, written whole)."""
    with open(log, "a") as f:
        f.write(json.dumps(step.to_dict(), default=str) + "\n")


def read_steps(log: Path) -> list[CommitStep]:
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [CommitStep.from_dict(json.loads(x)) for x in lines if x.strip()]


# --- the bisection ----------------------------------------------------------------------------


@dataclass
class BisectResult:
    first_bad: str | None  # None: skipped commits hide it (then *candidates*)
    candidates: list[str]
    steps: list[CommitStep]
    log: str  # git bisect log


_FIRST_BAD = re.compile(r"^([0-9a-f]{40,64}) is the first bad commit", re.M)
_COULD_BE = re.compile(r"The first bad commit could be any of:\n((?:[0-9a-f]{40,64}\n?)+)")


def run_bisect(clone: Path, good: str, bad: str, step_argv: list[str], steps_log: Path) -> BisectResult:
    """``git bisect run`` in *clone* between *good* and *bad*, each commit judged by
    *step_argv* (whose progress goes to lab's stderr; git's own chatter is kept for the
    log).  The clone is reset whatever happens."""

    _git(clone, "bisect", "reset", check=False)
    try:
        _git(clone, "bisect", "start", bad, good)
        cp = proc.run(["git", "-C", clone, "bisect", "run", *step_argv], check=False, capture=False,
                      stdout=subprocess.PIPE, timeout=None)  # fmt: skip
        out = cp.stdout.decode(errors="replace")
        blog = _git(clone, "bisect", "log", check=False)
    finally:
        _git(clone, "bisect", "reset", check=False)
    m = _FIRST_BAD.search(out)
    if m:
        return BisectResult(m[1], [m[1]], read_steps(steps_log), blog)
    m2 = _COULD_BE.search(out)
    if m2:
        return BisectResult(None, m2[1].split(), read_steps(steps_log), blog)
    tail = proc.tail(out, 5)
    raise InfraError(f"git bisect run stopped without an answer (exit {cp.returncode}): {tail}")


# --- the driver (`lab bisect` and its step under git bisect run) ------------------------------


@dataclass
class Bisection:
    """A finished bisection: its answer, the report (mail text) and where it is kept."""

    result: BisectResult
    text: str
    run_dir: Path


def _abs(arg: str) -> str:
    """A name as it is; a file (a scenario or recipe path) as its absolute path."""
    p = Path(arg)
    return str(p.resolve()) if ("/" in arg or p.suffix) and p.exists() else arg


def drive(
    scenario_name: str, topo: topology.Topology | None, tree: Path, good: str, bad: str, vm: VmOptions, *,
    repeat: int | None = None, confidence: float | None = None, max_runs: int | None = None, recipe: str | None = None,
    progress: Progress,
) -> Bisection:  # fmt: skip
    """Find the first commit between *good* and *bad* of *tree* where *scenario_name*
    fails on *topo* (None: the scenario's first): every input checked before any work,
    both ends judged (by a majority of *repeat* runs, or with *confidence* by the SPRT
    of lab.bisect_seq, up to *max_runs* runs), then ``git bisect run`` with lab's step.
    Bad input is a UserError; an end that cannot be judged an InfraError."""

    t0 = time.monotonic()
    if confidence is not None:
        bisect_seq.check_confidence(confidence)
        if repeat is not None:
            raise UserError("--repeat and --confidence: give one (a fixed majority of N runs, or a sequential test)")
        max_runs = max_runs if max_runs is not None else bisect_seq.DEFAULT_MAX_RUNS
    elif max_runs is not None:
        raise UserError("--max-runs goes with --confidence (the fixed majority's runs are --repeat)")
    s = sc.load(scenario_name)
    topo = topo or topology.load(s.topologies[0])
    unmet = s.unmet(topo)
    if unmet:
        raise UserError(f"{s.name} cannot run on {topo.name}: the topology lacks {'; '.join(unmet)}")
    runs = repeat if repeat is not None else s.verdict_runs
    if runs % 2 == 0:
        raise UserError(f"--repeat {runs}: give an odd number of runs per commit (a majority must exist)")
    tree = check_tree(tree)
    iterate.tree_recipe(tree, topo.arch, recipe)  # a bad --recipe is refused before any work
    good_sha = commit(tree, good, "--good")
    bad_sha = commit(tree, bad, "--bad")
    check_range(tree, good_sha, bad_sha)
    check_kernel(tree, good_sha, "--good")
    check_kernel(tree, bad_sha, "--bad")

    p = progress
    with lock.cache_lock(f"bisect-{workspace_name(tree)}", f"bisecting {tree}", timeout=24 * 3600.0):
        with p.step("clone", f"lab's clone of {tree}"):
            clone = workspace(tree)
        d = session.new_run_dir("bisect", topo, tree.name)
        steps_log = d / STEPS
        state: dict[str, Any] = {
            # The step runs in the clone (git bisect run's working directory): files by absolute path.
            "scenario": _abs(scenario_name), "topology": session.topology_arg(topo), "runs": runs,
            "recipe": _abs(recipe) if recipe else None,
            "clone": str(clone), "steps": str(steps_log),
            "vm": vm.to_dict(),  # the step runs lab again: the options as given (VmOptions.from_dict)
        }  # fmt: skip
        if confidence is not None:
            assert max_runs is not None
            with p.step("ends", f"good {good_sha[:12]} and bad {bad_sha[:12]}, interleaved, until their pass rates are told apart"):
                seq_ends, g_st, b_st = measure_ends(s, topo, vm, clone, good_sha, bad_sha, confidence, max_runs, recipe, progress=p)
            for st in (g_st, b_st):
                if st is not None:
                    record(steps_log, st)
            if seq_ends.state != "ready":
                err = InfraError if seq_ends.unjudged else UserError
                raise err(f"{s.name} on {topo.name}: {seq_ends.why} (steps: {steps_log})")
            state["sequential"] = {"p_good": seq_ends.p_good, "p_bad": seq_ends.p_bad, "confidence": confidence, "max_runs": max_runs}
            p.note(f"ends told apart ({seq_ends.rates()}); bisecting in {clone}")
        (d / STATE).write_text(json.dumps(state, indent=1))
        for role, sha in (("good end", good_sha), ("bad end", bad_sha)) if confidence is None else ():
            with p.step(role, f"{sha[:12]} {subject(tree, sha)}"):
                st = judge(s, topo, vm, clone, sha, runs, recipe, progress=p, role=role)
            record(steps_log, st)
            what = f"the {role.split()[0]} commit {sha[:12]} ({st.subject})"
            want = "PASS" if role == "good end" else "FAIL"
            if st.status in ("PASS", "FAIL") and st.status != want:
                run = next((r for r in st.runs if r.get("status") == st.status), {})
                raise UserError(f"{what} {'fails' if want == 'PASS' else 'passes'} {s.name} on {topo.name} "
                                f"({st.describe()}; run dir {run.get('run_dir')}): nothing to bisect")  # fmt: skip
            if st.status != want:
                raise InfraError(f"{what} cannot be judged, so lab cannot bisect: {st.describe()} (steps: {steps_log})")
        if confidence is None:
            p.note(f"both ends hold (good {good_sha[:12]} PASS, bad {bad_sha[:12]} FAIL); bisecting in {clone}")
        step_argv = [sys.executable, "-m", "lab", "bisect-step", str(d / STATE)]
        result = run_bisect(clone, good_sha, bad_sha, step_argv, steps_log)
    (d / "bisect.log").write_text(result.log + "\n")
    wall = time.monotonic() - t0
    text = report(result, scenario=s.name, topology=topo.name, wall_s=wall, run_dir=str(d))
    (d / "report.txt").write_text(text)
    doc: dict[str, Any] = {"first_bad": result.first_bad, "candidates": result.candidates, "wall_s": round(wall, 1)}
    conf = confidence_of(result.steps)
    if conf is not None:
        doc["confidence"] = round(conf[0], 6) if result.first_bad else None
        doc["sequential"] = state["sequential"]
    (d / "result.json").write_text(json.dumps(doc, indent=1))
    return Bisection(result, text, d)


def step(state_file: Path, progress: Progress) -> CommitStep:
    """One step of ``git bisect run``: judge the clone's HEAD as the state file (drive())
    says, record it in the steps log, say git's answer on *progress*."""
    state = json.loads(state_file.read_text())
    clone = Path(state["clone"])
    s = sc.load(state["scenario"])
    topo = topology.load(state["topology"])
    vm = VmOptions.from_dict(state["vm"])
    sha = proc.run(["git", "-C", clone, "rev-parse", "HEAD"]).stdout.decode().strip()
    done = len(read_steps(Path(state["steps"]))) - 2
    left = steps_left(clone)
    p = progress
    with p.step(f"bisect step {done + 1}" + (f" (~{left} more)" if left is not None else ""), f"{sha[:12]} {subject(clone, sha)}"):
        if state.get("sequential"):
            st = judge_seq(s, topo, vm, clone, sha, state["sequential"], state["recipe"], progress=p)
        else:
            st = judge(s, topo, vm, clone, sha, state["runs"], state["recipe"], progress=p)
    record(Path(state["steps"]), st)
    p.note(f"{sha[:12]}: {st.describe()} -> git bisect {({0: 'good', 1: 'bad'}).get(st.exit_code, 'skip')}")
    return st


# --- the report -------------------------------------------------------------------------------


def _wrap(s: str, indent: str = "") -> list[str]:
    """*s* as ASCII lines of at most 80 columns, continuation lines indented."""

    s = s.encode("ascii", "replace").decode()
    return textwrap.wrap(s, 80, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False) or [indent]


def report(result: BisectResult, *, scenario: str, topology: str, wall_s: float, run_dir: str | None = None) -> str:
    """The bisection's answer as mail text (ASCII, at most 80 columns): the first bad
    commit, both sides' evidence, and every commit judged.  A pure function."""
    by_sha = {st.sha: st for st in result.steps}
    out: list[str] = []
    skipped = sum(st.exit_code == SKIP for st in result.steps)
    middle = sum(not st.role for st in result.steps)
    if result.first_bad:
        bad = by_sha.get(result.first_bad)
        out += _wrap(f"first bad commit: {result.first_bad[:12]} {bad.subject if bad else ''}".rstrip())
    else:
        out += _wrap("the first bad commit could not be told apart from skipped commits; it is one of:")
        for sha in result.candidates:
            st = by_sha.get(sha)
            out += _wrap(f"{sha[:12]} {st.subject if st else ''}".rstrip(), "  ")
    out += _seq_lines(result)
    out += _wrap(f"lab bisect {scenario} --topology {topology}: both ends and {middle} step(s) judged, "
                f"{skipped} skipped, {wall_s:.0f}s")  # fmt: skip
    if run_dir:
        out += _wrap(f"steps and runs: {run_dir}")
    if result.first_bad and result.first_bad in by_sha:
        bad = by_sha[result.first_bad]
        good = _good_side(result, bad)
        out.append("")
        out += _evidence("bad ", bad)
        if good is not None:
            out.append("")
            out += _evidence("good", good)
    out.append("")
    out.append("commits judged:")
    for st in result.steps:
        role = f" ({st.role})" if st.role else ""
        out += _wrap(f"{st.sha[:12]} {st.describe()}{role}: {st.subject}", "  ")
    return "\n".join(line.rstrip() for line in out) + "\n"


def _seq_lines(result: BisectResult) -> list[str]:
    """lab bisect --confidence: the answer's confidence, the rule and both ends' rates
    (nothing for the fixed majority)."""

    conf = confidence_of(result.steps)
    if conf is None:
        return []
    overall, decisions = conf
    end = next((st.seq for st in result.steps if st.role and st.seq), None) or {}
    out: list[str] = []
    if result.first_bad:
        out += _wrap(f"confidence: {overall:.3f} that this is the first bad commit (the product of {decisions} "
                     f"step decision(s), each an SPRT at {end.get('confidence', '?')})")  # fmt: skip
    good, bad = end.get("good") or {}, end.get("bad") or {}
    if good and bad:
        out += _wrap(f"ends: good {rate_text(good['passed'], good['runs'])}, bad {rate_text(bad['passed'], bad['runs'])}; "
                     f"SPRT between pass rates {good['p']:.3f} and {bad['p']:.3f}, at most {end.get('max_runs')} runs per commit")  # fmt: skip
    return out


def _good_side(result: BisectResult, bad: CommitStep) -> CommitStep | None:
    """The good side's evidence: *bad*'s parent, which git judged good before naming
    *bad* (or the good end), else the last good commit judged."""
    goods = [st for st in result.steps if st.status == "PASS"]
    parent = next((st for st in goods if st.sha == bad.parent), None)
    return parent or (goods[-1] if goods else None)


def _evidence(label: str, st: CommitStep) -> list[str]:
    out = _wrap(f"{label} {st.sha[:12]} {st.describe()}: {st.subject}")
    # The run that stands for the verdict: one that agrees with the majority.
    run = next((r for r in st.runs if r.get("status") == st.status), st.runs[-1] if st.runs else None)
    if run is None:
        return out
    for e in run.get("expectations") or []:
        figs = "  ".join(f"{k}={v}" for k, v in (e.get("figures") or {}).items())
        out += _wrap(f"{e.get('status')} {e.get('name')}: {figs}", "  ")
        if e.get("status") != "PASS":
            for line in (e.get("evidence") or [])[:6]:
                out += _wrap(str(line), "      ")
    out += _wrap(f"run dir: {run.get('run_dir')}", "  ")
    return out
