"""`lab report render`: golden text, markdown and HTML of recorded runs; text fits a
mail; the page is self-contained; the migration classes are lab.analysis's; the page
renders in a real headless Chromium with one box per CPU and no console errors.

Regenerate the golden files after an intended change with:
    LAB_REGEN=1 .venv/bin/pytest tests/unit/test_report_render.py
and review the diff (open the .html files in a browser)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main
from lab.plan import VmPlan
from lab.report import document, render
from lab.trace.parser import parse_file

RUNS = Path(__file__).parent.parent / "fixtures" / "runs"
GOLDEN = Path(__file__).parent.parent / "golden" / "report"
FIXTURES = ["llc-spread-pinned-zen3-2s-mini-lab-6.1", "cluster-wakeup-kunpeng920-2s-mini-debian"]
EXT = {"text": "txt", "markdown": "md", "html": "html"}


def doc(name: str) -> document.RunDoc:
    # As stored: the goldens check the drawing, not today's scenario (re-judging:
    # test_render_re_judges_a_run_and_says_so).
    return document.load_run(RUNS / name, source=name, stored=True)


@pytest.mark.parametrize("fmt", render.FORMATS)
@pytest.mark.parametrize("name", FIXTURES)
def test_golden(name, fmt):
    got = render.render(doc(name), fmt)
    path = GOLDEN / f"{name}.{EXT[fmt]}"
    if os.environ.get("LAB_REGEN") == "1":
        path.write_text(got)
    assert path.exists(), f"no golden file {path}; run LAB_REGEN=1 pytest {__file__}"
    assert got == path.read_text(), f"{name} {fmt}: changed; if intended, LAB_REGEN=1 and review the diff"


@pytest.mark.parametrize("name", FIXTURES)
def test_text_pastes_into_a_mail(name):
    d = doc(name)
    out = render.text(d)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80
    assert all(ord(ch) < 128 for ch in out), "plain ASCII"
    machine = [i for i, ln in enumerate(lines) if ln.startswith("Machine: ")]
    assert len(machine) == 1 and not lines[machine[0] + 1].startswith(" "), "the machine in one line"
    assert f"Verdict: {d.status}" in out and "Kernel:  " in out and "Command:" in out
    for e in d.expectations:  # every expectation's result is in the table
        assert e["status"] in out


def test_migration_classes_are_the_analysis_table():
    name = "llc-spread-pinned-zen3-2s-mini-lab-6.1"
    plan = VmPlan.read(RUNS / name)
    from lab.analysis import migrations

    g2s = plan.guest_to_spec
    m = migrations(parse_file(RUNS / name / "out" / "trace.main.txt"), plan.topo, cpu_map=lambda c: g2s[c]).table(0)
    d = doc(name).migrations
    assert (d["same core"], d["same LLC"], d["same node"], d["cross-node"], d["total"]) == (
        m.samecore, m.same_llc, m.samenode, m.crossnode, m.total,
    )
    assert m.total == 4 and m.crossnode == 1  # the run's own figures, not an empty table


@pytest.mark.parametrize("name", FIXTURES)
def test_html_is_self_contained(name):
    page = render.html(doc(name))
    assert "<script" not in page.lower()
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", page)
    assert refs == [], refs
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    d = doc(name)
    assert page.count('class="cpu"') == d.topology.n_cpus


def test_timeline_of_the_placements():
    d = doc("llc-spread-pinned-zen3-2s-mini-lab-6.1")
    tl = d.timeline
    assert tl is not None and tl.source == "placement"  # this trace has no sched_switch
    streams = [i for i, (_, comm) in enumerate(tl.tasks) if comm == "stream"]
    assert len(streams) >= 4
    # The migration the verdict failed on is a mark from CPU 4 to CPU 12 (cross-node).
    assert any(m.src == 4 and m.dst == 12 and m.klass == "cross-node" for m in tl.marks)


def test_cli_render(tmp_path):
    run = str(RUNS / FIXTURES[0])
    r = CliRunner().invoke(main, ["report", "render", "--stored", run])
    assert r.exit_code == 0 and "lab run llc-spread-pinned on zen3-2s-mini: FAIL" in r.output
    assert "verdict as stored in results.json, not re-judged" in " ".join(r.output.split())
    r = CliRunner().invoke(main, ["report", "render", run, "--format", "html", "-o", str(tmp_path / "r.html")])
    assert r.exit_code == 0 and (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    r = CliRunner().invoke(main, ["report", "render", run, "--format", "pdf"])
    assert r.exit_code == 2 and r.output.startswith("lab: error:")
    r = CliRunner().invoke(main, ["report", "render", str(RUNS / FIXTURES[0] / "out" / "trace.main.txt")])
    assert r.exit_code == 2 and "give a run directory, a bundle" in r.output
    r = CliRunner().invoke(main, ["report", "render", str(RUNS / FIXTURES[0] / "plan.json")])
    assert r.exit_code == 2 and "not a lab compare document" in r.output


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium missing: apt-get install chromium (scripts/setup.sh installs it)")
    return exe


@pytest.mark.parametrize("name", FIXTURES)
def test_html_in_headless_chromium(tmp_path, name):
    """The page as a browser makes it: no console errors, one box per CPU in the DOM,
    and a screenshot that is not blank."""
    exe = _chromium()
    page = tmp_path / "r.html"
    page.write_text(render.html(doc(name)))
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"]  # fmt: skip
    r = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    n = doc(name).topology.n_cpus
    assert len(re.findall(r'<rect class="cpu" data-cpu="\d+"', dom)) == n
    assert sorted(int(x) for x in re.findall(r'class="cpu" data-cpu="(\d+)"', dom)) == sorted(doc(name).topology.cpu_ids)
    console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln or "Refused to" in ln]
    assert console == [], console
    shot = tmp_path / "r.png"
    r = subprocess.run([*base, "--hide-scrollbars", "--window-size=1400,1800", f"--screenshot={shot}", page.as_uri()],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1400, 1800)
    assert len(data) > 50_000, "a blank page compresses to a few KiB"


# ---- a comparison (lab compare --json) -------------------------------------------------

ROOT = Path(__file__).parent.parent.parent
COMPARE = "tests/fixtures/compare/llc-spread-pinned-debian-vs-lab-6.1.json"  # its run_dirs are relative to ROOT


@pytest.fixture
def compare_doc(monkeypatch):
    monkeypatch.chdir(ROOT)
    return document.load_compare(Path(COMPARE))


@pytest.mark.parametrize("fmt", render.FORMATS)
def test_compare_golden(compare_doc, fmt):
    got = render.render(compare_doc, fmt)
    path = GOLDEN / f"compare-llc-spread-pinned.{EXT[fmt]}"
    if os.environ.get("LAB_REGEN") == "1":
        path.write_text(got)
    assert got == path.read_text(), f"compare {fmt}: changed; if intended, LAB_REGEN=1 and review the diff"


def test_compare_sides_are_drawn_side_by_side(compare_doc):
    a, b = compare_doc.runs
    assert a is not None and b is not None
    assert (a.kernel["name"], b.kernel["name"]) == ("debian", "lab-6.1")
    page = render.compare_html(compare_doc)
    assert page.count('class="timeline"') == 2 and page.count('<div class="side">') == 2
    assert page.count('class="cpu"') == compare_doc.topology.n_cpus
    assert max(map(len, render.compare_text(compare_doc).splitlines())) <= 80


def test_compare_documents_it_cannot_read(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"schema": "lab.compare", "version": 99}')
    r = CliRunner().invoke(main, ["report", "render", str(p)])
    assert r.exit_code == 2 and "newer lab" in r.output and r.output.count("\n") == 1
    p.write_text('{"hello": 1}')
    r = CliRunner().invoke(main, ["report", "render", str(p)])
    assert r.exit_code == 2 and "not a lab compare document" in r.output
    p.write_text("{")
    r = CliRunner().invoke(main, ["report", "render", str(p)])
    assert r.exit_code == 2 and "not JSON" in r.output


def test_compare_html_in_headless_chromium(tmp_path, compare_doc):
    exe = _chromium()
    page = tmp_path / "c.html"
    page.write_text(render.compare_html(compare_doc))
    r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}",
                        "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(re.findall(r'<rect class="cpu" data-cpu="\d+"', r.stdout)) == compare_doc.topology.n_cpus
    assert r.stdout.count('class="timeline"') == 2
    assert [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln or "Refused to" in ln] == []


def test_render_re_judges_a_run_and_says_so():
    """lab report render judges the run's data with lab's current scenario, as lab recheck
    does, and says where the stored verdict differs: Debian 6.1's recorded run was stored
    FAIL before the vendor-effect gate, and is INCONCLUSIVE now."""
    run = str(RUNS / "llc-spread-pinned-zen3-2s-mini-debian")
    r = CliRunner().invoke(main, ["report", "render", run])
    assert r.exit_code == 0, r.output
    assert "llc-spread-pinned on zen3-2s-mini: INCONCLUSIVE" in r.output
    assert "re-judged by the current scenario: stored FAIL, now INCONCLUSIVE" in " ".join(r.output.split())
