"""VM tests boot real guests under QEMU (TCG here).  They skip, saying what to
install, only where QEMU or the default kernel is missing; .ci/run installs both,
so in CI they never skip."""

import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/vm/" in str(item.fspath):
            item.add_marker(pytest.mark.vm)


@pytest.fixture(scope="session")
def debian_kernel():
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 missing: apt-get install qemu-system-x86 (scripts/setup.sh does)")
    from lab.errors import LabError
    from lab.kernel import resolve

    try:
        return resolve("debian", "x86_64", build=False)
    except LabError as e:
        pytest.skip(f"Debian's kernel is not fetched: run `lab kernel fetch debian` ({e})")
