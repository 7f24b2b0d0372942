"""Structured-output probe: the shipped schemas, validation messages, and the grammar-skipped fault."""

from __future__ import annotations

import json

from fasttrack.probes.content import default_schema_paths, load_schema_file, prompt_for_schema
from fasttrack.probes.fake import FakeTarget
from fasttrack.probes.structured_output import StructuredSettings, probe_structured_output, validation_error


def test_three_shipped_schemas_are_valid_and_have_prompts():
    paths = default_schema_paths()
    assert [p.name for p in paths] == ["person.json", "order.json", "ticket.json"]
    for path in paths:
        schema = load_schema_file(path)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert "JSON object" in prompt_for_schema(path)
    order = load_schema_file(paths[1])
    assert order["properties"]["items"]["type"] == "array"  # nested array of objects
    ticket = load_schema_file(paths[2])
    assert "enum" in ticket["properties"]["priority"] and ticket["properties"]["severity"]["maximum"] == 5


def test_validation_error_names_the_field():
    ticket = load_schema_file(default_schema_paths()[2])
    good = {"priority": "low", "severity": 3, "status": "open", "votes": 0}
    assert validation_error(json.dumps(good), ticket) is None
    assert (
        validation_error(json.dumps({**good, "severity": 9}), ticket)
        == "$.severity: 9 is greater than the maximum of 5"
    )
    assert validation_error('{"priority": "lo', ticket).startswith("not JSON")


def test_grammar_skipped_fails_and_clean_passes():
    settings = StructuredSettings.from_mapping({"samples": 1})
    assert probe_structured_output(FakeTarget(), FakeTarget("candidate", noise=1e-4), settings).passed
    result = probe_structured_output(
        FakeTarget(), FakeTarget("candidate", faults=frozenset({"grammar_skipped"})), settings
    )
    assert result.status == "failed" and "person.json violates the schema" in result.reason


def test_greedy_difference_from_baseline_fails_even_when_valid():
    settings = StructuredSettings.from_mapping({"samples": 0})
    result = probe_structured_output(FakeTarget(), FakeTarget("candidate", noise=3.0), settings)
    assert result.status == "failed" and "differs from the baseline at token" in result.reason
