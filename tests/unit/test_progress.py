"""lab.progress: plain lines off a terminal (no control characters), nothing when quiet."""

import io
import re

from lab import progress


def test_plain_progress_is_timestamped_lines_and_says_when_slow_steps_end(monkeypatch):
    monkeypatch.setattr(progress, "SLOW_S", 0.0)  # every step counts as slow
    out = io.StringIO()
    p = progress.PlainProgress(out)
    with p.step("boot", "zen3-2s-mini"):
        pass
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"\[ +\d+\.\ds\] boot: zen3-2s-mini", lines[0])
    assert re.fullmatch(r"\[ +\d+\.\ds\] boot: done \(\d+\.\ds\)", lines[1])
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


def test_fast_steps_and_frequent_updates_stay_quiet():
    out = io.StringIO()
    p = progress.PlainProgress(out)
    with p.step("snapshot"):
        for i in range(100):
            p.update(f"line {i}")
    assert out.getvalue().splitlines() == ["[   0.0s] snapshot"]


def test_callback_feeds_the_current_step_and_base_progress_prints_nothing(capsys):
    p = progress.of(None)
    with p.step("build"):
        p.callback()("CC", "kernel/sched/fair.o")
    assert capsys.readouterr() == ("", "")


def test_kernel_build_piped_shows_timestamped_progress(monkeypatch, tmp_path):
    """`lab kernel build` in a CI log: plain lines on stderr while it builds, the store id
    alone on stdout (its own rich spinner printed nothing at all when piped)."""
    from click.testing import CliRunner

    from lab.cli import main
    from lab.kernel import build as kbuild

    class Artifact:
        id, label, release, arch = "ab" * 16, "lab-6.1@abababab", "6.1.192", "x86_64"
        metadata = {"image_size": 4e6}
        image = tmp_path / "bzImage"

    def fake_build(recipe, *, jobs=None, progress=None, force=False):
        for i in range(3):
            progress("CC", f"kernel/sched/f{i}.o")
        return Artifact()

    monkeypatch.setattr(progress, "SLOW_S", 0.0)
    monkeypatch.setattr(progress, "_PLAIN_UPDATE_EVERY_S", 0.0)
    monkeypatch.setattr(kbuild, "build", fake_build)
    r = CliRunner().invoke(main, ["kernel", "build", "lab-6.1"])
    assert r.exit_code == 0, r.output + r.stderr
    assert r.stdout == "ab" * 16 + "\n"
    lines = r.stderr.splitlines()
    assert re.fullmatch(r"\[ +\d+\.\ds\] build: kernel lab-6.1 \(x86_64\)", lines[0]), lines
    assert any(re.fullmatch(r"\[ +\d+\.\ds\] build: CC: kernel/sched/f2\.o", ln) for ln in lines), lines
    assert "\x1b" not in r.stderr and "lab-6.1@abababab: 6.1.192 x86_64 4.0 MB" in r.stderr
