"""Every command README.md shows works (issue 14, item 1): the fast ones run here, as a
user would type them (bash, the checkout's `lab` on PATH, a scratch working directory);
tests/readme_commands.py says how each of the others is checked, and a README command
without a check fails here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from readme_commands import CHECKS, ROOT, commands  # tests/ is on sys.path (its conftest.py)

from lab.cli import main

BIN = Path(sys.executable).parent  # the venv's bin: its `lab` is this checkout's
RUN_FIXTURE = ROOT / "tests" / "fixtures" / "runs" / "llc-spread-pinned-zen3-2s-mini-lab-6.1"


def _of(kind: str) -> list:
    return [
        pytest.param(c, marks=[pytest.mark.xfail(strict=True, reason=CHECKS[c].xfail)] if CHECKS[c].xfail else [], id=c)
        for c in commands() if CHECKS.get(c) and CHECKS[c].kind == kind
    ]  # fmt: skip


def test_every_readme_command_has_a_check():
    cmds = commands()
    assert len(cmds) >= 15, f"the README's commands were not found: {cmds}"
    missing = [c for c in cmds if c not in CHECKS]
    assert not missing, f"README commands with no check in tests/readme_commands.py: {missing}"
    stale = [c for c in CHECKS if c not in cmds]
    assert not stale, f"checks for commands no longer in the README (remove them): {stale}"
    assert len(cmds) == len(set(cmds)), "a command shown twice: keep one"


def test_the_parser_finds_commands_only_in_command_blocks():
    text = (
        "para `lab inline`\n\n    lab one   # comment\n              # more comment\n    lab two\n"
        "\n```toml\nlab = 1\n```\n\n```\nlab three\n```\n\n```text\nlab/  the package\n```\n"
        "* item\n    continued text\n"
    )
    assert commands(text) == ["lab one", "lab two", "lab three"]


# ---- run: for real -------------------------------------------------------------------------

def _scratch(tmp_path: Path, check, cmd: str) -> tuple[str, dict[str, str]]:
    """The command with its placeholders filled, and its environment."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "COLUMNS": "200"}
    if check.setup == "capture":
        subprocess.run(["lab", "topo", "capture", "-o", "mybox.tar.gz"], cwd=tmp_path, env=env, check=True,
                       capture_output=True)  # fmt: skip
    elif check.setup in ("run_dir", "bundle"):
        shutil.copytree(RUN_FIXTURE, tmp_path / "run")
        shutil.copytree(RUN_FIXTURE, tmp_path / "run2")
        # compare: the run against a copy of itself (one run on both sides is refused)
        cmd = cmd.replace("RUN_DIR... -- RUN_DIR...", "run -- run2").replace("RUN_DIR...", "run").replace("RUN_DIR", "run")
        if check.setup == "bundle":
            subprocess.run(["lab", "report", "bundle", "run", "-o", "bug.tar.gz"], cwd=tmp_path, env=env, check=True,
                           capture_output=True)  # fmt: skip
    elif check.setup == "store_entry":
        # A store of its own holding one build: removing it touches no real kernel.
        env["LAB_CACHE"] = str(tmp_path / "cache")
        d = tmp_path / "cache" / "kernels" / ("1a2b3c4d" + "0" * 56)
        d.mkdir(parents=True)
        (d / "bzImage").write_bytes(b"")
        meta = {"id": d.name, "name": "lab-6.1", "arch": "x86_64", "image": "bzImage", "release": "6.1.0-lab"}
        (d / "metadata.json").write_text(json.dumps(meta))
        cmd = cmd.replace("NAME", "lab-6.1@1a2b")
    elif check.setup == "checkout":  # names a file of the checkout: run from its top
        cmd = cmd.replace("tests/fixtures/", f"{ROOT}/tests/fixtures/")
    elif check.setup == "completion":  # the shell has lab's completion function after it
        cmd = f"{cmd} && declare -F _lab_completion"
    elif check.setup:
        raise AssertionError(f"unknown setup {check.setup!r}")
    assert not re.search(r"\b[A-Z][A-Z_]{2,}\b", cmd.replace("_LAB_COMPLETE", "")), f"a placeholder left in {cmd!r}"
    return cmd, env


@pytest.mark.parametrize("cmd", _of("run"))
def test_readme_command_runs(cmd, tmp_path):
    check = CHECKS[cmd]
    line, env = _scratch(tmp_path, check, cmd)
    p = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    print(f"README command: {cmd!r} -> exit {p.returncode}")
    assert p.returncode in check.exit, f"{line}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    assert "Traceback" not in p.stderr, p.stderr
    if check.setup == "store_entry":
        assert not list((tmp_path / "cache" / "kernels").glob("1a2b*")), "rm left the entry"
    if cmd.startswith("lab topo import"):
        out = cmd.split(" -o ")[1].split()[0]
        assert (tmp_path / out).is_file()


# ---- args: the cost is a kernel build; click parses and converts the arguments ---------------

def _parse(argv: list[str]) -> click.Context:
    """The innermost command's context for *argv*: every option parsed and converted, as
    `lab` would before running the command."""
    cmd: click.Command = main
    ctx = cmd.make_context("lab", list(argv))
    while isinstance(cmd, click.Group):
        if cmd.invoke_without_command and not [*ctx._protected_args, *ctx.args]:
            break  # a group that is a command too (lab matrix), given no subcommand
        name, sub, rest = cmd.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        assert sub is not None and name is not None, argv
        cmd = sub
        ctx = cmd.make_context(name, rest, parent=ctx)
    return ctx


@pytest.mark.parametrize("cmd", _of("args"))
def test_readme_command_arguments(cmd):
    argv = cmd.split()
    assert argv[0] == "lab"
    ctx = _parse(argv[1:])
    if "recipe_name" in ctx.params:  # the recipe and everything it names load
        from lab.kernel import recipe

        recipe.load(ctx.params["recipe_name"])
    print(f"README command: {cmd!r} -> arguments valid (not run: {CHECKS[cmd].why})")


def test_argument_check_refuses_bad_arguments():
    with pytest.raises(click.UsageError):
        _parse(["kernel", "build", "lab-6.1", "--jobs", "zero"])
    with pytest.raises(click.UsageError):
        _parse(["kernel", "nope"])


# ---- covered: by another test, which must exist ----------------------------------------------

@pytest.mark.parametrize("cmd", [c for c in commands() if CHECKS.get(c) and CHECKS[c].kind == "covered"])
def test_covered_commands_name_a_test_that_exists(cmd):
    check = CHECKS[cmd]
    path, _, func = check.by.partition("::")
    assert check.why and func, cmd
    assert re.search(rf"^def {re.escape(func)}\(", (ROOT / path).read_text(), re.M), f"{check.by} does not exist"


def test_setup_main_is_the_readme_run():
    """`setup.sh --main` sets up (what CI does) and then execs one lab command: the README's."""
    text = (ROOT / "scripts" / "setup.sh").read_text()
    job = re.search(r"--main\)\s*\n\s*exec \.venv/bin/(lab [^\n]+)", text)
    assert job, "setup.sh --main execs no lab command"
    assert job[1].strip() in commands() and CHECKS[job[1].strip()].exit


def test_ci_runs_the_readme_test_command():
    assert re.search(r"^exec sh scripts/setup\.sh --yes --test$", (ROOT / ".ci" / "run").read_text(), re.M)
