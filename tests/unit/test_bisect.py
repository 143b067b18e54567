"""lab bisect without a real kernel: git's exit-code protocol, lab's clone of the
developer's tree (never written), git bisect run driven and read, a failed build as a
skip, ends that do not bisect refused before bisecting, and the report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import bisect
from lab.cli import main
from lab.errors import UserError

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def git(tree: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(tree), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def history(tmp_path, fake_kernels, monkeypatch):
    """The fake kernel tree as a git history: base, then c1..c4; c2 adds the file
    BAD (the 'regression'), c3 the file BROKEN and c4 removes it (commits to skip)."""
    kdir, tree = fake_kernels()
    monkeypatch.setenv("LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LAB_KERNELS", str(kdir))
    from lab import paths

    monkeypatch.setattr(paths, "KERNELS", kdir)
    git(tree, "init", "-q", "-b", "main")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "base")
    shas = [git(tree, "rev-parse", "HEAD")]
    for i, (name, text) in enumerate([("c1.txt", "1"), ("BAD", "x"), ("BROKEN", "y"), ("c4.txt", "4")], 1):
        (tree / name).write_text(text)
        git(tree, "add", "-A")
        git(tree, "commit", "-qm", f"c{i}: {name}")
        shas.append(git(tree, "rev-parse", "HEAD"))
    return tree, shas


def snapshot(tree: Path) -> dict[str, tuple[int, int]]:
    """Every file under *tree* (its .git too) with size and mtime: what 'never written' means."""
    out = {}
    for dirpath, _, files in os.walk(tree):
        for f in files:
            st = os.lstat(os.path.join(dirpath, f))
            out[os.path.relpath(os.path.join(dirpath, f), tree)] = (st.st_size, st.st_mtime_ns)
    return out


def test_exit_codes_follow_git_bisect_run():
    assert bisect.exit_code("PASS") == 0
    assert bisect.exit_code("FAIL") == 1
    for skip in ("ERROR", "BUILD", "SKIP", "INCONCLUSIVE"):  # never read as good or bad
        assert bisect.exit_code(skip) == 125
    st = bisect.CommitStep("a" * 40, "s", "FAIL", passed=1, failed=2, of=3, runs=[{}, {}, {}])
    assert st.exit_code == 1 and st.describe() == "FAIL in 2 of 3 run(s)"
    assert bisect.CommitStep.from_dict({**st.to_dict(), "new_field": 1}) == st


def test_clone_is_lab_s_and_the_tree_is_never_written(history):
    tree, shas = history
    before = snapshot(tree)
    clone = bisect.workspace(tree)
    assert clone.is_relative_to(Path(os.environ["LAB_CACHE"])) and (clone / ".git").is_dir()
    assert bisect.workspace(tree) == clone  # one clone per tree, kept
    for sha in (shas[2], shas[0], shas[3]):
        bisect.checkout(clone, sha)
        assert git(clone, "rev-parse", "HEAD") == sha
        assert (clone / "BAD").exists() == (sha != shas[0])
        assert not git(clone, "status", "--porcelain")
    assert bisect.commit(tree, "main~4", "--good") == shas[0]
    bisect.check_range(tree, shas[0], shas[4])
    assert snapshot(tree) == before


def test_revisions_are_checked(history):
    tree, shas = history
    with pytest.raises(UserError, match="--good nope: not a commit in"):
        bisect.commit(tree, "nope", "--good")
    with pytest.raises(UserError, match="--bad --upload-pack=x: not a commit"):
        bisect.commit(tree, "--upload-pack=x", "--bad")
    with pytest.raises(UserError, match="not an ancestor"):
        bisect.check_range(tree, shas[4], shas[0])
    with pytest.raises(UserError, match="same commit"):
        bisect.check_range(tree, shas[1], shas[1])
    with pytest.raises(UserError, match="not a git repository"):
        bisect.check_tree(tree.parent / "kernels")
    with pytest.raises(UserError, match="give the top of the git tree"):
        bisect.check_tree(tree / "kernel" / "sched")


def _fake_step(tmp_path: Path) -> list[str]:
    """A step that answers like lab's from the commit's files: BAD -> 1, BROKEN -> 125."""
    script = tmp_path / "step.py"
    script.write_text(
        "import json, os, subprocess, sys\n"
        "sha = subprocess.run(['git', 'rev-parse', 'HEAD'], capture_output=True, text=True).stdout.strip()\n"
        "code = 125 if os.path.exists('BROKEN') else 1 if os.path.exists('BAD') else 0\n"
        "st = {'sha': sha, 'subject': 's', 'status': {0: 'PASS', 1: 'FAIL'}.get(code, 'BUILD')}\n"
        f"open({str(tmp_path / 'steps.jsonl')!r}, 'a').write(json.dumps(st) + '\\n')\n"
        "sys.exit(code)\n"
    )
    return [sys.executable, str(script)]


def test_git_bisect_run_is_driven_and_read(history, tmp_path):
    tree, shas = history
    clone = bisect.workspace(tree)
    r = bisect.run_bisect(clone, shas[0], shas[4], _fake_step(tmp_path), tmp_path / "steps.jsonl")
    assert r.first_bad == shas[2] and "git bisect start" in r.log
    assert {s.sha for s in r.steps} >= {shas[2]}
    assert not (clone / ".git" / "BISECT_LOG").exists()  # reset after


def test_skips_that_hide_the_answer_give_the_candidates(history, tmp_path):
    tree, shas = history
    clone = bisect.workspace(tree)
    # Between c2 (bad, as the good end here would be wrong) use c1 good .. c4 bad with
    # c2 and c3 unbuildable: git cannot tell which of them broke it.
    (tmp_path / "steps.jsonl").write_text("")
    step = _fake_step(tmp_path)
    step_src = Path(step[1]).read_text().replace("os.path.exists('BROKEN')", "os.path.exists('BAD') and not os.path.exists('c4.txt')")
    Path(step[1]).write_text(step_src)
    r = bisect.run_bisect(clone, shas[1], shas[4], step, tmp_path / "steps.jsonl")
    assert r.first_bad is None and set(r.candidates) == {shas[2], shas[3], shas[4]}
    text = bisect.report(r, scenario="x", topology="t", wall_s=1.0)
    assert "could not be told apart" in text and shas[2][:12] in text


def test_a_failed_build_is_a_skip_with_its_reason(history, monkeypatch):
    tree, shas = history
    from lab import scenario as sc
    from lab import topology
    from lab.plan import VmOptions

    monkeypatch.setenv("FAKE_FAIL", "1")
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    clone = bisect.workspace(tree)
    st = bisect.judge(sc.load("llc-spread-pinned"), topology.load("zen3-2s-mini"), VmOptions(), clone, shas[1], 1, "fake")
    assert st.status == "BUILD" and st.exit_code == 125
    assert "make failed" in st.reason and "fake failure" in st.reason, st.reason
    assert st.parent == shas[0] and st.subject == "c1: c1.txt"


def _judge_by_file(results: dict[str, str]):
    """bisect.judge as if every commit had been built and run: PASS or FAIL from *results*."""

    def judge(s, topo, vm, clone, sha, runs, recipe, progress=None, role=""):
        status = results[sha]
        run = {"status": status, "run_dir": f"/runs/{sha[:7]}", "expectations": [
            {"name": "targets distinct (no pile-up)", "status": status, "figures": {"distinct": 4 if status == "PASS" else 2},
             "evidence": [] if status == "PASS" else ["targets 0,4,4,4"]}]}  # fmt: skip
        return bisect.CommitStep(sha, bisect.subject(clone, sha), status, passed=int(status == "PASS"),
                           failed=int(status == "FAIL"), runs=[run], role=role, parent=shas_parent(clone, sha))  # fmt: skip

    def shas_parent(clone, sha):
        return subprocess.run(["git", "-C", str(clone), "rev-parse", f"{sha}^"], capture_output=True, text=True).stdout.strip()

    return judge


def test_a_good_end_that_fails_is_refused_before_bisecting(history, monkeypatch):
    tree, shas = history
    monkeypatch.setattr(bisect, "judge", _judge_by_file({shas[0]: "FAIL", shas[4]: "FAIL"}))
    monkeypatch.setattr(bisect, "run_bisect", lambda *a, **k: pytest.fail("bisected although the good end fails"))
    r = CliRunner().invoke(main, ["bisect", "llc-spread-pinned", "--kernel-tree", str(tree), "--good", shas[0][:10],
                                  "--bad", "main", "--repeat", "1", "--recipe", "fake"])  # fmt: skip
    assert r.exit_code == 2, r.output
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"lab: error: the good commit {shas[0][:12]} (base) fails llc-spread-pinned on zen3-2s-mini (FAIL in 1 of 1 run(s); run dir /runs/")
    assert "nothing to bisect" in line


def test_a_bad_end_that_passes_is_refused(history, monkeypatch):
    tree, shas = history
    monkeypatch.setattr(bisect, "judge", _judge_by_file({shas[0]: "PASS", shas[4]: "PASS"}))
    monkeypatch.setattr(bisect, "run_bisect", lambda *a, **k: pytest.fail("bisected although the bad end passes"))
    r = CliRunner().invoke(main, ["bisect", "llc-spread-pinned", "--kernel-tree", str(tree), "--good", shas[0], "--bad", shas[4], "--repeat", "1", "--recipe", "fake"])
    assert r.exit_code == 2 and "the bad commit" in r.stderr and "passes llc-spread-pinned" in r.stderr, r.output


def test_report_shows_both_sides(history, monkeypatch, tmp_path):
    tree, shas = history
    judge = _judge_by_file({shas[0]: "PASS", shas[1]: "PASS", shas[2]: "FAIL", shas[3]: "FAIL", shas[4]: "FAIL"})
    clone = bisect.workspace(tree)
    steps = [judge(None, None, None, clone, s, 1, None, role=role) for s, role in
             ((shas[0], "good end"), (shas[4], "bad end"), (shas[2], ""), (shas[1], ""))]  # fmt: skip
    text = bisect.report(bisect.BisectResult(shas[2], [shas[2]], steps, ""), scenario="llc-spread-pinned", topology="zen3-2s-mini", wall_s=42)
    lines = text.splitlines()
    assert lines[0] == f"first bad commit: {shas[2][:12]} c2: BAD"
    assert any(ln.startswith(f"bad  {shas[2][:12]} FAIL in 1 of 1 run(s)") for ln in lines)
    assert any(ln.startswith(f"good {shas[1][:12]} PASS in 1 of 1 run(s): c1: c1.txt") for ln in lines)  # its parent
    assert "      targets 0,4,4,4" in lines, text
    assert "both ends and 2 step(s) judged, 0 skipped, 42s" in " ".join(text.split())
    for ln in lines:
        assert ln.isascii() and len(ln) <= 80


# --- lab bisect --confidence: the SPRT in lab's bisection (lab.bisect_seq) ----------------


class _Outcome:
    def __init__(self, status: str, n: int):
        self.status, self.message, self.run_dir = status, "", f"/runs/{n}"

    def to_dict(self):
        return {"status": self.status, "run_dir": self.run_dir, "expectations": []}


def _fake_runs(monkeypatch, statuses: dict[str, list[str]]):
    """bisect._build and bisect._run as if each commit had built and its runs gave
    *statuses*[sha] in turn (no kernel, no VM)."""
    from lab import session

    def build(clone, sha, topo, recipe, p, role, runs, t0):
        return bisect.CommitStep(sha, bisect.subject(clone, sha), "ERROR", of=runs, role=role), type("Art", (), {"id": f"k-{sha[:7]}"})()

    def run(s, topo, vm, sess, art, clone, sha, p, label, n):
        return _Outcome(statuses[sha][n - 1], n)

    monkeypatch.setattr(bisect, "_build", build)
    monkeypatch.setattr(bisect, "_run", run)
    monkeypatch.setattr(session, "prepare", lambda topo, vm: None)


def test_sequential_options_are_checked(history):
    tree, shas = history
    base = ["bisect", "llc-spread-pinned", "--kernel-tree", str(tree), "--good", shas[0], "--bad", shas[4], "--recipe", "fake"]
    for extra, msg in ((["--confidence", "1.5"], "lab: error: --confidence 1.5: give a probability above 0.5 and below 1 (e.g. 0.95)"),
                       (["--max-runs", "9"], "lab: error: --max-runs goes with --confidence (the fixed majority's runs are --repeat)"),
                       (["--confidence", "0.95", "--repeat", "3"], "lab: error: --repeat and --confidence: give one (a fixed majority of N runs, or a sequential test)")):  # fmt: skip
        r = CliRunner().invoke(main, base + extra)
        assert r.exit_code == 2 and r.stderr.strip().splitlines() == [msg], r.output


def test_a_good_end_that_fails_more_often_is_refused_with_both_rates(history, monkeypatch):
    tree, shas = history
    _fake_runs(monkeypatch, {shas[0]: ["FAIL", "PASS"] + ["FAIL"] * 4, shas[4]: ["PASS"] * 6})
    monkeypatch.setattr(bisect, "run_bisect", lambda *a, **k: pytest.fail("bisected although the good end fails"))
    r = CliRunner().invoke(main, ["bisect", "llc-spread-pinned", "--kernel-tree", str(tree), "--good", shas[0], "--bad", shas[4],
                                  "--recipe", "fake", "--confidence", "0.95"])  # fmt: skip
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("lab: error: llc-spread-pinned on zen3-2s-mini: the good end fails more often than the bad end "
                                "(good end 1/6 passed (17%), bad end 6/6 passed (100%)): nothing to bisect (steps: ")
    assert len(lines) == 3  # two progress lines, then the one-line error  # fmt: skip


def test_measure_ends_and_a_step_judged_by_sprt(history, monkeypatch):
    tree, shas = history
    from lab import bisect_seq
    from lab.plan import VmOptions

    vm = VmOptions()
    clone = bisect.workspace(tree)
    _fake_runs(monkeypatch, {shas[0]: ["PASS"] * 4, shas[4]: ["FAIL"] * 4, shas[2]: ["FAIL"] * 3,
                             shas[1]: ["PASS", "FAIL"] * 5})  # fmt: skip
    ends, g, b = bisect.measure_ends(None, None, vm, clone, shas[0], shas[4], 0.95, 10, "fake")
    assert ends.state == "ready" and (g.status, g.passed, len(g.runs)) == ("PASS", 4, 4) and (b.status, b.failed) == ("FAIL", 4)
    assert g.seq["method"] == "ends" and g.seq["good"] == {"passed": 4, "runs": 4, "p": round(ends.p_good, 4)}
    rule = {"p_good": ends.p_good, "p_bad": ends.p_bad, "confidence": 0.95, "max_runs": 10}
    st = bisect.judge_seq(None, None, vm, clone, shas[2], rule, "fake")
    assert st.status == "FAIL" and st.exit_code == 1 and len(st.runs) == 3
    assert st.describe() == f"FAIL in 3 of 3 run(s), confidence {st.seq['confidence']:.3f}" and st.seq["confidence"] >= 0.95
    st = bisect.judge_seq(None, None, vm, clone, shas[1], rule, "fake")
    assert st.status == bisect_seq.UNDECIDED and st.exit_code == 125 and len(st.runs) == 10
    assert st.describe() == "UNDECIDED: undecided after 10 runs (5/10 passed (50%); the good end passes 80%, the bad end 20%)"


def test_the_sequential_report_states_the_answer_s_confidence(history):
    tree, shas = history
    clone = bisect.workspace(tree)
    ends = {"method": "ends", "good": {"passed": 4, "runs": 4, "p": 0.8}, "bad": {"passed": 0, "runs": 4, "p": 0.2},
            "confidence": 0.95, "max_runs": 30, "state": "ready"}  # fmt: skip

    def st(sha, status, role="", conf=None):
        return bisect.CommitStep(sha, bisect.subject(clone, sha), status, passed=3 * (status == "PASS"), failed=3 * (status == "FAIL"),
                           runs=[{"status": status, "run_dir": "/r"}] * 3, role=role,
                           seq=ends if role else {"method": "sprt", "confidence": conf})  # fmt: skip

    steps = [st(shas[0], "PASS", "good end"), st(shas[4], "FAIL", "bad end"), st(shas[2], "FAIL", conf=0.985),
             st(shas[1], "PASS", conf=0.985)]  # fmt: skip
    text = bisect.report(bisect.BisectResult(shas[2], [shas[2]], steps, ""), scenario="llc-spread-pinned", topology="zen3-2s-mini", wall_s=42)
    lines = text.splitlines()
    assert lines[:4] == [
        f"first bad commit: {shas[2][:12]} c2: BAD",
        "confidence: 0.970 that this is the first bad commit (the product of 2 step",
        "  decision(s), each an SPRT at 0.95)",
        "ends: good 4/4 passed (100%), bad 0/4 passed (0%); SPRT between pass rates 0.800",
    ]
    assert f"  {shas[2][:12]} FAIL in 3 of 3 run(s), confidence 0.985: c2: BAD" in lines
    assert bisect.confidence_of(steps) == (pytest.approx(0.985**2), 2)
    assert bisect.confidence_of([st(shas[0], "PASS", "good end")][:0]) is None
    for ln in lines:
        assert ln.isascii() and len(ln) <= 80


def test_the_fixed_majority_s_records_are_unchanged():
    st = bisect.CommitStep("a" * 40, "s", "PASS", passed=2, of=3, runs=[{}, {}])
    assert "seq" not in st.to_dict() and st.describe() == "PASS in 2 of 2 run(s)"


def test_the_step_under_git_bisect_run_answers_by_the_sprt(history, monkeypatch, tmp_path):
    """lab bisect-step with a sequential state: git's 1 for a decided bad commit, 125 for
    one the SPRT cannot decide in max_runs runs, each recorded with its SPRT figures."""
    import json

    tree, shas = history
    clone = bisect.workspace(tree)
    _fake_runs(monkeypatch, {shas[2]: ["FAIL"] * 3, shas[1]: ["PASS", "FAIL"] * 3})
    steps = tmp_path / "steps.jsonl"
    steps.write_text("{}\n{}\n".replace("{}", json.dumps({"sha": shas[0], "subject": "s", "status": "PASS"})))
    state = tmp_path / "bisect.json"
    state.write_text(json.dumps({"scenario": "llc-spread-pinned", "topology": "zen3-2s-mini", "runs": 3, "recipe": "fake",
                                 "clone": str(clone), "steps": str(steps), "vm": {"accel": "tcg"},
                                 "sequential": {"p_good": 0.8, "p_bad": 0.2, "confidence": 0.95, "max_runs": 6}}))  # fmt: skip
    for sha, code, status in ((shas[2], 1, "FAIL"), (shas[1], 125, "UNDECIDED")):
        bisect.checkout(clone, sha)
        r = CliRunner().invoke(main, ["bisect-step", str(state)])
        assert r.exit_code == code, r.output
        st = bisect.read_steps(steps)[-1]
        assert st.sha == sha and st.status == status and st.seq["method"] == "sprt"
    assert st.reason == "undecided after 6 runs (3/6 passed (50%); the good end passes 80%, the bad end 20%)"
