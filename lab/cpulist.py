"""Linux cpulist strings ("0-7,128-135") and hex cpumasks ("00000000,000000ff")."""

from __future__ import annotations

from collections.abc import Iterable


def parse(text: str) -> list[int]:
    """Parse a cpulist such as '0-3,8,10-11' (also '0-7:2' strides).  Raises ValueError."""
    text = text.strip().strip("\x00").strip()
    out: list[int] = []
    if not text:
        return out
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty item in cpulist {text!r}")
        stride = 1
        if ":" in part:
            part, s = part.split(":", 1)
            stride = int(s)
        if "-" in part:
            a, b = part.split("-", 1)
            lo, hi = int(a), int(b)
            if hi < lo:
                raise ValueError(f"descending range {part!r} in cpulist {text!r}")
            out.extend(range(lo, hi + 1, stride))
        else:
            out.append(int(part))
    return out


def format(cpus: Iterable[int]) -> str:
    """Format CPUs as a canonical cpulist: sorted, ranges collapsed."""
    s = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(parts)


def parse_mask(text: str) -> list[int]:
    """Parse a kernel hex cpumask ('ff,00000000' as in /proc/schedstat) into CPU ids."""
    text = text.strip().replace(",", "")
    if not text:
        return []
    value = int(text, 16)
    out = []
    bit = 0
    while value:
        if value & 1:
            out.append(bit)
        value >>= 1
        bit += 1
    return out
