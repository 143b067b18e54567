"""Scenarios that are data, not Python: a TOML file, or `lab run --workload CMD --check EXPR`.

A data scenario runs its commands in the guest at once (each a workload step, all started
together inside one traced phase, ``main``), traces the sched events the checks need, and
judges its check expressions (lab.analysis.checks: ``starvation < 100ms``,
``wakeup-latency p99 < 5ms``, ...), which carry its claim.  Its steps' exit statuses are
preconditions: a command that fails (or is not found in the guest) makes the run an ERROR
naming it, with its stderr.

Commands are data end to end: a command line is split with shlex on the host (or given as
an argv list), each word written to a file of the job layer (``/lab/workload/N/arg.I``)
and read back in the guest byte for byte into ``"$@"``; no shell of lab's parses them.
Parameters (``[params.NAME]``: default, min, max, help) are substituted into words as
``{NAME}`` on the host, after the split.  The command's first word is packed as a host
tool (as ``lab boot --tools`` does) unless it is one of lab's workloads, a busybox applet
or a path; a tool that cannot be packed is a SKIP before booting.

The whole definition, with the parameters' values, is recorded in plan.json
(``scenario``), so ``lab recheck``, ``lab compare`` and a bundle's replay rebuild the same
scenario from the run itself: it is data, nothing is imported.

A TOML scenario::

    name = "hackbench-starvation"
    summary = "hackbench groups on every CPU: no task waits runnable longer than 100 ms"
    topologies = ["zen3-2s-mini"]
    requires = ["sockets >= 2"]               # also: "clusters", "arch x86_64", "CONFIG_SCHED_CLUSTER"
    workloads = ["hackbench -g {groups} -l 2000"]
    checks = ["starvation < 100ms", "wakeup-latency p99 < 5ms"]

    [params.groups]
    default = 4
    min = 1
    max = 64
    help = "hackbench groups (each 40 tasks)"
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from . import scenario as sc
from .errors import UserError
from .limits import read_file
from .topology import Topology

WORKLOAD_NAME = "workload"  # the synthetic scenario `lab run --workload` makes
GUEST_DIR = "lab/workload"
DEFAULT_EVENTS = (
    "sched:sched_switch", "sched:sched_wakeup", "sched:sched_wakeup_new", "sched:sched_waking", "sched:sched_migrate_task",
)  # fmt: skip
DEFAULT_BUFFER_KB = 8192
DEFAULT_TIMEOUT = 900.0
MAX_WORKLOADS = 32
MAX_ARGS = 256
MAX_TOML_BYTES = 64 * 1024
KEYS = ("name", "summary", "claim", "topologies", "requires", "workloads", "checks", "events", "tools", "timeout", "buffer_kb", "params")
_COUNTS = ("sockets", "nodes", "llcs", "llcs_per_socket", "llcs_per_node", "clusters_per_llc", "cpus", "threads_per_core")
_PARAM_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@cache
def _applets() -> frozenset[str]:
    """busybox's applets (the guest's /bin holds each as a link): from the host's busybox
    when it has one, else none known (a command is then packed as a host tool)."""
    bb = shutil.which("busybox") or next((p for p in ("/bin/busybox", "/usr/bin/busybox") if Path(p).exists()), None)
    if bb is None:
        return frozenset()
    try:
        out = subprocess.run([bb, "--list"], capture_output=True, timeout=10, check=False).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(out.split())


@cache
def _lab_programs() -> frozenset[str]:
    """The guest programs lab itself ships: its workloads (stream, pingpong, ...) and
    labsel/labcpu."""
    from . import paths

    return frozenset({p.stem for p in (paths.IMAGES / "workloads").glob("*.c")} | {"labsel", "labcpu"})


def tool_of(argv: list[str]) -> str | None:
    """The host tool to pack for a command (its first word), or None when the guest has it
    already (a lab workload, a busybox applet) or it is a path in the guest."""
    first = argv[0]
    if "/" in first or first in _lab_programs() or first in _applets():
        return None
    return first


def requirement(text: str, where: str) -> sc.Requirement:
    """'sockets >= 2' (any of _COUNTS), 'clusters', 'arch x86_64', 'CONFIG_SCHED_CLUSTER'."""
    t = " ".join(text.split())
    m = re.fullmatch(r"([a-z_]+)\s*>=\s*([0-9]{1,6})", t)
    if m and m[1] in _COUNTS:
        return sc.at_least(m[1], int(m[2]))
    if t == "clusters":
        return sc.clusters
    m = re.fullmatch(r"arch ([a-z0-9_]+)", t)
    if m:
        return sc.arch(m[1])
    m = re.fullmatch(r"CONFIG_([A-Z0-9_]+)", t)
    if m:
        return sc.kernel_config(m[1], "the scenario requires it")
    raise UserError(
        f"{where}: requirement {text[:60]!r}: give 'COUNT >= N' (COUNT one of {', '.join(_COUNTS)}), "
        "'clusters', 'arch NAME' or 'CONFIG_SYMBOL'"
    )


def _param(name: str, d: Any, where: str) -> sc.Param:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,39}", name):
        raise UserError(f"{where}: parameter name {name[:40]!r} must be a word (letters, digits, _)")
    if not isinstance(d, dict) or "default" not in d:
        raise UserError(f"{where}: [params.{name}] needs a default (default = 16)")
    extra = set(d) - {"default", "min", "max", "help", "choices"}
    if extra:
        raise UserError(f"{where}: [params.{name}] has {', '.join(sorted(extra))}: it takes default, min, max, help, choices")
    default = d["default"]
    if not isinstance(default, (bool, int, float, str)):
        raise UserError(f"{where}: [params.{name}] default must be a number, true/false or a string")
    for k in ("min", "max"):
        if k in d and (isinstance(d[k], bool) or not isinstance(d[k], (int, float)) or isinstance(default, (bool, str))):
            raise UserError(f"{where}: [params.{name}] {k} must be a number, for a number parameter")
    choices = d.get("choices", [])
    if not (isinstance(choices, list) and all(isinstance(c, str) for c in choices)):
        raise UserError(f"{where}: [params.{name}] choices must be a list of strings")
    p = sc.Param(name, default, str(d.get("help", "")), d.get("min"), d.get("max"), tuple(choices))
    try:
        p.value(default)
    except ValueError as e:
        raise UserError(f"{where}: [params.{name}] default {default!r} is not {e}") from None
    return p


def _argv(cmd: Any, where: str) -> list[str]:
    if isinstance(cmd, str):
        try:
            argv = shlex.split(cmd)
        except ValueError as e:
            raise UserError(f"{where}: command {cmd[:80]!r}: {e}") from None
    elif isinstance(cmd, list) and all(isinstance(a, str) for a in cmd):
        argv = list(cmd)
    else:
        raise UserError(f"{where}: a workload is a command line or a list of words, not {str(cmd)[:60]!r}")
    if not argv or not argv[0]:
        raise UserError(f"{where}: an empty command")
    if len(argv) > MAX_ARGS or any("\0" in a for a in argv):
        raise UserError(f"{where}: command {shlex.join(argv)[:80]!r}: at most {MAX_ARGS} words, none with a NUL byte")
    return argv


class DataScenario(sc.Scenario):
    """A scenario from data (see the module's docstring); one instance per definition."""

    checks_carry_claim = True

    def __init__(self, d: dict[str, Any], where: str, source: str = "") -> None:
        from .analysis import checks as ck

        unknown_keys = set(d) - set(KEYS)
        if unknown_keys:
            raise UserError(f"{where}: unknown key(s) {', '.join(sorted(unknown_keys))} (a scenario takes {', '.join(KEYS)})")
        self.where, self.source, self.definition = where, source, d
        for k in ("name", "summary"):
            if not isinstance(d.get(k), str) or not d[k].strip():
                raise UserError(f"{where}: {k} must be a non-empty string")
        if not sc._is_name(d["name"]):
            raise UserError(f"{where}: name must be a one-line name without '/', not {d['name'][:60]!r}")
        cmds = d.get("workloads")
        if not isinstance(cmds, list) or not cmds or len(cmds) > MAX_WORKLOADS:
            raise UserError(f"{where}: workloads must be a list of 1 to {MAX_WORKLOADS} commands")
        self.argvs = [_argv(c, f"{where}: workloads[{i}]") for i, c in enumerate(cmds)]
        exprs = d.get("checks")
        if not isinstance(exprs, list) or not exprs or not all(isinstance(x, str) for x in exprs):
            raise UserError(f"{where}: checks must be a non-empty list of expressions ('starvation < 100ms'): they are what a run is judged by")
        self.check_texts = list(exprs)
        for x in exprs:
            try:
                ck.parse_check(x)
            except ck.CheckSyntaxError as e:
                raise UserError(f"{where}: {e}") from None
        tops = d.get("topologies", [])
        if not sc._is_str_list(tops):
            raise UserError(f"{where}: topologies must be a list of topology names")
        reqs = d.get("requires", [])
        if not sc._is_str_list(reqs):
            raise UserError(f"{where}: requires must be a list of strings ('sockets >= 2', 'clusters')")
        params = d.get("params", {})
        if not isinstance(params, dict):
            raise UserError(f"{where}: params must be a table ([params.NAME] with default, min, max, help)")
        self.params = [_param(k, v, where) for k, v in params.items()]  # type: ignore[misc]
        declared = {p.name for p in self.params}
        for argv in self.argvs:
            for w in argv:
                for ref in _PARAM_REF.findall(w):
                    if ref not in declared:
                        raise UserError(f"{where}: command {shlex.join(argv)[:80]!r} names {{{ref}}}, which is no parameter ({', '.join(sorted(declared)) or 'none declared'})")
        self.name = d["name"]  # type: ignore[misc]
        self.summary = d["summary"]  # type: ignore[misc]
        self.claim = d.get("claim") or f"the checks {'; '.join(exprs)} hold"  # type: ignore[misc]
        self.topologies = list(tops) or ["zen3-2s-mini"]  # type: ignore[misc]
        self.requires = [requirement(r, where) for r in reqs]  # type: ignore[misc]
        self.events = list(d.get("events") or DEFAULT_EVENTS)  # type: ignore[misc]
        self.tools_extra = list(d.get("tools") or [])
        self.timeout = d.get("timeout", DEFAULT_TIMEOUT)  # type: ignore[misc]
        self.buffer_kb = d.get("buffer_kb", DEFAULT_BUFFER_KB)  # type: ignore[misc]
        self.path = source if source.endswith(".toml") else ""  # type: ignore[misc]
        for attr in ("events", "timeout", "buffer_kb", "claim"):
            ok, what = sc.ATTRIBUTES[attr]
            if not ok(getattr(self, attr)):
                raise UserError(f"{where}: {attr} must be {what}")
        if not sc._is_str_list(self.tools_extra):
            raise UserError(f"{where}: tools must be a list of tool names")
        self._user_checks: list[Any] = []

    # the commands, with the parameters' values
    def commands(self) -> list[list[str]]:
        vals = {k: sc.fmt_param(v) for k, v in self.p.items()}
        return [[_PARAM_REF.sub(lambda m: vals.get(m[1], m[0]), w) for w in argv] for argv in self.argvs]

    @property
    def tools(self) -> list[str]:  # type: ignore[override]
        out = [t for t in (tool_of(a) for a in self.commands()) if t is not None]
        return list(dict.fromkeys([*out, *self.tools_extra]))

    def own_checks(self) -> list[str]:
        return list(self.check_texts)

    def record(self) -> dict[str, Any]:
        """plan.json's ``scenario``: the definition (commands as argv lists), the
        parameters' values and the commands as run, so the run rebuilds it."""
        d = dict(self.definition)
        d["workloads"] = [list(a) for a in self.argvs]
        return {"kind": "data", "name": self.name, "source": self.source, "definition": d,
                "params": self.param_values(), "commands": self.commands()}  # fmt: skip

    def guest_files(self, topo: Topology) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for i, argv in enumerate(self.commands()):
            for j, a in enumerate(argv):
                files[f"{GUEST_DIR}/{i}/arg.{j}"] = a.encode("utf-8", "surrogateescape")
            files[f"{GUEST_DIR}/{i}/nargs"] = f"{len(argv)}\n".encode()
        return files

    def step_names(self) -> list[str]:
        return [f"w{i + 1}-{re.sub(r'[^A-Za-z0-9._-]', '_', Path(a[0]).name)[:30]}" for i, a in enumerate(self.commands())]

    def steps(self, topo: Topology) -> str:
        lines = [
            "# Each command's words are files (/lab/workload/N/arg.I), read back byte for byte",
            "# into \"$@\": this shell never parses them.",
            "lab_argv_run() {",
            '    nm=$1; d=$2; set --; n=0; cnt=$(cat "$d/nargs")',
            '    while [ "$n" -lt "$cnt" ]; do a=$(cat "$d/arg.$n"; echo x); set -- "$@" "${a%x}"; n=$((n + 1)); done',
            '    lab_run "$nm" "$@"',
            "}",
            "lab_trace_on main",
        ]
        # All at once, each in a subshell of its own: one phase traces them together.
        for i, name in enumerate(self.step_names()):
            lines.append(f"lab_argv_run {name} /{GUEST_DIR}/{i} &")
        lines += ["wait", "lab_trace_off main"]
        return "\n".join(lines)

    def check(self, r: sc.Result) -> list[sc.Expectation]:
        out = []
        for name, argv in zip(self.step_names(), self.commands(), strict=True):
            st = r.step(name)
            out.append(sc.Expectation(
                f"{name} ran: {shlex.join(argv)[:100]}", st.rc == 0, figures={"rc": st.rc},
                note="" if st.rc == 0 else f"exited {st.rc}: {st.err.strip()[-200:]}",
            ))  # fmt: skip
        return out


def load_toml(path: Path) -> DataScenario:
    """A TOML scenario file; what is wrong with it is one line naming the file."""
    try:
        data = read_file(path, MAX_TOML_BYTES, "a TOML scenario").decode()
        d = tomllib.loads(data)
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: not TOML: {e}") from None
    return DataScenario(d, str(path), source=str(path))


def from_workloads(commands: list[str] | tuple[str, ...], checks: list[str] | tuple[str, ...]) -> DataScenario:
    """The synthetic scenario of `lab run --workload CMD ... --check EXPR ...`."""
    if not checks:
        raise UserError("--workload needs at least one --check EXPR: the checks are what the run is judged by")
    return DataScenario(
        {"name": WORKLOAD_NAME, "summary": "commands from the command line: " + "; ".join(commands),
         "workloads": list(commands), "checks": list(checks)},
        "--workload", source=WORKLOAD_NAME,
    )  # fmt: skip


def from_record(rec: Any, where: str) -> DataScenario:
    """The data scenario plan.json's ``scenario`` record defines, with its parameters."""
    if not isinstance(rec, dict) or rec.get("kind") != "data" or not isinstance(rec.get("definition"), dict):
        raise UserError(f"{where}: not a data scenario's record")
    s = DataScenario(rec["definition"], where, source=str(rec.get("source") or ""))
    if isinstance(rec.get("params"), dict) and rec["params"]:
        s.set_params(rec["params"], where=f"{where}: params")
    return s
