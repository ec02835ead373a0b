"""A dns:// probe against servers that misbehave: truncated answers (asked again over TCP),
answers larger than 64 KiB, replies with another id (ignored: the real answer or the
time-out), a server that never answers, garbage. Each ends within the timeout, in words."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from engine.probes.dns import TCP_MAX_BYTES, DnsProber
from tests.support.dns_zone_server import DnsZoneServer

TIMEOUT = 0.5


@pytest.fixture
async def server() -> AsyncIterator[DnsZoneServer]:
    async with DnsZoneServer() as s:
        yield s


def prober() -> DnsProber:
    return DnsProber(timeout=TIMEOUT, allow_private=True)


async def test_a_truncated_answer_is_asked_again_over_tcp(server: DnsZoneServer) -> None:
    server.mode = "truncate"
    out = await prober().probe(server.url("www.zone.test"))
    assert out.error is None and out.assertion_error is None
    assert out.details is not None and out.details["transport"] == "tcp"
    assert sorted(out.details["answers"]) == ["192.0.2.1", "192.0.2.2"]
    assert server.queries == {"udp": 1, "tcp": 1}


async def test_an_answer_over_64_kib_comes_over_tcp_cut_and_its_meta_bounded(
    server: DnsZoneServer,
) -> None:
    out = await prober().probe(server.url("huge.zone.test", "TXT"))
    assert out.error is None and out.assertion_error is None, out
    d = out.details
    assert d is not None and d["transport"] == "tcp"
    assert 200 < d["answer_count"] < 300  # what fits in 65,535 bytes of the 300
    assert len(d["answers"]) == 20
    assert all(len(a) <= 258 for a in d["answers"])


async def test_a_reply_with_another_id_is_ignored_for_the_real_one(
    server: DnsZoneServer,
) -> None:
    server.mode = "wrong_id"
    p = prober()
    out = await p.probe(server.url("www.zone.test"))
    assert out.error is None and out.assertion_error is None
    assert p.ignored == 1


async def test_only_replies_with_another_id_end_in_the_timeout_saying_so(
    server: DnsZoneServer,
) -> None:
    server.mode = "wrong_id_only"
    out = await prober().probe(server.url("www.zone.test"))
    assert out.error == "timed out after 0.5 s (2 replies not matching the question ignored)"


@pytest.mark.parametrize("mode", ["silent", "garbage", "tcp_stall"])
async def test_a_server_that_never_answers_right_times_out(
    server: DnsZoneServer, mode: str
) -> None:
    server.mode = mode
    t = time.monotonic()
    out = await prober().probe(server.url("www.zone.test"))
    took = time.monotonic() - t
    assert out.error is not None and out.error.startswith("timed out after 0.5 s"), out.error
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 1.0
    assert out.details is None


async def test_garbage_behind_our_id_is_a_malformed_answer(server: DnsZoneServer) -> None:
    server.mode = "garbage_matching"
    out = await prober().probe(server.url("www.zone.test"))
    assert out.error is not None
    assert out.error.startswith("malformed DNS answer from 127.0.0.1 ("), out.error


async def test_a_tcp_server_sending_without_end_is_read_up_to_the_cap(
    server: DnsZoneServer,
) -> None:
    server.mode = "tcp_endless"
    out = await prober().probe(server.url("www.zone.test"))
    assert out.error == f"no matching DNS answer in {TCP_MAX_BYTES // 1024} KiB (TCP)", out.error


async def test_a_url_that_cannot_be_probed_fails_in_words() -> None:
    out = await prober().probe("dns://127.0.0.1/www.zone.test?type=ANY")
    assert out.error is not None and out.error.startswith("not a probeable dns:// URL: the type")


async def test_an_answer_to_another_question_is_ignored(server: DnsZoneServer) -> None:
    server.mode = "other_question"
    out = await prober().probe(server.url("www.zone.test"))
    assert out.error == "timed out after 0.5 s (1 reply not matching the question ignored)"


async def test_the_question_echoed_in_another_case_is_ours(server: DnsZoneServer) -> None:
    server.mode = "upper_case"
    out = await prober().probe(server.url("www.zone.test"))
    assert out.error is None and out.assertion_error is None, out
