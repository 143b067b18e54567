"""Probes of a hostile or careless user (issue 38): records, bundles, settings and caches
that try to make lab run code, lie about a verdict, lose results or print a traceback.
Each case failed on the commit before this suite; together they keep the class closed.

Classes (the issue's): code from data, a verdict or exit code that lies, results lost,
tracebacks instead of one line, cache/locks/progress, and the minor ones."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import compare, runner
from lab import scenario as sc
from lab.cli import main
from lab.errors import UserError
from lab.report import bundle, replay

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "runs" / "llc-spread-pinned-zen3-2s-mini-lab-6.1"


@pytest.fixture
def run_copy(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(FIXTURE, d)
    return d


def evil(tmp_path: Path, name: str = "evil") -> tuple[Path, Path]:
    """A .py that leaves a marker file when imported (and would be a scenario)."""
    marker = tmp_path / f"{name}.ran"
    p = tmp_path / f"{name}.py"
    p.write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "from lab.scenario import Expectation, Scenario\n\n"
        "class Evil(Scenario):\n    name = 'llc-spread-pinned'\n    summary = 's'\n    claim = 'c'\n"
        "    topologies = ['zen3-2s-mini']\n    def steps(self, t):\n        return ''\n"
        "    def check(self, r):\n        return [Expectation('x', True, claim=True)]\n"
    )
    return p, marker


def edit_json(p: Path, **change) -> None:
    d = json.loads(p.read_text())
    d.update(change)
    p.write_text(json.dumps(d))


def one_line_error(r, code: int = 2) -> str:
    out = r.output
    assert r.exit_code == code, out
    assert "Traceback" not in out, out
    assert out.strip().count("\n") == 0 or out.startswith("lab: error:"), out
    return out


# ---- code from data ---------------------------------------------------------------------------


def test_recheck_never_imports_a_path_results_json_names(run_copy, tmp_path):
    p, marker = evil(tmp_path)
    edit_json(run_copy / "results.json", scenario=str(p))
    r = CliRunner().invoke(main, ["recheck", str(run_copy)])
    out = one_line_error(r)
    assert "a path" in out and "--scenario FILE" in out and not marker.exists()
    # The user who trusts it says so: then it runs.
    r = CliRunner().invoke(main, ["recheck", str(run_copy), "--scenario", str(p)])
    assert marker.exists()


def test_bundling_never_imports_the_py_a_command_file_names(run_copy, tmp_path):
    p, marker = evil(tmp_path)
    (run_copy / "command").write_text(f"lab run {p} --topology zen3-2s-mini\n")
    m = bundle.make(run_copy, tmp_path / "b.tar.gz")
    assert not marker.exists()
    # It declares the run's scenario name, so its source (read as text) is what is bundled.
    assert m["scenario"] == "scenario/evil.py"


def _bundle(run_dir: Path, tmp_path: Path, **manifest_change) -> Path:
    """A bundle of *run_dir* whose manifest is changed after the hashes were taken (the
    manifest itself is not a hashed member: its keys are what a stranger controls)."""
    src = tmp_path / "orig.tar.gz"
    bundle.make(run_dir, src)
    out = tmp_path / "tampered.tar.gz"
    with tarfile.open(src) as tin, tarfile.open(out, "w:gz") as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read()
            if m.name == bundle.MANIFEST:
                d = json.loads(data)
                d.update(manifest_change)
                data = json.dumps(d).encode()
                m.size = len(data)
            tout.addfile(m, io.BytesIO(data))
    return out


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("scenario", "/etc/evil2.py", "not one of the bundle's own scenario/*.py members"),
        ("scenario", "../../evil2.py", "not one of the bundle's own scenario/*.py members"),
        ("topology", "../../../../../../etc/hostname", "not one of the bundle's own topology/*.toml members"),
        ("topology", "topology/icelake-2s-mini.toml", "not one of the bundle's own topology/*.toml members"),
    ],
)
def test_a_manifest_names_only_its_own_members(run_copy, tmp_path, key, value, says):
    tb = _bundle(run_copy, tmp_path, **{key: value})
    b = bundle.extract(tb, tmp_path / "open")
    with pytest.raises(UserError, match=re.escape(says)):
        b.file(key)
    if key == "topology":  # render reads the topology: refused, nothing of the host read
        r = CliRunner().invoke(main, ["report", "render", str(tb)])
        assert r.exit_code == 2 and says in " ".join(r.output.split()) and "Traceback" not in r.output, r.output
    else:
        with pytest.raises(UserError, match=re.escape(says)):
            replay.scenario_of(b, trust=True)


def test_replay_runs_lab_s_own_scenario_unless_trusted(run_copy, tmp_path):
    b = bundle.extract(_bundle(run_copy, tmp_path), tmp_path / "open")
    s, which = replay.scenario_of(b)
    assert s.name == "llc-spread-pinned" and "lab's own, the same source as the bundle's" in which
    # The bundle's source differs from lab's: lab's own still runs, and it says so.
    (b.root / "scenario" / "llc_spread_pinned.py").write_text("raise SystemExit('never imported')\n")
    b2 = bundle.Bundle(b.root, {**b.manifest, "members": {**b.manifest["members"], "scenario/llc_spread_pinned.py": {"sha256": "0" * 64, "size": 1}}})
    s, which = replay.scenario_of(b2)
    assert s.path.startswith(str(ROOT / "scenarios")) and "--trust runs the bundle's instead" in which


def test_replay_refuses_a_scenario_lab_does_not_have_without_trust(run_copy, tmp_path):
    p, marker = evil(tmp_path)
    tb = _bundle(run_copy, tmp_path, scenario_name="mine")
    b = bundle.extract(tb, tmp_path / "open")
    shutil.copy(p, b.root / "scenario" / "llc_spread_pinned.py")  # what a stranger's bundle could carry
    with pytest.raises(UserError, match=r"not one of lab's.*sha256 [0-9a-f]{64}.*--trust"):
        replay.scenario_of(b)
    assert not marker.exists()
    s, which = replay.scenario_of(b, trust=True)  # the user read it and said so
    assert marker.exists() and "run with --trust" in which


# ---- a verdict or exit code that lies --------------------------------------------------------


def scenario_file(tmp_path: Path, check_body: str, extra: str = "", name: str = "probe") -> Path:
    p = tmp_path / f"{name}.py"
    p.write_text(
        "import sys\nfrom lab.scenario import Expectation, Scenario\n\n"
        f"class P(Scenario):\n    name = 'llc-spread-pinned'\n    summary = 's'\n    claim = 'c'\n"
        f"    topologies = ['zen3-2s-mini']\n{extra}"
        "    def steps(self, t):\n        return ''\n"
        f"    def check(self, r):\n        {check_body}\n"
    )
    return p


@pytest.mark.parametrize(
    "body, says",
    [
        ("sys.exit(0)", "check() called sys.exit(0)"),
        ("raise KeyboardInterrupt if False else SystemExit(1)", "check() called sys.exit(1)"),
        ("return []", "check() returned no expectations"),
        ("return [Expectation('a', 'no', claim=True)]", "ok='no' is not True or False"),
        ("return [Expectation(None, True)]", "Expectation name None"),
        ("return [Expectation('a', True, inconclusive=123)]", "must be strings"),
        ("return 'PASS'", "must return a list of Expectation"),
    ],
)
def test_a_verdict_needs_judged_expectations(run_copy, tmp_path, body, says):
    p = scenario_file(tmp_path, body)
    o = runner.recheck(run_copy, str(p))
    assert o.status == "ERROR" and says in o.message and str(p) in o.message
    r = CliRunner().invoke(main, ["recheck", str(run_copy), "--scenario", str(p)])
    assert r.exit_code == 3, r.output


def test_a_check_that_never_returns_is_an_error(run_copy, tmp_path):
    p = scenario_file(tmp_path, "while True: pass", extra="    check_timeout = 0.5\n")
    o = runner.recheck(run_copy, str(p))
    assert o.status == "ERROR" and "did not return within 0.5s" in o.message


def test_sys_exit_at_import_is_the_scenario_s_error(tmp_path):
    p = tmp_path / "exits.py"
    p.write_text("import sys\nsys.exit(0)\n")
    r = CliRunner().invoke(main, ["run", str(p)])
    assert r.exit_code == 2 and f"{p}:2: called sys.exit(0)" in r.output


def test_plan_maps_are_checked_against_the_topology(run_copy):
    edit_json(run_copy / "plan.json", guest_to_spec=[0, 1])
    r = CliRunner().invoke(main, ["recheck", str(run_copy)])
    assert r.exit_code == 2 and "guest_to_spec" in r.output and "32 guest CPUs" in r.output


@pytest.mark.parametrize(
    "field, value",
    [("guest_to_spec", [10**9] * 32), ("guest_to_spec", [-1] * 32), ("guest_node_to_spec", [0, 0]),
     ("memory_mb", float("inf")), ("options", [1]), ("boot_cpus", -4), ("qemu_version", "7.2")],
)  # fmt: skip
def test_a_plan_field_out_of_range_is_one_line(run_copy, field, value):
    p = run_copy / "plan.json"
    d = json.loads(p.read_text())
    d[field] = value
    p.write_text(json.dumps(d))  # Infinity is what Python's json writes for inf
    r = CliRunner().invoke(main, ["recheck", str(run_copy)])
    assert r.exit_code == 2 and field in r.output and "Traceback" not in r.output, r.output


def test_results_and_plan_must_name_one_machine(run_copy):
    edit_json(run_copy / "results.json", topology="icelake-2s-mini")
    r = CliRunner().invoke(main, ["recheck", str(run_copy)])
    assert r.exit_code == 2 and "the records disagree" in r.output


def lab(*args: str, stdin=None, shell: str | None = None) -> subprocess.CompletedProcess:
    if shell is not None:
        return subprocess.run(["sh", "-c", shell], capture_output=True, text=True, timeout=120, cwd=ROOT)
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_reader_that_leaves_never_changes_the_exit_code():
    alone = lab("recheck", str(FIXTURE)).returncode
    py = sys.executable
    piped = lab(shell=f"{py} -m lab recheck {FIXTURE} | head -1 >/dev/null; echo ${{?}}; exit 0")
    # sh gives the pipeline's status as head's; ask for lab's own via a fifo-free trick:
    cp = subprocess.run(["bash", "-c", f"{py} -m lab recheck {FIXTURE} | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}"],
                        capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert int(cp.stdout.strip()) == alone, cp.stderr
    assert "Traceback" not in cp.stderr and piped.returncode == 0
    cp = subprocess.run(["bash", "-c", f"{py} -m lab topo show zen3-2s | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}"],
                        capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert cp.stdout.strip() == "0" and "Traceback" not in cp.stderr
    cp = subprocess.run(["bash", "-c", f"{py} -m lab topo list >&-; echo $?"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert cp.stdout.strip() == "0" and "Traceback" not in cp.stderr, cp.stderr


@pytest.mark.parametrize(
    "extra, says",
    [
        ("    timeout = -5\n", "P.timeout must be seconds"),
        ("    tools = 'perf'\n", "P.tools must be a list of tool names"),
        ("    buffer_kb = 'big'\n", "P.buffer_kb must be a whole number"),
        ("    filters = {'sched_switch': 5}\n", "P.filters must be a dict"),
        ("    requires = [5]\n", "P.requires must be a list of requirements"),
        ("    timeout = 'soon'\n", "P.timeout must be seconds"),
        ("    verdict_runs = 2\n", "P.verdict_runs must be an odd number"),
    ],
)
def test_scenario_attributes_are_checked_at_load(tmp_path, extra, says):
    p = scenario_file(tmp_path, "return []", extra=extra)
    with pytest.raises(sc.ScenarioError, match=rf"^{p}: {says}"):
        sc.load(str(p))
    runs = tmp_path / "runs"
    r = CliRunner().invoke(main, ["run", str(p), "--runs", str(runs)])
    assert r.exit_code == 2 and not runs.exists(), r.output  # refused before any run directory


@pytest.mark.parametrize("name", ["5", "''", "'a/b'"])
def test_a_scenario_name_must_be_a_name(tmp_path, name):
    p = tmp_path / "n.py"
    p.write_text(scenario_file(tmp_path, "return []").read_text().replace("name = 'llc-spread-pinned'", f"name = {name}"))
    with pytest.raises(sc.ScenarioError, match=r"\.name"):
        sc.load(str(p))


def test_a_running_record_with_a_bogus_pid_is_not_still_running(run_copy):
    for pid in (0, -1, True):
        edit_json(run_copy / "results.json", status="RUNNING", integrity={"pid": pid, "host": os.uname().nodename, "stage": "boot"})
        o = runner.recheck(run_copy)
        assert o.status == "ERROR" and "still running" not in o.message and "did not finish" in o.message


# ---- results are never lost -------------------------------------------------------------------


def test_odd_figures_are_normalised_so_results_are_written(run_copy, tmp_path):
    p = scenario_file(
        tmp_path,
        "return [Expectation('a', True, claim=True, figures={(1, 2): 3, 'big': 10**5000, 'inf': float('inf'), 'obj': object()})]",
    )
    o = runner.recheck(run_copy, str(p))
    assert o.status == "PASS"
    runner.write_results(o, run_copy)
    d = json.loads((run_copy / "results.json").read_text())
    figs = d["expectations"][0]["figures"]
    assert figs["(1, 2)"] == 3 and figs["big"] == ">1e30" and figs["inf"] == "inf" and figs["obj"].startswith("<object")
    assert (run_copy / "junit.xml").is_file()


# ---- one line, never a traceback ------------------------------------------------------------


@pytest.mark.parametrize(
    "change, says",
    [
        ({"expectations": "PASS"}, "field 'expectations' must be a list"),
        ({"expectations": [{"name": "a", "status": "PASS", "figures": "x"}]}, "figures must be an object"),
        ({"expectations": [{"name": "a", "status": "PASS", "figures": {"n": 10**400}}]}, "more than 30 digits"),
        ({"status": 5}, "field 'status' must be one of"),
    ],
)
def test_a_results_json_lab_cannot_read_is_named(run_copy, change, says):
    edit_json(run_copy / "results.json", **change)
    rec = compare.load_run(run_copy, stored=True)
    assert rec["status"] == "ERROR" and says in rec["message"]
    r = CliRunner().invoke(main, ["compare", "--stored", str(run_copy), "--", str(FIXTURE)])
    assert "Traceback" not in r.output and r.exit_code in (0, 3), r.output


def test_bad_settings_and_environment_are_one_line(tmp_path, monkeypatch):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('runs = "~nonexistentuser/x"\n')
    monkeypatch.setenv("LAB_CONFIG", str(cfg))
    r = CliRunner().invoke(main, ["topo", "list"])
    assert r.exit_code == 2 and "no such user's home directory" in r.output
    monkeypatch.delenv("LAB_CONFIG")
    f = tmp_path / "afile"
    f.write_text("")
    for var, says in (("LAB_RUNS", "is a file, not a folder"), ("LAB_TOPOLOGIES", "is not a folder"), ("LAB_SCENARIOS", "is not a folder")):
        monkeypatch.setenv(var, str(f))
        r = CliRunner().invoke(main, ["report", "replay", str(tmp_path / "none.tar.gz")] if var == "LAB_RUNS" else ["topo", "list"] if var == "LAB_TOPOLOGIES" else ["scenarios"])
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, (var, r.output)
        monkeypatch.delenv(var)
    # LAB_KERNELS is read when lab starts: a process of its own
    cp = subprocess.run([sys.executable, "-m", "lab", "kernel", "config", "lab-6.1"], capture_output=True, text=True,
                        env={**os.environ, "LAB_KERNELS": str(tmp_path / "nothing")}, timeout=60)  # fmt: skip
    assert cp.returncode == 2 and "LAB_KERNELS" in cp.stderr and "Traceback" not in cp.stderr, cp.stderr


@pytest.mark.parametrize("argv", [["topo", "show"], ["kernel", "show"], ["boot", "--dry-run", "zen3-2s-mini", "--kernel"]])
def test_a_name_too_long_for_the_file_system_is_one_line(argv):
    r = CliRunner().invoke(main, [*argv, "a" * 5000])
    assert r.exit_code == 2 and "File name too long" in r.output and "Traceback" not in r.output and len(r.output) < 400, r.output


# ---- cache, locks, progress -----------------------------------------------------------------


def _entry(cache: Path, **meta_change) -> Path:
    d = cache / "kernels" / ("ab" * 12)
    d.mkdir(parents=True)
    (d / "vmlinuz").write_bytes(b"MZ" + b"x" * 100)
    (d / "config").write_text("CONFIG_PVH=y\n")
    meta = {"id": "ab" * 12, "name": "lab-6.1", "arch": "x86_64", "image": "vmlinuz", "release": "6.1.0-lab",
            "config": "config", "image_size": 102, "features": []}  # fmt: skip
    meta.update(meta_change)
    (d / "metadata.json").write_text(json.dumps(meta))
    return d


@pytest.mark.parametrize(
    "change, says",
    [({"release": 5}, "'release' must be a string"), ({"image_size": "big"}, "'image_size' must be a whole number"),
     ({"image": "../../etc/passwd"}, "must name a file inside the entry")],
)  # fmt: skip
def test_damaged_store_entries_are_named_never_booted(tmp_path, monkeypatch, change, says):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    _entry(tmp_path, **change)
    r = CliRunner().invoke(main, ["kernel", "show", "ab" * 12])
    assert r.exit_code == 2 and says in r.output and "damaged" in r.output, r.output
    r = CliRunner().invoke(main, ["kernel", "list"])
    assert r.exit_code == 0 and "damaged store entry" in r.output and "Traceback" not in r.output


def test_metadata_that_is_not_an_object_and_a_truncated_image(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    d = _entry(tmp_path)
    (d / "metadata.json").write_text("[]")
    r = CliRunner().invoke(main, ["kernel", "show", "ab" * 12])
    assert r.exit_code == 2 and "not a JSON object" in r.output
    shutil.rmtree(d)
    d = _entry(tmp_path)
    (d / "vmlinuz").write_bytes(b"MZ")  # truncated in place
    r = CliRunner().invoke(main, ["boot", "--dry-run", "zen3-2s-mini", "--kernel", "ab" * 12])
    assert r.exit_code == 2 and "is 2 bytes, metadata.json says 102" in r.output, r.output
    r = CliRunner().invoke(main, ["kernel", "rm", "ab" * 12])
    assert r.exit_code == 0 and not d.exists(), r.output


def test_a_deleted_config_is_unknown_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    d = _entry(tmp_path)
    (d / "config").unlink()
    from lab.kernel import store

    assert store.get("ab" * 12).config_value("PVH") is None
    r = CliRunner().invoke(main, ["kernel", "show", "ab" * 12])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output


def test_the_extracted_vmlinux_follows_the_image_and_goes_with_its_kernel(tmp_path, monkeypatch):
    import lzma

    from lab.backends import guest
    from lab.kernel import store

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    d = _entry(tmp_path)
    elf1, elf2 = b"\x7fELF" + b"1" * 1000, b"\x7fELF" + b"2" * 1000
    (d / "vmlinuz").write_bytes(b"MZ" + lzma.compress(elf1, format=lzma.FORMAT_XZ))
    edit_json(d / "metadata.json", image_size=(d / "vmlinuz").stat().st_size)
    k = store.get("ab" * 12)
    first = guest.boot_image(k)
    assert first.read_bytes() == elf1
    (d / "vmlinuz").write_bytes(b"MZ" + lzma.compress(elf2, format=lzma.FORMAT_XZ))  # replaced in place
    edit_json(d / "metadata.json", image_size=(d / "vmlinuz").stat().st_size)
    second = guest.boot_image(store.get("ab" * 12))
    assert second != first and second.read_bytes() == elf2
    store.remove("ab" * 12)
    assert not list((tmp_path / "vmlinux").glob("*.elf"))


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "soon"])
def test_lock_timeouts_must_be_finite_and_not_negative(tmp_path, monkeypatch, value):
    from lab.lock import cache_lock

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    monkeypatch.setenv("LAB_LOCK_TIMEOUT", value)
    with pytest.raises(UserError, match="finite, non-negative number of seconds"):
        with cache_lock("x", "testing"):
            pass


def test_an_interrupted_step_never_says_done():
    from lab.progress import PlainProgress

    out = io.StringIO()
    p = PlainProgress(out)
    p.t0 -= 10
    with pytest.raises(KeyboardInterrupt):
        with p.step("fetch", "Debian's kernel"):
            p._steps[-1] = ("fetch", p._steps[-1][1] - 5)  # a step long enough to say done
            raise KeyboardInterrupt
    assert "done" not in out.getvalue()
    with p.step("fetch", "again"):
        p._steps[-1] = ("fetch", p._steps[-1][1] - 5)
    assert "fetch: done" in out.getvalue()


# ---- minor ----------------------------------------------------------------------------------


def test_markdown_passes_no_raw_html_or_table_breaks(run_copy):
    from lab.report import document, render

    p = run_copy / "results.json"
    d = json.loads(p.read_text())
    d["expectations"][0]["name"] = "<script>alert(1)</script> | x"
    p.write_text(json.dumps(d))
    md = render.markdown(document.load_run(run_copy, stored=True))
    assert "<script>" not in md and "&lt;script&gt;" in md and "\\| x" in md


def test_compare_refuses_a_run_on_both_sides():
    r = CliRunner().invoke(main, ["compare", "--stored", str(FIXTURE), "--", str(FIXTURE)])
    assert r.exit_code == 2 and "on both sides" in r.output


def test_a_full_stdout_is_named():
    cp = subprocess.run(["bash", "-c", f"{sys.executable} -m lab topo list > /dev/full"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert cp.returncode == 3 and "stdout" in cp.stderr and "lab does not know which" not in cp.stderr and "Traceback" not in cp.stderr


# ---- missing data is never a verdict (issue 31 item 8) -----------------------------------------


def _read_by_check(run_dir: Path) -> list[str]:
    """The out/ files the scenario's check() reads on this run (by watching Result)."""
    from lab import scenario as scmod

    seen: list[str] = []
    orig_text, orig_events = scmod.Result.text, scmod.Result.events

    def text(self, name, optional=False):
        if not optional:
            seen.append(name)
        return orig_text(self, name, optional)

    def events(self, phase="main", only=None):
        seen.append(f"trace.{phase}.txt")
        return orig_events(self, phase, only)

    scmod.Result.text, scmod.Result.events = text, events
    try:
        runner.recheck(run_dir)
    finally:
        scmod.Result.text, scmod.Result.events = orig_text, orig_events
    return sorted(set(seen))


@pytest.mark.parametrize(
    "fixture",
    ["llc-spread-pinned-zen3-2s-mini-lab-6.1", "cluster-wakeup-kunpeng920-2s-mini-debian", "preferred-node-migrations-epyc7551-8n-mini-debian",
     "soft-affinity-xeon-2s22c-mini-debian", "numa-balancing-numa4-96-mini-debian"],
)  # fmt: skip
def test_deleting_any_file_a_check_reads_is_an_error_naming_it(tmp_path, fixture):
    src = ROOT / "tests" / "fixtures" / "runs" / fixture
    names = [n for n in _read_by_check(src) if (src / "out" / n).is_file()]
    assert names, "the check reads no file?"
    for n in names:
        d = tmp_path / n.replace("/", "_")
        shutil.copytree(src, d)
        (d / "out" / n).unlink()
        o = runner.recheck(d)
        assert o.status == "ERROR" and n in o.message, (n, o.status, o.message)  # integrity names some first
    # An emptied trace is no trace.
    trace = next(n for n in names if n.startswith("trace."))
    d = tmp_path / "empty"
    shutil.copytree(src, d)
    (d / "out" / trace).write_bytes(b"")
    o = runner.recheck(d)
    assert o.status == "ERROR" and f"out/{trace}" in o.message, o.message


def test_the_issue_s_case_all_traces_gone(run_copy):
    for p in (run_copy / "out").glob("trace*"):
        p.unlink()
    r = CliRunner().invoke(main, ["recheck", str(run_copy)])
    assert r.exit_code == 3 and "out/trace.main.txt" in r.output, r.output  # was FAIL ("0 sched_wakeup_new for 4 threads")


def test_a_damaged_entry_is_replaced_when_the_kernel_is_made_again(tmp_path, monkeypatch):
    """Fetching or building the same kernel again puts a good entry in the damaged one's
    place (the id is the content's: it is the same kernel)."""
    from lab.kernel import store

    monkeypatch.setenv("LAB_CACHE", str(tmp_path))
    d = _entry(tmp_path)
    (d / "vmlinuz").write_bytes(b"MZ")  # damaged: 2 bytes, metadata says 102
    with store.staging("ab" * 12) as tmp:
        (tmp / "vmlinuz").write_bytes(b"MZ" + b"x" * 100)
        meta = json.loads((d / "metadata.json").read_text())
        (tmp / "metadata.json").write_text(json.dumps(meta))
    assert store.get("ab" * 12).image.stat().st_size == 102


def test_a_check_that_needs_the_lost_snapshot_is_an_error(tmp_path):
    """llc-spread-pinned's INCONCLUSIVE gate reads the guest's snapshot: without it the gate
    cannot be proven and the recorded Debian run would turn FAIL.  It is an ERROR instead."""
    d = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "fixtures" / "runs" / "llc-spread-pinned-zen3-2s-mini-debian", d)
    assert runner.recheck(d).status == "INCONCLUSIVE"
    shutil.rmtree(d / "guest")
    o = runner.recheck(d)
    assert o.status == "ERROR" and "guest/ (the topology snapshot)" in o.message, o.message
