"""/proc/schedstat and /proc/vmstat from a guest are data: a garbled line is one error in
lab's words, naming the line, never Python's int() wording."""

import pytest

from lab.analysis import ProcFormatError, parse_schedstat, parse_vmstat


@pytest.mark.parametrize(
    "text",
    [
        "version 15\ntimestamp 1\ncpu0 1 2 x 4\n",
        "version 15\ntimestamp 1\ncpuX 1 2 3\n",
        "version 15\ntimestamp 1\ncpu0 1 2 3\ndomain0 ff 1 2 ²\n",
        "version\n",
        "version 15\ntimestamp 1\ncpu0 " + "9x" * 1000 + "\n",
    ],
)
def test_garbled_schedstat_is_one_line_in_labs_words(text):
    with pytest.raises(ProcFormatError) as e:
        parse_schedstat(text)
    msg = str(e.value)
    assert msg.startswith("schedstat line ") and "\n" not in msg and len(msg) < 300
    assert "invalid literal" not in msg and "base 10" not in msg and "index out of range" not in msg


def test_garbled_vmstat_names_the_line():
    with pytest.raises(ProcFormatError, match=r"vmstat line 2: 'numa_hit' is 'x', not a whole number"):
        parse_vmstat("nr_free_pages 1\nnuma_hit x\n")
    with pytest.raises(ProcFormatError) as e:
        parse_vmstat("numa_hit \u0661\n")  # int() reads ARABIC-INDIC DIGIT ONE as 1
    assert str(e.value) == "vmstat line 1: 'numa_hit' is '\u0661', not a whole number"
    with pytest.raises(ProcFormatError, match=r"^vmstat line 1: expected 'name value', got 'numa_hit 1 2'$"):
        parse_vmstat("numa_hit 1 2\n")


# One fault for each check parse_schedstat() makes, and what lab says of it.
SCHEDSTAT_FAULTS = {
    "version 15\ncpu0 1 \u00b2 3\n": "schedstat line 2: cpu0's field 2 is '\u00b2', not a whole number",
    "version 15\ntimestamp 1_0\n": "schedstat line 2: the timestamp is '1_0', not a whole number",
    "version\n": "schedstat line 1: expected 'version N', got 'version'",
    "version 15\ncpu4096 1\n": "schedstat line 2: 'cpu4096' names no cpu (cpu0 to cpu4095)",
    "version 15\ncpu0 1\ndomain0\n": "schedstat line 3: 'domain0' without its cpumask",
    "version 15\ncpu0 1\ndomain0 zz 1\n": "schedstat line 3: cpumask 'zz': not hex digits in comma-separated words",
}


@pytest.mark.parametrize("text", list(SCHEDSTAT_FAULTS))
def test_a_schedstat_fault_is_named_exactly(text):
    with pytest.raises(ProcFormatError) as e:
        parse_schedstat(text)
    assert str(e.value) == SCHEDSTAT_FAULTS[text]
