"""One verdict/expectation table (lab.report.verdicts) draws `lab run`'s output and
`lab report render text`: the same rows, figures at the same precision, the same
reasons under the table."""

from rich.console import Console

from lab.report import verdicts
from lab.scenario import Expectation

EXPS = [
    Expectation("the tasks spread over the LLCs", True, figures={"share": 0.123456, "cpus": [0, 4]}),
    Expectation("no task starves", False, evidence=[f"line {i}" for i in range(15)], figures={"longest_s": 2.0},
                note="task 12 waited 2 s"),
    Expectation("wakeups stay on the node", True, inconclusive="the CPU model decides under TCG"),
]


def _rich(exps) -> str:
    c = Console(record=True, width=200, color_system=None)
    verdicts.show(c, exps, "lab run x --topology y --kernel z")
    return c.export_text()


def test_objects_and_records_give_the_same_rows():
    assert verdicts.rows(EXPS) == verdicts.rows([e.to_dict() for e in EXPS])
    assert verdicts.rows(EXPS)[0] == ["the tasks spread over the LLCs", "PASS", "share=0.1235  cpus=0,4"]


def test_terminal_and_text_agree():
    term = _rich(EXPS)
    text = "\n".join(verdicts.text([e.to_dict() for e in EXPS]))
    for s in ("share=0.1235", "cpus=0,4", "longest_s=2", "why: task 12 waited 2 s", "cause: the CPU model decides under TCG",
              "line 11", "... 3 more in results.json"):
        assert s in term and s in text, s
    assert "line 12" not in term and "line 12" not in text
    # a PASS has no reasons under the table
    assert "PASS the tasks spread" not in text


def test_text_fits_a_mail():
    assert max(map(len, verdicts.text(EXPS))) <= 80
