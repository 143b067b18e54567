"""Write lab's measured baseline of matrix cell costs (scenarios/matrix-costs.json) from a
full mini matrix's result file, and say how far the timeout formula and the baseline are
from a matrix's measured cells.

    .venv/bin/python bench/cost_baseline.py write bench/results/bench_matrix-<time>.json
    .venv/bin/python bench/cost_baseline.py compare --baseline OLD.json --against NEW.json

`write` keeps each cell that ran (PASS, FAIL, INCONCLUSIVE) with its wall time per run,
keyed scenario@topology, with the scenario's version and the topology spec's SHA-256 *at
the commit the matrix ran on* (read with git show, so a scenario changed since does not
inherit a stale cost: lab.matrix.baseline_s applies an entry only where both still match).

`compare` is the bench: for every cell of the AGAINST matrix, the formula's estimate and
the baseline's (from the BASELINE matrix, as `write` would make it at that matrix's
commit), against the cell's measured wall time; writes
bench/results/bench_cost_estimates-<time>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))
from provenance import stamp, write_result  # noqa: E402

from lab import matrix, topology  # noqa: E402
from lab import scenario as sc  # noqa: E402

RAN = ("PASS", "FAIL", "INCONCLUSIVE")


def _show(commit: str, rel: str) -> bytes | None:
    r = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:{rel}"], capture_output=True)
    return r.stdout if r.returncode == 0 else None


def _version_at(commit: str, scenario: str) -> int | None:
    path = Path(sc.load(scenario).path).resolve()
    src = _show(commit, str(path.relative_to(REPO)))
    m = re.search(rb"^    version = (\d+)", src or b"", re.M)
    return int(m[1]) if m else (1 if src is not None else None)


def _topology_sha_at(commit: str, name: str) -> str | None:
    src = _show(commit, str(topology.resolve(name).resolve().relative_to(REPO)))
    return hashlib.sha256(src).hexdigest() if src is not None else None


def baseline_from(result: Path, commit: str | None = None) -> dict:
    """*commit*: the one the matrix ran on, where the file names another (files written
    before bench/provenance.py's AT_START name the commit at write time)."""
    d = json.loads(result.read_text())
    commit = commit or d["commit"]
    run = d["runs"][-1]
    cells = {}
    for cid, c in sorted(run["cells"].items()):
        if c.get("status") not in RAN or not c.get("wall_s"):
            continue
        s, t, _k = cid.split("@")
        version, tsha = _version_at(commit, s), _topology_sha_at(commit, t)
        if version is None or tsha is None:
            continue
        cells[f"{s}@{t}"] = {"run_s": round(float(c["wall_s"]) / int(run.get("repeat", 1) or 1), 1), "version": version,
                             "topology_sha": tsha, "kernel": _k, "status": c["status"]}  # fmt: skip
    return {
        "format": 1,
        "about": "lab's measured cost per run of each catalog scenario on each catalog mini, for `lab matrix` cells "
        "this host never ran (lab.matrix.baseline_s); written by bench/cost_baseline.py",
        "measured_by": str(result.relative_to(REPO)), "commit": commit, "accel": "tcg",
        "host_cpus": d.get("host_cpus"), "jobs": run.get("jobs"), "cells": cells,
    }  # fmt: skip


def compare(base_file: Path, against: Path) -> dict:
    base = baseline_from(base_file)
    d = json.loads(against.read_text())
    commit = d["commit"]
    rows = []
    for cid, c in sorted(d["runs"][-1]["cells"].items()):
        if c.get("status") not in RAN or not c.get("wall_s"):
            continue
        s, t, _k = cid.split("@")
        topo = topology.load(t)
        formula = matrix.estimate_s(topo.n_cpus, float(sc.load(s).timeout))
        b = matrix.baseline_s(base, s, t, version=_version_at(commit, s) or 0, topology_sha=_topology_sha_at(commit, t) or "", accel="tcg")
        # lab's estimate: the baseline where it applies, else the formula (lab.matrix's _cell_costs)
        rows.append({"cell": cid, "measured_s": c["wall_s"], "formula_s": formula, "baseline_s": b, "lab_s": b if b is not None else formula})

    def err(key: str) -> dict:
        e = [abs(r[key] - r["measured_s"]) / r["measured_s"] for r in rows if r[key] is not None]
        return {"cells": len(e), "median_rel_error": round(median(e), 3) if e else None,
                "within_50pct": sum(x <= 0.5 for x in e), "off_2x_or_more": sum(x >= 1.0 for x in e)}  # fmt: skip

    def rank_pairs(key: str) -> dict:
        ok = bad = 0
        have = [r for r in rows if r[key] is not None]
        for i, a in enumerate(have):
            for b in have[i + 1 :]:
                if a["measured_s"] == b["measured_s"] or a[key] == b[key]:
                    continue
                ok += (a[key] > b[key]) == (a["measured_s"] > b["measured_s"])
                bad += (a[key] > b[key]) != (a["measured_s"] > b["measured_s"])
        return {"pairs_in_measured_order": ok, "pairs_reversed": bad}

    return {
        **stamp(), "bench": "cost_estimates", "baseline_from": str(base_file.relative_to(REPO)),
        "against": str(against.relative_to(REPO)), "rows": rows,
        "formula": {**err("formula_s"), **rank_pairs("formula_s")},
        "baseline": {**err("baseline_s"), **rank_pairs("baseline_s")},
        "lab": {**err("lab_s"), **rank_pairs("lab_s")},
        "total_measured_s": round(sum(r["measured_s"] for r in rows), 1),
        "total_formula_s": round(sum(r["formula_s"] for r in rows), 1),
        "total_baseline_s": round(sum(r["baseline_s"] for r in rows if r["baseline_s"] is not None), 1),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("result", type=Path)
    w.add_argument("--commit", help="the commit the matrix ran on, where its file names another")
    c = sub.add_parser("compare")
    c.add_argument("--baseline", type=Path, required=True)
    c.add_argument("--against", type=Path, required=True)
    a = ap.parse_args()
    if a.cmd == "write":
        doc = baseline_from(a.result.resolve(), a.commit)
        out = matrix.baseline_file()
        out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {out}: {len(doc['cells'])} cells from {doc['measured_by']}")
    else:
        doc = compare(a.baseline.resolve(), a.against.resolve())
        print(json.dumps({k: doc[k] for k in ("formula", "baseline", "lab", "total_measured_s", "total_formula_s", "total_baseline_s")}, indent=1))
        print(f"wrote {write_result('bench_cost_estimates', doc)}")


if __name__ == "__main__":
    main()
