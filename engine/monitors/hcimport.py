"""Heartbeats from Healthchecks: the JSON of its Management API v3 ``GET /api/v3/checks/``
(read with a read-write key, so each check carries its ``uuid``) mapped onto heartbeat
entries of monitors as code (:mod:`engine.monitors.heartbeat_file`). Pure.

Each check keeps its ``uuid`` as the ping id (cron lines need only the host changed) and is
named by it (the entry's ``key``), so importing the same file again updates, never
duplicates. ``timeout`` becomes ``period``, ``schedule``/``tz`` become
``schedule``/``time_zone``, ``grace`` stays, ``slug`` stays where it is free, a ``paused``
check is imported disabled. What has no counterpart (tags, description, e-mail keyword
filters, POST-only, manual resume, integrations, fields this reader does not know) is listed
by check name; a check that cannot be made at all (no uuid, a schedule we cannot read) is
skipped and listed with the reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.monitors import heartbeat as hbconfig
from engine.monitors.heartbeat_file import HeartbeatEntry
from engine.monitors.validation import MAX_ALIAS_LENGTH
from engine.runtime.errors import ValidationFailed

MAX_IMPORT_BYTES = 16 * 1024 * 1024
# Fields a v3 check carries that say nothing the heartbeat needs: its history and its URLs.
_HISTORY = frozenset({
    "n_pings", "status", "started", "last_ping", "next_ping", "last_duration", "badge_url",
    "ping_url", "update_url", "pause_url", "resume_url", "unique_key", "uuid", "name",
    "slug", "grace", "timeout", "schedule", "tz",
})
# Fields with no counterpart, and the value Healthchecks gives them when unused.
_DEFAULTS: Mapping[str, Any] = {
    "tags": "", "desc": "", "methods": "", "manual_resume": False, "channels": "",
    "subject": "", "subject_fail": "", "start_kw": "", "success_kw": "", "failure_kw": "",
    "filter_subject": False, "filter_body": False, "filter_http_body": False,
    "filter_default_fail": False,
}
_WHY: Mapping[str, str] = {
    "tags": "tags are not kept",
    "desc": "the description is not kept",
    "methods": "Upwatch takes HEAD, GET and POST pings alike",
    "manual_resume": "a heartbeat resumes on its next good ping",
    "channels": "integrations are not imported (set up notification channels)",
    "subject": "e-mail pings are not supported",
    "subject_fail": "e-mail pings are not supported",
    "start_kw": "keyword filters are not supported",
    "success_kw": "keyword filters are not supported",
    "failure_kw": "keyword filters are not supported",
    "filter_subject": "e-mail pings are not supported",
    "filter_body": "e-mail pings are not supported",
    "filter_http_body": "keyword filters are not supported (body assertions can replace them)",
    "filter_default_fail": "keyword filters are not supported",
}


@dataclass(frozen=True, slots=True)
class Unmapped:
    """Something of the check named ``name`` (its uuid when it has one) that was not
    carried over, in words."""

    name: str
    uuid: str | None
    what: str

    def line(self, verb: str) -> str:
        ident = f" ({self.uuid})" if self.uuid else ""
        return f"{verb} {self.name}{ident}: {self.what}"


@dataclass(slots=True)
class HcImport:
    """The heartbeats a file maps to, the checks skipped and what was left behind."""

    entries: list[HeartbeatEntry] = field(default_factory=list)
    skipped: list[Unmapped] = field(default_factory=list)
    not_kept: list[Unmapped] = field(default_factory=list)

    def lines(self) -> list[str]:
        return ([s.line("skipped ") for s in self.skipped]
                + [n.line("not kept") for n in self.not_kept])


def read_checks(data: bytes) -> list[Any]:
    """The checks of a v3 list document (``{"checks": [...]}``; a bare list or one check
    object is taken too). ValidationFailed (key ``file``) when it is not such JSON."""
    if len(data) > MAX_IMPORT_BYTES:
        raise ValidationFailed({"file": [f"The file is over {MAX_IMPORT_BYTES} bytes."]})
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValidationFailed({"file": [f"It is not JSON: {exc}."]}) from None
    if isinstance(doc, dict) and "checks" in doc:
        doc = doc["checks"]
    elif isinstance(doc, dict) and ("uuid" in doc or "unique_key" in doc):
        doc = [doc]
    if not isinstance(doc, list):
        raise ValidationFailed({"file": [
            "It is not the answer of GET /api/v3/checks/ (an object with a checks list)."]})
    return doc


def _name(check: Mapping[str, Any]) -> str | None:
    for f in ("name", "slug"):
        v = check.get(f)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def _alias(check: Mapping[str, Any], ping_id: str) -> str:
    """Healthchecks shows an unnamed check by its id; so does the heartbeat."""
    return (_name(check) or ping_id)[:MAX_ALIAS_LENGTH]


def _body(check: Mapping[str, Any], alias: str) -> dict[str, Any]:
    """The heartbeat create body (API field names) for the check's schedule."""
    body: dict[str, Any] = {"alias": alias, "ping_uuid": check["uuid"]}
    if check.get("grace") is not None:
        body["grace"] = check["grace"]
    if check.get("schedule") not in (None, ""):
        body["schedule"] = check["schedule"]
        body["time_zone"] = check.get("tz") or "UTC"
    elif check.get("timeout") is not None:
        body["period"] = check["timeout"]
    return body


def _errors_in_words(exc: ValidationFailed) -> str:
    return "; ".join(m for messages in exc.errors.values() for m in messages)


def _not_kept(check: Mapping[str, Any]) -> list[str]:
    out = []
    for f, default in _DEFAULTS.items():
        value = check.get(f, default)
        if value not in (default, None):
            out.append(f"{f} {value!r}: {_WHY[f]}")
    for f in sorted(set(check) - set(_DEFAULTS) - _HISTORY):
        out.append(f"{f}: unknown field, ignored")
    return out


def _validated(body: dict[str, Any]) -> hbconfig.HeartbeatCreate:
    """The create command of ``body``; a slug that alone is invalid is dropped."""
    try:
        return hbconfig.validate_heartbeat_create(body, keep_uuid=True)
    except ValidationFailed as exc:
        if set(exc.errors) != {"slug"}:
            raise
    return hbconfig.validate_heartbeat_create(
        {k: v for k, v in body.items() if k != "slug"}, keep_uuid=True)


def map_checks(checks: Iterable[Any], *, slugs: Mapping[str, str] | None = None,
               owned_uuids: Mapping[str, str] | None = None) -> HcImport:
    """The heartbeats of the v3 ``checks``. ``slugs``: slug -> key of the account's
    heartbeats (a slug another heartbeat holds is dropped and listed); ``owned_uuids``: ping
    id -> key of the account's heartbeats (a uuid held under another key is skipped)."""
    out = HcImport()
    slugs = dict(slugs or {})
    owned = dict(owned_uuids or {})
    seen: set[str] = set()
    for index, check in enumerate(checks):
        if not isinstance(check, dict):
            out.skipped.append(Unmapped(f"checks[{index}]", None, "not a JSON object"))
            continue
        name = _name(check) or f"checks[{index}]"
        raw = check.get("uuid")
        if raw is None:
            out.skipped.append(Unmapped(name, None, "no uuid (exported with a read-only"
                                        " API key? use a read-write key)"))
            continue
        try:
            ping_id = str(uuid.UUID(str(raw)))
        except ValueError:
            out.skipped.append(Unmapped(name, None, f"the uuid {raw!r} is not a UUID"))
            continue
        if ping_id in seen:
            out.skipped.append(Unmapped(name, ping_id, "the uuid appears twice in the file"))
            continue
        seen.add(ping_id)
        if owned.get(ping_id, ping_id) != ping_id:
            out.skipped.append(Unmapped(name, ping_id, "the account already has a heartbeat"
                                        f" with this ping id (key {owned[ping_id]!r})"))
            continue
        check = {**check, "uuid": ping_id}
        if check.get("schedule") in (None, "") and check.get("timeout") is None:
            out.skipped.append(Unmapped(name, ping_id, "neither timeout nor schedule"))
            continue
        body = _body(check, _alias(check, ping_id))
        slug = check.get("slug")
        if isinstance(slug, str) and slug:
            holder = slugs.get(slug, ping_id)
            if holder != ping_id:
                out.not_kept.append(Unmapped(
                    name, ping_id, f"slug {slug!r}: heartbeat {holder} has it"))
            else:
                body["slug"] = slug
        try:
            command = _validated(body)
        except ValidationFailed as exc:
            out.skipped.append(Unmapped(name, ping_id, _errors_in_words(exc)))
            continue
        if "slug" in body and command.slug is None:
            out.not_kept.append(Unmapped(name, ping_id, f"slug {slug!r}: not a valid slug"))
        if command.slug is not None:
            slugs[command.slug] = ping_id
        for what in _not_kept(check):
            out.not_kept.append(Unmapped(name, ping_id, what))
        out.entries.append(HeartbeatEntry(
            key=ping_id, alias=command.alias, config=command.config, slug=command.slug,
            ping_uuid=ping_id, enabled=check.get("status") != "paused"))
    return out
