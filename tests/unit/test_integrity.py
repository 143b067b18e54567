"""Nothing judged on partial data (lab.integrity): each fault is injected into a run
recorded from a real guest (tests/fixtures/runs) and must give ERROR, exit 3, naming the
cause, in `lab run` and `lab recheck` alike, without a traceback.

`lab run` goes through the real runner and the real backend's result checks (boot(),
_extract); only QEMU is replaced, by a "guest" that sends the recorded run's files the
way lab's agent does: a tar stream on lab.out, its words (ready, done, sent bytes=N) on
lab.log."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import integrity, runner, session, topology
from lab.backends import guest
from lab.backends import qemu as backend
from lab.cli import main
from lab.cli.common import to_ascii
from lab.kernel.artifact import KernelArtifact
from lab.plan import VmOptions
from lab.render import qemu as render

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNS = ROOT / "tests" / "fixtures" / "runs"
FIXTURE = RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1"

Files = dict[str, bytes]


# ---- a guest that sends a recorded run ----------------------------------------------------


def guest_files(fixture: Path = FIXTURE) -> Files:
    """What today's agent would stream for the recorded run: its out/ and guest/ files,
    plus what the recording predates (the job's rc/stdout/stderr, lib.sh's lists of the
    phases and steps it started, phase end times)."""
    files = {p.name: p.read_bytes() for p in sorted((fixture / "out").iterdir())}
    files.update({f"guest/{p.name}": p.read_bytes() for p in sorted((fixture / "guest").glob("*"))})
    phases = sorted(n[6:-4] for n in files if n.startswith("trace.") and n.endswith(".txt"))
    for ph in phases:
        files.setdefault(f"phase.{ph}.start", b"11.0\n")
        files.setdefault(f"phase.{ph}.end", b"13.0\n")
    files.update({
        "rc": b"0\n", "stdout": b"", "stderr": b"",
        "lab.phases": "".join(f"{p}\n" for p in phases).encode(),
        "lab.steps": "".join(f"{n[:-3]}\n" for n in sorted(files) if n.endswith(".rc") and n != "rc").encode(),
    })  # fmt: skip
    return files


def tar_bytes(files: Files, extra: Callable[[tarfile.TarFile], None] | None = None) -> bytes:
    """The archive busybox's `tar -C /tmp/out -cf - .` makes of *files*."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        dirs = sorted({"/".join(n.split("/")[:i]) for n in files for i in range(1, n.count("/") + 1)})
        for d in [".", *dirs]:
            ti = tarfile.TarInfo("./" if d == "." else f"./{d}/")
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            tf.addfile(ti)
        for name, data in files.items():
            ti = tarfile.TarInfo(f"./{name}")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        if extra:
            extra(tf)
    return buf.getvalue()


def _session(name: str = "zen3-2s-mini") -> session.Session:
    from lab import host as host_mod

    t = topology.load(name)
    h = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test host")
    k = KernelArtifact(
        name="fake", arch=t.arch, image=Path("/nonexistent/bzImage"), release="6.1.0", modules=None,
        config=None, features=frozenset({"node_reclaim_distance_param"}), id="fake-1",
    )  # fmt: skip
    return session.Session(render.plan(t, h, VmOptions(kernel="fake"), kernel_features=session.features(k), kernel=k.ref()), k)


def install_guest(setattr, files: Files | None = None, *, stream: bytes | None = None, words: list[str] | None = None,
                  during: Callable[[], None] | None = None) -> None:  # fmt: skip
    """Replace QEMU by a guest that sends *files* (default: the recorded run's) as *stream*
    (default: their tar), saying *words* on lab.log (default: what the agent says, with
    the byte count of the whole tar); *during* runs while the 'VM' is up."""
    files = guest_files() if files is None else files
    whole = tar_bytes(files)
    data = whole if stream is None else stream
    said = words if words is not None else ["lab: ready uptime=1.0", "lab: job start uptime=1.1", "lab: done rc=0 uptime=3.0", f"lab: sent bytes={len(whole)} tar=0"]

    def run_qemu(argv, run_dir, agent, lost, mon, *, ready_within, finish_within):
        (run_dir / "agent.log").write_text("".join(f"{w}\n" for w in said))
        (run_dir / "results.tar").write_bytes(data)
        agent.read(1.0)
        if during:
            during()
        return 0

    setattr(backend, "_run_qemu", run_qemu)
    setattr(backend, "make_boot_files", lambda plan, kernel, run_dir, job, **kw: render.boot_files(plan, Path("/nonexistent")))
    setattr(session, "prepare", lambda topo, vm, **kw: _session(topo.name))
    setattr(runner, "workloads_layer", lambda arch, progress=None: Path("/nonexistent/workloads.cpio"))


def lab_run(monkeypatch, tmp_path, **guest):
    monkeypatch.setenv("LAB_RUNS", str(tmp_path / "runs"))
    install_guest(monkeypatch.setattr, **guest)
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--runs-per-verdict", "1"])
    (run_dir,) = (tmp_path / "runs").glob("*-llc-spread-pinned-*")
    return r, run_dir


def recheck(run_dir: Path):
    return CliRunner().invoke(main, ["recheck", str(run_dir)])


def assert_error(r, cause: str) -> None:
    assert r.exit_code == 3, r.output
    # Piped output is ASCII (a guest's '\u00b2' shows as its escape): lab.cli.common.to_ascii
    assert "ERROR" in r.output and to_ascii(cause) in " ".join(r.output.split()), r.output
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception


# ---- the baseline: a complete run is judged, live and rechecked ---------------------------


def test_a_complete_run_is_judged_and_records_its_figures(monkeypatch, tmp_path):
    r, run_dir = lab_run(monkeypatch, tmp_path)
    assert r.exit_code in (0, 1), r.output
    res = json.loads((run_dir / "results.json").read_text())
    assert res["status"] in ("PASS", "FAIL") and res["integrity"]["finished"] is True
    ig = res["integrity"]
    assert ig["problems"] == [] and ig["stream"]["bytes_sent"] == ig["stream"]["bytes_received"] > 0
    assert ig["stream"]["end_of_archive"] is True and ig["job_rc"] == 0
    main_ = ig["phases"]["main"]
    assert main_["lost"] == 0 and main_["unparsed_lines"] == 0 and main_["mismatched"] == {} and main_["events"] == 25
    assert "pid" not in ig and ig["stage"] == "check"
    assert (run_dir / "junit.xml").exists() and not list(run_dir.glob("*.tmp"))
    again = recheck(run_dir)
    assert again.exit_code == r.exit_code, again.output


def test_recorded_runs_of_older_labs_are_still_judged():
    """They predate the integrity record (no byte count, no rc file kept): their PASS/FAIL
    says the agent finished; lost events and skipped lines are still looked at."""
    for d in sorted(RUNS.iterdir()):
        o = runner.recheck(d)
        if d.name == "numa-balancing-numa4-96-mini-debian-25s-thp":  # predates numa02: its check reads
            assert o.status == "ERROR" and "out/numa02.rc" in o.message  # files it lacks (no verdict)
            continue
        assert o.status in runner.JUDGED, (d.name, o.message)
        assert all(f["lost"] == 0 and f["unparsed_lines"] == 0 for f in o.integrity["phases"].values())


# ---- faults in the trace ------------------------------------------------------------------


def _trace(files: Files, edit: Callable[[list[str]], list[str]]) -> Files:
    lines = files["trace.main.txt"].decode().splitlines(keepends=True)
    return {**files, "trace.main.txt": "".join(edit(lines)).encode()}


def _after_header(lines: list[str], extra: list[str]) -> list[str]:
    at = max(i for i, ln in enumerate(lines) if ln.startswith("#")) + 1
    return lines[:at] + extra + lines[at:]


TRACE_FAULTS = {
    "a [LOST 5 EVENTS] marker": (
        lambda f: _trace(f, lambda ls: _after_header(ls, ["CPU:3 [LOST 5 EVENTS]\n"])),
        "trace phase 'main' lost 5 events (ring buffer overrun: 1 [LOST ...] markers): raise buffer_kb (4096 KiB per CPU)",
    ),
    "a [LOST EVENTS] marker without a count": (
        lambda f: _trace(f, lambda ls: _after_header(ls, ["CPU:3 [LOST EVENTS]\n"])),
        "trace phase 'main' lost an unknown number of events",
    ),
    "the guest's overrun count": (
        lambda f: {**f, "trace.main.lost": b"7\n"},
        "trace phase 'main' lost 7 events (ring buffer overrun: the guest's per-CPU overrun/dropped count 7)",
    ),
    "entries-written above entries-in-buffer": (
        lambda f: _trace(f, lambda ls: [ln.replace("25/25", "25/40") for ln in ls]),
        "trace phase 'main' lost 15 events (ring buffer overrun: entries-written 40 > entries-in-buffer 25)",
    ),
    "a buffer that restarted": (
        lambda f: _trace(f, lambda ls: _after_header(ls, ["##### CPU 4 buffer started ####\n"])),
        "the buffer of CPU 4 restarted",
    ),
    "22 garbage lines": (
        lambda f: _trace(f, lambda ls: ls[:20] + [f"garbage {i} \x1b[31m[/]\n" for i in range(22)] + ls[20:]),
        "trace phase 'main': 22 lines lab could not read (tolerated: 0), e.g. 'garbage 0",
    ),
    "a sched_wakeup_new line in another format": (
        lambda f: _trace(f, lambda ls: ls + ["          stream-326     [004] d..2.    11.186113: sched_wakeup_new: pid=9 cpu=4\n"]),
        "trace phase 'main': 1 event lines not in the format lab decodes (sched_wakeup_new 1; tolerated: 0)",
    ),
    "a lost count that is not a number": (
        lambda f: {**f, "trace.main.lost": "\u00b2\n".encode()},
        "trace.main.lost holds no count: '\u00b2\\n'",
    ),
}


@pytest.mark.parametrize("fault", list(TRACE_FAULTS))
def test_trace_faults_are_errors_in_run_and_recheck(monkeypatch, tmp_path, fault):
    edit, cause = TRACE_FAULTS[fault]
    r, run_dir = lab_run(monkeypatch, tmp_path, files=edit(guest_files()))
    assert_error(r, cause)
    res = json.loads((run_dir / "results.json").read_text())
    assert res["status"] == "ERROR" and cause in res["message"] and res["integrity"]["finished"] is True
    assert_error(recheck(run_dir), cause)


def test_skip_counts_go_into_results_json(monkeypatch, tmp_path):
    edit, _ = TRACE_FAULTS["22 garbage lines"]
    _, run_dir = lab_run(monkeypatch, tmp_path, files=edit(guest_files()))
    ph = json.loads((run_dir / "results.json").read_text())["integrity"]["phases"]["main"]
    assert ph["unparsed_lines"] == 22 and ph["unparsed_samples"][0].startswith("'garbage 0")
    assert json.loads((run_dir / "results.json").read_text())["integrity"]["tolerated"] == {"unparsed_lines": 0, "malformed_events": 0}


def test_faults_injected_into_a_recorded_run_dir_are_errors_on_recheck(tmp_path):
    """The same faults straight into a copy of a recorded run (older lab, no integrity
    record): `lab recheck` alone."""
    for fault, (edit, cause) in TRACE_FAULTS.items():
        d = tmp_path / fault.replace(" ", "_").replace("/", "_")
        shutil.copytree(FIXTURE, d)
        files = edit({p.name: p.read_bytes() for p in (d / "out").iterdir()})
        for name, data in files.items():
            (d / "out" / name).write_bytes(data)
        assert_error(recheck(d), cause)


# ---- faults in the stream and the job ------------------------------------------------------


def _cut_inside_a_member(data: bytes) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        m = next(m for m in tf.getmembers() if m.name == "./trace.main.txt")
    return data[: m.offset_data + 700]


def _cut_between_members(data: bytes) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        m = next(m for m in tf.getmembers() if m.name == "./trace.main.txt")
    return data[: m.offset]  # tarfile reads this as a shorter, whole archive


STREAM_FAULTS = {
    "cut inside a member": (dict(stream=_cut_inside_a_member(tar_bytes(guest_files()))), "the results stream was cut short: "),
    "cut between members": (dict(stream=_cut_between_members(tar_bytes(guest_files()))), "the results stream was cut short: "),
    "cut before the end-of-archive blocks": (dict(stream=tar_bytes(guest_files())[:-10240]), "the results stream was cut short: "),
    "nothing arrived": (dict(stream=b""), "no results stream from the guest (results.tar is empty)"),
    "the agent never said it had sent them": (
        dict(words=["lab: ready uptime=1.0", "lab: done rc=0 uptime=3.0"]),
        "the results stream was cut short: the guest never said it had sent them all",
    ),
    "the guest's tar failed": (
        dict(words=["lab: ready uptime=1.0", "lab: done rc=0 uptime=3.0", f"lab: sent bytes={len(tar_bytes(guest_files()))} tar=1"]),
        "the guest's tar exited 1: some results could not be archived",
    ),
    "not a tar": (
        dict(stream=b"x" * 4096, words=["lab: ready uptime=1.0", "lab: done rc=0 uptime=3.0", "lab: sent bytes=4096 tar=0"]),
        "the results stream is not a tar archive lab can read",
    ),
}


@pytest.mark.parametrize("fault", list(STREAM_FAULTS))
def test_a_results_stream_cut_short_is_an_error_in_run_and_recheck(monkeypatch, tmp_path, fault):
    guest, cause = STREAM_FAULTS[fault]
    r, run_dir = lab_run(monkeypatch, tmp_path, **guest)
    assert_error(r, cause)
    res = json.loads((run_dir / "results.json").read_text())
    assert res["status"] == "ERROR" and cause in res["message"] and res["integrity"]["finished"] is False
    sent = guest["stream"] if "stream" in guest else tar_bytes(guest_files())
    assert json.loads((run_dir / "boot.json").read_text())["stream"]["bytes_received"] == len(sent)
    assert res["integrity"]["stream"]["bytes_received"] == len(sent)
    assert_error(recheck(run_dir), cause)


def test_a_stream_cut_between_members_is_caught_on_the_data_alone(tmp_path):
    """Python's tarfile reads such a stream as a shorter, whole archive; without the
    agent's byte count only tar's end-of-archive blocks tell."""
    tar = tmp_path / "results.tar"
    tar.write_bytes(_cut_between_members(tar_bytes(guest_files())))
    st = integrity.check_stream(tar, [], need_count=False)
    assert st.problem and "ends without tar's end-of-archive blocks" in st.problem
    assert st.figures["end_of_archive"] is False


def test_extract_keeps_what_arrived_and_only_plain_files(tmp_path):
    def hostile(tf: tarfile.TarFile) -> None:
        for name, kind in (("../escape", tarfile.REGTYPE), ("/abs", tarfile.REGTYPE), ("./link", tarfile.SYMTYPE),
                           ("./dev", tarfile.CHRTYPE), ("./rc/inner", tarfile.REGTYPE)):  # fmt: skip
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = kind, "/etc/passwd" if kind == tarfile.SYMTYPE else ""
            tf.addfile(ti, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)

    tar = tmp_path / "run" / "results.tar"
    tar.parent.mkdir()
    tar.write_bytes(tar_bytes({"rc": b"0\n", "a/b": b"x"}, extra=hostile))
    ignored = guest._extract(tar, tmp_path / "run" / "out")
    assert sorted(ignored) == ["../escape", "./dev", "./link", "./rc/inner", "/abs"]
    assert (tmp_path / "run" / "out" / "a" / "b").read_bytes() == b"x"
    assert not (tmp_path / "escape").exists() and not (tmp_path / "run" / "out" / "link").exists()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(_cut_inside_a_member(tar_bytes(guest_files())))
    guest._extract(cut, tmp_path / "cut")
    assert (tmp_path / "cut" / "stream.rc").exists() and not (tmp_path / "cut" / "trace.main.txt").exists()


def _without(*names: str) -> Files:
    return {k: v for k, v in guest_files().items() if k not in names}


JOB_FAULTS = {
    "the job left no exit status": (_without("rc"), "the run did not finish: the guest's job left no exit status (out/rc)"),
    "the job exited non-zero": ({**guest_files(), "rc": b"2\n", "stderr": b"sh: oops [bold]\n"}, "the job exited 2: sh: oops [bold]"),
    "trace setup failed": ({**guest_files(), "rc": b"90\n", "stderr": b"lab: no tracefs\n"}, "trace setup failed in the guest: lab: no tracefs"),
    "a step exited non-zero": ({**guest_files(), "stream.rc": b"3\n", "stream.err": b"went wrong\n"}, "workload step 'stream' exited 3: went wrong"),
    "a step that never ended": (_without("stream.rc"), "result files missing from the guest's output: 'stream.rc'"),
    "a phase whose trace was never saved": (_without("trace.main.txt", "trace.main.lost"), "result files missing from the guest's output: 'trace.main.txt', 'trace.main.lost'"),
    "a phase without its lost count": (_without("trace.main.lost"), "result files missing from the guest's output: 'trace.main.lost'"),
    "a phase never stopped": (_without("phase.main.end"), "result files missing from the guest's output: 'phase.main.end'"),
    "an exit status that is not a number": ({**guest_files(), "rc": "\u00b2".encode()}, "the job exited with no status ('\u00b2')"),
}


@pytest.mark.parametrize("fault", list(JOB_FAULTS))
def test_job_faults_and_missing_files_are_errors_in_run_and_recheck(monkeypatch, tmp_path, fault):
    files, cause = JOB_FAULTS[fault]
    r, run_dir = lab_run(monkeypatch, tmp_path, files=files)
    assert_error(r, cause)
    assert_error(recheck(run_dir), cause)


def test_guest_names_are_never_paths(tmp_path):
    """Names the guest lists (lab.phases, lab.steps) are looked up among the files in out/."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "secret.rc").write_text("5\n")
    (out / "lab.steps").write_text("../secret\n/etc/passwd\nok\n")
    (out / "lab.phases").write_text("../../x\n")
    v = integrity.judge(tmp_path, integrity.Need(finish=False, count=False))
    assert v.figures.get("missing") == ["ok.rc"] and "secret" not in v.message


def test_links_and_fifos_in_a_run_directory_are_not_results(tmp_path):
    """lab unpacks only regular files into out/ (_extract); a link or a FIFO there was put
    by someone else: it is not judged as the guest's, nothing waits on the FIFO and
    nothing is read through the link."""
    import threading

    def recheck_within(d: Path, seconds: float = 30):
        box: dict = {}
        t = threading.Thread(target=lambda: box.update(r=recheck(d)), daemon=True)
        t.start()
        t.join(seconds)
        assert not t.is_alive(), "recheck is waiting on a FIFO"
        return box["r"]

    fifo = tmp_path / "fifo"
    shutil.copytree(FIXTURE, fifo)
    (fifo / "out" / "trace.main.lost").unlink()
    os.mkfifo(fifo / "out" / "trace.main.lost")
    assert_error(recheck_within(fifo), "result files missing from the guest's output: 'trace.main.lost'")

    linked = tmp_path / "linked"
    shutil.copytree(FIXTURE, linked)
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    (linked / "out" / "trace.main.txt").unlink()
    (linked / "out" / "trace.main.txt").symlink_to(secret)
    r = recheck_within(linked)  # an older lab's run lists no phases: check() asks for the trace
    assert r.exit_code == 2 and "Traceback" not in r.output and "secret\n" not in r.output
    assert f"{linked / 'out' / 'trace.main.txt'}: a symbolic link, not a regular file" in " ".join(r.output.split())


# ---- runs that did not finish ---------------------------------------------------------------


def test_missing_or_unreadable_results_json_is_an_error(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(FIXTURE, d)
    (d / "results.json").unlink()
    assert_error(recheck(d), "the run did not finish: no results.json")
    (d / "results.json").write_text("")  # what a non-atomic write left when lab was killed
    assert_error(recheck(d), "the run did not finish: results.json is not JSON (0 bytes")
    (d / "results.json").write_text("[1, 2]")
    assert_error(recheck(d), "results.json is not a run's record (not a JSON object)")


def test_a_run_an_older_lab_left_unfinished_is_not_judged(tmp_path):
    """The issue's case: interrupted during boot, results.json said ERROR with no message,
    and recheck judged the files that happened to be there (FAIL)."""
    d = tmp_path / "run"
    shutil.copytree(FIXTURE, d)
    res = json.loads((d / "results.json").read_text())
    (d / "results.json").write_text(json.dumps({**res, "status": "ERROR", "message": "", "expectations": []}))
    assert_error(recheck(d), "the run did not finish: the guest's job left no exit status (out/rc)")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_says_so_and_recheck_agrees(monkeypatch, tmp_path, sig):
    r, run_dir = lab_run(monkeypatch, tmp_path, during=lambda: (os.kill(os.getpid(), sig), time.sleep(5)))
    assert r.exit_code == 130, r.output
    cause = f"the run did not finish: interrupted by {sig.name} while the guest ran the job"
    assert cause in r.output and str(run_dir) in " ".join(r.output.split())
    res = json.loads((run_dir / "results.json").read_text())
    assert res["status"] == "ERROR" and res["message"] == cause
    assert res["integrity"]["interrupted"] == sig.name and res["integrity"]["stage"] == "job"
    assert (run_dir / "agent.log").exists() and (run_dir / "command").exists()  # what was gathered is kept
    assert_error(recheck(run_dir), cause)
    # The next run works.
    monkeypatch.undo()
    r, _ = lab_run(monkeypatch, tmp_path / "next")
    assert r.exit_code in (0, 1), r.output


def test_a_run_is_recorded_as_running_until_it_ends(monkeypatch, tmp_path):
    seen = {}

    def look():
        (d,) = (tmp_path / "runs").glob("*")
        seen.update(json.loads((d / "results.json").read_text()))
        seen["recheck"] = recheck(d)

    lab_run(monkeypatch, tmp_path, during=look)
    assert seen["status"] == "RUNNING" and seen["scenario"] == "llc-spread-pinned"
    assert seen["integrity"]["stage"] == "job" and seen["integrity"]["pid"] == os.getpid()
    assert_error(seen["recheck"], f"the run has not finished: lab (pid {os.getpid()}) is still running it")


KILLED = """
import sys, time
sys.path.insert(0, {here!r})
from test_integrity import install_guest
install_guest(setattr, during=lambda: time.sleep(120))
from lab.cli import main
main(["run", "llc-spread-pinned", "--runs-per-verdict", "1"])
"""


def test_a_run_whose_lab_was_killed_says_it_did_not_finish(tmp_path):
    """SIGKILL: lab can write nothing at the end; the RUNNING record it wrote first says
    where it was, and recheck reports the run as not finished, not 'unknown scenario'."""
    env = {**os.environ, "LAB_RUNS": str(tmp_path / "runs"), "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", KILLED.format(here=str(HERE))], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = list((tmp_path / "runs").glob("*/results.json"))
            if runs and json.loads(runs[0].read_text()).get("integrity", {}).get("stage") == "job":
                break
            assert p.poll() is None, p.stderr.read().decode() if p.stderr else ""
            time.sleep(0.1)
        else:
            pytest.fail("the run never reached the job")
    finally:
        p.kill()
        p.wait()
    run_dir = runs[0].parent
    assert_error(recheck(run_dir), f"the run did not finish (lab was killed while the guest ran the job: results.json still says RUNNING; lab's pid {p.pid} is gone)")
