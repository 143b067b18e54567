"""The host's check of the agent's CPU onlining (hotplug bring-up)."""

from pathlib import Path

import pytest

from lab import host as host_mod
from lab import topology
from lab.backends import guest as backend
from lab.errors import InfraError
from lab.plan import VmOptions
from lab.render import qemu

HOST = host_mod.Host(arch="x86_64", cpus=2, qemu={"x86_64": (7, 2, 0), "arm64": (7, 2, 0)}, kvm=False, kvm_reason="test")


def _plan():
    t = topology.load("zen3-2s-mini")
    return qemu.plan(t, HOST, VmOptions(bringup="hotplug"), kernel_features=frozenset({"cpu_hotplug"}))


def test_online_reports_the_time_spent():
    got = backend._online("lab: online cpus=0-31 from=1.50 uptime=3.25", _plan(), Path("c.log"))
    assert got == 1.75


def test_cpus_left_offline_are_an_infrastructure_error():
    with pytest.raises(InfraError, match=r"brought CPUs 0-7,9-31 online, not 0-31 \(console: c.log\)"):
        backend._online("lab: online cpus=0-7,9-31 from=1.5 uptime=3.2", _plan(), Path("c.log"))
