"""scripts/setup.sh (issue 14, item 9): it says which systems it supports and refuses the
others in one line, and it changes the package manager's setup only after saying what it
will change.  The package tools are fakes on PATH that log their calls: the real ones
would change this machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"
BOOKWORM = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'


@pytest.fixture
def system(tmp_path):
    """A fake system: os-release, and dpkg/dpkg-query/apt-get/sudo that log every call."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls"
    state = {"arch": "amd64", "foreign": "", "installed": ""}

    def make(os_release: str = BOOKWORM, **kw):
        state.update(kw)
        (tmp_path / "os-release").write_text(os_release)
        for name, body in {
            "dpkg": f'echo "dpkg $*" >> {log}\ncase "$1" in --print-architecture) echo {state["arch"]} ;;'
                    f' --print-foreign-architectures) printf "{state["foreign"]}" ;; esac',
            "dpkg-query": f'case " {state["installed"]} " in *" $3 "*) printf "install ok installed" ;; *) exit 1 ;; esac',
            "apt-get": f'echo "apt-get $*" >> {log}',
            "sudo": f'echo "sudo $*" >> {log}\nexec "$@"',
        }.items():
            (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
            (bin_ / name).chmod(0o755)
        return log

    def run(*args: str, ci: bool = False, stdin: str | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "CI"}
        env.update(PATH=f"{bin_}:{env['PATH']}", LAB_OS_RELEASE=str(tmp_path / "os-release"))
        if ci:
            env["CI"] = "true"
        return subprocess.run(["sh", str(SETUP), *args], env=env, capture_output=True, text=True, timeout=60,
                              input=stdin)  # fmt: skip

    return make, run, log


@pytest.mark.parametrize(
    "os_release, arch, says",
    [
        ('PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\nVERSION_CODENAME=jammy\n', "amd64",
         "Ubuntu 22.04.4 LTS is not supported: lab needs Debian 12 (bookworm)"),
        ('PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\nID=debian\nVERSION_ID="11"\nVERSION_CODENAME=bullseye\n', "amd64",
         "Debian GNU/Linux 11 (bullseye) is not supported"),
        ('PRETTY_NAME="Fedora Linux 40"\nID=fedora\nVERSION_ID=40\n', "amd64", "use the Containerfile"),
        (BOOKWORM, "arm64", "Debian 12 on arm64 is not supported: lab needs amd64"),
    ],
)  # fmt: skip
def test_other_systems_are_refused_in_one_line(system, os_release, arch, says):
    make, run, log = system
    make(os_release, arch=arch)
    p = run("--system", ci=True)
    assert p.returncode == 2 and p.stderr.startswith("setup: ") and p.stderr.count("\n") == 1, p.stderr
    assert says in p.stderr, p.stderr
    assert not log.exists() or "apt-get" not in log.read_text()  # nothing was changed


def test_it_says_what_it_will_change_and_asks(system):
    make, run, log = system
    make()  # nothing installed, dpkg knows only amd64
    p = run("--system")  # no terminal, not CI: it says what it would do and does nothing
    assert p.returncode == 1, p.stdout + p.stderr
    assert "dpkg --add-architecture arm64" in p.stdout and "apt-get install --no-install-recommends" in p.stdout
    assert "linux-source-6.1" in p.stdout
    assert "nothing changed" in p.stderr and "--yes" in p.stderr
    assert "--add-architecture" not in log.read_text() and "apt-get" not in log.read_text()
    # In CI (CI=true, no stdin) it goes ahead: announcement first, then the changes.
    p = run("--system", ci=True)
    assert p.returncode == 0, p.stderr
    calls = log.read_text().splitlines()
    assert "dpkg --add-architecture arm64" in calls and any(c.startswith("apt-get install") and "linux-source-6.1" in c for c in calls)
    assert calls.index("dpkg --add-architecture arm64") < calls.index("apt-get update -qq")


def test_nothing_to_change_asks_nothing(system):
    make, run, log = system
    from_script = SETUP.read_text().split('PKGS="', 1)[1].split('"', 1)[0].split()
    make(foreign="arm64\\n", installed=" ".join(from_script))
    p = run("--system")
    assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p.stdout + p.stderr
    assert "apt-get" not in (log.read_text() if log.exists() else "")


def test_unknown_option_is_one_line(system):
    make, run, _ = system
    make()
    p = run("--nope")
    assert p.returncode == 2 and p.stderr == "setup: unknown option --nope (use --yes, --main, --test or --system)\n"
