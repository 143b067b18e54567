"""Ask QEMU, stopped before its first instruction (-S), where it put each vCPU: the
rendered -smp/-numa arguments, QMP's query-cpus-fast, quit.  No kernel, no guest."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from lab.plan import VmPlan
from lab.render import qemu

# What a machine needs to be built; everything a boot adds around it (kernel, serial
# ports, the QMP socket) is dropped.
_DROP_WITH_VALUE = {"-kernel", "-initrd", "-append", "-dtb", "-chardev", "-serial", "-device", "-qmp"}


def machine_argv(p: VmPlan) -> list[str]:
    a = qemu.argv(p, qemu.boot_files(p, Path("none")))
    out, i = [], 0
    while i < len(a):
        if a[i] in _DROP_WITH_VALUE:
            i += 2
            continue
        out.append(a[i])
        i += 1
    # No guest RAM is touched before the first instruction; keep it small anyway.
    out = [x.replace(f"-m {p.memory_mb}M", "") for x in out]
    return [*out, "-S", "-display", "none", "-qmp", "stdio"]


def readback(p: VmPlan, timeout: float = 20.0) -> list[dict]:
    """QEMU's props (node-id, socket-id, die-id, core-id, thread-id, ...) per vCPU index.
    Raises AssertionError with QEMU's own words when it refuses the argv."""
    cmds = [
        {"execute": "qmp_capabilities"},
        {"execute": "query-cpus-fast"},
        {"execute": "quit"},
    ]
    inp = "".join(json.dumps(c) + "\n" for c in cmds)
    r = subprocess.run(machine_argv(p), input=inp, capture_output=True, text=True, timeout=timeout)
    replies = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    cpus = next((x["return"] for x in replies if isinstance(x.get("return"), list)), None)
    if cpus is None:
        raise AssertionError(f"QEMU refused the argv: {r.stderr.strip()[:500]}")
    return [c["props"] for c in sorted(cpus, key=lambda c: c["cpu-index"])]
