"""The test button's limits as a pure decision over ``now``: which limit refuses, and when
it would let the test start (the 429's Retry-After); places are freed when the sending
thread ends, rate tokens only by time."""

from __future__ import annotations

from engine.delivery.notify.testgate import Gate, Limits, Refused, Ticket

LIMITS = Limits(channel_burst=3, channel_every=20.0, account_at_once=2, account_burst=5,
                account_every=12.0, server_at_once=4, deadline=15.0)


def test_a_running_test_holds_its_channel_until_its_thread_ends() -> None:
    gate = Gate(LIMITS)
    first = gate.start(1, 10, now=100.0)
    assert isinstance(first, Ticket)
    again = gate.start(1, 10, now=104.0)
    assert isinstance(again, Refused) and again.limit == "channel"
    assert again.retry_after == 11.0  # the first test's deadline
    gate.finish(first)
    assert isinstance(gate.start(1, 10, now=105.0), Ticket)


def test_a_channel_takes_three_in_a_row_then_one_every_twenty_seconds() -> None:
    gate = Gate(LIMITS)
    for t in (0.0, 1.0, 2.0):
        ticket = gate.start(1, 10, now=t)
        assert isinstance(ticket, Ticket)
        gate.finish(ticket)
    refused = gate.start(1, 10, now=3.0)
    assert isinstance(refused, Refused) and refused.limit == "channel"
    # A token comes back every 20 s: by t=3 the bucket holds 0.15 of one, the rest
    # takes 17 s more.
    assert abs(refused.retry_after - 17.0) < 1e-9
    assert isinstance(gate.start(1, 10, now=20.0), Ticket)


def test_an_account_runs_two_at_a_time_and_five_in_a_row() -> None:
    gate = Gate(LIMITS)
    a, b = gate.start(1, 10, now=0.0), gate.start(1, 11, now=0.0)
    assert isinstance(a, Ticket) and isinstance(b, Ticket)
    third = gate.start(1, 12, now=1.0)
    assert isinstance(third, Refused) and third.limit == "account"
    assert "at most 2 at a time" in third.message and third.retry_after == 14.0
    # Another account is not held by it.
    assert isinstance(gate.start(2, 20, now=1.0), Ticket)
    gate.finish(a)
    gate.finish(b)
    for channel in (12, 13, 14):
        t = gate.start(1, channel, now=2.0)
        assert isinstance(t, Ticket)
        gate.finish(t)
    sixth = gate.start(1, 15, now=2.0)
    assert isinstance(sixth, Refused) and sixth.limit == "account"
    assert "at most 5 in a row, then one every 12 s" in sixth.message


def test_the_server_runs_at_most_its_threads_and_a_refusal_takes_nothing() -> None:
    gate = Gate(LIMITS)
    running = [gate.start(account, account * 10, now=0.0) for account in range(1, 5)]
    assert all(isinstance(t, Ticket) for t in running)
    refused = gate.start(9, 90, now=5.0)
    assert isinstance(refused, Refused) and refused.limit == "server"
    assert refused.retry_after == 10.0
    gate.finish(running[0])  # type: ignore[arg-type]
    # The refused test spent nothing: its channel still has its whole burst.
    for _ in range(LIMITS.channel_burst):
        t = gate.start(9, 90, now=6.0)
        assert isinstance(t, Ticket)
        gate.finish(t)
