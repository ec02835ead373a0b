"""Packet loss made by the kernel, inside a private network namespace: nftables dropping
every second echo request, then all of them, and ``tc ... netem loss`` where the kernel has
netem. Also: unprivileged ICMP datagram sockets where ``ping_group_range`` allows them."""

from __future__ import annotations

from tests.support.ping_lab import run_lab


def test_every_second_request_dropped_is_half_the_requests_lost() -> None:
    got = run_lab("nft_loss")
    half = got["half"]
    assert half["error"] is None  # loss under 100 %: up
    assert half["figures"]["sent"] == 4
    assert half["figures"]["received"] == 2
    assert half["figures"]["loss"] == 50.0
    assert half["figures"]["rtt_avg"] is not None


def test_every_request_dropped_is_a_failure_in_words() -> None:
    none = run_lab("nft_loss")["none"]
    assert none["error"] == "100 % packet loss: no reply to 2 echo requests in 1 s"
    assert none["figures"]["received"] == 0
    assert none["figures"]["loss"] == 100.0
    assert none["figures"]["rtt_avg"] is None
    # bounded by the probe timeout (1 s), not longer
    assert 900 <= none["total_ms"] < 2500


def test_netem_loss_of_every_packet_is_a_failure() -> None:
    got = run_lab("netem_loss")["result"]
    assert got["error"].startswith("100 % packet loss")
    assert got["figures"]["loss"] == 100.0


def test_unprivileged_datagram_sockets_ping_both_families() -> None:
    got = run_lab("datagram")
    assert got["access"] == {"ipv4": "datagram", "ipv6": "datagram", "reason": None}
    assert got["modes"] == {"ipv4": "datagram", "ipv6": "datagram"}
    for family in ("v4", "v6"):
        assert got[family]["error"] is None
        assert got[family]["figures"]["received"] == 3
        assert got[family]["figures"]["loss"] == 0.0


def test_a_target_the_kernel_cannot_route_to_fails_in_words_at_once() -> None:
    got = run_lab("unreachable")["result"]
    assert got["error"] == "host unreachable"
    assert got["figures"] is None  # nothing left the host
    assert got["total_ms"] < 1000  # refused at each send, not waited for until the timeout
