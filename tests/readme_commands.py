"""The commands README.md shows, and how the tests check each (issue 14, item 1).

A command is a line of a README code block: an indented block, or a fenced one without a
language or with sh/shell/console (a block that is not commands is fenced with its
language: ```toml, ```text).  Trailing `# comments` are dropped; a line that is only a
comment continues the one above.

Every command has exactly one entry in CHECKS, keyed by its text; a README command
without one, or an entry whose command left the README, fails
tests/unit/test_readme.py.  The kinds of check:

- ``run``: run for real by tests/unit/test_readme.py (fast: no guest, no kernel build);
- ``vm``: run for real by tests/vm/test_readme_vm.py (boots a guest);
- ``args``: its cost is a full kernel build or a source unpack, so only its arguments are
  checked: click parses and converts them (names resolved, recipes loaded), named as such;
- ``covered``: another test runs the same thing; ``by`` names it and ``why`` says how it is
  the same (tests/unit/test_readme.py checks that the named test exists).

Placeholders (``RUN_DIR``, ``NAME``, ``mybox.tar.gz``) are filled by ``setup`` in a
scratch directory that is the command's working directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SHELL_FENCES = ("", "sh", "shell", "console", "bash")


@dataclass(frozen=True)
class Check:
    kind: str  # run | vm | args | covered
    exit: tuple[int, ...] = (0,)  # the exit statuses that mean the command worked
    setup: str = ""  # the name of a setup step in the test (placeholders, files it needs)
    by: str = ""  # covered: the test that runs it (path::function)
    why: str = ""  # covered / args: how that checks this command
    xfail: str = ""  # a known failure, with the issue that fixes it (strict: the fix must remove it)
    interactive: bool = False  # vm: a console on a terminal


# A verdict is the command working: PASS (0) or FAIL (1) are both answers; 2 (bad input)
# and 3 (error, no verdict) are failures.
VERDICT = (0, 1)

CHECKS: dict[str, Check] = {
    "sh scripts/setup.sh --main": Check(
        "covered", by="tests/unit/test_readme.py::test_setup_main_is_the_readme_run",
        why="its setup part is .ci/run's (the CI run itself); its job is `lab run llc-spread-pinned --topology "
        "zen3-2s-mini`, which the test checks is the README command of that text, checked below",
    ),
    "sh scripts/setup.sh --test": Check(
        "covered", by="tests/unit/test_readme.py::test_ci_runs_the_readme_test_command",
        why="it is CI: .ci/run execs exactly this command (with --yes), so a CI run is its check",
    ),
    "pipx install .": Check(
        "covered", by="tests/unit/test_install.py::test_topo_list_and_render_from_another_directory",
        why="pipx builds a wheel of the checkout and installs it into a fresh venv: the test does the same with pip "
        "(pipx is not a lab dependency) and runs lab from another directory",
    ),
    'eval "$(_LAB_COMPLETE=bash_source lab)"': Check("run", setup="completion"),
    "lab topo list": Check("run"),
    "lab topo show zen3-2s": Check("run"),
    "lab topo render zen3-2s-mini --format qemu": Check("run"),
    "lab topo capture -o mybox.tar.gz": Check("run"),
    "lab topo import mybox.tar.gz -o mybox.toml --mini": Check("run", setup="capture"),
    "lab verify zen3-2s-mini": Check(
        "covered", by="tests/vm/test_verify_vm.py::test_verify_mini",
        why="runs `lab verify zen3-2s-mini --json` (parametrized over the x86 minis) and needs exit 0; --json "
        "changes only how the same checks are printed",
    ),
    "lab boot xeon-2s22c-mini -- numactl -H": Check("vm"),
    "lab boot xeon-2s22c-mini": Check("vm", interactive=True),
    "lab scenarios": Check("run"),
    "lab run llc-spread-pinned --topology zen3-2s-mini": Check(
        "covered", exit=VERDICT, by="tests/vm/test_scenarios_vm.py::test_seed_scenario_passes_or_states_why",
        why="runs `lab run llc-spread-pinned` (its default topology, asserted there to be zen3-2s-mini) and needs "
        "a verdict: PASS, or FAIL with the scenario's stated reason",
    ),
    "lab recheck RUN_DIR": Check("run", setup="run_dir"),
    "lab kernel build lab-6.1": Check("args", why="a full kernel build (tests/build builds lab's kernels)"),
    "lab kernel list": Check("run"),
    "lab kernel show debian": Check("run"),
    "lab kernel rm NAME": Check("run", setup="store_entry"),
    "lab kernel config lab-6.1": Check("args", why="unpacks linux-source-6.1 and runs make olddefconfig: minutes cold"),
    "lab kernel fetch debian": Check("run"),
    "lab kernel fetch debian-6.12": Check("run"),
    "lab verify zen3-2s-mini --backend libvirt": Check(
        "covered", by="tests/vm/test_backends_vm.py::test_verify_through_libvirt",
        why="runs `lab verify zen3-2s-mini` through --backend libvirt on a libvirtd the test starts, and needs exit 0",
    ),
    "lab run llc-spread-pinned --backend vng": Check(
        "covered", exit=VERDICT, by="tests/vm/test_backends_vm.py::test_scenario_through_vng",
        why="runs llc-spread-pinned on its default topology through --backend vng and needs a verdict with its reason",
    ),
    "lab topo render zen3-2s-mini --format libvirt": Check("run"),
    "lab matrix --topologies all-minis --kernels debian --scenarios all -o out": Check(
        "args", why="every catalog mini x every seed scenario: 27 min at -j2 on this 2-core host "
        "(tests/vm/test_matrix_vm.py runs a 2 x 2 matrix at -j2 for real)",
    ),
    "lab matrix --topologies all-minis --shard 2/4 -o out/shard-2-4": Check(
        "args", why="a quarter of the full mini matrix; shards are partitioned and merged in tests/unit/test_matrix.py",
    ),
    "lab matrix merge -o merged out/shard-*": Check(
        "covered", by="tests/unit/test_matrix.py::test_shards_merge_into_the_whole_matrix",
        why="merges the shards of a matrix into one table and one JUnit file, as the command does",
    ),
    "lab matrix plan --format github --topologies all-minis --shards 4": Check("run"),
    "lab compare llc-spread-pinned --kernel lab-6.1 --kernel lab-6.1-no-affinity-imbalance": Check(
        "args", why="builds two recipes, then 10 interleaved runs (7 min here); tests/vm/test_compare_vm.py runs "
        "a short comparison for real",
    ),
    "lab compare RUN_DIR... -- RUN_DIR...": Check("run", setup="run_dir"),
    "lab bisect llc-spread-pinned --kernel-tree ~/linux --good v6.1 --bad HEAD": Check(
        "covered", by="tests/build/test_bisect_build.py::test_bisect_finds_the_revert",
        why="bisects a history made from linux-source-6.1 whose one commit reverts seed 000's fix (marked handrun: "
        "four kernel builds)",
    ),
    "lab bisect llc-spread-pinned --kernel-tree ~/linux --good v6.1 --bad HEAD --confidence 0.95": Check(
        "args", why="kernel builds of a real tree; the sequential rule is tested against simulated histories in "
        "tests/unit/test_bisect_seq.py and wired through lab's bisection with faked runs in tests/unit/test_bisect.py",
    ),
    "lab domains RUN_DIR": Check("run", setup="run_dir"),
    "lab domains --topology zen3-2s-mini --kernel debian --kernel debian-6.12": Check(
        "args", why="two boots (24 s each here for zen3-2s-mini); tests/unit/test_domains.py diffs recorded runs' "
        "snapshots and drives this path with the boots faked",
    ),
    "lab topo import tests/fixtures/captures/spr8480-2s-snc4.tar.gz -o snc.toml --mini": Check("run", setup="checkout"),
    "lab topo diff tests/fixtures/captures/epyc7551-8n-mini-guest.tar.gz": Check("vm", setup="checkout"),
    "lab topo import tests/fixtures/lscpu/xeon-gold-6130-2s.txt -o xeon.toml": Check("run", setup="checkout"),
    "lab verify snc-mini.toml": Check(
        "covered", by="tests/vm/test_verify_vm.py::test_verify_snc_machine_from_its_capture",
        why="imports the same capture with --mini and needs `lab verify` of the mini spec to pass",
    ),
    "lab kernel build lab-6.12-scx": Check("args", why="a full 6.12 kernel build with debug info (tests/vm/test_sched_ext_vm.py builds it on demand, by hand)"),
    "lab scheduler build scx_simple": Check("args", why="needs lab-6.12-scx built (an hour here); tests/vm/test_sched_ext_vm.py builds it on demand, by hand"),
    "lab scheduler list": Check("run"),
    "lab scheduler show ID": Check("args", why="needs a built scheduler (tests/vm/test_sched_ext_vm.py, by hand); tests/unit/test_scheduler.py looks one up in a store"),
    "lab boot zen3-2s-mini --kernel lab-6.12-scx --scheduler scx_simple -- cat /sys/kernel/sched_ext/state": Check(
        "covered", by="tests/vm/test_sched_ext_vm.py::test_scx_simple_is_enabled_when_the_command_runs",
        why="boots zen3-2s-mini on lab-6.12-scx with --scheduler scx_simple and cats the same state file (and root/ops), needing 'enabled'",
    ),
    "lab compare llc-spread-pinned --kernel lab-6.12-scx --scheduler eevdf --scheduler scx_simple": Check(
        "args", why="10 VM runs on lab-6.12-scx (an hour to build here); the sides' argv: tests/unit/test_compare.py::test_compare_two_schedulers_is_two_sides_on_one_kernel"),
    "lab matrix --topologies all-minis --kernels lab-6.12-scx --schedulers eevdf,scx_simple": Check(
        "args", why="a VM per cell on lab-6.12-scx; cells and argv: tests/unit/test_matrix.py::test_schedulers_are_an_axis_inside_the_kernels"),
    "lab bisect SCENARIO --kernel-tree T --good G --bad B --recipe lab-6.12-scx --scheduler scx_simple": Check(
        "args", why="a kernel build per commit; the steps' argv: tests/unit/test_bisect_scheduler.py::test_each_step_runs_under_the_scheduler"),
    "lab run llc-spread-pinned --kernel lab-6.12-scx --scheduler scx_simple": Check(
        "covered", by="tests/vm/test_sched_ext_vm.py::test_a_scenario_runs_under_scx_simple",
        why="runs llc-spread-pinned on its default topology zen3-2s-mini on lab-6.12-scx under scx_simple and needs a verdict with the scheduler kept",
    ),
    "lab verify zen3-2s-mini --kernel debian-6.12": Check(
        "covered", by="tests/vm/test_verify_vm.py::test_verify_mini_on_debian_612",
        why="runs `lab verify` of the catalog minis, zen3-2s-mini among them, with --kernel debian-6.12 and needs exit 0",
    ),
    "lab verify jacobsville-24c-mini": Check(
        "covered", by="tests/vm/test_verify_vm.py::test_verify_mini",
        why="runs `lab verify jacobsville-24c-mini --json` (an x86 mini) on lab's QEMU 10 and needs exit 0 with "
        "every check passing (the clusters and the CLS level among them); skipped, saying so, where lab has no QEMU 9.2+ "
        "(setup.sh --test fetches one)",
    ),
    "lab verify zen3-2s": Check(
        "args", why="boots 256 vCPUs on lab's QEMU 10 (`lab qemu fetch`; 535 s here on the built 10.0.13, 1017 s on the fetched 10.0.2 on a loaded host; run by "
        "hand); its argv (x2apic=on, the interrupt-remapping IOMMU) is checked by "
        "tests/unit/test_render.py::test_more_than_255_x86_vcpus_get_x2apic_and_an_interrupt_remapping_iommu",
    ),
    "lab qemu list": Check("run"),
    "lab qemu fetch": Check(
        "covered", by="tests/unit/test_emulators.py::test_fetch_for_real_from_debian",
        why="fetches Debian's bookworm-backports QEMU for real into an empty cache through emulators.fetch(), which "
        "the command runs, and needs both binaries to run and say QEMU 10 (marked network); the command's own "
        "one-line errors are tests/unit/test_emulators.py's",
    ),
    "lab qemu build": Check(
        "args", why="builds QEMU 10 from Debian's source: 3331 steps, over an hour on a 2-core host "
        "(tests/unit/test_emulators.py checks the apt options, configure arguments, store and selection)",
    ),
    "lab report bundle RUN_DIR -o bug.tar.gz": Check("run", setup="run_dir"),
    "lab report replay bug.tar.gz": Check(
        "covered", by="tests/vm/test_report_vm.py::test_bundle_replays_to_the_same_verdict",
        why="bundles a real run, removes the run, its spec and scenario file, replays the bundle and needs the same "
        "verdict and figures",
    ),
    "lab report render RUN_DIR": Check("run", setup="run_dir"),
    "lab report render bug.tar.gz --format markdown": Check("run", setup="bundle"),
    "lab report render RUN_DIR --format html -o run.html": Check("run", setup="run_dir"),
    "lab compare --json RUN_DIR... -- RUN_DIR... > ab.json && lab report render ab.json --format html -o ab.html": Check(
        "run", setup="run_dir",
    ),
}


def commands(text: str | None = None) -> list[str]:
    """The commands in README.md's code blocks, in order."""
    text = README.read_text() if text is None else text
    out: list[str] = []
    fence: str | None = None  # the language of the fenced block we are in
    prev_blank = True
    indented = False
    for line in text.splitlines():
        m = re.match(r"^```(\w*)\s*$", line)
        if m:
            fence = None if fence is not None else m[1]
            continue
        if fence is not None:
            if fence in SHELL_FENCES:
                _add(out, line)
            continue
        if line.startswith("    ") and (indented or prev_blank):
            indented = True
            _add(out, line)
        elif line.strip():
            indented = False
        prev_blank = not line.strip()
    return out


def _add(out: list[str], line: str) -> None:
    cmd = line.strip()
    if cmd.startswith("#") or not cmd:
        return  # a comment continuing the line above
    # Drop a trailing comment (two spaces or more, then #): none of the commands quote a #.
    cmd = re.split(r"\s+#\s", cmd, maxsplit=1)[0].rstrip()
    if cmd.startswith("$ "):
        cmd = cmd[2:]
    out.append(cmd)
