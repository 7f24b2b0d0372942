"""JUnit XML: parses with junitparser, one testcase per check outcome with the right result."""

from __future__ import annotations

from junitparser import Error, Failure, JUnitXml, Skipped

from fasttrack.report.junit import write_junit


def test_one_testcase_per_outcome_with_reasons(load, tmp_path):
    evidence, _ = load("incomplete")
    path = write_junit(evidence, tmp_path / "junit.xml")
    xml = JUnitXml.fromfile(str(path))
    cases = {case.name: case for suite in xml for case in suite}
    assert len(cases) == len(evidence["checks"])
    for c in evidence["checks"]:
        case = cases[c["id"]]
        assert case.classname == c["kind"]
        kinds = {type(r) for r in case.result}
        expected = {"passed": set(), "failed": {Failure}, "errored": {Error}, "not_run": {Skipped}}[c["status"]]
        assert kinds == expected, c["id"]
        if c["status"] != "passed":
            assert c["reason"] in case.result[0].message
    assert xml.errors == sum(1 for c in evidence["checks"] if c["status"] == "errored")
    assert xml.skipped == sum(1 for c in evidence["checks"] if c["status"] == "not_run")


def test_failures_counted_and_control_characters_removed(load, tmp_path):
    evidence, _ = load("fail")
    evidence["checks"][0]["reason"] = "bad\x00byte\x1b[31m and <xml> & more"
    xml = JUnitXml.fromfile(str(write_junit(evidence, tmp_path / "junit.xml")))
    assert xml.failures == evidence["verdict"]["counts"]["failed"]
    first = next(case for suite in xml for case in suite if case.name == evidence["checks"][0]["id"])
    assert first.result[0].message == "badbyte[31m and <xml> & more"
