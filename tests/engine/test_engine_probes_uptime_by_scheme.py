"""The uptime kind probes each check through the prober of its URL's scheme: a non-HTTP
probe that answers is ok (its figures in the check's meta), one that fails goes down, and
the confirmation of that failure probes again through the same scheme's prober."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.cluster.peer import _outcome_from_json, _outcome_to_json
from engine.db.store import Store
from engine.domain.outcomes import HttpOutcome
from engine.kinds.registry import registered
from tests.support.engine_support import add_monitor, fast_settings, running_engine, wait_status
from tests.support.schemes import EchoProber, EchoServer, echo_registered
from tests.support.targets import HttpTarget


async def test_each_scheme_probes_through_its_own_prober(
    store: Store, account: tuple[Any, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc, _ = account
    echo = EchoProber()
    settings = fast_settings(tmp_path)
    with echo_registered(monkeypatch):
        async with EchoServer() as server, HttpTarget() as site:
            _, echo_check, _ = await add_monitor(
                store, acc.id, f"echo://127.0.0.1:{server.port}")
            _, http_check, _ = await add_monitor(store, acc.id, site.url("/"))
            async with running_engine(store, settings, uptime_probers={"echo": echo}):
                ok = await wait_status(store, echo_check, "ok")
                assert ok["error"] is None
                assert ok["meta"] == {"http_status_code": None, "reply": "pong"}
                http_ok = await wait_status(store, http_check, "ok")
                assert http_ok["meta"] == {"http_status_code": 200}
                # A wrong answer is a failed assertion, in its words.
                server.reply = "pang"
                down = await wait_status(store, echo_check, "down")
                assert down["error"] == "replied 'pang'"
                server.reply = "pong"
                await wait_status(store, echo_check, "ok")
                # Nothing listening: down, confirmed by a second echo probe.
                await server.close()
                seen = len(echo.probed)
                down = await wait_status(store, echo_check, "down")
                assert down["error"] == "connection refused"
                assert down["detected_by"] and down["outage_id"] is not None
                assert len(echo.probed) >= seen + 2
    assert set(echo.probed) == {f"echo://127.0.0.1:{server.port}"}


async def test_the_reprober_dispatches_by_scheme() -> None:
    echo = EchoProber()
    kinds = registered(None, None, uptime={"echo": echo})
    async with EchoServer() as server:
        got = await kinds.reprober.probe(f"echo://127.0.0.1:{server.port}")
        assert got.error is None and got.details == {"reply": "pong"}
    missing = await kinds.reprober.probe("gopher://127.0.0.1:70")
    assert missing.error == "no prober for gopher:// on this node"
    assert echo.probed == [f"echo://127.0.0.1:{server.port}"]


def test_a_peers_answer_carries_the_figures() -> None:
    answered = HttpOutcome(None, None, 3.5, None, 1.0, None, 2.0, details={"reply": "pong"})
    again = _outcome_from_json(orjson.loads(orjson.dumps(_outcome_to_json(answered))))
    assert again == answered
    http = HttpOutcome(200, None, 3.5, 0.5, 1.0, None, 2.0)
    assert "details" not in _outcome_to_json(http)
    assert _outcome_from_json(_outcome_to_json(http)) == http
    with pytest.raises(ValueError):
        _outcome_from_json({"total_ms": 1.0})
