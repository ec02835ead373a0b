"""The building blocks of the OpenAPI document (``GET /webapi/openapi.json``): references,
objects, nullable fields, responses, and the shapes every part of the API shares.

:mod:`engine.web.api.openapi` assembles the document from them, with
:mod:`engine.web.api.monitor_openapi` (monitors and checks); other modules' path items
(``extra_paths``) use them through :mod:`engine.web.api.openapi`.
"""

from __future__ import annotations

from typing import Any

from engine.monitors.validation import MAX_ID
from engine.runtime.settings import ALLOWED_INTERVALS

TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"

INT64: dict[str, Any] = {"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ID}
TIMESTAMP: dict[str, Any] = {
    "type": "string", "pattern": TIMESTAMP_PATTERN, "example": "2026-01-31 12:00:00"}
INTERVAL: dict[str, Any] = {"type": "integer", "enum": list(ALLOWED_INTERVALS)}


def ref(name: str) -> dict[str, str]:
    """A reference to the schema ``name`` of the document's components."""
    return {"$ref": f"#/components/schemas/{name}"}


def obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An object of ``props``, all of them required unless ``required`` says which."""
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
    }


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def response(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """A response, with a JSON body of ``schema`` when given."""
    out: dict[str, Any] = {"description": description}
    if schema is not None:
        out["content"] = json_content(schema)
    return out


def response_ref(name: str) -> dict[str, str]:
    """A reference to the response ``name`` of the document's components."""
    return {"$ref": f"#/components/responses/{name}"}


def common_responses() -> dict[str, Any]:
    """401, 429 and 503, which every authenticated operation may answer."""
    return {
        "401": response_ref("Unauthenticated"), "429": response_ref("TooManyRequests"),
        "503": response_ref("Unavailable"),
    }
