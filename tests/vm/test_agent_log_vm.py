"""The guest agent's lab.log port: every line the agent and the job send arrives, also
when steps run at once (a virtio-serial port opens once at a time: opening it per line
from two processes lost lines with EBUSY).  And `lab run` off a terminal shows its
progress as timestamped lines on stderr, moved on by those lines."""

import re

from click.testing import CliRunner

from lab.cli import main

from .procs import assert_slow_steps_said_done, progress_steps, qemu_running

STEPS = 8

SCENARIO = f'''from lab.scenario import Expectation, Scenario


class Chatty(Scenario):
    name = "chatty"
    summary = "{STEPS} steps at once, each saying start and end on lab.log"
    claim = "'every step ran': each concurrent step's lines reached lab"
    topologies = ["xeon-2s22c-mini"]
    events = ["sched:sched_switch"]
    workloads = False

    def steps(self, topo):
        return (
            "lab_trace_on\\n"
            "for i in $(seq 1 {STEPS}); do lab_run s$i sh -c '. /lab/lib.sh; for j in 1 2 3; do lab_log tick; done' & done\\n"
            "wait\\n"
            "lab_trace_off\\n"
        )

    def check(self, r):
        return [Expectation("every step ran", all(r.step(f"s{{i}}").rc == 0 for i in range(1, {STEPS} + 1)), claim=True)]
'''


def test_every_agent_line_arrives_with_concurrent_steps(debian_kernel, tmp_path):
    p = tmp_path / "chatty.py"
    p.write_text(SCENARIO)
    r = CliRunner().invoke(main, ["run", str(p)])
    assert r.exit_code == 0, r.output
    (run,) = (tmp_path / "runs").glob("*-chatty-*")
    log = (run / "agent.log").read_text().splitlines()
    for i in range(1, STEPS + 1):
        start = [n for n, line in enumerate(log) if re.fullmatch(rf"lab: step s{i} start uptime=[\d.]+", line)]
        end = [n for n, line in enumerate(log) if re.fullmatch(rf"lab: step s{i} rc=0 uptime=[\d.]+", line)]
        assert len(start) == 1 and len(end) == 1 and start[0] < end[0], (i, log)
    # Lines written at once are never torn or merged: each is whole.
    assert sum(line == "lab: tick" for line in log) == 3 * STEPS, log
    assert all(line.startswith("lab: ") for line in log), log
    for word in ("ready", "job start", "done rc=0", "sent bytes="):
        assert any(line.startswith(f"lab: {word}") for line in log), (word, log)
    stderr = (run / "out" / "stderr").read_text()
    assert "Device or resource busy" not in stderr, stderr
    # Progress off a terminal: each stage as plain lines on stderr, the verdict on stdout.
    started, _ = progress_steps(r.stderr)
    assert started == ["run", "boot", "snapshot", "workload", "results"], r.stderr
    assert_slow_steps_said_done(r.stderr, ["run", "boot", "workload"], outer="run")
    assert "[" not in r.stdout.split("lab run chatty")[0] and "PASS" in r.stdout, r.stdout
    assert not qemu_running(str(tmp_path))
