"""The certificate history of a certificate check: GET /webapi/checks/{id}/certificates.

Every certificate the check has seen, last seen first (at most 500), each with its SHA-256
fingerprint, serial, issuer, subject, key type, signature algorithm, validity, lifetime in
days, when it was first and last seen, and ``current`` (the one the last probe read). A
renewal, a certificate swapped for one of another issuer, or a rollback to an older one
shows as rows. 404 for an unknown check, another account's, or an uptime check.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from engine.db.accounts import Account
from engine.db.certificates import MAX_LISTED, SeenCertificate
from engine.domain.timefmt import fmt
from engine.monitors import validation
from engine.web.api import openapi
from engine.web.jsonio import json_response
from engine.web.keys import ACCOUNT, STORE

routes = web.RouteTableDef()


def certificate_view(c: SeenCertificate) -> dict[str, Any]:
    lifetime = None
    if c.valid_from is not None and c.valid_to is not None:
        lifetime = round((c.valid_to - c.valid_from).total_seconds() / 86400.0, 2)
    return {
        "fingerprint_sha256": c.fingerprint_sha256,
        "serial": c.serial,
        "issuer": c.issuer,
        "subject": c.subject,
        "key_type": c.key_type,
        "signature_algorithm": c.signature_algorithm,
        "valid_from": fmt(c.valid_from),
        "valid_to": fmt(c.valid_to),
        "lifetime_days": lifetime,
        "first_seen_at": fmt(c.first_seen_at),
        "last_seen_at": fmt(c.last_seen_at),
        "current": c.current,
    }


@routes.get("/webapi/checks/{id}/certificates")
async def list_certificates(request: web.Request) -> web.Response:
    check_id = validation.parse_id(request.match_info["id"])
    account: Account = request[ACCOUNT]
    seen = await request.app[STORE].list_certificates(account.id, check_id)
    return json_response([certificate_view(c) for c in seen])


# --- OpenAPI -----------------------------------------------------------------------------

_TS = openapi.TIMESTAMP
_nullable = openapi.nullable


_CERTIFICATE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "fingerprint_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "serial": {"type": "string", "description": "Lower-case hexadecimal."},
        "issuer": _nullable({"type": "string"}),
        "subject": _nullable({"type": "string"}),
        "key_type": _nullable({"type": "string", "example": "EC-secp256r1"}),
        "signature_algorithm": _nullable({"type": "string"}),
        "valid_from": _nullable(_TS),
        "valid_to": _nullable(_TS),
        "lifetime_days": _nullable({"type": "number", "minimum": 0}),
        "first_seen_at": _TS,
        "last_seen_at": _TS,
        "current": {"type": "boolean", "description": "The certificate the last probe read."},
    },
}
_CERTIFICATE["required"] = list(_CERTIFICATE["properties"])

OPENAPI_PATHS: dict[str, Any] = {
    "/webapi/checks/{id}/certificates": {
        "get": {
            "summary": "Every certificate a certificate check has seen",
            "description": f"Last seen first, at most {MAX_LISTED}.",
            "operationId": "listCheckCertificates",
            "parameters": [{"$ref": "#/components/parameters/Id"}],
            "responses": {
                "200": {"description": "The certificates.",
                        "content": {"application/json": {
                            "schema": {"type": "array", "items": _CERTIFICATE}}}},
                "404": {"$ref": "#/components/responses/NotFound"},
                **openapi.common_responses(),
            },
        },
    },
}
