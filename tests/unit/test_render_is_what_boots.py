"""`lab topo render --format qemu` and `lab boot --dry-run` print the same argv for every
catalog topology (or refuse it with the same message), for the same kernel: the plan
depends on the kernel's features (hotplug bring-up's maxcpus=, TCG threading), so render
takes --kernel like a boot and says which kernel it planned for.  That this argv is what
a boot runs is tests/vm/test_dry_run_vm.py's."""

import os

import pytest
from click.testing import CliRunner

from lab import topology
from lab.cli import main
from lab.errors import LabError
from lab.kernel import resolve


@pytest.mark.parametrize("name", topology.catalog_names())
@pytest.mark.parametrize("extra", [[], ["--bringup", "boot"], ["--accel", "tcg", "--tcg-threads", "single"]])
def test_render_and_dry_run_agree(debian_kernel, name, extra):
    arch = topology.load(name).arch
    try:
        k = resolve("debian", arch, build=False)
    except LabError as e:
        pytest.skip(f"Debian's {arch} kernel is not fetched: lab kernel fetch debian --arch {arch} ({e})")
    cli = CliRunner()
    dry = cli.invoke(main, ["boot", name, *extra, "--dry-run"])
    render = cli.invoke(main, ["topo", "render", name, *extra])
    assert render.exit_code == dry.exit_code, render.output + dry.output
    if dry.exit_code:  # refused (e.g. more vCPUs than this QEMU's TCG can give): the same words
        assert dry.exit_code == 2 and render.stderr == dry.stderr
        return
    assert render.stdout == dry.stdout and os.path.basename(render.stdout.split()[0]).startswith("qemu-system-")  # the system QEMU, or a lab-built one by path
    assert f"planned for kernel debian ({k.release}, {k.id})" in render.stderr
    assert f"planned for kernel debian ({k.release}, {k.id})" in dry.stderr
