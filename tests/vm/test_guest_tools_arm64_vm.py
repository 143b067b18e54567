"""An arm64 guest on this x86 host gets Debian's own arm64 tools (issue 39 item 1):
`lab boot kunpeng920-2s-mini --tools stress-ng -- stress-ng --version` stages
Debian's arm64 stress-ng with its library closure and ld-linux-aarch64.so.1, and the
guest runs it.  Before, the boot was refused ("cannot be packed for arm64 guests")."""

from click.testing import CliRunner

from lab.arch import host_name
from lab.cli import main


def test_boot_kunpeng_mini_runs_debians_arm64_stress_ng(debian_arm64_kernel):
    r = CliRunner().invoke(main, ["boot", "kunpeng920-2s-mini", "--tools", "stress-ng", "--", "stress-ng", "--version"])
    assert r.exit_code == 0, (r.stdout, r.stderr[-3000:])
    line = r.stdout.strip().splitlines()[-1]
    # 'stress-ng, version 0.15.06 (gcc 12.2.0, aarch64 Linux 6.1.0-56-arm64)': the
    # binary is Debian's arm64 build, run by the guest's kernel
    assert line.startswith("stress-ng, version "), r.stdout
    assert "aarch64" in line, line
    if host_name() != "arm64":
        assert "x86_64" not in line, line
