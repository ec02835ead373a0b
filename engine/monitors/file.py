"""The monitors-as-code file: TOML (``upwatch export`` / ``upwatch apply``) and its JSON form
(``PUT /webapi/monitors``, ``GET /webapi/monitors/export?format=json``).

The document is ``{"monitors": [entry, ...]}``; an entry is::

    [[monitors]]
    key = "shop"                     # optional: names the monitor; else its URL does
    url = "https://shop.example.com/"
    alias = "Shop"                   # default: the host

    [monitors.uptime]                # every key optional: defaults as on create
    interval = 60
    notification_threshold = 300
    recovery_threshold = 0
    enabled = true

    [monitors.certificate_health]
    interval = 3600
    expiry_threshold_days = 14
    expiry_threshold_percent = 0
    enabled = true                   # unstated: as on create (off for http), then kept

    [monitors.request]               # optional: as in the API
    method = "POST"
    body = "{}"
    [monitors.request.headers]
    Authorization = "********"       # a secret as exported: keeps the stored value

    [[monitors.assertions]]          # optional, one table per assertion
    source = "json"
    property = "$.status"
    comparison = "equals"
    target = "UP"

An omitted value means its default (the file states the whole monitor): applying a file
that drops ``alias`` sets the alias back to the host, and one without ``request`` or
``assertions`` removes the monitor's. ``request`` and ``assertions`` follow the API
(:mod:`engine.monitors.requests`): a request replaces the stored one whole, and a header value
``"********"`` (how export writes secrets) keeps the stored value of that header.

Values are checked by the API's own rules (:mod:`engine.monitors.validation`), so a file
accepts exactly what the API accepts. A check table's keys are the API's check update
fields (``validation.CHECK_UPDATE_FIELDS``) and ``enabled``; a feature that adds a check
setting adds it there and to ``plan.SETTING_ATTRIBUTES``, and one that adds a per-monitor
field adds it to :data:`MONITOR_FIELDS` (a create-body field: :func:`validate_document`
hands top-level fields to ``validate_monitor_create`` and ``requestconfig.validate``).

A file is UTF-8 text of at most :data:`MAX_FILE_BYTES` (:func:`decode_file`); anything
else, TOML that does not parse, or TOML nested too deeply to read is an invalid file,
ValidationFailed under ``file`` with one line saying why.

Errors are keyed ``monitors[<index>].<field>`` (index from 0, as in the JSON form); for the
TOML text :class:`LineMap` turns such a key into the line it points at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import tomli

from engine.monitors import requests as requestconfig
from engine.monitors import schemes, validation
from engine.monitors.checkset import DOMAIN, ORDER, checks_of
from engine.monitors.domain_settings import shown_thresholds, stored_thresholds
from engine.monitors.plan import SETTING_ATTRIBUTES, CheckSettings, CurrentMonitor, MonitorSpec
from engine.runtime.errors import ValidationFailed
from engine.runtime.settings import Plan

MONITORS = "monitors"
HEARTBEATS = "heartbeats"  # engine.monitors.heartbeat_file
UPTIME = "uptime"
CERTIFICATE = "certificate_health"
# Top-level fields of an entry besides its check tables.
MONITOR_FIELDS: tuple[str, ...] = ("key", "url", "alias", "request", "assertions")
# The check tables an entry may hold (each only when the monitor has that check:
# checkset.checks_of), and their keys.
CHECK_FIELDS: dict[str, tuple[str, ...]] = {
    kind: (*validation.CHECK_UPDATE_FIELDS[kind], "enabled") for kind in ORDER
}
# The largest file read: ten thousand monitors are about 2 MB (the API's monitor set body
# takes the same).
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_KEY_LENGTH = 128
# Printable, no spaces: a key is typed on command lines and shown in plans. Identifiers
# (token_urlsafe) fit: export uses them as keys.
KEY_PATTERN = r"^[A-Za-z0-9._:/@+-]+$"
_KEY = re.compile(KEY_PATTERN)


def entry_field(index: int, name: str) -> str:
    """The error key of ``name`` (``url``, ``uptime.interval``) in entry ``index``."""
    return f"{MONITORS}[{index}].{name}" if name else f"{MONITORS}[{index}]"


# --- reading -----------------------------------------------------------------------------


def _invalid_file(message: str) -> ValidationFailed:
    return ValidationFailed({"file": [message]})


def decode_file(data: bytes) -> str:
    """A file's bytes as text; ValidationFailed under ``file`` when they are over
    :data:`MAX_FILE_BYTES` or not UTF-8 (a byte order mark is allowed and dropped)."""
    if len(data) > MAX_FILE_BYTES:
        raise _invalid_file(f"The file is larger than {MAX_FILE_BYTES // 2**20} MiB.")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _invalid_file(
            f"Not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line} cannot be read."
        ) from None


def parse_toml(text: str) -> dict[str, Any]:
    """The TOML text as a document; ValidationFailed under ``file`` (with TOML's own line
    and column) when it is not TOML, or nests values too deeply to have the JSON form
    (orjson's limit of 255 levels; a valid file nests five). tomli rather than the
    standard library's tomllib (the same parser): its compiled wheel reads ten thousand
    monitors in a third of the time."""
    if len(text) > MAX_FILE_BYTES:
        raise _invalid_file(f"The file is larger than {MAX_FILE_BYTES // 2**20} MiB.")
    too_deep = _invalid_file("Not a monitors file: its values are nested too deeply.")
    try:
        doc = tomli.loads(text)
    except tomli.TOMLDecodeError as exc:
        raise _invalid_file(f"Not valid TOML: {exc}.") from None
    except RecursionError:
        raise too_deep from None
    try:
        orjson.dumps(doc)  # ten thousand monitors in about 10 ms
    except orjson.JSONEncodeError as exc:
        if "ecursion" in str(exc):
            raise too_deep from None
        # Anything else (an integer beyond 64 bits) is a value validation refuses.
    return doc


def validate_key(value: Any, field: str = "key") -> str:
    if not isinstance(value, str):
        raise ValidationFailed({field: [f"The {field} must be a string."]})
    if not value or len(value) > MAX_KEY_LENGTH or not _KEY.match(value):
        raise ValidationFailed({field: [
            f"The {field} must be 1 to {MAX_KEY_LENGTH} letters, digits or ._:/@+-."]})
    return value


def _as_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationFailed({field: [f"The {field} must be true or false."]})
    return value


def _prefixed(exc: ValidationFailed, prefix: str, rename: Mapping[str, str] | None = None,
              ) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, messages in exc.errors.items():
        name = (rename or {}).get(key, key)
        out.setdefault(f"{prefix}.{name}", []).extend(messages)
    return out


_Checked = tuple[CheckSettings | None, dict[str, list[str]]]


def _check_settings(table: Any, kind: str, plan: Plan) -> _Checked:
    """One check table through the API's check-update rules: the settings, or errors keyed
    from the table's name (``uptime.interval``)."""
    errors: dict[str, list[str]] = {}
    if table is None:
        table = {}
    if not isinstance(table, dict):
        return None, {kind: [f"The {kind} entry must be a table."]}
    for name in table:
        if name not in CHECK_FIELDS[kind]:
            errors[f"{kind}.{name}"] = [
                f"Unknown key {name!r} in {kind}; known: {', '.join(CHECK_FIELDS[kind])}."]
    body = {k: v for k, v in table.items() if k in CHECK_FIELDS[kind] and k != "enabled"}
    update: validation.CheckUpdate | None = None
    try:
        update = validation.validate_check_update(body, kind, plan)
    except ValidationFailed as exc:
        errors.update(_prefixed(exc, kind))
    # An unstated ``enabled`` of a check other than uptime is None: the plan resolves it
    # (created as the API creates it, else left as it is).
    enabled: bool | None = True if kind == UPTIME else None
    if "enabled" in table:
        try:
            enabled = _as_bool(table["enabled"], "enabled")
        except ValidationFailed as exc:
            errors.update(_prefixed(exc, kind))
    if errors or update is None:
        return None, errors
    if kind == UPTIME:
        interval = update.interval or validation.default_interval(plan)
        threshold = update.notification_threshold_s
        threshold_s = validation.DEFAULT_THRESHOLD if threshold is None else threshold
    else:
        interval = update.interval or validation.check_interval(kind, plan)
        threshold_s = update.notification_threshold_s or 0
    return CheckSettings(interval=interval, threshold_s=threshold_s, enabled=enabled,
                         recovery_s=update.recovery_threshold_s or 0,
                         expiry_percent=update.expiry_threshold_percent or 0,
                         expiry_days=stored_thresholds(update.expiry_threshold_days)), {}


class _CheckCache:
    """Check tables already read in this document: thousands of monitors usually share a
    few, and each is checked once. Keyed by value AND type (``1`` is not ``true``)."""

    def __init__(self, plan: Plan) -> None:
        self._plan = plan
        self._seen: dict[Any, _Checked] = {}

    def read(self, table: Any, kind: str) -> _Checked:
        key: Any = None
        if table is None:
            key = (kind,)
        elif isinstance(table, dict) and all(
                isinstance(v, str | int | float | bool) for v in table.values()):
            key = (kind, *((k, type(v), v) for k, v in table.items()))
        if key is None:
            return _check_settings(table, kind, self._plan)
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = _check_settings(table, kind, self._plan)
        return found


@dataclass(frozen=True, slots=True)
class _Read:
    """One entry as read: its spec when valid, and its name (key, or normalised URL) as far
    as it could be read, for the duplicate checks even of an entry with other errors."""

    spec: MonitorSpec | None
    key: str | None
    url: str | None


def _entry(raw: Any, index: int, plan: Plan, checks: _CheckCache,
           errors: dict[str, list[str]]) -> _Read:
    prefix = entry_field(index, "")
    if not isinstance(raw, dict):
        errors[prefix] = ["Each monitor must be a table (an object)."]
        return _Read(None, None, None)
    before = len(errors)
    known = MONITOR_FIELDS + tuple(CHECK_FIELDS)
    for name in raw:
        if name not in known:
            errors.setdefault(f"{prefix}.{name}", []).append(
                f"Unknown key {name!r}; known: {', '.join(known)}.")
    key: str | None = None
    if raw.get("key") is not None:
        try:
            key = validate_key(raw["key"])
        except ValidationFailed as exc:
            errors.update(_prefixed(exc, prefix))
    # The API's create rules for the monitor's own fields (url, alias and any a feature
    # adds); check settings come from the tables below.
    body = {k: v for k, v in raw.items() if k in MONITOR_FIELDS and k != "key"}
    create: validation.MonitorCreate | None = None
    config = requestconfig.Config(None, None)
    try:
        create, config = schemes.validated(
            body, True, lambda: validation.validate_monitor_create(body, plan))
    except ValidationFailed as exc:
        errors.update(_prefixed(exc, prefix))
    # The monitor's checks; before its URL is known, every kind's table is read for errors.
    kinds = CHECK_FIELDS if create is None else checks_of(create.target.scheme,
                                                          create.target.host)
    settings: dict[str, CheckSettings] = {}
    for kind in CHECK_FIELDS:
        if kind not in kinds:
            if raw.get(kind) is not None:
                scheme = create.target.scheme if create is not None else ""
                errors.setdefault(f"{prefix}.{kind}", []).append(
                    f"A {scheme}:// monitor has no {kind} check.")
            continue
        got, table_errors = checks.read(raw.get(kind), kind)
        for name, messages in table_errors.items():
            errors.setdefault(f"{prefix}.{name}", []).extend(messages)
        if got is not None:
            settings[kind] = got
    url = create.target.url if create is not None else None
    if len(errors) > before or create is None or len(settings) != len(kinds):
        return _Read(None, key, url)
    t = create.target
    return _Read(MonitorSpec(key=key, url=t.url, scheme=t.scheme, host=t.host, port=t.port,
                             alias=create.alias, checks=settings,
                             request=config.request, assertions=config.assertions),
                 key, url)


def validate_document(doc: Any, plan: Plan) -> list[MonitorSpec]:
    """Every entry of the document, validated and normalised, in file order. Raises
    ValidationFailed with every error of every entry (nothing is half-read): unknown keys,
    values the API refuses (an interval the plan does not allow among them), a key used
    twice, and the same URL twice among entries without a key."""
    if not isinstance(doc, dict):
        raise ValidationFailed({"body": ["The body must be a JSON object."]})
    errors: dict[str, list[str]] = {}
    for name in doc:
        if name not in (MONITORS, HEARTBEATS):
            errors[name] = [f"Unknown key {name!r}; the file holds only {MONITORS!r} and"
                            f" {HEARTBEATS!r}."]
    raw = doc.get(MONITORS, [])
    if not isinstance(raw, list):
        errors[MONITORS] = [f"The {MONITORS} entry must be a list of monitors."]
        raw = []
    checks = _CheckCache(plan)
    read = [_entry(r, i, plan, checks, errors) for i, r in enumerate(raw)]
    keys: dict[str, int] = {}
    urls: dict[str, int] = {}
    for i, r in enumerate(read):
        if r.key is not None:
            if r.key in keys:
                errors.setdefault(entry_field(i, "key"), []).append(
                    f"The key {r.key!r} is already used by {entry_field(keys[r.key], '')}.")
            else:
                keys[r.key] = i
        elif r.url is not None and not (isinstance(raw[i], dict) and raw[i].get("key")):
            if r.url in urls:
                errors.setdefault(entry_field(i, "url"), []).append(
                    f"The url {r.url} is already named by {entry_field(urls[r.url], '')}; "
                    "give each monitor of the same URL its own key.")
            else:
                urls[r.url] = i
    if errors:
        raise ValidationFailed(errors, f"{_count(errors)} in the monitors file.")
    return [r.spec for r in read if r.spec is not None]


def _count(errors: Mapping[str, list[str]]) -> str:
    n = sum(len(v) for v in errors.values())
    return "1 error" if n == 1 else f"{n} errors"


# --- writing -----------------------------------------------------------------------------


def entry_of(spec: MonitorSpec, *, key: str | None = None) -> dict[str, Any]:
    """The JSON form of one monitor (a monitor the account has: stored request and
    assertions), every value explicit. ``key`` overrides the spec's."""
    entry: dict[str, Any] = {}
    k = key if key is not None else spec.key
    if k is not None:
        entry["key"] = k
    entry["url"] = spec.url
    entry["alias"] = spec.alias
    # A stored request and assertions as the API shows them (secret values masked), less
    # their nulls (TOML has none; absent means the same); left out when not set, so that a
    # file without them means a monitor without them.
    if spec.request is not None:
        entry["request"] = _no_nulls(requestconfig.shown_request(spec.request) or {})
    if spec.assertions:
        entry["assertions"] = [
            _no_nulls(a) for a in requestconfig.shown_assertions(spec.assertions) or []]
    for kind in ORDER:
        settings = spec.checks.get(kind)
        if settings is not None:
            entry[kind] = _table_of(kind, settings)
    return entry


def _table_of(kind: str, settings: CheckSettings) -> dict[str, Any]:
    """A check table, every key of ``plan.SETTING_ATTRIBUTES[kind]`` in its order."""
    table: dict[str, Any] = {}
    for name, attribute in SETTING_ATTRIBUTES[kind]:
        value = getattr(settings, attribute)
        if kind == DOMAIN and name == "expiry_threshold_days":
            table[name] = shown_thresholds(value)  # a list of days, the defaults written out
        else:
            table[name] = (value // validation.SECONDS_PER_DAY if name.endswith("_days")
                           else value)
    return table


def _no_nulls(value: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if v is not None}


def export_document(monitors: Iterable[CurrentMonitor]) -> dict[str, Any]:
    """The JSON form of an account's monitors (in id order). A monitor without a key whose
    URL another monitor shares is written with its identifier as key, so that the file
    stays valid (one URL names one monitor) and applying it keeps them apart."""
    monitors = list(monitors)
    seen: dict[str, int] = {}
    for m in monitors:
        if m.spec.key is None:
            seen[m.spec.url] = seen.get(m.spec.url, 0) + 1
    return {MONITORS: [
        entry_of(m.spec, key=m.identifier if m.spec.key is None and seen[m.spec.url] > 1
                 else None)
        for m in monitors]}


def export_header(account_id: int, account_name: str, when: str | None) -> str:
    """The comment at the top of an exported file."""
    return (f"Upwatch monitors of account {account_id} ({account_name}), exported {when} UTC.\n"
            f"Apply with: upwatch apply FILE --account {account_id}")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # finite (validated): repr is a TOML float
        return repr(value)
    if isinstance(value, list):  # of scalars (a domain check's days)
        return "[" + ", ".join(map(_toml_value, value)) + "]"
    text = str(value)
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(name: str) -> str:
    return name if _BARE_KEY.match(name) else _toml_value(name)


def _toml_table(lines: list[str], path: str, table: Mapping[str, Any], *,
                array: bool = False) -> None:
    """``table`` under ``[path]`` (``[[path]]`` with ``array``): its values, then its
    tables, then its lists of tables. None (no TOML form) and empty tables are left out:
    read back, both mean what they meant."""
    lines.append(f"[[{path}]]" if array else f"[{path}]")
    tables: list[tuple[str, Any]] = []
    for name, value in table.items():
        if value is None:
            continue
        if isinstance(value, dict) or (
                isinstance(value, list) and value and isinstance(value[0], dict)):
            tables.append((name, value))
        else:
            lines.append(f"{_toml_key(name)} = {_toml_value(value)}")
    for name, value in tables:
        if isinstance(value, dict):
            if value:
                _toml_table(lines, f"{path}.{_toml_key(name)}", value)
        else:
            for item in value:
                _toml_table(lines, f"{path}.{_toml_key(name)}", item, array=True)


def render_toml(doc: Mapping[str, Any], header: str = "") -> str:
    """The document as TOML in the layout of the module docstring (a few lines of our own:
    the format is flat, and we choose the order and comments)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for entry in doc.get(MONITORS, []):
        lines.append("")
        _toml_table(lines, MONITORS, entry, array=True)
    for entry in doc.get(HEARTBEATS, []):
        lines.append("")
        _toml_table(lines, HEARTBEATS, entry, array=True)
    return "\n".join(lines).lstrip("\n") + "\n"


# --- lines ---------------------------------------------------------------------------------


_HEADER = re.compile(r"^\s*\[\[\s*monitors\s*\]\]\s*(#.*)?$")
_TABLE = re.compile(r"^\s*\[\s*monitors\s*\.\s*([A-Za-z0-9_-]+(?:\s*\.\s*[A-Za-z0-9_-]+)*)"
                    r"\s*\]\s*(#.*)?$")
_ARRAY = re.compile(r"^\s*\[\[\s*monitors\s*\.\s*([A-Za-z0-9_-]+)\s*\]\]\s*(#.*)?$")
_OTHER_TABLE = re.compile(r"^\s*\[")
_ASSIGN = re.compile(r'^\s*([A-Za-z0-9_-]+|"[^"\\]*")\s*=')
_INDEX = re.compile(r"^monitors\[(\d+)\](?:\.(.*))?$")


@dataclass
class LineMap:
    """Where each entry and each of its keys sit in a TOML text written in the documented
    layout (``[[monitors]]`` blocks with ``[monitors.<check>]`` tables). A key it cannot
    place (an inline table, say) falls back to its entry's line. The n-th
    ``[[monitors.assertions]]`` of an entry (from 0) is ``assertions.<n>``, as the API's
    field paths name it."""

    entries: list[int]
    keys: dict[tuple[int, str], int]

    @classmethod
    def of(cls, text: str) -> LineMap:
        entries: list[int] = []
        keys: dict[tuple[int, str], int] = {}
        table = ""
        arrays: dict[str, int] = {}
        for n, line in enumerate(text.splitlines(), start=1):
            if _HEADER.match(line):
                entries.append(n)
                table = ""
                arrays = {}
                continue
            m = _ARRAY.match(line)
            if m and entries:
                name = m.group(1)
                arrays[name] = arrays.get(name, -1) + 1
                table = f"{name}.{arrays[name]}"
                keys.setdefault((len(entries) - 1, name), n)
                keys.setdefault((len(entries) - 1, table), n)
                continue
            m = _TABLE.match(line)
            if m and entries:
                table = re.sub(r"\s+", "", m.group(1))
                keys.setdefault((len(entries) - 1, table), n)
                continue
            if _OTHER_TABLE.match(line):
                table = "?"
                continue
            m = _ASSIGN.match(line)
            if m and entries and table != "?":
                key = m.group(1).strip('"')
                name = f"{table}.{key}" if table else key
                keys.setdefault((len(entries) - 1, name), n)
        return cls(entries, keys)

    def line_of(self, error_key: str) -> int | None:
        """The line an error key (``monitors[3].uptime.interval``) points at."""
        m = _INDEX.match(error_key)
        if m is None:
            return None
        index = int(m.group(1))
        if index >= len(self.entries):
            return None
        name = m.group(2) or ""
        while name:
            if (index, name) in self.keys:
                return self.keys[(index, name)]
            name = name.rpartition(".")[0]
        return self.entries[index]
