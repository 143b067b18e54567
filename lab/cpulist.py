"""Linux cpulist strings ("0-7,128-135") and hex cpumasks ("00000000,000000ff").

Both parsers are linear in their input and bounded by ``limits.MAX_CPUS``: a range or
a mask reaching past it is refused from its text, before a list is made.  Errors are
``CpulistError``, a ``UserError`` (one line, no Python wording) that is also a
``ValueError`` for callers that add the file and field to the message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import UserError
from .limits import MAX_CPUS, show

# ASCII digits only: int() would also take '1_0', '+1', ' 1' and '٣'.  Ten digits is more
# than any CPU id needs and keeps int() away from huge numbers.
_ITEM = re.compile(r"([0-9]{1,10})(?:-([0-9]{1,10})(?::([0-9]{1,10}))?)?")
_LONG = re.compile(r"[0-9]+(?:-[0-9]+(?::[0-9]+)?)?")
_HEX = re.compile(r"[0-9a-fA-F]*")


class CpulistError(UserError, ValueError):
    """A cpulist or cpumask that cannot be parsed; the message says why."""


def _item_error(item: str, text: str, limit: int) -> CpulistError:
    if _LONG.fullmatch(item):
        why = f"ids go up to {limit - 1} ({limit} CPUs at most)"
    elif item.startswith("-"):
        why = "CPU ids are not negative"
    elif item.endswith("-"):
        why = "the range has no end"
    elif ":" in item and "-" not in item.split(":", 1)[0]:
        why = "a stride needs a range (like 0-7:2)"
    else:
        why = "not a CPU number or range (like 3, 0-7 or 0-7:2)"
    where = f"cpulist {show(text)}" if item == text else f"{show(item, 30)} in cpulist {show(text)}"
    return CpulistError(f"{where}: {why}")


def parse(text: str, limit: int = MAX_CPUS) -> list[int]:
    """Parse a cpulist such as '0-3,8,10-11' (also '0-7:2' strides) into CPU ids.

    Ids must be below *limit* and at most *limit* CPUs may be listed (repeats count):
    each range is checked before it is expanded.  Raises CpulistError.
    """
    text = text.strip().strip("\x00").strip()
    out: list[int] = []
    if not text:
        return out
    # No item is shorter than 'N,' per CPU it lists, so a longer text lists more than
    # *limit* CPUs (or is not a cpulist): refused before it is split.
    if len(text) > 16 * limit:
        raise CpulistError(f"cpulist of {len(text)} characters lists more than the {limit} CPUs lab supports")
    for part in text.split(","):
        item = part.strip()
        if not item:
            raise CpulistError(f"empty item in cpulist {show(text)}")
        m = _ITEM.fullmatch(item)
        if m is None:
            raise _item_error(item, text, limit)
        a, b, s = m.groups()
        lo = int(a)
        hi = int(b) if b is not None else lo
        stride = int(s) if s is not None else 1
        if hi >= limit:
            raise CpulistError(
                f"CPU {hi} in cpulist {show(text)}: ids go up to {limit - 1} ({limit} CPUs at most)"
            )
        if hi < lo:
            raise CpulistError(f"descending range {show(item, 30)} in cpulist {show(text)}")
        if stride < 1:
            raise CpulistError(f"stride {stride} in {show(item, 30)} in cpulist {show(text)}: must be at least 1")
        if len(out) + (hi - lo) // stride + 1 > limit:
            raise CpulistError(f"cpulist {show(text)} lists more than the {limit} CPUs lab supports")
        out.extend(range(lo, hi + 1, stride))
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


def parse_mask(text: str, limit: int = MAX_CPUS) -> list[int]:
    """Parse a kernel hex cpumask ('ff,00000000' as in /proc/schedstat) into CPU ids.

    Linear in the text (the bits are read from one bin() string, not shifted out one at a
    time, which is quadratic in the mask's length); a set bit at or past *limit* is
    refused.  Raises CpulistError.
    """
    text = text.strip().strip("\x00").strip()
    # The kernel prints 8 hex digits and a comma per 32 CPUs; leading zero words allowed.
    if len(text) > 4 * (limit // 4 + limit // 32 + 9):
        raise CpulistError(f"cpumask of {len(text)} characters is longer than {limit} CPUs need")
    digits = text.replace(",", "")
    if not digits:
        return []
    if _HEX.fullmatch(digits) is None:
        raise CpulistError(f"cpumask {show(text)}: not hex digits in comma-separated words")
    value = int(digits, 16)
    if value.bit_length() > limit:
        raise CpulistError(
            f"cpumask {show(text)} sets CPU {value.bit_length() - 1}: ids go up to {limit - 1}"
        )
    bits = bin(value)[:1:-1]  # least significant bit first, without the '0b'
    return [i for i, ch in enumerate(bits) if ch == "1"]
