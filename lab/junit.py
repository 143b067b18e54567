"""JUnit XML: the one writer, for a run's junit.xml and a matrix's.

Built with ElementTree, never by pasting strings, and every text and attribute made
legal XML 1.0 first (``xml_text``): a task name or an evidence line may hold control
characters, lone surrogates (a comm that is not UTF-8) or anything else a guest writes,
and a CI page that cannot parse the report shows nothing at all.

Names are chosen for how CI pages show them: test reporters (GitHub's and GitLab's
JUnit views, Jenkins) split ``classname`` at its dots into packages and classes, so each
part of it is made of letters, digits and ``_`` only (``classname("soft-affinity",
"xeon-2s22c-mini")`` is ``lab.soft_affinity.xeon_2s22c_mini``) and what may hold dots,
the kernel (``lab-6.1``), goes in the test's ``name``.  ``render`` is a pure function.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

STATUSES = ("PASS", "FAIL", "ERROR", "SKIP", "INCONCLUSIVE")

# Characters XML 1.0 does not allow anywhere (not even as character references):
# C0 controls but TAB, LF and CR; lone surrogates; U+FFFE and U+FFFF.
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")


def xml_text(s: str) -> str:
    """*s* with every character XML 1.0 cannot hold written as a visible escape
    (``\\x01``, ``\\udc80``), so the report keeps what was there and stays valid."""
    return _ILLEGAL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", s)


def name_part(s: str) -> str:
    """One dot-free part of a classname: runs of anything but letters, digits and _ as _."""
    return _NOT_NAME.sub("_", s).strip("_") or "_"


def classname(*parts: str) -> str:
    """``lab.<part>.<part>``, each part safe for a CI page's package split."""
    return ".".join(["lab", *(name_part(p) for p in parts)])


@dataclass(frozen=True)
class Case:
    """One testcase: PASS, FAIL (``message`` is the failure's one line, ``text`` its
    evidence), ERROR (``message`` says why nothing was judged), SKIP (why not run) or
    INCONCLUSIVE (the emulation decided the outcome: ``message`` names the cause; a
    ``<skipped>`` for CI pages, which know no such state, never a pass or a failure)."""

    classname: str
    name: str
    status: str
    time_s: float | None = None
    message: str = ""
    text: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"JUnit case status {self.status!r}: one of {', '.join(STATUSES)}")


@dataclass(frozen=True)
class Suite:
    name: str
    cases: tuple[Case, ...]


def _counts(cases: tuple[Case, ...] | list[Case]) -> dict[str, str]:
    n = {s: sum(c.status == s for c in cases) for s in STATUSES}
    t = sum(c.time_s or 0.0 for c in cases)
    return {
        "tests": str(len(cases)),
        "failures": str(n["FAIL"]),
        "errors": str(n["ERROR"]),
        "skipped": str(n["SKIP"] + n["INCONCLUSIVE"]),
        "time": f"{t:.2f}",
    }


def render(suites: list[Suite], name: str = "lab") -> str:
    """The JUnit document for *suites*: ``<testsuites>`` with one ``<testsuite>`` each."""
    root = ET.Element("testsuites", {"name": xml_text(name), **_counts([c for s in suites for c in s.cases])})
    for s in suites:
        se = ET.SubElement(root, "testsuite", {"name": xml_text(s.name), **_counts(s.cases)})
        for c in s.cases:
            attrs = {"classname": xml_text(c.classname), "name": xml_text(c.name)}
            if c.time_s is not None:
                attrs["time"] = f"{c.time_s:.2f}"
            ce = ET.SubElement(se, "testcase", attrs)
            tag = {"FAIL": "failure", "ERROR": "error", "SKIP": "skipped", "INCONCLUSIVE": "skipped"}.get(c.status)
            if tag is None:
                continue
            message = f"INCONCLUSIVE: {c.message}" if c.status == "INCONCLUSIVE" else c.message
            el = ET.SubElement(ce, tag, {"message": xml_text(message)})
            if c.text:
                el.text = xml_text(c.text)
    ET.indent(root, space=" ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def failure_message(expectations) -> tuple[str, str]:
    """(message, text) for failed expectations: the first one's name and its first
    evidence line (what a CI page shows in one line), then every failed one in full."""
    failed = [e for e in expectations if not e.ok and not getattr(e, "inconclusive", "")]
    if not failed:
        return "", ""
    first = failed[0]
    lead = first.evidence[0] if first.evidence else first.note
    message = f"{first.name}: {lead}" if lead else first.name
    text = "\n\n".join("\n".join(x for x in (f"FAIL {e.name}", e.note and f"why: {e.note}", *e.evidence) if x) for e in failed)
    return message, text


def run_suite(outcomes) -> Suite:
    """A `lab run`'s report: one testcase per expectation of each run (an ERROR or SKIP
    run is one testcase saying why), classname ``lab.<scenario>.<topology>``, name
    ``<kernel>: <expectation>`` (and `` #N`` for the Nth of several runs)."""
    cases: list[Case] = []
    for i, o in enumerate(outcomes):
        cls = classname(o.scenario, o.topology)
        wall = o.timing.get("wall_s")
        nth = f" #{i + 1}" if len(outcomes) > 1 else ""
        if o.status in ("ERROR", "SKIP") or not o.expectations:
            status = o.status if o.status in STATUSES else "ERROR"
            cases.append(Case(cls, f"{o.kernel}: run{nth}", status, wall, o.message or f"the run is {o.status}"))
            continue
        for e in o.expectations:
            if e.status == "INCONCLUSIVE":
                cases.append(Case(cls, f"{o.kernel}: {e.name}{nth}", e.status, None, e.inconclusive))
                continue
            msg, text = failure_message([e])
            cases.append(Case(cls, f"{o.kernel}: {e.name}{nth}", e.status, None, msg, text))
    return Suite("lab run", tuple(cases))
