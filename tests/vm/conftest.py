"""VM tests boot real guests under QEMU (TCG here).  They skip, saying what to
install, only where QEMU or the default kernel is missing; .ci/run installs both,
so in CI they never skip."""

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/vm/" in str(item.fspath):
            item.add_marker(pytest.mark.vm)
