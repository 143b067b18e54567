"""Where lab puts run directories and finds data: the settings file, the environment,
the user's own folders (issue 14, items 3 and 8)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import config, paths, scenario, topology
from lab.cli import main
from lab.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def test_default_runs_dir_is_the_users_data_dir_not_the_cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_RUNS")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    d = paths.runs_dir()
    assert d == tmp_path / "home" / ".local" / "share" / "lab" / "runs"
    assert d.is_absolute() and Path.cwd() not in (d, *d.parents)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert paths.runs_dir() == tmp_path / "xdg" / "lab" / "runs"


def test_runs_dir_choice_order(tmp_path, monkeypatch):
    """--runs beats LAB_RUNS, which beats the settings file, which beats the default."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('runs = "~/from-config"\n')
    monkeypatch.setenv("LAB_CONFIG", str(cfg))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("LAB_RUNS")
    assert paths.runs_dir() == tmp_path / "from-config"
    monkeypatch.setenv("LAB_RUNS", str(tmp_path / "env"))
    assert paths.runs_dir() == tmp_path / "env"
    assert paths.runs_dir(tmp_path / "opt") == tmp_path / "opt"


@pytest.mark.parametrize("runs", ["tree", "tree/runs", "tree/a/../b", "other/../tree/x"])
def test_a_run_dir_is_never_inside_the_kernel_tree(tmp_path, monkeypatch, runs):
    tree = tmp_path / "tree"
    tree.mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="inside the kernel tree"):
        paths.check_runs_outside(Path(runs), Path("tree"))
    # Through a symbolic link to the tree too.
    (tmp_path / "link").symlink_to(tree)
    with pytest.raises(UserError, match="inside the kernel tree"):
        paths.check_runs_outside(Path("link/runs"), tree)
    paths.check_runs_outside(tmp_path / "runs", tree)  # beside it is fine
    paths.check_runs_outside(tmp_path / "treehouse", tree)  # a name that starts alike too


def test_run_from_inside_a_kernel_tree_never_writes_there(tmp_path, monkeypatch):
    """The habit of vng users: cd into the tree, run lab there.  With no choice made the
    runs go to the user's data dir; LAB_RUNS naming the tree is refused before any work."""
    tree = tmp_path / "linux"
    shutil.copytree(ROOT / "tests" / "fixtures" / "fakelinux", tree)
    monkeypatch.chdir(tree)
    monkeypatch.setenv("LAB_RUNS", "runs")  # relative: inside the tree
    r = CliRunner().invoke(main, ["run", "llc-spread-pinned", "--kernel-tree", "."])
    assert r.exit_code == 2 and "inside the kernel tree" in r.stderr, r.output
    assert sorted(p.name for p in tree.iterdir()) == sorted(p.name for p in (ROOT / "tests" / "fixtures" / "fakelinux").iterdir())
    monkeypatch.delenv("LAB_RUNS")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    paths.check_runs_outside(paths.runs_dir(), tree)


def test_settings_file_defaults_for_vm_options(tmp_path, monkeypatch):
    cfg = tmp_path / "config.toml"
    cfg.write_text('kernel = "/nonexistent/bzImage"\naccel = "tcg"\n')
    monkeypatch.setenv("LAB_CONFIG", str(cfg))
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--dry-run"])
    assert r.exit_code == 2 and "/nonexistent/bzImage does not exist" in r.stderr, r.output
    # The command line beats the file.
    r = CliRunner().invoke(main, ["topo", "render", "zen3-2s-mini", "--format", "qemu", "--kernel", "debian"])
    assert "/nonexistent" not in r.output


@pytest.mark.parametrize(
    "text, message",
    [
        ("kernal = 'x'\n", "unknown setting 'kernal'; did you mean 'kernel'?"),
        ("accel = 'fast'\n", "accel: 'fast' is not one of auto, kvm, tcg"),
        ("runs = 3\n", "runs: give a non-empty string"),
        ("topologies = '~/t'\n", "topologies: give a list of folders"),
        ("this is = not [ toml\n", "not valid TOML"),
    ],
)
def test_bad_settings_are_one_line_naming_the_file(tmp_path, monkeypatch, text, message):
    cfg = tmp_path / "config.toml"
    cfg.write_text(text)
    monkeypatch.setenv("LAB_CONFIG", str(cfg))
    with pytest.raises(UserError, match="^" + str(cfg)):
        config.load()
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--dry-run"])
    assert r.exit_code == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.output


def test_users_own_topology_and_scenario_folders(tmp_path, monkeypatch):
    mine = tmp_path / "topos"
    mine.mkdir()
    spec = (ROOT / "topologies" / "zen3-2s-mini.toml").read_text().replace('name = "zen3-2s-mini"', 'name = "mybox"')
    (mine / "mybox.toml").write_text(spec)
    scen = tmp_path / "scen"
    scen.mkdir()
    shutil.copy(ROOT / "scenarios" / "llc_spread_pinned.py", scen / "my_scenario.py")
    assert "mybox" not in topology.catalog_names()
    monkeypatch.setenv("LAB_TOPOLOGIES", f"{tmp_path / 'nothing'}:{mine}")
    monkeypatch.setenv("LAB_SCENARIOS", str(scen))
    assert "mybox" in topology.catalog_names() and "zen3-2s-mini" in topology.catalog_names()
    assert topology.load("mybox").n_cpus == topology.load("zen3-2s-mini").n_cpus
    assert "my-scenario" in scenario.names() and "llc-spread-pinned" in scenario.names()
    r = CliRunner().invoke(main, ["topo", "list"])
    assert r.exit_code == 0 and "mybox" in r.output
    # The same through the settings file.
    monkeypatch.delenv("LAB_TOPOLOGIES")
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'topologies = ["{mine}"]\n')
    monkeypatch.setenv("LAB_CONFIG", str(cfg))
    assert "mybox" in topology.catalog_names()
