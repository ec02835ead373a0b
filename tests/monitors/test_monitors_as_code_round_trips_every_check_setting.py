"""Every setting a check takes through the API (``PUT /webapi/checks/{id}``: its fields as
``validation.CHECK_UPDATE_FIELDS`` defines them), and every field of the monitor update
(``PUT /webapi/monitors/{id}``), is a key of a monitors file: set through the API, it is
exported, applies back unchanged (over HTTP and with ``upwatch apply``) and exports the
same; set by a file, the API shows it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.monitors import file as monitorfile
from engine.monitors import plan as monitorplan
from engine.monitors import schemes, validation
from engine.monitors.validation import CHECK_UPDATE_FIELDS, CheckUpdate, validate_check_update
from engine.runtime.settings import Plan
from tests.support.cli import upwatch

ALLOW = {"UPWATCH_ALLOW_PRIVATE_TARGETS": "true"}
EVERY_SETTING = [(kind, name) for kind, names in CHECK_UPDATE_FIELDS.items() for name in names]
# Two values other than the default for each check setting. A setting the API gains without
# values here fails these tests (KeyError) until it has them, and then until it round-trips.
FIRST = {"interval": 300, "notification_threshold": 60, "recovery_threshold": 120,
         "expiry_threshold_days": 14, "expiry_threshold_percent": 33}
SECOND = {"interval": 900, "notification_threshold": 600, "recovery_threshold": 300,
          "expiry_threshold_days": 30, "expiry_threshold_percent": 20}
# A kind's setting whose values are not the ones above (a domain check's thresholds are a
# list of days).
FIRST_OF = {("domain_expiry", "expiry_threshold_days"): [60, 21, 7]}
SECOND_OF = {("domain_expiry", "expiry_threshold_days"): [10, 3]}
# How the API's monitor shows a setting whose file name or unit differs: (field, factor).
SHOWN_AS = {("certificate_health", "expiry_threshold_days"): ("notification_threshold", 86400)}


def first(kind: str, name: str) -> Any:
    return FIRST_OF.get((kind, name), FIRST[name])


def second(kind: str, name: str) -> Any:
    return SECOND_OF.get((kind, name), SECOND[name])
# A value for each field the monitor update takes, and how export writes it (secret
# header values masked). A field the update gains without one here fails the tests.
MONITOR_VALUES: dict[str, Any] = {
    "url": "https://b.example/health",
    "alias": "Bee",
    "request": {"method": "POST", "headers": {"Authorization": "Bearer abc", "Accept": "*/*"},
                "body": "{}", "follow_redirects": False},
    "assertions": [{"source": "status_code", "comparison": "equals", "target": 200}],
}
MONITOR_EXPORTED = {**MONITOR_VALUES, "request": {
    **MONITOR_VALUES["request"], "headers": {"Authorization": "********", "Accept": "*/*"}}}


class _Reading(dict[str, Any]):
    """A body that remembers every field the validator reads."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def _monitor_update_fields() -> set[str]:
    """The fields the API's monitor update reads (validation and requests, as
    ``PUT /webapi/monitors/{id}`` calls them)."""
    body = _Reading()
    schemes.validated(body, False, lambda: validation.validate_monitor_update(body))
    return body.read


def test_the_file_holds_every_field_the_monitor_update_reads() -> None:
    fields = _monitor_update_fields()
    assert fields == set(MONITOR_VALUES)
    assert fields <= set(monitorfile.MONITOR_FIELDS)


@pytest.mark.parametrize("kind", list(CHECK_UPDATE_FIELDS))
def test_the_file_holds_exactly_the_fields_the_check_update_reads(kind: str) -> None:
    body = _Reading()
    validate_check_update(body, kind, Plan())
    every = {name for names in CHECK_UPDATE_FIELDS.values() for name in names}
    # Read and not defined: a setting the file would not know.
    assert body.read <= every
    assert set(CHECK_UPDATE_FIELDS[kind]) <= body.read
    for name in CHECK_UPDATE_FIELDS[kind]:  # each defined field is taken, none ignored
        assert validate_check_update({name: first(kind, name)}, kind, Plan()) != CheckUpdate(
            None, None), name
    assert monitorfile.CHECK_FIELDS[kind] == (*CHECK_UPDATE_FIELDS[kind], "enabled")
    assert [name for name, _ in monitorplan.SETTING_ATTRIBUTES[kind]] == list(
        monitorfile.CHECK_FIELDS[kind])


async def _create(client: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json={"url": url}) as r:
        assert r.status == 201, await r.text()
        return dict(await r.json())


async def _export(client: aiohttp.ClientSession, form: str = "json") -> Any:
    async with client.get("/webapi/monitors/export", params={"format": form}) as r:
        assert r.status == 200, await r.text()
        return await (r.json() if form == "json" else r.text())


async def _apply(client: aiohttp.ClientSession, doc: Any) -> dict[str, Any]:
    async with client.put("/webapi/monitors", json=doc) as r:
        body = await r.json()
        assert r.status == 200, body
        return dict(body)


def _without_header(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


async def test_every_setting_set_through_the_api_survives_export_and_apply(
    client: aiohttp.ClientSession, store: Store, account: tuple[Any, str], db_dsn: str,
    tmp_path: Path,
) -> None:
    monitor = await _create(client, "https://a.example/")
    async with client.put(f"/webapi/monitors/{monitor['id']}", json={
            name: MONITOR_VALUES[name] for name in _monitor_update_fields()}) as r:
        assert r.status == 200, await r.text()
    for kind, names in CHECK_UPDATE_FIELDS.items():
        check_id = monitor["checks"][kind]["id"]
        async with client.put(f"/webapi/checks/{check_id}",
                              json={name: first(kind, name) for name in names}) as r:
            assert r.status == 200, await r.text()
        async with client.post(f"/webapi/checks/{check_id}/disable") as r:
            assert r.status == 200

    [entry] = (await _export(client))["monitors"]
    for name in _monitor_update_fields():
        assert entry[name] == MONITOR_EXPORTED[name], name
    for kind, name in EVERY_SETTING:
        assert entry[kind][name] == first(kind, name), (kind, name)
    assert entry["uptime"]["enabled"] is False and entry["certificate_health"]["enabled"] is False

    # The TOML export, read back and applied: nothing changes, and it exports the same.
    text = await _export(client, "toml")
    result = await _apply(client, tomllib.loads(text))
    assert (result["created"], result["updated"], result["unchanged"]) == ([], [], 1)
    assert _without_header(await _export(client, "toml")) == _without_header(text)

    # The same with the command line: export, apply, export.
    path = tmp_path / "monitors.toml"
    res = upwatch("export", str(path), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 0, res.stderr
    assert _without_header(path.read_text()) == _without_header(text)
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 0, res.stderr
    assert res.stdout.endswith(
        ": 0 monitors were created, 0 were updated, 0 were deleted, 1 was unchanged.\n")
    assert (await _export(client))["monitors"] == [entry]


def _shown(check: dict[str, Any], kind: str, name: str) -> Any:
    field, factor = SHOWN_AS.get((kind, name), (name, 1))
    value = check.get(field, 0)
    return value if factor == 1 else value // factor


@pytest.mark.parametrize(("kind", "name"), EVERY_SETTING)
async def test_a_setting_a_file_changes_is_the_one_update_and_the_api_shows_it(
    client: aiohttp.ClientSession, kind: str, name: str,
) -> None:
    table = {n: first(kind, n) for n in CHECK_UPDATE_FIELDS[kind]}
    doc = {"monitors": [{"key": "a", "url": "https://a.example/", kind: table}]}
    [created] = (await _apply(client, doc))["created"]
    async with client.get(f"/webapi/monitors/{created['id']}") as r:
        shown = (await r.json())["checks"][kind]
    assert {n: _shown(shown, kind, n) for n in table} == table

    table[name] = second(kind, name)
    result = await _apply(client, doc)
    assert [u["changes"] for u in result["updated"]] == [[f"{kind}.{name}"]]
    async with client.get(f"/webapi/monitors/{created['id']}") as r:
        shown = (await r.json())["checks"][kind]
    assert {n: _shown(shown, kind, n) for n in table} == table
    [entry] = (await _export(client))["monitors"]
    assert {n: entry[kind][n] for n in table} == table
    assert (await _apply(client, doc))["unchanged"] == 1
