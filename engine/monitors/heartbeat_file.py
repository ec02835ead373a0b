"""Heartbeats in the monitors-as-code file: ``[[heartbeats]]`` entries beside
``[[monitors]]``. Pure: validation, the export form and the plan.

An entry is named by its ``key`` (required; a heartbeat has no URL to name it)::

    [[heartbeats]]
    key = "nightly-backup"
    alias = "Nightly backup"             # default: the key
    schedule = "0 3 * * *"               # or period = 86400
    time_zone = "Europe/Berlin"
    grace = 3600
    max_runtime = 7200                   # optional, as in the API
    ping_uuid = "4a142ddb-..."           # as exported: a create keeps it (cron lines stay)
    enabled = true

Values follow the API's create rules (:mod:`engine.monitors.heartbeat`). A heartbeat whose
key the file does not hold is kept, or deleted with ``prune``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.domain import heartbeat as hb
from engine.monitors import heartbeat as hbconfig
from engine.runtime.errors import ValidationFailed

HEARTBEATS = "heartbeats"
_FIELDS = ("key", "alias", "period", "schedule", "time_zone", "grace", "max_runtime",
           "min_runtime", "min_interval", "recovery_threshold", "slug", "ping_uuid",
           "assertions", "enabled")


@dataclass(frozen=True, slots=True)
class HeartbeatEntry:
    """One heartbeat as a file states it, or as the account holds it (``monitor_id``)."""

    key: str
    alias: str
    config: hb.Config
    recovery_threshold: int = 0
    slug: str | None = None
    ping_uuid: str | None = None
    assertions: Any = None
    enabled: bool = True
    monitor_id: int | None = None
    check_id: int | None = None

    def settings(self) -> tuple[Any, ...]:
        """What an update compares (not the ids, not the ping id)."""
        return (self.alias, self.config, self.recovery_threshold, self.slug,
                self.assertions or None, self.enabled)


def entry_field(index: int, name: str) -> str:
    return f"{HEARTBEATS}[{index}].{name}" if name else f"{HEARTBEATS}[{index}]"


def validate_entries(raw: Any) -> list[HeartbeatEntry]:
    """The ``heartbeats`` list of a document, validated; ValidationFailed keyed
    ``heartbeats[<index>].<field>`` with every error."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValidationFailed({HEARTBEATS: ["The heartbeats entry must be a list."]})
    errors: dict[str, list[str]] = {}
    out: list[HeartbeatEntry] = []
    keys: dict[str, int] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            errors[entry_field(i, "")] = ["Each heartbeat must be a table."]
            continue
        for name in item:
            if name not in _FIELDS:
                errors.setdefault(entry_field(i, name), []).append(f"Unknown key {name!r}.")
        key = item.get("key")
        if not isinstance(key, str) or not key.strip() or len(key) > 128:
            errors.setdefault(entry_field(i, "key"), []).append(
                "Each heartbeat needs a key (1-128 characters) that names it.")
            continue
        if key in keys:
            errors.setdefault(entry_field(i, "key"), []).append(
                f"The key {key!r} is already used by {entry_field(keys[key], '')}.")
            continue
        keys[key] = i
        body = {k: v for k, v in item.items() if k not in ("key", "enabled")}
        body.setdefault("alias", key)
        enabled = item.get("enabled", True)
        if not isinstance(enabled, bool):
            errors.setdefault(entry_field(i, "enabled"), []).append(
                "The enabled field must be true or false.")
        try:
            command = hbconfig.validate_heartbeat_create(body, keep_uuid=True)
        except ValidationFailed as exc:
            for name, messages in exc.errors.items():
                errors.setdefault(entry_field(i, name), []).extend(messages)
            continue
        out.append(HeartbeatEntry(
            key=key, alias=command.alias, config=command.config,
            recovery_threshold=command.recovery_threshold, slug=command.slug,
            ping_uuid=command.ping_uuid, assertions=command.assertions or None,
            enabled=enabled is not False))
    if errors:
        raise ValidationFailed(errors)
    return out


def entry_of(e: HeartbeatEntry) -> dict[str, Any]:
    """The export form of a heartbeat (None values left out)."""
    c = e.config
    out: dict[str, Any] = {"key": e.key, "alias": e.alias}
    if c.schedule is None:
        out["period"] = c.period_s
    else:
        out["schedule"], out["time_zone"] = c.schedule, c.time_zone
    out.update({"grace": c.grace_s, "max_runtime": c.max_runtime_s,
                "min_runtime": c.min_runtime_s, "min_interval": c.min_interval_s,
                "recovery_threshold": e.recovery_threshold or None, "slug": e.slug,
                "ping_uuid": e.ping_uuid, "enabled": e.enabled,
                "assertions": e.assertions or None})
    return {k: v for k, v in out.items() if v is not None}


@dataclass(slots=True)
class HeartbeatPlan:
    creates: list[HeartbeatEntry] = field(default_factory=list)
    updates: list[tuple[HeartbeatEntry, HeartbeatEntry]] = field(default_factory=list)
    deletes: list[HeartbeatEntry] = field(default_factory=list)
    unchanged: int = 0

    @property
    def empty(self) -> bool:
        return not (self.creates or self.updates or self.deletes)

    def as_json(self) -> dict[str, Any]:
        return {
            "created": [e.key for e in self.creates],
            "updated": [d.key for _, d in self.updates],
            "deleted": [e.key for e in self.deletes],
            "unchanged": self.unchanged,
        }

    def lines(self) -> list[str]:
        return ([f"create  heartbeat {e.key}" for e in self.creates]
                + [f"update  heartbeat {d.key} (monitor {c.monitor_id})"
                   for c, d in self.updates]
                + [f"delete  heartbeat {e.key} (monitor {e.monitor_id})" for e in self.deletes])


def plan(current: Iterable[HeartbeatEntry], desired: Sequence[HeartbeatEntry], *,
         prune: bool) -> HeartbeatPlan:
    """What makes the account's heartbeats (by key) match ``desired``; heartbeats without a
    key are never touched."""
    by_key: Mapping[str, HeartbeatEntry] = {c.key: c for c in current if c.key}
    out = HeartbeatPlan()
    for d in desired:
        found = by_key.get(d.key)
        if found is None:
            out.creates.append(d)
        elif found.settings() != d.settings():
            out.updates.append((found, d))
        else:
            out.unchanged += 1
    if prune:
        wanted = {d.key for d in desired}
        out.deletes = [c for c in by_key.values() if c.key not in wanted]
    return out
