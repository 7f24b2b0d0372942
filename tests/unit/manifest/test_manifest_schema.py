"""The manifest JSON Schema itself: valid Draft 2020-12, versioned, documented, closed."""

import json

from jsonschema import Draft202012Validator

from fasttrack.resources import load_schema, schema_path


def _walk(node, path=""):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}/{index}")


def test_schema_is_valid_draft_2020_12_with_versioned_id():
    schema = load_schema("manifest")
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith("/manifest/v1.json")
    json.loads(schema_path("manifest").read_text())  # plain JSON file


def test_every_property_has_a_description():
    missing = [
        f"{path}/properties/{name}"
        for path, node in _walk(load_schema("manifest"))
        for name, sub in (node.get("properties") or {}).items()
        if isinstance(sub, dict) and not sub.get("description")
    ]
    assert missing == []


def test_every_object_with_properties_rejects_unknown_keys():
    open_objects = [
        path
        for path, node in _walk(load_schema("manifest"))
        if "properties" in node and not path.endswith("/if") and node.get("additionalProperties") is not False
    ]
    assert open_objects == []


def test_required_sections():
    schema = load_schema("manifest")
    assert set(schema["required"]) >= {"fasttrack", "optimisation", "model", "scope", "preserve", "target"}
    # exactly one of switch (one) and switches (a list), each switch off by default
    assert [alt["required"] for alt in schema["oneOf"]] == [["switch"], ["switches"]]
    assert schema["properties"]["switch"]["$ref"] == "#/$defs/switch"
    assert schema["properties"]["switches"]["items"]["$ref"] == "#/$defs/switch"
    assert schema["$defs"]["switch"]["properties"]["default"]["const"] is False
