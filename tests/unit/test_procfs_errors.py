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
    with pytest.raises(ProcFormatError, match=r"vmstat line 2: 'x' is not a number"):
        parse_vmstat("nr_free_pages 1\nnuma_hit x\n")
