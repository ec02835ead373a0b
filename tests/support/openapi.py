"""Checking JSON values against the API's OpenAPI document."""

from __future__ import annotations

import re
from typing import Any


def resolve(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The schema ``node`` stands for, its ``$ref`` chain followed through ``doc``."""
    while "$ref" in node:
        parts = node["$ref"].removeprefix("#/").split("/")
        target: Any = doc
        for p in parts:
            target = target[p]
        node = target
    return node


def check(doc: dict[str, Any], schema: dict[str, Any], value: Any, where: str = "$") -> None:
    """A small validator for the OpenAPI 3.0 subset the document uses."""
    schema = resolve(doc, schema)
    if value is None:
        assert schema.get("nullable"), f"{where}: null but not nullable"
        return
    kind = schema.get("type")
    if kind == "object":
        assert isinstance(value, dict), f"{where}: not an object"
        for key in schema.get("required", []):
            assert key in value, f"{where}: missing {key}"
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                check(doc, props[key], item, f"{where}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                check(doc, schema["additionalProperties"], item, f"{where}.{key}")
    elif kind == "array":
        assert isinstance(value, list), f"{where}: not an array"
        for i, item in enumerate(value):
            check(doc, schema["items"], item, f"{where}[{i}]")
    elif kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), f"{where}: {value!r}"
    elif kind == "number":
        assert isinstance(value, int | float) and not isinstance(value, bool), where
    elif kind == "string":
        assert isinstance(value, str), f"{where}: {value!r}"
        if "pattern" in schema:
            assert re.search(schema["pattern"], value), f"{where}: {value!r} !~ pattern"
        if "minLength" in schema:
            assert len(value) >= schema["minLength"], where
    elif kind == "boolean":
        assert isinstance(value, bool), where
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in enum"
    if "minimum" in schema:
        assert value >= schema["minimum"], where
    if "maximum" in schema:
        assert value <= schema["maximum"], where
