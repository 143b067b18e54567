"""bench/results/*.json are the data behind the figures the README and the scenarios'
docstrings quote (issue 31): committed, small, and each saying what was measured where
and when (commit, host, date, load)."""

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
MAX_BYTES = 256 * 1024  # a summary, not a run: traces and run directories stay out (.gitignore)


def test_bench_results_are_small_json_with_their_provenance():
    for p in sorted(RESULTS.glob("*.json")):
        assert p.stat().st_size <= MAX_BYTES, f"{p}: {p.stat().st_size} bytes, above {MAX_BYTES}: keep run data out"
        doc = json.loads(p.read_text())
        assert isinstance(doc, dict), f"{p}: not a JSON object"
        missing = [k for k in ("commit", "host") if k not in doc] + ([] if {"date", "when"} & set(doc) else ["date"])
        assert not missing, f"{p}: lacks {', '.join(missing)}"
        assert "loadavg" in p.read_text(), f"{p}: says nothing of the host's load"


def test_gitignore_lets_the_summaries_in_and_keeps_run_data_out():
    text = (RESULTS.parents[1] / ".gitignore").read_text().splitlines()
    assert "/bench/results/*" in text and "!/bench/results/*.json" in text
    assert "bench/results/" not in text


def test_bench_boot_reads_verify_s_checks_from_stdout_alone():
    """A note on stderr before the JSON once made every verify row say "0 checks"
    (bench_boot-20261126-024600.json, the full zen3-2s verify, records 0)."""
    from _bench import bench_module

    mod = bench_module("bench_boot")
    out = json.dumps({"checks": [{"name": "a", "ok": True}, {"name": "b", "ok": False}, {"name": "c", "ok": False, "known_deviation": "x"}]})
    row = mod.verify_row("zen3-2s", "debian", 1, out + "\n", 2.345)
    assert (row["checks"], row["failed"], row["known_deviations"], row["wall_s"]) == (3, ["b"], ["c"], 2.35)
    assert mod.verify_row("t.toml", "debian", 2, "", 1.0)["topology"] == "t"


def test_a_result_names_the_commit_it_started_on_and_says_when_it_moved(monkeypatch):
    """A commit made while a long bench ran is not what it measured: stamp() gives the
    commit checked out at the start and, when HEAD or the tree changed since, at_write."""
    import sys

    sys.path.insert(0, str(RESULTS.parent))
    import provenance

    start = {"commit": "a" * 40, "dirty": False}
    monkeypatch.setattr(provenance, "AT_START", start)
    monkeypatch.setattr(provenance, "_tree", lambda: dict(start))
    s = provenance.stamp()
    assert (s["commit"], s["dirty"]) == ("a" * 40, False) and "at_write" not in s
    monkeypatch.setattr(provenance, "_tree", lambda: {"commit": "b" * 40, "dirty": True})
    s = provenance.stamp()
    assert s["commit"] == "a" * 40 and s["at_write"] == {"commit": "b" * 40, "dirty": True}


def test_run_breakdown_splits_a_run_by_lab_s_own_records(tmp_path):
    """bench_run_breakdown: boot, snapshot, phases, the rest of the job, the results stream
    and the host's part add up to the run's wall time; a run without its records is left out."""
    from _bench import bench_module

    mod = bench_module("bench_run_breakdown")
    run = tmp_path / "runs" / "r1"
    (run / "out").mkdir(parents=True)
    (run / "results.json").write_text(
        json.dumps({"scenario": "s", "topology": "t", "status": "PASS", "timing": {"wall_s": 100.0, "vm_s": 95.0, "boot_to_agent_s": 8.0}})
    )
    (run / "agent.log").write_text(
        "lab: ready uptime=5.0\nlab: snapshot uptime=7.0\nlab: job start uptime=7.1\nlab: done rc=0 uptime=77.1\n"
    )
    (run / "out" / "lab.phases").write_text("a\nb\n")
    for p, a, b in (("a", 10.0, 30.0), ("b", 40.0, 70.0)):
        (run / "out" / f"phase.{p}.start").write_text(f"{a}\n")
        (run / "out" / f"phase.{p}.end").write_text(f"{b}\n")
    (tmp_path / "runs" / "broken").mkdir()
    (tmp_path / "runs" / "broken" / "results.json").write_text("{}")
    doc = mod.breakdown(tmp_path)
    assert doc["runs"] == 1
    t = doc["total_s"]
    assert (t["boot"], t["snapshot"], t["phases"], t["job_rest"], t["results"], t["host"]) == (8.0, 2.0, 50.0, 20.0, 15.0, 5.0)
    assert sum(v for k, v in t.items() if k != "wall") == t["wall"] == 100.0
    assert doc["scenarios"]["s"]["runs"] == 1
