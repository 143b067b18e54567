"""What `lab boot --dry-run` and `lab topo render` print is what a boot runs: the argv
comes from one function, and a real boot records the argv it ran as qemu.argv."""

import pytest
from click.testing import CliRunner

from lab.cli import main
from lab.errors import LabError
from lab.kernel import resolve


def _arch_kernel(arch: str) -> None:
    try:
        resolve("debian", arch, build=False)
    except LabError as e:
        pytest.skip(f"Debian's {arch} kernel is not fetched: lab kernel fetch debian --arch {arch} ({e})")


@pytest.mark.parametrize(
    ("topo", "arch", "extra"),
    [
        ("zen3-2s-mini", "x86_64", ["--bringup", "hotplug"]),  # maxcpus= and thread=multi come from the kernel's features
        ("kunpeng920-2s-mini", "arm64", []),  # -dtb: the device tree lab edits
    ],
)
def test_dry_run_and_topo_render_print_what_a_boot_runs(debian_kernel, tmp_path, topo, arch, extra):
    _arch_kernel(arch)
    cli = CliRunner()
    dry = cli.invoke(main, ["boot", topo, *extra, "--dry-run"])
    assert dry.exit_code == 0, dry.output + dry.stderr
    render = cli.invoke(main, ["topo", "render", topo, *extra])
    assert render.exit_code == 0, render.output + render.stderr
    assert render.stdout == dry.stdout
    ran = cli.invoke(main, ["boot", topo, *extra, "--", "true"])
    assert ran.exit_code == 0, ran.output + ran.stderr
    (argv,) = (tmp_path / "runs").glob("*/qemu.argv")
    assert argv.read_text() == dry.stdout
    if extra:
        assert "maxcpus=1" in dry.stdout and "thread=multi" in dry.stdout
    else:
        assert " -dtb machine.dtb " in dry.stdout
