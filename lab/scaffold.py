"""`lab scenario new NAME [--toml]`: a commented scenario skeleton that runs and passes as
written (tests/unit/test_scenario_new.py loads each and judges it; the Python one on a
recorded run), for the user to edit into their own question."""

from __future__ import annotations

import re
from pathlib import Path

from .errors import UserError

PYTHON = '''"""{name}: <one line: what this scenario asks of the scheduler>.

<Where the question comes from, as a reader can find it: a post's title, its author, the
list and the date ("[PATCH v9 2/2] sched/fair: Scan cluster before scanning LLC in
wake-up path", Yicong Yang, linux-kernel, 2023-07-19), or a commit (8881e1639f1f).>

<The mechanism: what the kernel does, where (select_task_rq_fair(), the load balancer),
and what a kernel that gets it wrong does instead.>

Written by `lab scenario new`: as it stands it runs lab's stream with one thread pinned
to the first CPU of each LLC and asks that every thread start on a CPU it is allowed,
which any working kernel does.  Edit steps() and check() into your own question:

    lab run ./{file} [-p seconds=5]             # boot, run, judge
    lab recheck RUN_DIR --scenario ./{file}     # judge a run again after editing check()
"""

from lab.scenario import Expectation, Param, Scenario, at_least

COMM = "stream"  # lab's static workload (images/workloads/stream.c): one JSON line on stdout


class {cls}(Scenario):
    name = "{name}"
    summary = "stream threads pinned one per LLC: each starts on a CPU it is allowed"
    seed = ""  # the source of the question, short (the docstring says it in full)
    # The expectation that carries the claim, in a sentence; check() marks it claim=True.
    # A run PASSes only when a claim-carrying expectation was judged and could have failed.
    claim = "'every thread starts on an allowed CPU': fork placement honours the affinity mask"
    topologies = ["zen3-2s-mini"]  # the first is the default; `lab topo list` has the rest
    # What lab can tell before booting (at_least, clusters, arch, kernel_config): a SKIP
    # with the reason when unmet, nothing boots.
    requires = [at_least("llcs", 2)]
    # The trace events check() reads, and the checks every run gets (starvation, wakeup
    # latency, ...) need; `filters` (event -> ftrace filter) keep a busy trace small.
    events = ["sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new", "sched:sched_migrate_task"]
    tools: list[str] = []  # host tools to pack into the guest: ["hackbench"], ["stress-ng"], ["perf"]
    # Typed parameters with defaults, checked before booting: `-p seconds=5`; self.p["seconds"].
    params = [Param("seconds", 2, "how long stream runs (traced)", min=1, max=60)]
    timeout = 300  # seconds for the whole guest job
    version = 1  # bump when steps() or check() change what a run means

    def steps(self, topo):
        # Shell (busybox sh) run in the guest in $LAB_OUT after lab's library (lab/guest/lib.sh):
        # labsel picks CPUs from the guest's own sysfs (in the guest's numbering), lab_trace_on /
        # lab_trace_off bracket a traced phase (trace.main.txt), lab_run NAME CMD... keeps a
        # step's stdout, stderr and exit status (a non-zero exit makes the run an ERROR).
        # Files written here are what check() reads (r.text, r.allowed).
        return f"""
CPUS=$(labsel llc-firsts) || exit 1
N=$(labsel count "$CPUS")
echo "$CPUS" > allowed
lab_trace_on
lab_run stream taskset -c "$CPUS" stream -t "$N" -s {{self.p['seconds']}}
lab_trace_off
"""

    def allowed_cpus(self, r, phase):
        # Optional: the CPUs each comm was allowed, for the affinity check every run gets.
        cpus = r.allowed("allowed")
        return {{COMM: cpus}} if cpus else None

    def check(self, r):
        # r answers in the spec's (the real machine's) CPU numbering: r.allowed(file),
        # r.step(name) (.rc, .out, .json), r.wakeups(), r.migrations(), r.residency(), ...
        allowed = r.allowed("allowed")
        w = r.wakeups(comms=COMM, kinds=["sched_wakeup_new"])
        outside = w.outside(allowed)
        ran = r.step("stream")
        return [
            # A precondition: the workload ran and was traced (not the claim).
            Expectation(
                "stream ran and its threads' forks were traced",
                ran.rc == 0 and bool(w.wakeups),
                figures={{"threads": len(w.wakeups), "allowed": len(allowed), "rc": ran.rc}},
                note="" if w.wakeups else "no sched_wakeup_new of stream in the trace",
            ),
            # The claim: evidence is the offending trace lines, figures what it measured.
            Expectation(
                "every thread starts on an allowed CPU",
                bool(w.wakeups) and not outside,
                evidence=[x.line() for x in outside[:20]],
                figures={{"outside": len(outside), "targets": len(set(w.targets()))}},
                note="" if not outside else "a thread started outside its affinity mask",
                claim=True,
            ),
        ]
'''

TOML = '''# {name}: a scenario as data (no Python): commands run in the guest at once, traced,
# judged by the checks every run gets.  Written by `lab scenario new --toml`; as it
# stands it runs lab's stream on {{threads}} threads and passes on any working kernel.
#
#   lab run ./{file} [-p threads=8]
#   lab recheck RUN_DIR          (the run's plan.json holds this definition)
#
# Where the question comes from, as a reader can find it: a post's title, author, list
# and date, or a commit.

name = "{name}"
summary = "stream threads on an idle machine: no task waits long to run"
topologies = ["zen3-2s-mini"]        # the first is the default
requires = ["llcs >= 2"]             # also "sockets >= 2", "clusters", "arch x86_64", "CONFIG_SCHED_CLUSTER"

# Each command is split like a shell's words on the host and passed to the guest as data
# (never through a shell); its first word is packed from the host unless the guest has it
# (lab's workloads, busybox's applets).  {{NAME}} is a parameter's value.
workloads = ["stream -t {{threads}} -s {{seconds}}"]

# What the run is judged by (`lab run --help` lists the checks): these carry the claim.
checks = ["starvation < 2s", "wakeup-latency p99 < 1s"]

# events = [...]      default: sched_switch, sched_wakeup(_new), sched_waking, sched_migrate_task
# tools = ["perf"]    more host tools to pack
# timeout = 900
# buffer_kb = 8192    trace buffer per CPU

[params.threads]
default = 4
min = 1
max = 64
help = "stream threads"

[params.seconds]
default = 2
min = 1
max = 60
help = "how long stream runs"
'''


def class_name(name: str) -> str:
    return "".join(w.capitalize() for w in re.split(r"[-_]", name) if w) or "MyScenario"


def write(name: str, directory: Path, toml: bool = False) -> Path:
    """The skeleton for scenario *name* in *directory* (never over an existing file)."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,62}", name):
        raise UserError(f"lab scenario new {name[:60]!r}: a name is lowercase letters, digits and '-', starting with a letter (e.g. wake-affine-llc)")
    file = name.replace("-", "_") + (".toml" if toml else ".py")
    dest = directory / file
    if dest.exists() or dest.is_symlink():
        raise UserError(f"{dest} exists: lab scenario new never overwrites a file")
    if not directory.is_dir():
        raise UserError(f"{directory}: not a directory")
    text = (TOML if toml else PYTHON).format(name=name, file=file, cls=class_name(name))
    with open(dest, "x") as f:
        f.write(text)
    return dest
