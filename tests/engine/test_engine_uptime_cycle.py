"""Full uptime cycles through the real engine and database: outages, events with their exact
bodies (api.md section 6), parent ids, thresholds, confirmation, restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.db.store import Store
from engine.domain.outcomes import HttpOutcome
from engine.domain.timefmt import fmt, hms
from engine.scheduler.confirm import Confirmation, ConfirmTarget, LocalConfirmer
from tests.support.engine_support import (
    add_monitor,
    check_row,
    events_of,
    fast_settings,
    fetch,
    running_engine,
    wait_status,
)
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until


async def outages_of(store: Store, check_id: int) -> list[Any]:
    return await fetch(store, "SELECT * FROM outages WHERE check_id = $1 ORDER BY id", check_id)


async def test_ok_failing_down_ok_with_outage_and_both_events(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, region="eu-west")
    async with HttpTarget() as site:
        monitor_id, check_id, _ = await add_monitor(store, acc.id, site.url("/"), alias="Shop")
        async with running_engine(store, settings):
            await wait_status(store, check_id, "ok")
            site.status = 500
            down = await wait_status(store, check_id, "down")
            assert down["error"] == "HTTP 500"
            [outage] = await outages_of(store, check_id)
            assert outage["ended_at"] is None and outage["alerted"] is True
            assert outage["started_at"] == down["failing_since"]
            assert outage["detected_by"] == "eu-west" and outage["verified_via"] == "eu-west"
            assert outage["http_status_code"] == 500
            assert down["outage_id"] == outage["id"]
            [downtime] = await events_of(store, check_id)
            assert downtime["event"] == "downtime" and downtime["parent_id"] is None
            assert down["incident_event_id"] == downtime["id"]
            assert downtime["monitor_id"] == monitor_id and downtime["account_id"] == acc.id
            body = orjson.loads(downtime["body"])
            assert body == {
                "check": {
                    "name": "uptime", "status": "nok",
                    "last_check_at": body["check"]["last_check_at"],
                    "error": "HTTP 500",
                    "meta": {"http_status_code": 500, "detected_by": "eu-west",
                             "verified_via": "eu-west"},
                },
                "monitor": {"id": monitor_id, "url": site.url("/"), "alias": "Shop"},
            }
            assert len(body["check"]["last_check_at"]) == 19

            site.status = 200
            up = await wait_status(store, check_id, "ok")
            assert up["error"] is None and up["failing_since"] is None
            assert up["outage_id"] is None and up["incident_event_id"] is None
            [closed] = await outages_of(store, check_id)
            assert closed["ended_at"] is not None and closed["ended_at"] > closed["started_at"]
            downtime_row, restored = await events_of(store, check_id)
            assert restored["event"] == "uptime_restored"
            assert restored["parent_id"] == downtime_row["id"]
            body = orjson.loads(restored["body"])
            assert body["check"] == {
                "name": "uptime", "status": "ok",
                "last_check_at": fmt(closed["ended_at"]),
                "meta": {"http_status_code": 200,
                         "downtime": hms((closed["ended_at"] - closed["started_at"])
                                         .total_seconds())},
            }
            assert body["monitor"] == {"id": monitor_id, "url": site.url("/"), "alias": "Shop"}
            assert "error" not in body["check"]


async def test_threshold_delays_down_and_the_alert(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    """threshold 60 s x 0.01 = 0.6 s of confirmed downtime before down and the event."""
    acc, _ = account
    settings = fast_settings(tmp_path)
    async with HttpTarget() as site:
        _, check_id, _ = await add_monitor(store, acc.id, site.url("/"), threshold=60)
        async with running_engine(store, settings):
            await wait_status(store, check_id, "ok")
            site.status = 503
            # Confirmed but waiting: failing with an open, not alerted outage, no event.
            async def confirmed() -> Any:
                row = await check_row(store, check_id)
                return row if row["status"] == "failing" and row["outage_id"] else None

            failing = await wait_until(confirmed, what="a confirmed failing check")
            [outage] = await outages_of(store, check_id)
            assert outage["alerted"] is False
            assert await events_of(store, check_id) == []
            down = await wait_status(store, check_id, "down")
            [event] = await events_of(store, check_id)
            assert event["event"] == "downtime"
            # Not before the threshold had passed since the first failed probe.
            waited = (event["created_at"] - failing["failing_since"]).total_seconds()
            assert waited >= 0.6
            assert down["failing_since"] == failing["failing_since"]
            [outage] = await outages_of(store, check_id)
            assert outage["alerted"] is True and outage["started_at"] == down["failing_since"]


async def test_recovery_within_threshold_closes_outage_without_events(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path)
    async with HttpTarget() as site:
        _, check_id, _ = await add_monitor(store, acc.id, site.url("/"), threshold=1800)
        async with running_engine(store, settings):
            await wait_status(store, check_id, "ok")
            site.status = 500

            async def confirmed() -> Any:
                row = await check_row(store, check_id)
                return row["status"] == "failing" and row["outage_id"]

            await wait_until(confirmed, what="a confirmed failing check")
            site.status = 200
            await wait_status(store, check_id, "ok")
            [outage] = await outages_of(store, check_id)
            assert outage["ended_at"] is not None and outage["alerted"] is False
            assert await events_of(store, check_id) == []


class HealingConfirmer:
    """A real local re-probe, after the site has healed: the blip the confirmation exists
    to filter out, made deterministic."""

    def __init__(self, inner: LocalConfirmer, site: HttpTarget) -> None:
        self.inner, self.site, self.calls = inner, site, 0

    async def confirm(self, check: ConfirmTarget, first: HttpOutcome) -> Confirmation:
        self.calls += 1
        self.site.status = 200
        return await self.inner.confirm(check, first)


async def test_failure_the_confirmation_does_not_see_ends_ok_and_silent(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    from engine.probes.http import HttpProber

    acc, _ = account
    settings = fast_settings(tmp_path, region="r1")
    prober = HttpProber(timeout=2.0, user_agent="Upwatch/test", allow_private=True)
    async with HttpTarget() as site:
        confirmer = HealingConfirmer(
            LocalConfirmer(prober, region="r2", pause=0.05), site)
        _, check_id, _ = await add_monitor(store, acc.id, site.url("/"))
        async with running_engine(store, settings, confirmer=confirmer):
            await wait_status(store, check_id, "ok")
            site.status = 500
            await wait_until(lambda: confirmer.calls, what="a confirmation")

            async def confirmation_row() -> Any:
                return await fetch(
                    store, "SELECT * FROM probe_results WHERE check_id = $1 AND confirmation",
                    check_id)

            [row] = await wait_until(confirmation_row, what="the confirmation's result row")
            assert row["region"] == "r2" and row["outcome"] == 0 and row["status_code"] == 200
            failed = await fetch(
                store, "SELECT * FROM probe_results WHERE check_id = $1 AND outcome = 2",
                check_id)
            assert [r["region"] for r in failed] == ["r1"]
            ok = await wait_status(store, check_id, "ok")
            assert ok["failing_since"] is None and ok["outage_id"] is None
        assert await outages_of(store, check_id) == []
        assert await events_of(store, check_id) == []


async def test_restart_keeps_state_and_restores_under_the_first_engines_event(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path)
    async with HttpTarget() as site:
        site.status = 502
        _, check_id, _ = await add_monitor(store, acc.id, site.url("/"))
        async with running_engine(store, settings):
            down = await wait_status(store, check_id, "down")
        [downtime] = await events_of(store, check_id)
        # A new engine on the same database: still down, no second downtime event.
        async with running_engine(store, settings) as engine:
            await wait_until(
                lambda: engine.check(check_id) is not None, what="the check loaded")
            assert engine.check(check_id).state.status == "down"  # type: ignore[union-attr]
            assert engine.check(check_id).state.incident_event_id == downtime["id"]  # type: ignore[union-attr]
            start = await fetchval_results(store, check_id)
            await wait_until(
                lambda: _more_results(store, check_id, start + 3), what="more probes")
            assert len(await events_of(store, check_id)) == 1
            row = await check_row(store, check_id)
            assert row["status"] == "down" and row["failing_since"] == down["failing_since"]
            site.status = 200
            await wait_status(store, check_id, "ok")
        first, restored = await events_of(store, check_id)
        assert restored["event"] == "uptime_restored" and restored["parent_id"] == first["id"]


async def fetchval_results(store: Store, check_id: int) -> int:
    rows = await fetch(store, "SELECT count(*) AS n FROM probe_results WHERE check_id = $1",
                       check_id)
    return int(rows[0]["n"])


async def _more_results(store: Store, check_id: int, n: int) -> bool:
    return await fetchval_results(store, check_id) >= n


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_threshold_expiring_before_the_next_interval_is_probed_then(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    """Interval 86400 s (864 s here), threshold 60 s (0.6 s): the alert comes when the
    threshold expires, not an interval later."""
    acc, _ = account
    settings = fast_settings(tmp_path)
    async with HttpTarget() as site:
        site.status = 500
        _, check_id, _ = await add_monitor(store, acc.id, site.url("/"), interval=86400,
                                           threshold=60)
        async with running_engine(store, settings):
            down = await wait_status(store, check_id, "down", timeout=5)
        [event] = await events_of(store, check_id)
        after = (event["created_at"] - down["failing_since"]).total_seconds()
        assert 0.6 <= after < 3.0  # far below the 864 s interval
        # The first failure, its confirmation, the re-probe at the threshold (and, only if
        # the check's phase happened to fall in these seconds, one more ordinary probe).
        rows = await fetch(store, "SELECT confirmation FROM probe_results WHERE check_id = $1"
                                  " ORDER BY at", check_id)
        flags = [r["confirmation"] for r in rows]
        assert flags[:3] == [False, True, False] and len(flags) <= 4
