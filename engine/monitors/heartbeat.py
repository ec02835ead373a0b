"""A heartbeat monitor as a user configures it: create and update bodies, validated once
(the API and monitors as code share these rules). Pure; raises ValidationFailed (422)
naming each field.

Create: ``{"type": "heartbeat", "alias", "period", "grace"}`` or ``{"type": "heartbeat",
"alias", "schedule", "time_zone", "grace"}``; optional ``max_runtime`` (default: the
grace), ``min_runtime``, ``min_interval``, ``recovery_threshold``, ``slug`` (for slug
pings), ``assertions`` on the ping body (``body``/``json`` sources, as URL monitors have).
Durations are seconds.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.domain import heartbeat as hb
from engine.monitors import requests as requestconfig
from engine.monitors.validation import (
    MAX_RECOVERY_THRESHOLD,
    present,
    validate_alias,
    validate_int_range,
)
from engine.runtime.errors import ValidationFailed

HEARTBEAT = "heartbeat"
MIN_PERIOD = 60
MAX_DURATION = 365 * 86400
DEFAULT_GRACE = 3600
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")
_BODY_SOURCES = ("body", "json")
# Body fields of a URL monitor that a heartbeat has not.
_URL_ONLY = ("url", "interval", "notification_threshold", "request")

# API field -> Config field, for the schedule settings shared by create and update.
DURATIONS = {
    "period": "period_s", "grace": "grace_s", "max_runtime": "max_runtime_s",
    "min_runtime": "min_runtime_s", "min_interval": "min_interval_s",
}


@dataclass(frozen=True, slots=True)
class HeartbeatCreate:
    alias: str
    config: hb.Config
    recovery_threshold: int
    slug: str | None
    assertions: Any
    ping_uuid: str | None = None


def is_heartbeat(body: Mapping[str, Any]) -> bool:
    return body.get("type") == HEARTBEAT


def validate_type(body: Mapping[str, Any]) -> None:
    kind = body.get("type")
    if kind is not None and kind not in ("http", HEARTBEAT):
        raise ValidationFailed({"type": ["The type must be http or heartbeat."]})


def _duration(body: Mapping[str, Any], field: str, low: int, errors: dict[str, list[str]]
              ) -> int | None:
    if not present(body, field):
        return None
    try:
        return validate_int_range(body[field], field, low, MAX_DURATION)
    except ValidationFailed as exc:
        for k, v in exc.errors.items():
            errors.setdefault(k, []).extend(v)
        return None


def _text(body: Mapping[str, Any], field: str, errors: dict[str, list[str]]) -> str | None:
    if not present(body, field):
        return None
    value = body[field]
    if not isinstance(value, str) or not value.strip():
        errors.setdefault(field, []).append(f"The {field} must be a non-empty string.")
        return None
    return value.strip()


def _schedule_fields(body: Mapping[str, Any], errors: dict[str, list[str]]) -> dict[str, Any]:
    """The schedule settings given in ``body``, as Config keyword arguments."""
    out: dict[str, Any] = {}
    for field, key in DURATIONS.items():
        low = MIN_PERIOD if field in ("period", "grace") else 1
        value = _duration(body, field, low, errors)
        if value is not None:
            out[key] = value
    schedule = _text(body, "schedule", errors)
    if schedule is not None:
        why = hb.schedule_error(schedule)
        if why is not None:
            errors.setdefault("schedule", []).append(f"The schedule {why}.")
        else:
            out["schedule"] = schedule
    zone = _text(body, "time_zone", errors)
    if zone is not None:
        why = hb.zone_error(zone)
        if why is not None:
            errors.setdefault("time_zone", []).append(f"The time_zone is an {why}.")
        else:
            out["time_zone"] = zone
    if "period_s" in out and "schedule" in out:
        errors.setdefault("schedule", []).append(
            "Give either period or schedule, not both.")
    return out


def _assertions(body: Mapping[str, Any], creating: bool, errors: dict[str, list[str]]) -> Any:
    if "assertions" not in body:
        return None
    try:
        config = requestconfig.validate({"assertions": body["assertions"]}, creating=creating)
    except ValidationFailed as exc:
        for k, v in exc.errors.items():
            errors.setdefault(k, []).extend(v)
        return None
    got = config.assertions
    if isinstance(got, list):
        for i, a in enumerate(got):
            if a.get("source") not in _BODY_SOURCES:
                errors.setdefault(f"assertions.{i}.source", []).append(
                    "A heartbeat's assertions read the ping body: source body or json.")
    return got


def _slug(body: Mapping[str, Any], errors: dict[str, list[str]]) -> str | None:
    if not present(body, "slug"):
        return None
    value = body["slug"]
    if not isinstance(value, str) or not _SLUG.match(value):
        errors.setdefault("slug", []).append(
            "The slug must be 1-100 lower-case letters, digits, '-' or '_'.")
        return None
    return value


def validate_heartbeat_create(body: Mapping[str, Any], *, keep_uuid: bool = False
                              ) -> HeartbeatCreate:
    """The create body of a heartbeat (see the module docstring). ``keep_uuid``: accept a
    ``ping_uuid`` (an importer keeping Healthchecks' ids)."""
    errors: dict[str, list[str]] = {}
    for field in _URL_ONLY:
        if present(body, field):
            errors.setdefault(field, []).append(f"A heartbeat has no {field}.")
    alias: str | None = None
    if not present(body, "alias"):
        errors["alias"] = ["The alias field is required for a heartbeat."]
    else:
        try:
            alias = validate_alias(body["alias"])
        except ValidationFailed as exc:
            errors.update(exc.errors)
    fields = _schedule_fields(body, errors)
    if "period_s" not in fields and "schedule" not in fields and not (
        {"period", "schedule"} & set(errors)
    ):
        errors["period"] = ["Give period (seconds) or schedule (a cron expression)."]
    if "time_zone" in fields and "schedule" not in fields and "schedule" not in errors:
        errors.setdefault("time_zone", []).append("The time_zone applies to a schedule only.")
    fields.setdefault("grace_s", DEFAULT_GRACE)
    recovery = 0
    if present(body, "recovery_threshold"):
        r = _duration(body, "recovery_threshold", 0, errors)
        if r is not None and r > MAX_RECOVERY_THRESHOLD:
            errors.setdefault("recovery_threshold", []).append(
                f"The recovery_threshold must be between 0 and {MAX_RECOVERY_THRESHOLD}.")
        recovery = r or 0
    slug = _slug(body, errors)
    assertions = _assertions(body, True, errors)
    ping_uuid = None
    if keep_uuid and present(body, "ping_uuid"):
        try:
            ping_uuid = str(uuid.UUID(str(body["ping_uuid"])))
        except ValueError:
            errors.setdefault("ping_uuid", []).append("The ping_uuid must be a UUID.")
    if errors:
        raise ValidationFailed(errors)
    assert alias is not None
    return HeartbeatCreate(alias, hb.Config(**fields), recovery, slug, assertions, ping_uuid)


def validate_heartbeat_update(body: Mapping[str, Any]) -> dict[str, Any]:
    """The schedule settings an update body changes (Config keyword arguments); a
    ``max_runtime``/``min_runtime``/``min_interval`` of 0 turns it off (the default)."""
    errors: dict[str, list[str]] = {}
    zeroable = {"max_runtime", "min_runtime", "min_interval"}
    cleaned = {k: v for k, v in body.items() if not (k in zeroable and v == 0)}
    fields = _schedule_fields(cleaned, errors)
    for field in zeroable:
        if body.get(field) == 0:
            fields[DURATIONS[field]] = None
    if errors:
        raise ValidationFailed(errors)
    return fields
