"""The mapping of Healthchecks' v3 check list onto heartbeats, pure: each check keeps its
uuid, simple and cron checks map to period and schedule, paused checks come disabled, and
whatever has no counterpart is listed by check name."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from engine.domain import heartbeat as hb
from engine.monitors import hcimport
from engine.runtime.errors import ValidationFailed

SIMPLE = "31365bce-8da9-4729-8ff3-aaa71d56b712"
CRON = "803f680d-e89b-492b-82ef-2be7b774a92d"


def check(**over: Any) -> dict[str, Any]:
    """A check as GET /api/v3/checks/ returns it with a read-write key."""
    base: dict[str, Any] = {
        "name": "Filesystem Backup", "slug": "filesystem-backup", "tags": "", "desc": "",
        "grace": 600, "n_pings": 1, "status": "up", "started": False,
        "last_ping": "2020-03-24T14:02:03+00:00", "next_ping": "2020-03-24T15:02:03+00:00",
        "manual_resume": False, "methods": "", "subject": "", "subject_fail": "",
        "start_kw": "", "success_kw": "", "failure_kw": "", "filter_subject": False,
        "filter_body": False, "filter_http_body": False, "filter_default_fail": False,
        "badge_url": "https://hc.example/b/2/1b9d0386.svg", "uuid": SIMPLE,
        "ping_url": f"https://hc-ping.com/{SIMPLE}",
        "update_url": f"https://hc.example/api/v3/checks/{SIMPLE}",
        "pause_url": f"https://hc.example/api/v3/checks/{SIMPLE}/pause",
        "resume_url": f"https://hc.example/api/v3/checks/{SIMPLE}/resume",
        "channels": "", "timeout": 3600,
    }
    base.update(over)
    return {k: v for k, v in base.items() if v is not ...}


def test_simple_and_cron_checks_keep_their_uuids() -> None:
    cron = check(name="Database Backup", slug="database-backup", uuid=CRON, timeout=...,
                 schedule="15 5 * * *", tz="Europe/Riga", grace=1200, status="paused")
    got = hcimport.map_checks(hcimport.read_checks(orjson.dumps({"checks": [check(), cron]})))
    assert got.skipped == [] and got.not_kept == []
    a, b = got.entries
    assert (a.key, a.ping_uuid, a.alias, a.slug, a.enabled) == (
        SIMPLE, SIMPLE, "Filesystem Backup", "filesystem-backup", True)
    assert a.config == hb.Config(grace_s=600, period_s=3600)
    assert (b.ping_uuid, b.enabled) == (CRON, False)
    assert b.config == hb.Config(grace_s=1200, schedule="15 5 * * *", time_zone="Europe/Riga")


def test_what_has_no_counterpart_is_listed_by_check_name() -> None:
    got = hcimport.map_checks([check(
        tags="backup fs", desc="hourly", methods="POST", manual_resume=True,
        channels="1bdea468-03bf-47b8-ab27-29a9dd0e4b94", filter_http_body=True,
        success_kw="SUCCESS", colour="red")])
    assert len(got.entries) == 1
    lines = got.lines()
    assert all(line.startswith(f"not kept Filesystem Backup ({SIMPLE}): ") for line in lines)
    said = "\n".join(lines)
    for field in ("tags 'backup fs'", "desc 'hourly'", "methods 'POST'", "manual_resume True",
                  "channels", "filter_http_body True", "success_kw 'SUCCESS'",
                  "colour: unknown field"):
        assert field in said
    assert len(lines) == 8


def test_checks_that_cannot_be_made_are_skipped_with_the_reason() -> None:
    got = hcimport.map_checks([
        check(name="read-only", uuid=..., unique_key="a6c7b0a8a66bed0df66abfdab3c77736861703ee"),
        check(name="bad id", uuid="nope"),
        check(name="oncalendar", uuid=CRON, timeout=..., schedule="Mon *-*-* 03:00",
              tz="UTC"),
        check(name="bad zone", uuid="0b6f3b8e-61b9-4f56-9b1c-0cf0b4cbd1f2", timeout=...,
              schedule="0 3 * * *", tz="Mars/Olympus"),
        check(name="twice"),
        check(name="again"),
        "not a check",
    ])
    assert [e.alias for e in got.entries] == ["twice"]
    why = {s.name: s.what for s in got.skipped}
    assert "read-write key" in why["read-only"]
    assert "not a UUID" in why["bad id"]
    assert "schedule" in why["oncalendar"]
    assert "time_zone" in why["bad zone"]
    assert "twice in the file" in why["again"]
    assert "not a JSON object" in why["checks[6]"]


def test_slugs_another_heartbeat_holds_are_dropped_and_ids_are_not_taken_twice() -> None:
    got = hcimport.map_checks(
        [check(), check(name="Other", uuid=CRON, slug="filesystem-backup"),
         check(name="Mine", uuid="0b6f3b8e-61b9-4f56-9b1c-0cf0b4cbd1f2", slug="Bad Slug")],
        slugs={}, owned_uuids={})
    assert [e.slug for e in got.entries] == ["filesystem-backup", None, None]
    assert [n.name for n in got.not_kept] == ["Other", "Mine"]
    # Imported again: its own slug and id are its own; held under another key, skipped.
    again = hcimport.map_checks([check()], slugs={"filesystem-backup": SIMPLE},
                                owned_uuids={SIMPLE: SIMPLE})
    assert again.entries[0].slug == "filesystem-backup" and not again.not_kept
    held = hcimport.map_checks([check()], owned_uuids={SIMPLE: "nightly"})
    assert held.entries == [] and "key 'nightly'" in held.skipped[0].what


def test_an_unnamed_check_is_named_by_its_uuid() -> None:
    [e] = hcimport.map_checks([check(name="", slug="")]).entries
    assert e.alias == SIMPLE


@pytest.mark.parametrize("data", [b"{", b"[1", b'{"checks": 3}', b"42", b'"x"'])
def test_a_file_that_is_not_a_check_list_names_the_file(data: bytes) -> None:
    with pytest.raises(ValidationFailed) as exc:
        hcimport.read_checks(data)
    assert list(exc.value.errors) == ["file"]


def test_one_check_object_and_a_bare_list_are_read_too() -> None:
    assert hcimport.read_checks(orjson.dumps(check())) == [check()]
    assert hcimport.read_checks(orjson.dumps([check()])) == [check()]
