"""cpulist.parse and cpulist.parse_mask: bounded, linear, one-line errors (issue 13)."""

from __future__ import annotations

import pytest
from _bounds import one_line, within
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import cpulist
from lab.cpulist import CpulistError
from lab.errors import UserError
from lab.limits import MAX_CPUS

FUZZ = settings(max_examples=300, deadline=2000)  # ms per example: tiny inputs, linear parsers


def ids_or_error(parser, text: str) -> list[int] | None:
    """parser(text): CPU ids in range, or None after a one-line CpulistError; nothing else."""
    try:
        cpus = parser(text)
    except CpulistError as e:
        one_line(str(e))
        return None
    assert all(0 <= c < MAX_CPUS for c in cpus)
    return cpus


def kernel_mask(cpus: set[int], words: int) -> str:
    """A cpumask as the kernel prints it: 32-bit words of 8 hex digits, high word first."""
    v = sum(1 << c for c in cpus)
    return ",".join(f"{(v >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


def test_parse_and_format():
    assert cpulist.parse("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert cpulist.parse(" 0-7:2 \x00") == [0, 2, 4, 6]
    assert cpulist.parse("") == [] and cpulist.parse("\x00\n") == []
    assert cpulist.parse(f"0-{MAX_CPUS - 1}") == list(range(MAX_CPUS))
    assert cpulist.format([3, 1, 2, 8]) == "1-3,8"


@pytest.mark.parametrize(
    "text, words",
    [
        ("0-", "has no end"),
        ("-1", "not negative"),
        ("0--1", "not a CPU number"),
        ("0-3:0", "stride 0"),
        ("3-1", "descending"),
        ("0,,1", "empty item"),
        ("1_0", "not a CPU number"),  # int() takes it as 10
        ("+1", "not a CPU number"),
        ("\u0663", "not a CPU number"),  # ARABIC-INDIC DIGIT THREE: int() takes it as 3
        ("0 - 3", "not a CPU number"),
        ("0:2", "needs a range"),
        ("9" * 5000, "ids go up to"),  # int() would refuse it in Python's words
        ("0-999999999", f"ids go up to {MAX_CPUS - 1}"),
        (f"0-{MAX_CPUS - 1},0-{MAX_CPUS - 1}", f"more than the {MAX_CPUS}"),
        ("0," * (8 * MAX_CPUS + 1), f"more than the {MAX_CPUS}"),
    ],
)
def test_bad_cpulists_are_one_line_errors(text, words):
    with within(1.0), pytest.raises(CpulistError) as e:
        cpulist.parse(text)
    assert words in one_line(str(e.value)) and len(str(e.value)) < 200
    # A UserError where nobody adds context, a ValueError for callers that do.
    assert isinstance(e.value, UserError) and isinstance(e.value, ValueError)


def test_huge_range_is_refused_before_it_is_made():
    # Before: list(range(0, 10**9 + 1)): a MemoryError or gigabytes of RSS.
    with within(0.5), pytest.raises(CpulistError):
        cpulist.parse("0-999999999")
    with within(0.5), pytest.raises(CpulistError):
        cpulist.parse("0-4095:1," * 2)


@FUZZ
@given(st.text(alphabet="0123456789-,:x \n\x00\u0663_+", max_size=60))
def test_parse_fuzz_returns_bounded_ids_or_one_line_error(text):
    cpus = ids_or_error(cpulist.parse, text)
    assert cpus is None or len(cpus) <= MAX_CPUS


@FUZZ
@given(st.text(max_size=80))
def test_parse_fuzz_any_text(text):
    ids_or_error(cpulist.parse, text)


@FUZZ
@given(st.sets(st.integers(0, MAX_CPUS - 1), max_size=200))
def test_format_parse_round_trip(cpus):
    assert cpulist.parse(cpulist.format(cpus)) == sorted(cpus)


@pytest.mark.parametrize(
    "text",
    [
        "0," * 200_000,  # 400 KB of items
        "1-" * 200_000,
        "9" * 400_000,
        " " * 400_000 + "0",
        ",".join(["0-1"] * 100_000),
    ],
)
def test_parse_400kb_is_quick(text):
    with within(1.0):
        ids_or_error(cpulist.parse, text)


def test_parse_mask():
    assert cpulist.parse_mask("ff,00000000") == list(range(32, 40))
    assert cpulist.parse_mask("00000000,00000001\n") == [0]
    assert cpulist.parse_mask("") == [] and cpulist.parse_mask("0,00000000") == []
    full = kernel_mask(set(range(MAX_CPUS)), MAX_CPUS // 32)
    assert cpulist.parse_mask(full) == list(range(MAX_CPUS))


@pytest.mark.parametrize(
    "text, words",
    [
        ("fg", "not hex"),
        ("0x ff", "not hex"),
        ("\u0663", "not hex"),
        ("1" + "0" * (MAX_CPUS // 4), f"sets CPU {MAX_CPUS}"),
        ("f" * 400_000, "longer than"),  # before: 47 s (shifting a 1.6 Mbit int one bit at a time)
        ("ffffffff," * 50_000, "longer than"),
    ],
)
def test_bad_masks_are_one_line_errors(text, words):
    with within(1.0), pytest.raises(CpulistError) as e:
        cpulist.parse_mask(text)
    assert words in one_line(str(e.value))


def test_mask_parse_is_linear_at_the_limit():
    # The longest mask the limit allows, a thousand times: the old bit-shifting loop took
    # ~0.3 ms per 1 Kbit mask and grew with the square of the length.
    full = kernel_mask(set(range(0, MAX_CPUS, 3)), MAX_CPUS // 32)
    with within(2.0):
        for _ in range(1000):
            cpulist.parse_mask(full)


@FUZZ
@given(st.sets(st.integers(0, MAX_CPUS - 1), max_size=300), st.integers(0, 3))
def test_mask_round_trip(cpus, spare_words):
    words = (max(cpus, default=0) // 32) + 1 + spare_words
    assert cpulist.parse_mask(kernel_mask(cpus, min(words, MAX_CPUS // 32))) == sorted(cpus)


@FUZZ
@given(st.text(alphabet="0123456789abcdefABCDEFg, \n\x00", max_size=1200))
def test_mask_fuzz(text):
    cpus = ids_or_error(cpulist.parse_mask, text)
    assert cpus is None or cpus == sorted(set(cpus))
