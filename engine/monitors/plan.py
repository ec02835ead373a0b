"""What applying a monitor set does: a pure comparison of an account's monitors with a file.

A file (``upwatch apply``, ``PUT /webapi/monitors``) lists the monitors an account should
have, each named by its ``key`` or, without one, by its URL. :func:`plan` matches each entry
to a monitor the account has and says what to create, what to update (and which fields
differ) and, with ``prune``, what to delete. Nothing here touches the database or the
network: the store executes a plan in one transaction (engine.db.monitor_batches).

Matching, in this order (each monitor matches at most one entry):

1. an entry with a key matches the monitor with that key;
2. an entry without a key matches a monitor of the same URL that no entry claimed by key,
   one without a key first (the lowest id first);
3. an entry whose key no monitor has yet matches such a monitor of the same URL too (so a
   key can be given to a monitor that had none, keeping its history).

Anything left unmatched is created; a monitor no entry matched is deleted only with
``prune``. An entry equal to its monitor in every field is unchanged and writes nothing.

A monitor's checks are those :func:`engine.monitors.checkset.checks_of` gives it, each
with its settings (``MonitorSpec.checks``, by kind). A check whose ``enabled`` the file does
not state (None) is created as the API creates it
(:func:`engine.monitors.checkset.enabled_on_create`: a certificate check is disabled for an
http URL) and, on a monitor the account has, left as it is: an apply never toggles a check
the file is silent on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.monitors.checkset import ORDER, enabled_on_create

# Whether a file's request (validated, engine/monitors/requests.py) leaves a monitor's stored
# one as it is: ``(stored, desired) -> bool``. Comparing needs the secret key (secret values
# are stored encrypted), so the caller supplies it; plain equality without one.
SameRequest = Callable[[Any, Any], bool]


def _equal(stored: Any, desired: Any) -> bool:
    return bool(stored == desired)


@dataclass(frozen=True, slots=True)
class CheckSettings:
    """One check's settings as a file states them, in the units stored. ``threshold_s`` is
    the uptime notification threshold in seconds, or the certificate expiry threshold in
    days x 86400 (``checks.notification_threshold_s``); ``recovery_s`` the uptime recovery
    threshold in seconds; ``expiry_percent`` the certificate expiry threshold in percent of
    the certificate's lifetime. A setting the kind does not have is 0. ``enabled`` None:
    not stated (a file's certificate check; :func:`plan` resolves it)."""

    interval: int
    threshold_s: int
    enabled: bool | None
    recovery_s: int = 0
    expiry_percent: int = 0
    # Domain expiry: the renewal-due thresholds in days (None: the defaults, 30, 14, 7, 1).
    expiry_days: tuple[int, ...] | None = None


# Each check table's fields as a file names them, and the CheckSettings attribute holding
# each, in file order: what :func:`changes` compares and reports.
SETTING_ATTRIBUTES: dict[str, tuple[tuple[str, str], ...]] = {
    "uptime": (("interval", "interval"), ("notification_threshold", "threshold_s"),
               ("recovery_threshold", "recovery_s"), ("enabled", "enabled")),
    "certificate_health": (("interval", "interval"), ("expiry_threshold_days", "threshold_s"),
                           ("expiry_threshold_percent", "expiry_percent"),
                           ("enabled", "enabled")),
    "domain_expiry": (("interval", "interval"), ("expiry_threshold_days", "expiry_days"),
                      ("enabled", "enabled")),
}


@dataclass(frozen=True, slots=True)
class MonitorSpec:
    """A monitor as a file states it: the normalised URL and its parts, the alias, the key
    (None: named by its URL) and its checks' settings."""

    key: str | None
    url: str
    scheme: str
    host: str
    port: str
    alias: str
    # Each check's settings by kind: exactly the monitor's checks (checkset.checks_of).
    checks: Mapping[str, CheckSettings]
    # The request and assertions (engine/monitors/requests.py), None when not set: of a
    # monitor the account has, the stored forms; of a file's entry, the validated ones (a
    # header value "********" keeps the stored value). Compared by :func:`changes`.
    request: Any = field(default=None, compare=False)
    assertions: Any = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class CurrentMonitor:
    """A monitor the account has, with its ids (``check_ids``: by kind, those of
    ``spec.checks``)."""

    id: int
    identifier: str
    check_ids: Mapping[str, int]
    spec: MonitorSpec


@dataclass(frozen=True, slots=True)
class Update:
    index: int  # of the entry in the file
    current: CurrentMonitor
    desired: MonitorSpec
    changes: tuple[str, ...]  # field names, as in the file: "alias", "uptime.interval", ...

    @property
    def url_changed(self) -> bool:
        return self.desired.url != self.current.spec.url

    @property
    def host_changed(self) -> bool:
        return self.desired.host != self.current.spec.host


@dataclass(slots=True)
class Plan:
    creates: list[tuple[int, MonitorSpec]] = field(default_factory=list)  # (index, spec)
    updates: list[Update] = field(default_factory=list)
    deletes: list[CurrentMonitor] = field(default_factory=list)
    unchanged: int = 0
    kept: int = 0  # monitors no entry names, left alone (no prune)

    @property
    def empty(self) -> bool:
        return not (self.creates or self.updates or self.deletes)

    def monitors_after(self, current: int) -> int:
        return current + len(self.creates) - len(self.deletes)

    def over_limit(self, current: int, limit: int) -> str | None:
        """Why carrying the plan out would break the monitor limit, or None. A plan that
        creates nothing never does (it may bring an account over a lowered limit down)."""
        after = self.monitors_after(current)
        if self.creates and after > limit:
            return (f"Applying the file would give the account {after} monitors; its limit"
                    f" is {limit}.")
        return None


def changes(current: MonitorSpec, desired: MonitorSpec,
            same_request: SameRequest = _equal) -> tuple[str, ...]:
    """The fields in which ``desired`` differs from ``current``, in file order."""
    out: list[str] = []
    for name in ("key", "url", "alias"):
        if getattr(current, name) != getattr(desired, name):
            out.append(name)
    for table in kinds_of(current, desired):
        cur, des = current.checks.get(table), desired.checks.get(table)
        if cur is None or des is None:
            out.append(table)  # a check the monitor gains or loses (its URL's scheme)
            continue
        for name, attribute in SETTING_ATTRIBUTES[table]:
            if getattr(cur, attribute) != getattr(des, attribute):
                out.append(f"{table}.{name}")
    if not same_request(current.request, desired.request):
        out.append("request")
    if (current.assertions or None) != (desired.assertions or None):
        out.append("assertions")
    return tuple(out)


def kinds_of(*specs: MonitorSpec) -> list[str]:
    """The kinds of check any of ``specs`` has, in the API's order."""
    return [k for k in ORDER if any(k in s.checks for s in specs)] + sorted(
        {k for s in specs for k in s.checks} - set(ORDER))


def resolved(spec: MonitorSpec, current: MonitorSpec | None) -> MonitorSpec:
    """``spec`` with each ``enabled`` it leaves unstated filled in: ``current``'s (the
    monitor it updates, when it has that check) or the creation default."""
    if all(c.enabled is not None for c in spec.checks.values()):
        return spec
    checks = dict(spec.checks)
    for kind, settings in spec.checks.items():
        if settings.enabled is None:
            now = None if current is None else current.checks.get(kind)
            enabled = enabled_on_create(kind, spec.scheme) if now is None else now.enabled
            checks[kind] = replace(settings, enabled=enabled)
    return replace(spec, checks=checks)


def plan(current: Sequence[CurrentMonitor], desired: Sequence[MonitorSpec], *,
         prune: bool, same_request: SameRequest = _equal) -> Plan:
    """What makes an account with ``current`` monitors (in id order) match ``desired``.

    ``desired`` must already be valid: keys unique, URLs of entries without a key unique
    (engine.monitors.file checks both). The plan's specs are :func:`resolved`."""
    by_key = {m.spec.key: m for m in current if m.spec.key is not None}
    matched: list[CurrentMonitor | None] = [None] * len(desired)
    claimed: set[int] = set()
    for i, d in enumerate(desired):
        if d.key is not None and d.key in by_key:
            matched[i] = by_key[d.key]
            claimed.add(by_key[d.key].id)
    # Unclaimed monitors by URL, those without a key first, then by id.
    by_url: dict[str, list[CurrentMonitor]] = {}
    for m in sorted(current, key=lambda m: (m.spec.key is not None, m.id)):
        if m.id not in claimed:
            by_url.setdefault(m.spec.url, []).append(m)
    order = [i for i, d in enumerate(desired) if d.key is None]
    order += [i for i, d in enumerate(desired) if d.key is not None and matched[i] is None]
    for i in order:
        candidates = by_url.get(desired[i].url)
        while candidates:
            candidate = candidates.pop(0)
            if candidate.id not in claimed:
                matched[i] = candidate
                claimed.add(candidate.id)
                break
    out = Plan()
    for i, d in enumerate(desired):
        found = matched[i]
        d = resolved(d, None if found is None else found.spec)
        if found is None:
            out.creates.append((i, d))
            continue
        diff = changes(found.spec, d, same_request)
        if diff:
            out.updates.append(Update(i, found, d, diff))
        else:
            out.unchanged += 1
    for m in current:
        if m.id not in claimed:
            if prune:
                out.deletes.append(m)
            else:
                out.kept += 1
    return out
