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
