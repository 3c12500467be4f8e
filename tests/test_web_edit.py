"""The inbox's **Edit** form (issue 49): its fields come from the tool's JSON schema (one per
argument: numbers, checkboxes, choices, text, JSON for nested values) and the form's text is
read back into the edited arguments, a mistake named by its argument before anything runs."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="codeact[web] is not installed")
pytest.importorskip("jinja2", reason="codeact[web] is not installed")

from codeact.web._views import args_from_form, edit_fields

SCHEMA = {
    "type": "object",
    "properties": {
        "amount": {"type": "integer", "description": "cents"},
        "rate": {"type": "number"},
        "urgent": {"type": "boolean"},
        "to": {"type": "string", "description": "the payee"},
        "currency": {"type": "string", "enum": ["EUR", "USD"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "memo": {"type": "string"},
    },
    "required": ["amount", "to"],
}


def test_the_fields_follow_the_schema_and_show_the_calls_arguments() -> None:
    args = {"amount": 900, "rate": 1.5, "urgent": True, "to": "bob", "currency": "USD", "tags": ["a"]}
    fields = {f["name"]: f for f in edit_fields(SCHEMA, args)}
    assert [f["kind"] for f in fields.values()] == ["integer", "number", "boolean", "string", "enum", "json", "string"]
    assert fields["amount"]["value"] == "900" and fields["amount"]["required"]
    assert fields["amount"]["description"] == "cents"
    assert fields["urgent"]["value"] == "true" and fields["currency"]["options"] == ["EUR", "USD"]
    assert fields["tags"]["value"] == '[\n "a"\n]' and fields["memo"]["value"] == ""
    assert not fields["rate"]["required"]


def test_an_argument_the_schema_does_not_name_or_of_another_type_is_json() -> None:
    fields = {f["name"]: f for f in edit_fields(SCHEMA, {"amount": "nine", "extra": {"k": 1}})}
    assert fields["amount"]["kind"] == "json" and fields["amount"]["value"] == '"nine"'
    assert fields["extra"]["kind"] == "json"
    assert [f["name"] for f in edit_fields(None, {"x": 1})] == ["x"]


def test_the_form_is_read_back_into_arguments() -> None:
    form = {
        "digest": "d",
        "kind:amount": "integer",
        "arg:amount": "450",
        "kind:rate": "number",
        "arg:rate": "",
        "kind:urgent": "boolean",
        "arg:urgent": "true",
        "kind:to": "string",
        "arg:to": "carol",
        "kind:tags": "json",
        "arg:tags": '["x", "y"]',
        "kind:memo": "string",
        "arg:memo": "",
    }
    assert args_from_form(form) == {"amount": 450, "urgent": True, "to": "carol", "tags": ["x", "y"], "memo": ""}


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("integer", "4.5", "must be a whole number"),
        ("integer", "true", "must be a whole number"),
        ("number", '"7"', "must be a number"),
        ("integer", "lots", "is not a number"),
        ("json", "{oops", "is not JSON"),
    ],
)
def test_a_field_that_is_not_of_its_kind_is_named(kind: str, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"argument 'amount' {message}"):
        args_from_form({"kind:amount": kind, "arg:amount": text})
