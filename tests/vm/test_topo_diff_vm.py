"""`lab topo diff` (issue 34 item 5) booted: a small capture (2 sockets, SMT, the
sockets' CPUs interleaved even/odd) imported, booted and compared with what the guest
sees, in the capture's numbering."""

import json
import sys
from pathlib import Path

from click.testing import CliRunner

from lab.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
import _synth_sysfs as ss  # noqa: E402


def test_topo_diff_of_a_small_capture(tmp_path, debian_kernel):
    m = ss.build(sockets=2, nodes_per_socket=1, cores_per_cluster=2, threads=2, numbering="socket-interleaved")
    cap = ss.write(ss.files(m, "list"), tmp_path / "small-capture")
    r = CliRunner().invoke(main, ["topo", "diff", str(cap), "--json"])
    assert r.exit_code == 0, r.output[-3000:]
    doc = json.loads(r.stdout)
    assert doc["identical"] is True and doc["differences"] == [], doc["rows"]
    rows = {row["what"]: row for row in doc["rows"]}
    # The capture's numbering: socket 0 holds the even CPUs, SMT siblings +4.
    assert rows["node 0 CPUs"]["capture"] == "0,2,4,6" and rows["node 0 CPUs"]["status"] == "same", rows
    assert rows["node 1 CPUs"]["capture"] == "1,3,5,7", rows
    assert rows["SMT siblings"]["capture"] == "0,4 | 1,5 | 2,6 | 3,7", rows
    assert rows["node 0 distances"]["status"] == "same"
    assert all(row["status"] in ("same", "known") for row in doc["rows"]), doc["rows"]
    assert Path(doc["run_dir"], "diff.json").is_file() and Path(doc["spec"]).is_file()
    # The text form says the same, side by side, in one table.
    text = json.dumps(doc)
    assert "DIFFERS" not in text
