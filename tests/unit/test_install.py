"""lab installs as a tool (issue 14, item 8): a wheel built from the checkout, installed
into a fresh virtualenv that does not see the system's or lab's own site-packages, finds
its topologies, scenarios, kernel recipes and guest files without the checkout.

Needs the package registry (pip's cache makes it quick): click, rich and kconfiglib are
installed into the new virtualenv the way `pipx install` would.  About 30 s here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a wheel is built from: the packaging files and the folders it ships.
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "lab", "topologies", "scenarios", "kernels", "images")


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """(the installed `lab`, its environment, a folder outside the checkout)."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    src.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=skip)
        else:
            shutil.copy2(p, src / name)
    # Nothing of the checkout or of this test run leaks in: no PYTHONPATH, no settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LAB_", "VIRTUAL_ENV"))}
    env.update(LAB_CONFIG=str(tmp / "no-settings.toml"), LAB_RUNS=str(tmp / "runs"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(src)], tmp, env)
    (wheel,) = (tmp / "dist").glob("lab-*.whl")
    venv = tmp / "venv"
    # A fresh virtualenv, without the system's site-packages; this pip installs into it.
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, env)
    _run([*pip, "--python", str(venv / "bin" / "python"), "install", "-q", str(wheel)], tmp, env)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(src)  # the installed lab must not need its source either
    return venv / "bin" / "lab", env, elsewhere


def test_installed_lab_is_not_the_checkout(installed):
    lab, env, elsewhere = installed
    py = lab.parent / "python"
    p = _run([str(py), "-c", "import lab, lab.paths as p; print(lab.__file__); print(p.TOPOLOGIES); print(p.SCENARIOS)"], elsewhere, env)
    for line in p.stdout.split():
        assert str(ROOT) not in line and "site-packages" in line, p.stdout


def test_topo_list_and_render_from_another_directory(installed):
    lab, env, elsewhere = installed
    p = _run([str(lab), "topo", "list"], elsewhere, env)
    for name in ("zen3-2s-mini", "kunpeng920-2s", "xeon-2s22c-mini"):
        assert name in p.stdout, p.stdout
    p = _run([str(lab), "topo", "render", "zen3-2s-mini", "--format", "qemu"], elsewhere, env)
    assert p.stdout.startswith("qemu-system-x86_64 ") and "-smp 32,sockets=2" in p.stdout, p.stdout


def test_scenarios_recipes_and_guest_files_ship(installed):
    lab, env, elsewhere = installed
    p = _run([str(lab), "scenarios"], elsewhere, env)
    assert "llc-spread-pinned" in p.stdout and "soft-affinity" in p.stdout, p.stdout
    p = _run([str(lab), "kernel", "recipes"], elsewhere, env)
    assert "lab-6.1-arm64-cluster-scan" in p.stdout, p.stdout
    py = lab.parent / "python"
    p = _run([str(py), "-c", "from lab.image import initramfs, workloads; "
              "print(all((initramfs.GUEST / f).is_file() for f in ('init.sh', 'lib.sh', 'labsel'))); "
              "print((workloads.SOURCES / 'pingpong.c').is_file())"], elsewhere, env)  # fmt: skip
    assert p.stdout.split() == ["True", "True"], p.stdout


def test_users_own_topology_folder_with_the_installed_lab(installed, tmp_path):
    lab, env, elsewhere = installed
    (tmp_path / "mybox.toml").write_text((ROOT / "topologies" / "zen3-2s-mini.toml").read_text())
    p = _run([str(lab), "topo", "show", "mybox"], elsewhere, {**env, "LAB_TOPOLOGIES": str(tmp_path)})
    assert "mybox" in p.stdout, p.stdout
