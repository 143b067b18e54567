"""Lost-guest diagnosis from QEMU's `info registers -a` (recorded from real guests:
lab-6.1 x86 stopped 1 s into boot, lab-6.1-arm64 1.5 s in) and the kernel's System.map
(the lines around those addresses, from the same builds)."""

import json
import os
import socket
import threading
from pathlib import Path

import pytest

from lab.backends import monitor

REGS = Path(__file__).resolve().parent.parent / "fixtures" / "registers"


def test_x86_halted_flag_and_rip_including_a_32bit_ap():
    states = monitor.parse_registers((REGS / "x86_64-lab-6.1.txt").read_text())
    assert [(s.cpu, s.halted, s.pc) for s in states] == [
        (0, False, "ffffffff81f51ee0"),
        (1, True, "000fd09a"),  # an AP still in SeaBIOS's 32-bit wait loop
        (2, True, "000fd09a"),
    ]
    sym = monitor.Symbols(REGS / "x86_64-lab-6.1.System.map")
    assert monitor.summary(states, symbol=sym) == "1 of 3 vCPUs running: CPU 0 at ffffffff81f51ee0 (setup_boot_APIC_clock+0x126)"


def test_arm64_has_no_halted_flag_so_cpus_are_grouped_by_pc():
    states = monitor.parse_registers((REGS / "arm64-lab-6.1-arm64.txt").read_text())
    assert [s.cpu for s in states] == [0, 1, 2, 15] and all(s.halted is None for s in states)
    sym = monitor.Symbols(REGS / "arm64-lab-6.1-arm64.System.map")
    assert monitor.summary(states, symbol=sym) == (
        "4 vCPUs: CPU 0,2 at ffffffc008426cc8 (cpu_do_idle+0x8); CPU 1 at ffffffc008426f2c (ct_nmi_enter+0x48); "
        "CPU 15 at ffffffc0081729d0 (ptep_clear_flush+0x50)"
    )


def test_all_halted_and_unknown_addresses():
    states = [monitor.VcpuState(i, True, "ffffffff81000000") for i in range(4)]
    assert monitor.summary(states) == "all 4 vCPUs halted (the guest is idle, waiting)"
    assert monitor.Symbols(None)("ffffffff81000000") == "ffffffff81000000"
    assert monitor.summary([]) == "QEMU gave no vCPU state"


def _fake_qmp(path, answer: bool):
    """A QMP server speaking the protocol's framing (greeting, then one reply per
    command, with an event in between), or one that never answers."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = os.open(path.parent, os.O_PATH)  # as QEMU does, relative to its directory
    try:
        srv.bind(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        with conn:
            if not answer:
                conn.recv(1)  # blocks until the client gives up
                return
            f = conn.makefile("rwb")
            f.write(b'{"QMP": {"version": {}, "capabilities": []}}\r\n')
            f.flush()
            f.readline()
            f.write(b'{"return": {}}\r\n{"event": "RTC_CHANGE", "data": {}}\r\n')
            f.flush()
            cmd = json.loads(f.readline())
            assert cmd["arguments"]["command-line"] == "info registers -a"
            f.write(json.dumps({"return": (REGS / "x86_64-lab-6.1.txt").read_text()}).encode() + b"\r\n")
            f.flush()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv, t


@pytest.mark.parametrize("depth", [1, 6], ids=["short", "run-dir-path-over-108-bytes"])
def test_diagnose_saves_the_registers_and_names_a_silent_qemu(tmp_path, depth):
    run_dir = tmp_path.joinpath(*["a-long-run-directory-name"] * depth)
    run_dir.mkdir(parents=True)
    mon = monitor.Monitor(run_dir / "qmp.sock")
    try:
        srv, t = _fake_qmp(mon.path, answer=True)
        msg = monitor.diagnose(mon, tmp_path)
        t.join(5)
        srv.close()
        assert msg.startswith("1 of 3 vCPUs running: CPU 0 at ffffffff81f51ee0")
        assert (tmp_path / "lost.registers").read_text() == (REGS / "x86_64-lab-6.1.txt").read_text()
        mon.path.unlink()
        srv, t = _fake_qmp(mon.path, answer=False)
        assert mon.registers(timeout=0.5) is None
        srv.close()
    finally:
        mon.close()
    assert not mon.path.exists()
    # No monitor at all (QEMU gone): said, not raised.
    assert "did not answer" in monitor.diagnose(mon, tmp_path)
