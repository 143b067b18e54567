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


BAD_SNAPSHOTS = {
    "a vmstat value": (parse_vmstat, "numa_hit 1\nnuma_miss lots\n", "vmstat line 2: 'numa_miss' is 'lots', not a whole number"),
    "a Unicode digit": (parse_vmstat, "numa_hit \u0661\n", "vmstat line 1: 'numa_hit' is '\u0661', not a whole number"),
    "a vmstat line": (parse_vmstat, "numa_hit 1 2\n", "vmstat line 1: expected 'name value', got 'numa_hit 1 2'"),
    "the version": (parse_schedstat, "version x\n", "schedstat line 1: the version is 'x', not a whole number"),
    "no version number": (parse_schedstat, "version\n", "schedstat line 1: expected 'version N', got 'version'"),
    "a timestamp": (parse_schedstat, "version 15\ntimestamp 1_0\n", "schedstat line 2: the timestamp is '1_0', not a whole number"),
    "a cpu name": (parse_schedstat, "version 15\ncpux 1\n", "schedstat line 2: 'cpux' names no cpu (cpu0 to cpu4095)"),
    "a cpu past MAX_CPUS": (parse_schedstat, "version 15\ncpu4096 1\n", "schedstat line 2: 'cpu4096' names no cpu (cpu0 to cpu4095)"),
    "a cpu field": (parse_schedstat, "version 15\ncpu0 1 \u00b2 3\n", "schedstat line 2: cpu0's field 2 is '\u00b2', not a whole number"),
    "a domain without a mask": (parse_schedstat, "version 15\ncpu0 1\ndomain0\n", "schedstat line 3: 'domain0' without its cpumask"),
    "a domain mask": (parse_schedstat, "version 15\ncpu0 1\ndomain0 zz 1\n", "schedstat line 3: cpumask 'zz': not hex digits in comma-separated words"),
    "a domain name": (parse_schedstat, "version 15\ncpu0 1\ndomainx 03 1\n", "schedstat line 3: 'domainx' names no domain (domain0, domain1, ...)"),
    "a domain field": (parse_schedstat, "version 15\ncpu0 1\ndomain0 03 1 -\n", "schedstat line 3: domain0's field 2 is '-', not a whole number"),
}


@pytest.mark.parametrize("what", list(BAD_SNAPSHOTS))
def test_snapshot_errors_say_what_is_wrong_in_labs_words(what):
    """Each message names the line and what is wrong with it; never int()'s 'invalid
    literal for int() with base 10', nor Python's 'list index out of range'."""
    parse, text, message = BAD_SNAPSHOTS[what]
    with pytest.raises(ProcFormatError) as e:
        parse(text)
    assert str(e.value) == message
