"""libvirt's remote URIs for real: an sshd the test starts on a localhost port (its own
host key, a throwaway user key, nothing of the system's ssh configuration used or
changed) and libvirt's own ssh transport (`qemu+ssh://`, virt-ssh-helper on the far
side) to this host's libvirtd.  `lab verify` passes through it, a matrix spreads its
cells over qemu:///system and the ssh URI and records which ran where, and an
unreachable URI is one line naming it, exit 2.

What this does not test: a really separate host.  Here the far side shares lab's cache
and runs folder trivially; on another host they must be shared at the same paths
(README, the libvirt backend)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.cli import main

from .conftest import lab_domains

SSHD = "/usr/sbin/sshd"
# lab's own one-second scenario (affinity holds: PASS on any kernel).  soft-affinity was
# used here until a kernel without soft affinity became a SKIP before booting (issue 31).
PINNED = Path(__file__).resolve().parent.parent / "fixtures" / "scenarios" / "pinned_stays.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ssh_uri(tmp_path_factory, libvirtd):
    if not Path(SSHD).is_file() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("openssh-server/openssh-client missing: apt-get install openssh-server (scripts/setup.sh does)")
    if os.geteuid() != 0:
        pytest.skip("the test's sshd logs in as root to reach qemu:///system: run as root")
    d = tmp_path_factory.mktemp("sshd")
    for key in ("hostkey", "id"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True)
    shutil.copy(d / "id.pub", d / "authorized_keys")
    port = _free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/hostkey\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\n"
    )
    # libvirt runs `ssh`; through this wrapper its known_hosts is the test's, not ~/.ssh's.
    (d / "ssh").write_text(f'#!/bin/sh\nexec ssh -o UserKnownHostsFile={d}/known_hosts -o BatchMode=yes "$@"\n')
    (d / "ssh").chmod(0o755)
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    subprocess.run([SSHD, "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")], check=True)
    for _ in range(100):
        if (d / "sshd.pid").exists():
            break
        time.sleep(0.1)
    pid = int((d / "sshd.pid").read_text().split()[0])
    yield f"qemu+ssh://root@127.0.0.1:{port}/system?keyfile={d}/id&no_verify=1&command={d}/ssh", d
    os.kill(pid, signal.SIGTERM)


def test_verify_through_a_qemu_ssh_uri(debian_kernel, ssh_uri):
    uri, _ = ssh_uri
    r = CliRunner().invoke(main, ["verify", "zen3-2s-mini", "--backend", "libvirt", "--connect", uri, "--json"])
    assert r.exit_code == 0, r.output[-3000:]
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["backend"] == "libvirt", doc["checks"]
    assert not lab_domains()


def test_matrix_spreads_cells_over_two_uris(debian_kernel, ssh_uri, tmp_path):
    uri, _ = ssh_uri
    out = tmp_path / "mx"
    r = CliRunner().invoke(main, [
        "matrix", "--scenarios", str(PINNED), "--topologies", "xeon-2s22c-mini,icelake-2s-mini", "--kernels", "debian",
        "--backend", "libvirt", "--connect", "qemu:///system", "--connect", uri, "-j", "2", "-o", str(out),
    ])  # fmt: skip
    assert r.exit_code == 0, r.output[-3000:]
    cells = json.loads((out / "matrix.json").read_text())["cells"]
    # the same verdict as through the QEMU backend (pinned-stays: affinity holds), on both URIs
    assert sorted((c["status"], c["connect"]) for c in cells) == sorted([("PASS", "qemu:///system"), ("PASS", uri)])
    assert not lab_domains()


def test_unreachable_uri_is_one_line_exit_2(ssh_uri):
    _, d = ssh_uri
    bad = f"qemu+ssh://root@127.0.0.1:{_free_port()}/system?keyfile={d}/id&no_verify=1&command={d}/ssh"
    r = CliRunner().invoke(main, ["verify", "zen3-2s-mini", "--backend", "libvirt", "--connect", bad])
    assert r.exit_code == 2, r.output
    err = [ln for ln in r.output.splitlines() if ln.startswith("lab: error:")]
    assert len(err) == 1 and f"cannot connect to libvirt at {bad}" in err[0] and "Connection refused" in err[0], r.output
    assert "Traceback" not in r.output
