"""A trivial backend (tests/unit/test_backends_registry.py): it boots nothing and answers
every job with "null" on stdout, through the same BootResult every backend returns."""

from lab.backends.base import Capabilities
from lab.backends.guest import BootResult

NAME = "null"
CAPABILITIES = Capabilities(run_dir_named=True)


def adapt(plan, kernel=None):
    return plan


def dry_run(plan, kernel):
    return f"null-vm {plan.topo.name} $RUN_DIR"


def boot(plan, kernel, run_dir, job=None, *, timeout=600, on_event=None, progress=None):
    out = run_dir / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "stdout").write_bytes(b"null\n")
    return BootResult(run_dir, out, ["null-vm"], plan.accel, wall_s=0.0, ready_s=0.0, guest_ready_uptime=0.0, rc=0)
