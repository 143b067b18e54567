"""Every table lab prints pastes into a mail: piped (stdout not a terminal) or with
--format text, each line is plain ASCII and at most 80 columns (issue 15, item 6).

The commands run as the user runs them, as a child process whose stdout is a pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "fixtures" / "runs"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A cache with store entries as long as real ones (a recipe's long name, features)."""
    cache = tmp_path_factory.mktemp("cache")
    for i, (name, arch, feats) in enumerate([
        ("lab-6.1-no-affinity-imbalance", "x86_64", ["node_reclaim_distance_param", "pvh"]),
        ("lab-6.1-arm64-cluster-scan", "arm64", ["node_reclaim_distance_param", "cluster_scan"]),
    ]):  # fmt: skip
        kid = f"{i:x}" * 64
        d = cache / "kernels" / kid
        d.mkdir(parents=True)
        with open(d / "Image", "wb") as f:  # as long as metadata.json says (sparse)
            f.truncate(12345678)
        meta = {"id": kid, "name": name, "arch": arch, "image": "Image", "release": "6.1.158-lab",
                "features": feats, "image_size": 12345678, "built_at": "2026-11-23T17:00:00"}  # fmt: skip
        (d / "metadata.json").write_text(json.dumps(meta))
    return {**os.environ, "LAB_CACHE": str(cache), "COLUMNS": "200", "TERM": "xterm-256color"}


def lab(env, *args: str) -> str:
    cp = subprocess.run([sys.executable, "-m", "lab", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert cp.returncode in (0, 1, 4), cp.stderr  # 4: INCONCLUSIVE
    return cp.stdout


def plain(out: str) -> None:
    assert out.strip()
    for line in out.splitlines():
        assert line.isascii(), repr(line)
        assert len(line) <= 80, f"{len(line)} columns: {line!r}"
        assert line == line.rstrip(), repr(line)


# (command, what its table must show: the output is the table, not an error)
COMMANDS = [
    (("topo", "list"), "kunpeng920-2s-mini"),
    (("topo", "show", "zen3-2s-mini"), "NUMA distances"),
    (("topo", "show", "epyc7551-8n"), "NUMA distances"),
    (("topo", "show", "kunpeng920-2s-mini"), "cluster"),
    (("kernel", "list"), "lab-6.1-no-affinity-imbalance"),
    (("kernel", "recipes"), "lab-6.1-arm64-cluster-scan"),
    (("scenarios",), "preferred-node-migrations"),
    (("recheck", str(RUNS / "llc-spread-pinned-zen3-2s-mini-debian")), "targets distinct (no pile-up)"),
    (("recheck", str(RUNS / "soft-affinity-xeon-2s22c-mini-debian")), "cross_node"),
    (("compare", "--stored", str(RUNS / "llc-spread-pinned-zen3-2s-mini-lab-6.1"), "--", str(RUNS / "llc-spread-pinned-zen3-2s-mini-debian")),
     "%Change"),
]


@pytest.mark.parametrize("args, shows", COMMANDS, ids=[" ".join(c[0][:3]) for c in COMMANDS])
def test_piped_tables_are_ascii_within_80_columns(env, args, shows):
    out = lab(env, *args)
    plain(out)
    assert shows in out


def test_format_text_on_a_terminal(env):
    """--format text gives the same on a terminal: run under a pseudo-terminal."""
    import pty

    for args in (("scenarios", "--format", "text"), ("topo", "list", "--format", "text")):
        out = _in_pty(pty, [sys.executable, "-m", "lab", *args], env)
        plain(out.replace("\r\n", "\n"))
        assert "\x1b[" not in out  # no colour or cursor codes either


def _in_pty(pty, argv: list[str], env) -> str:
    """*argv*'s output as a terminal shows it (stdout a pty, 200 columns)."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    p = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=slave, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode()


def test_a_terminal_still_gets_rich_tables(env):
    """Without --format text a wide terminal keeps rich's tables (box drawing, wide)."""
    import pty

    out = _in_pty(pty, [sys.executable, "-m", "lab", "topo", "list"], env)
    assert any(len(line) > 80 for line in out.splitlines()) and not out.isascii()


def test_kernel_list_piped_keeps_names_and_features_whole(env):
    """A name is copied from this list into --kernel, so it is never folded, and neither
    are the features (a table cell folded both into pieces at 80 columns)."""
    out = lab(env, "kernel", "list")
    plain(out)
    firsts = [ln.split()[0] for ln in out.splitlines() if not ln.startswith(" ")]
    assert any(f.startswith("lab-6.1-no-affinity-imbalance@") for f in firsts), out
    assert all("@" in f or f.startswith("debian-") for f in firsts), out
    for feats in ("node_reclaim_distance_param, pvh", "cluster_scan, node_reclaim_distance_param"):
        assert any(ln.endswith(f"features: {feats}") for ln in out.splitlines()), out
