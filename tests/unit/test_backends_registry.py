"""The backend registry (issue 33 item 1): a backend is a module with the Backend
protocol's names plus one line in backends.base.REGISTRY, and every place that offers or
dispatches on a backend reads the registry: the session (adapt), backends.boot and
.dry_run, the CLI's --backend and `lab topo render --format` choices, the matrix."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_plan import _session  # tests/unit is on sys.path (pytest's "prepend" import mode)

from lab import session
from lab.backends import base
from lab.cli import main


@pytest.fixture
def null_backend(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    monkeypatch.setitem(base.REGISTRY, "null", "_null_backend")  # the one registry line

    def prepare(topo, vm, **kw):
        s = _session(topo.name, **{k: v for k, v in vm.to_dict().items() if k != "kernel"})
        return dataclasses.replace(s, plan=session.for_backend(s.plan, s.kernel))

    monkeypatch.setattr(session, "prepare", prepare)


def test_the_shipped_backends_are_the_registry_s_and_keep_the_protocol():
    assert base.names() == ("qemu", "libvirt", "vng") and base.DEFAULT == "qemu"
    for name in base.names():
        b = base.get(name)
        assert b.NAME == name and isinstance(b.CAPABILITIES, base.Capabilities)
        assert all(callable(getattr(b, f)) for f in ("adapt", "dry_run", "boot"))
        if b.CAPABILITIES.interactive:
            assert callable(b.interactive)
        if b.CAPABILITIES.builds_tree:
            assert callable(b.build_tree) and b.TREE_BUILD
    assert base.with_capability("remote") == ("libvirt",) and base.with_capability("interactive") == ("qemu",)


def test_an_unknown_backend_is_one_line():
    from lab.errors import UserError

    with pytest.raises(UserError, match="backend 'nope': not one of qemu, libvirt, vng"):
        base.get("nope")


def test_a_registered_backend_boots_through_the_cli(null_backend):
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--backend", "null", "--", "true"])
    assert r.exit_code == 0, r.output
    assert r.stdout_bytes == b"null\n"
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--backend", "null", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "null-vm zen3-2s-mini $RUN_DIR\n" and "$RUN_DIR is the run directory" in r.stderr
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--backend", "null"])  # not interactive
    assert r.exit_code == 2 and "an interactive console is --backend qemu only" in r.output
    r = CliRunner().invoke(main, ["topo", "render", "zen3-2s-mini", "--format", "null"])
    assert r.exit_code == 0 and r.stdout.startswith("null-vm zen3-2s-mini")
    assert "[qemu|libvirt|vng|null]" in CliRunner().invoke(main, ["boot", "--help"]).output


def test_a_registered_backend_runs_matrix_cells(null_backend):
    import lab.matrix as mx

    m = mx.expand("llc-spread-pinned", "zen3-2s-mini", "debian", backend="null")
    argv = mx.Runner(m, Path("x")).lab_run_argv(m.cells[0], "k", None)
    assert argv[argv.index("--backend") + 1] == "null"
    r = CliRunner().invoke(main, ["matrix", "plan", "--topologies", "zen3-2s-mini", "--backend", "null"])
    assert r.exit_code == 0, r.output


def test_without_its_registry_line_it_is_unknown():
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--backend", "null", "--", "true"])
    assert r.exit_code == 2 and "'null' is not one of 'qemu', 'libvirt', 'vng'" in r.output


def test_only_the_registry_and_the_backends_name_a_backend():
    """No dispatch on a backend's name outside its own modules: everything reads the
    registry (before, session, backends/__init__, cli/vm, cli/topo, cli/run, cli/matrix
    and matrix each tested the name)."""
    import re

    lab = Path(__file__).resolve().parents[2] / "lab"
    own = {"backends/base.py", "backends/qemu.py", "backends/libvirt.py", "backends/vng.py", "render/libvirt.py", "render/vng.py",
           "proc.py", "emulators.py"}  # fmt: skip  (proc: the vng program's install hint; emulators: libvirt's schemas)
    named = [f"{p.relative_to(lab)}:{i}" for p in sorted(lab.rglob("*.py")) if str(p.relative_to(lab)) not in own
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"""["'](libvirt|vng)["']|[=!]= ["']qemu["']""", line)]  # fmt: skip
    assert named == []


def test_a_trivial_backend_is_one_small_module():
    """The diff of adding tests/unit/_null_backend.py: the module (under 25 lines) and the
    one registry line the fixture adds."""
    lines = (Path(__file__).parent / "_null_backend.py").read_text().splitlines()
    assert len(lines) <= 25
