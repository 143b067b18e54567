"""lab.junit, the one JUnit writer: valid XML whatever the names and evidence hold, names
CI pages split correctly, counts, and a golden report (LAB_REGEN=1 rewrites it)."""

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab import junit, runner
from lab import scenario as sc

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "junit"


def outcome(status, name="targets distinct", evidence=("cpu 3 twice",), kernel="lab-6.1", ok=None):
    ok = status == "PASS" if ok is None else ok
    e = sc.Expectation(name, ok, evidence=list(evidence), note="" if ok else "two threads on one CPU")
    o = runner.RunOutcome("soft-affinity", "xeon-2s22c-mini", kernel, status, None, message="guest lost at boot")
    if status in ("PASS", "FAIL"):
        o.expectations = [e]
    o.timing["wall_s"] = 12.5
    return o


def parse(xml: str) -> junitparser.JUnitXml:
    ET.fromstring(xml.encode())  # strict: any illegal character raises
    return junitparser.JUnitXml.fromstring(xml)


def test_classname_keeps_the_kernel_out_of_the_package_split():
    (case,) = junit.run_suite([outcome("PASS")]).cases
    assert case.classname == "lab.soft_affinity.xeon_2s22c_mini"
    assert case.name == "lab-6.1: targets distinct"
    assert junit.classname("a.b c", "-x-") == "lab.a_b_c.x"


def test_counts_and_kinds_parse_with_a_junit_parser():
    xml = junit.render([junit.run_suite([outcome("PASS"), outcome("FAIL"), outcome("ERROR"), outcome("SKIP")])])
    doc = parse(xml)
    (suite,) = list(doc)
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 1, 1, 1)
    kinds = {c.name: [type(r).__name__ for r in c.result] for c in suite}
    assert kinds == {
        "lab-6.1: targets distinct #1": [], "lab-6.1: targets distinct #2": ["Failure"],
        "lab-6.1: run #3": ["Error"], "lab-6.1: run #4": ["Skipped"],
    }  # fmt: skip
    fail = next(c for c in suite if c.result and type(c.result[0]).__name__ == "Failure")
    # The one line a CI page shows: the failed expectation and its first evidence line.
    assert fail.result[0].message == "targets distinct: cpu 3 twice"
    assert "why: two threads on one CPU" in fail.result[0].text


CONTROL = "".join(map(chr, range(0x20))) + "\x7f\ufffe\uffff\udc80<&>\"'"


def test_control_characters_and_surrogates_stay_valid_and_visible():
    o = outcome("FAIL", name=f"task{CONTROL}", evidence=[f"comm=x{CONTROL}y"])
    o.scenario = f"sc{CONTROL}"
    xml = junit.render([junit.run_suite([o])], name=f"n{CONTROL}")
    doc = parse(xml)
    case = next(iter(next(iter(doc))))
    assert "\\x01" in case.name and "\\x1b" in case.name and "\\udc80" in case.name and "<&>" in case.name
    assert "\\x00" in case.result[0].message and "\t" in case.result[0].text


@given(st.text(), st.text())
def test_any_text_gives_valid_xml(name, evidence):
    xml = junit.render([junit.run_suite([outcome("FAIL", name=name, evidence=[evidence])])])
    parse(xml)


def test_status_is_checked():
    with pytest.raises(ValueError, match="RUNNING"):
        junit.Case("lab.x", "y", "RUNNING")


def test_golden_report():
    suites = [
        junit.run_suite([outcome("PASS"), outcome("FAIL", evidence=["a\x01b", "second"])]),
        junit.Suite("lab matrix", (junit.Case(junit.classname("llc-spread-pinned", "zen3-2s-mini"), "debian", "SKIP", None, "lacks clusters"),)),
    ]
    got = junit.render(suites)
    path = GOLDEN / "report.xml"
    if os.environ.get("LAB_REGEN"):
        path.write_text(got)
    assert got == path.read_text()


def test_an_inconclusive_run_is_skipped_with_its_cause_never_passed_or_failed():
    cause = "the guest's CPU model, not the kernel, keeps fork placement on one socket"
    o = runner.RunOutcome("llc-spread-pinned", "zen3-2s-mini", "debian", "INCONCLUSIVE", None, message=cause)
    o.expectations = [
        sc.Expectation("a sched_wakeup_new per thread", True),
        sc.Expectation("targets distinct", False, evidence=["cpu 0 twice"], inconclusive=cause),
    ]
    (suite,) = list(parse(junit.render([junit.run_suite([o])])))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (2, 0, 0, 1)
    kinds = {c.name: [(type(r).__name__, r.message) for r in c.result] for c in suite}
    assert kinds == {
        "debian: a sched_wakeup_new per thread": [],
        "debian: targets distinct": [("Skipped", f"INCONCLUSIVE: {cause}")],
    }
    # failure_message() never reports an inconclusive expectation as a failure
    assert junit.failure_message(o.expectations) == ("", "")
