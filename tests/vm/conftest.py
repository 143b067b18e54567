"""VM tests boot real guests under QEMU (TCG here).  They skip, saying what to
install, only where QEMU or the default kernel is missing; .ci/run installs both,
so in CI they never skip."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

URI = "qemu:///system"
DAEMONS = ("virtlogd", "libvirtd")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/vm/" in str(item.fspath):
            item.add_marker(pytest.mark.vm)


def _answers() -> bool:
    try:
        import libvirt
    except ImportError:
        return False
    libvirt.registerErrorHandler(lambda *_: None, None)
    try:
        libvirt.open(URI).close()
        return True
    except libvirt.libvirtError:
        return False


def lab_domains() -> list[str]:
    import libvirt

    conn = libvirt.open(URI)
    try:
        return [d.name() for d in conn.listAllDomains() if d.name().startswith("lab-")]
    finally:
        conn.close()


@pytest.fixture(scope="session")
def libvirtd():
    if shutil.which("libvirtd") is None:
        pytest.skip("libvirtd missing: apt-get install libvirt-daemon-system (scripts/setup.sh does)")
    pytest.importorskip("libvirt", reason="libvirt-python missing: pip install -e . (scripts/setup.sh does)")
    started: list[int] = []
    if not _answers():
        if Path("/run/systemd/system").is_dir():
            subprocess.run(["systemctl", "start", "libvirtd"], check=True)
        else:
            for d in DAEMONS:
                pidfile = Path(f"/run/{d}.pid")
                if subprocess.run(["pgrep", "-x", d], capture_output=True).returncode != 0:
                    subprocess.run([d, "-d"], check=True)
                    for _ in range(100):
                        if pidfile.exists():
                            started.append(int(pidfile.read_text().split()[0]))
                            break
                        time.sleep(0.1)
        for _ in range(300):
            if _answers():
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"libvirtd started but {URI} does not answer")
    yield URI
    for pid in reversed(started):  # and gone before anything starts them again
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
