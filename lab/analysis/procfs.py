"""/proc/vmstat and /proc/schedstat snapshots, and the difference between two.

The guest agent snapshots both before and after a workload; the scenario
reports the difference (seed 001's numa_hint_faults, numa_pages_migrated, ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..cpulist import CpulistError, parse_mask
from ..limits import MAX_CPUS, show

# The counters seed 001 reports (mm/vmstat.c names).
NUMA_VMSTAT_KEYS = (
    "numa_hit",
    "numa_miss",
    "numa_foreign",
    "numa_interleave",
    "numa_local",
    "numa_other",
    "numa_pte_updates",
    "numa_huge_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "pgmigrate_success",
    "pgmigrate_fail",
    "pgfault",
    "pgmajfault",
)


class ProcFormatError(ValueError):
    """A snapshot is not in the expected format; the message names the line."""


# A counter as the kernel prints it (an unsigned long long is at most 20 digits).  int()
# alone would also take '1_000', '+5' and Unicode digits, and words its refusal its own way.
_NUMBER = re.compile(r"-?[0-9]{1,20}")


def _number(text: str, where: str, what: str) -> int:
    if _NUMBER.fullmatch(text) is None:
        raise ProcFormatError(f"{where}: {what} is {show(text)}, not a whole number")
    return int(text)


def parse_vmstat(text: str) -> dict[str, int]:
    """'name value' lines -> {name: value}."""
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise ProcFormatError(f"vmstat line {n}: expected 'name value', got {show(line)}")
        out[parts[0]] = _number(parts[1], f"vmstat line {n}", show(parts[0], 40))
    return out


def vmstat_delta(
    before: Mapping[str, int] | str,
    after: Mapping[str, int] | str,
    keys: Iterable[str] | None = NUMA_VMSTAT_KEYS,
) -> dict[str, int]:
    """after - before for *keys* (None: every counter in both).

    A key missing from the snapshots is left out (CONFIG_NUMA_BALANCING=n has
    no numa_hint_* lines) rather than reported as 0, which would read as "no
    faults happened".
    """
    b = parse_vmstat(before) if isinstance(before, str) else before
    a = parse_vmstat(after) if isinstance(after, str) else after
    names = [k for k in a if k in b] if keys is None else [k for k in keys if k in a and k in b]
    return {k: a[k] - b[k] for k in names}


# ---- /proc/schedstat ------------------------------------------------------------------------

# Version 15 (kernel/sched/stats.c, 4.x-6.1): 'cpuN' then 9 numbers; field 2 is
# always 0 (a legacy O(1)-scheduler counter), kept here so positions match the doc.
CPU_FIELDS = (
    "yld_count",
    "legacy_zero",
    "sched_count",
    "sched_goidle",
    "ttwu_count",
    "ttwu_local",
    "rq_cpu_time",
    "run_delay",
    "pcount",
)
IDLE_TYPES = ("idle", "busy", "newly_idle")  # CPU_IDLE, CPU_NOT_IDLE, CPU_NEWLY_IDLE
LB_FIELDS = (
    "lb_count",
    "lb_balanced",
    "lb_failed",
    "lb_imbalance",
    "lb_gained",
    "lb_hot_gained",
    "lb_nobusyq",
    "lb_nobusyg",
)
DOMAIN_TAIL_FIELDS = (
    "alb_count",
    "alb_failed",
    "alb_pushed",
    "sbe_count",
    "sbe_balanced",
    "sbe_pushed",
    "sbf_count",
    "sbf_balanced",
    "sbf_pushed",
    "ttwu_wake_remote",
    "ttwu_move_affine",
    "ttwu_move_balance",
)
DOMAIN_FIELDS = tuple(f"{f}.{t}" for t in IDLE_TYPES for f in LB_FIELDS) + DOMAIN_TAIL_FIELDS


@dataclass
class DomainStat:
    index: int  # domainN: 0 is the smallest domain of that CPU
    span: tuple[int, ...]
    values: dict[str, int]  # DOMAIN_FIELDS names for version 15, 'f0', 'f1', ... otherwise

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "span": list(self.span), "values": dict(self.values)}


@dataclass
class CpuStat:
    cpu: int
    values: dict[str, int]
    domains: list[DomainStat] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu,
            "values": dict(self.values),
            "domains": [d.to_dict() for d in self.domains],
        }


@dataclass
class Schedstat:
    version: int
    timestamp: int  # jiffies
    cpus: dict[int, CpuStat]

    def total(self, name: str) -> int:
        """A per-CPU counter summed over CPUs."""
        return sum(c.values.get(name, 0) for c in self.cpus.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "timestamp": self.timestamp,
            "cpus": {str(k): c.to_dict() for k, c in sorted(self.cpus.items())},
        }


def _names(known: tuple[str, ...], n: int, version: int) -> tuple[str, ...]:
    if version == 15 and n == len(known):
        return known
    return tuple(f"f{i}" for i in range(n))


def parse_schedstat(text: str, cpu_map: Callable[[int], int] | None = None) -> Schedstat:
    """Parse /proc/schedstat; *cpu_map* renumbers CPUs (and domain spans) like the analyses."""
    cmap = cpu_map or (lambda c: c)
    version = timestamp = -1
    cpus: dict[int, CpuStat] = {}
    cur: CpuStat | None = None
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        head, where = parts[0], f"schedstat line {n}"
        if head in ("version", "timestamp"):
            if len(parts) != 2:
                raise ProcFormatError(f"{where}: expected '{head} N', got {show(line)}")
            if head == "version":
                version = _number(parts[1], where, "the version")
            else:
                timestamp = _number(parts[1], where, "the timestamp")
        elif head.startswith("cpu"):
            cpu = cmap(_id(head, "cpu", where, MAX_CPUS))
            nums = [_number(x, where, f"{head}'s field {i}") for i, x in enumerate(parts[1:], 1)]
            cur = cpus[cpu] = CpuStat(cpu, dict(zip(_names(CPU_FIELDS, len(nums), version), nums, strict=True)))
        elif head.startswith("domain"):
            if cur is None:
                raise ProcFormatError(f"{where}: domain line before any cpu line")
            if len(parts) < 2:
                raise ProcFormatError(f"{where}: {show(head)} without its cpumask")
            index = _id(head, "domain", where)
            try:
                span = tuple(sorted(cmap(c) for c in parse_mask(parts[1])))
            except CpulistError as e:
                raise ProcFormatError(f"{where}: {e}") from None
            nums = [_number(x, where, f"{head}'s field {i}") for i, x in enumerate(parts[2:], 1)]
            values = dict(zip(_names(DOMAIN_FIELDS, len(nums), version), nums, strict=True))
            cur.domains.append(DomainStat(index, span, values))
        else:
            raise ProcFormatError(f"{where}: unexpected {show(head)}")
    if version < 0:
        raise ProcFormatError("schedstat: no 'version' line")
    return Schedstat(version, timestamp, dict(sorted(cpus.items())))


def _id(head: str, prefix: str, where: str, limit: int | None = None) -> int:
    """N of 'cpuN' / 'domainN' (below *limit*, if given)."""
    digits = head[len(prefix) :]
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 9) or (limit is not None and int(digits) >= limit):
        expected = f"{prefix}0 to {prefix}{limit - 1}" if limit is not None else f"{prefix}0, {prefix}1, ..."
        raise ProcFormatError(f"{where}: {show(head)} names no {prefix} ({expected})")
    return int(digits)


def schedstat_delta(before: Schedstat | str, after: Schedstat | str) -> Schedstat:
    """after - before, CPU by CPU and domain by domain (same CPUs and domains expected)."""
    b = parse_schedstat(before) if isinstance(before, str) else before
    a = parse_schedstat(after) if isinstance(after, str) else after
    if a.version != b.version:
        raise ProcFormatError(f"schedstat versions differ: {b.version} before, {a.version} after")
    cpus: dict[int, CpuStat] = {}
    for cpu, ca in a.cpus.items():
        cb = b.cpus.get(cpu)
        if cb is None:
            continue  # CPU came online in between: no baseline
        values = {k: v - cb.values.get(k, 0) for k, v in ca.values.items()}
        doms = []
        for da, db in zip(ca.domains, cb.domains, strict=False):
            doms.append(
                DomainStat(
                    da.index, da.span, {k: v - db.values.get(k, 0) for k, v in da.values.items()}
                )
            )
        cpus[cpu] = CpuStat(cpu, values, doms)
    return Schedstat(a.version, a.timestamp - b.timestamp, cpus)
