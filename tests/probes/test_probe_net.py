"""Pure helpers of the probes: IP literal detection and error words."""

from __future__ import annotations

import asyncio
import errno
import ssl
import time

import pytest
import uvloop

from engine.domain.netpolicy import is_public_ip
from engine.probes.addresses import ip_literal, public_address
from engine.probes.deadlines import Deadlines
from engine.probes.failures import os_error_words, ssl_error_words, timeout_words


@pytest.mark.parametrize(
    ("host", "literal"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("93.184.215.14", "93.184.215.14"),
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("2001:DB8:0:0::1", "2001:db8::1"),
        ("::ffff:10.0.0.1", "::ffff:10.0.0.1"),
        ("fe80::1%eth0", "fe80::1%eth0"),
        ("example.com", None),
        ("localhost", None),
        ("1.2.3", None),  # not a dotted quad: a name, resolved and then checked
        ("0177.0.0.1", None),  # octal forms too: the rule applies to what they resolve to
        ("999.1.1.1", None),
        ("", None),
        ("[not-an-ip]", None),
    ],
)
def test_ip_literal(host: str, literal: str | None) -> None:
    assert ip_literal(host) == literal


@pytest.mark.parametrize("ip", ["127.0.0.1", "10.1.2.3", "93.184.215.14", "::1", "2606:4700::1"])
def test_public_address_is_the_netpolicy_rule(ip: str) -> None:
    assert public_address(ip) == is_public_ip(ip)


def test_words() -> None:
    assert timeout_words(10.0) == "timed out after 10 s"
    assert timeout_words(1.5) == "timed out after 1.5 s"
    assert os_error_words(ConnectionRefusedError()) == "connection refused"
    assert os_error_words(ConnectionResetError()) == "connection reset"
    assert os_error_words(OSError(errno.ENETUNREACH, "x")) == "network unreachable"
    assert os_error_words(OSError(errno.EHOSTUNREACH, "x")) == "host unreachable"
    assert os_error_words(OSError(errno.EACCES, "Permission denied")) == (
        "connection failed: permission denied"
    )
    assert os_error_words(None) == "connection closed"
    err = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    err.reason = "WRONG_VERSION_NUMBER"
    assert ssl_error_words(err) == "wrong version number"


async def _guarded(d: Deadlines, timeout: float, work: float = 10.0) -> str:
    """The pattern the probes use around their awaits."""
    task, slot, cancelling = d.arm(timeout)
    try:
        await asyncio.sleep(work)
        return "finished"
    except asyncio.CancelledError:
        if not d.expired(task, cancelling):
            raise
        return "expired"
    finally:
        slot.discard(task)


@pytest.mark.serial  # measures timing: run alone (scripts/test)
def test_deadline_expires_finishes_and_survives_a_new_loop() -> None:
    d = Deadlines()
    t0 = time.perf_counter()
    assert asyncio.run(_guarded(d, 0.05)) == "expired"
    assert 0.045 <= time.perf_counter() - t0 < 0.5
    assert asyncio.run(_guarded(d, 1.0, work=0.01)) == "finished"

    async def abandon() -> None:
        d.arm(0.05)  # the loop ends before this slot's timer fires

    asyncio.run(abandon())
    assert asyncio.run(_guarded(d, 0.05)) == "expired"  # a new loop gets its own timers


def test_deadlines_of_one_slot_share_it_and_a_fired_slot_is_never_reused() -> None:
    """Probes started within one 4 ms slot share its timer; once it has fired, the next
    deadline gets a new slot (the shortcut to the last slot must not outlive it)."""
    d = Deadlines()

    class Target:
        def __init__(self) -> None:
            self.at: float | None = None

        def expire(self) -> None:
            self.at = time.perf_counter()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first, second = Target(), Target()
        t0 = time.perf_counter()
        slot = d.arm_expiry(0.02, loop, first)
        assert d.arm_expiry(0.02, loop, second) is slot  # same slot, no second timer
        assert d.arm_expiry(0.5, loop, Target()) is not slot  # another timeout: its own
        async with asyncio.timeout(2):
            while first.at is None or second.at is None:
                await asyncio.sleep(0.005)
        assert first.at - t0 >= 0.019 and second.at - t0 >= 0.019
        third = Target()
        later = d.arm_expiry(0.02, loop, third)
        assert later is not slot
        async with asyncio.timeout(2):
            while third.at is None:
                await asyncio.sleep(0.005)

    # On uvloop, as in the service, loop.time() is the loop turn's: deadlines armed in one
    # turn see one time (on asyncio's own loop the clock moves between two calls, and a
    # preemption between them can put the second past the slot's end).
    uvloop.run(main())


def test_outside_cancellation_is_not_swallowed() -> None:
    d = Deadlines()

    async def main() -> None:
        task = asyncio.create_task(_guarded(d, 5.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # An outer timeout firing first is the caller's, not the probe's.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.02):
                await _guarded(d, 5.0)

    asyncio.run(main())
