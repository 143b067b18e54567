import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_runs(tmp_path, monkeypatch):
    """Runs go to a temp dir; the cache stays shared (kernels are big) unless a test overrides it.
    The user's settings file (~/.config/lab/config.toml) and own folders are not read."""
    monkeypatch.setenv("LAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("LAB_CONFIG", str(tmp_path / "no-settings.toml"))
    for var in ("LAB_TOPOLOGIES", "LAB_SCENARIOS"):
        monkeypatch.delenv(var, raising=False)


def have_qemu(arch: str = "x86_64") -> bool:
    return shutil.which({"x86_64": "qemu-system-x86_64", "arm64": "qemu-system-aarch64"}[arch]) is not None


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


# Property tests must not fail on wall-clock deadlines: CI and developer boxes run
# guests under TCG beside them, so timing says nothing about correctness here.
from hypothesis import settings  # noqa: E402

settings.register_profile("lab", deadline=None)
settings.load_profile("lab")


def _debian_guest(arch: str, qemu: str, package: str, fetch: str):
    """Debian's kernel for *arch* guests, or skip saying what to install or fetch
    (scripts/setup.sh does both)."""
    if shutil.which(qemu) is None:
        pytest.skip(f"{qemu} missing: apt-get install {package} (scripts/setup.sh does)")
    from lab.errors import LabError
    from lab.kernel import resolve

    try:
        return resolve("debian", arch, build=False)
    except LabError as e:
        pytest.skip(f"Debian's {arch} kernel is not fetched: run `{fetch}` ({e})")


@pytest.fixture(scope="session")
def debian_kernel():
    return _debian_guest("x86_64", "qemu-system-x86_64", "qemu-system-x86", "lab kernel fetch debian")


@pytest.fixture(scope="session")
def debian_arm64_kernel():
    return _debian_guest("arm64", "qemu-system-aarch64", "qemu-system-arm", "lab kernel fetch debian --arch arm64")


@pytest.fixture
def fake_kernels(tmp_path):
    """A copy of the fake kernel tree and a kernels/ folder beside it with one recipe,
    'fake', built from that tree: make(fragment, recipe_extra) -> (kernels dir, tree)."""

    def make(fragment: str = "CONFIG_SMP=y\n", recipe_extra: str = "", source: str | None = None):
        tree = tmp_path / "linux"
        shutil.copytree(FIXTURES / "fakelinux", tree)
        kdir = tmp_path / "kernels"
        (kdir / "fragments").mkdir(parents=True)
        (kdir / "fragments" / "lab.config").write_text(fragment)
        (kdir / "fake").mkdir()
        (kdir / "fake" / "recipe.toml").write_text(f'arch = "x86_64"\nsource = "{source or tree}"\n{recipe_extra}')
        return kdir, tree

    return make
