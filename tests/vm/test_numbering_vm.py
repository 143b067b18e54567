"""On an smt-last topology the guest numbers CPUs otherwise than the spec: `lab boot`
says so once, with how to translate, and `labcpu` in the guest gives the spec's ids."""

from click.testing import CliRunner

from lab.cli import main

SCRIPT = """
labcpu -r "$(cat /sys/devices/system/node/node0/cpulist)"
labcpu -r "$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)"
labcpu 0,16
g=$(taskset -c "$(labcpu 16)" awk '{print $39}' /proc/self/stat)
labcpu -r "$g"
numactl -H | head -1
"""


def test_boot_on_smt_last_says_how_to_translate_and_labcpu_gives_spec_ids(debian_kernel):
    r = CliRunner().invoke(main, ["boot", "zen3-2s-mini", "--tools", "numactl", "--", "sh", "-c", SCRIPT])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert r.stdout.splitlines() == [
        "0-7,16-23",  # node 0 as `lab topo show zen3-2s-mini` has it (the guest's sysfs says 0-15)
        "0,16",  # cpu0's SMT sibling is spec cpu16 (guest cpu1)
        "0-1",  # the guest ids of spec CPUs 0 and 16
        "16",  # a task pinned with taskset -c $(labcpu 16) ran on spec CPU 16
        "available: 2 nodes (0-1)",  # numactl was staged with its libraries
    ], r.stderr
    notes = [line for line in r.stderr.splitlines() if "guest CPU ids differ" in line]
    assert len(notes) == 1, r.stderr
    assert "spec cpu16 is guest cpu1" in notes[0] and "labcpu 0,16" in notes[0]
