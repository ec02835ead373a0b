"""Replies from another address, duplicate replies, a late reply to an earlier request and
one after its probe ended: each counted once, for the request it answers, or not at all.
The kernel of a private namespace answers nothing; a scripted responder answers instead
(tests/support/ping_lab.py), against raw and datagram sockets alike."""

from __future__ import annotations

import pytest

from tests.support.ping_lab import run_lab


@pytest.mark.parametrize("mode", ["raw", "datagram"])
def test_hostile_replies_are_counted_right(mode: str) -> None:
    got = run_lab(f"hostile_{mode}")
    assert got["modes"] == {"ipv4": mode}
    first = got["first"]["figures"]
    # request 0 answered late (after request 1's reply), request 1 answered (plus a stray
    # from 127.0.0.3 and a duplicate), request 2 never within the probe
    assert first["sent"] == 3
    assert first["received"] == 2
    assert first["loss"] == 33.3
    assert first["duplicates"] == 1
    assert first["strays"] == 1
    # request 0's reply came about 0.15 s after it was sent, and is credited to it
    assert first["rtt_max"] >= 100
    assert first["rtt_min"] < 100
    assert got["first"]["error"] is None
    # the first probe's last reply, arriving during the second probe, is not credited to it
    second = got["second"]["figures"]
    assert second["sent"] == 1
    assert second["received"] == 1
    assert second["duplicates"] == 0
    assert second["strays"] == 0
    assert second["rtt_min"] >= 25  # its own reply (sent 30 ms late), not the early stale one
    assert got["requests_seen"] == 4
