"""`lab boot TOPO -- CMD` hands the guest command's output on byte for byte: a CR stays
a CR and a byte that is not UTF-8 stays that byte (it once came out as U+FFFD)."""

import subprocess
import sys
from pathlib import Path


def test_boot_output_is_the_guests_bytes(debian_kernel, tmp_path):
    lab = str(Path(sys.executable).parent / "lab")
    r = subprocess.run([lab, "boot", "xeon-2s22c-mini", "--", "printf", "a\\r\\nb\\377\\n"], capture_output=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-3000:]
    assert r.stdout == b"a\r\nb\xff\n"
    assert b"Traceback" not in r.stderr
