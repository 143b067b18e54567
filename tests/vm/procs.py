"""Process checks the VM tests share."""

from pathlib import Path


def qemu_running(marker: str) -> bool:
    """A QEMU whose command line mentions *marker* (read from /proc: ps truncates)."""
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmd.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in args and marker in args:
            return True
    return False
