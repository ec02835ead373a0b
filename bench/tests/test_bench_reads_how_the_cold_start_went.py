"""`upwatch bench internet` says how the engine's first interval went: the bench DNS server's
answers per second and how late they went out, the datagrams a process's full UDP sockets
dropped, and the engine child's warm-up a second at a time."""

from __future__ import annotations

import asyncio
import socket
import time

import dns.message

from upwatch_bench.roles.dnsserver import DnsServer
from upwatch_bench.roles.engine_run import _warmup_timeline, dropped_since, udp_drops


async def test_the_dns_server_says_how_many_answers_went_out_each_second_and_how_late() -> None:
    async with DnsServer(zone="names.test", addresses=["127.0.0.1"], latency=0.05) as server:
        client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        client.settimeout(5)
        try:
            t0 = time.time()
            loop = asyncio.get_running_loop()
            for i in range(5):
                q = dns.message.make_query(f"m{i}.names.test", "A")
                client.sendto(q.to_wire(), (server.host, server.port))
            got = 0
            while got < 5:
                await loop.sock_recv(client, 512)
                got += 1
        finally:
            client.close()
        rows = server.timeline(int(t0) - 1, time.time() + 1)
        assert sum(r[1] for r in rows) == 5
        # Answers leave after the latency, late by at most a scheduling delay.
        assert all(0 <= r[2] < 1000 for r in rows), rows
        assert server.timeline(time.time() + 10, time.time() + 20) == []


def test_datagrams_dropped_at_a_full_socket_are_counted_for_the_process() -> None:
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a few datagrams
    sink.bind(("127.0.0.1", 0))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        before = udp_drops()
        for _ in range(200):
            sender.sendto(b"x" * 200, sink.getsockname())
        assert dropped_since(before, udp_drops()) >= 100
        assert dropped_since(udp_drops(), before) == 0
    finally:
        sink.close()
        sender.close()


class _Engine:
    in_flight = 7


async def test_the_warm_up_timeline_has_a_row_a_second() -> None:
    from engine.runtime.metrics import Metrics

    rows = await _warmup_timeline(_Engine(), Metrics(), 1.5)
    assert len(rows) == 2  # one after a second, one at the end
    assert all(len(r) == 9 and r[2] == 7 and 0 <= r[8] < 1.5 for r in rows)
    assert rows[0][0] >= 1.0 and rows[-1][0] >= 1.5
