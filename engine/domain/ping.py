"""What one ping probe found, as figures, and its assertions judged: pure, no I/O.

A ping probe sends ``count`` ICMP echo requests and records, per request, the round-trip
time of its first matching reply (None: no reply by the probe's end). From those:

* ``loss``: percent of requests without a reply (0 to 100, one decimal);
* ``rtt_min`` / ``rtt_avg`` / ``rtt_max``: milliseconds over the replies (None without any);
* ``jitter``: the mean absolute difference between the RTTs of consecutive answered
  requests, in request order, in milliseconds (None with fewer than two replies).

Assertions (``{"source", "property", "comparison", "target"}`` as for URL monitors) take the
sources :data:`SOURCES` with the comparisons :data:`COMPARISONS`; a failed one reads as the
URL monitors' do: ``rtt_avg less_than 50 failed: got 72.4 ms``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final

# A probe's requests: ``count`` and ``interval_ms`` from the monitor URL's query.
DEFAULT_COUNT: Final = 3
MAX_COUNT: Final = 10
DEFAULT_INTERVAL_MS: Final = 500
MIN_INTERVAL_MS: Final = 20
MAX_INTERVAL_MS: Final = 2000
# (count - 1) * interval_ms at most: the last request leaves within half the default timeout.
MAX_SPREAD_MS: Final = 5000

SOURCES: Final = ("packet_loss", "rtt_avg", "rtt_max", "jitter")
COMPARISONS: Final = ("less_than", "greater_than", "equals", "not_equals")
# The unit each source's figure is shown in.
UNITS: Final = {"packet_loss": " %", "rtt_avg": " ms", "rtt_max": " ms", "jitter": " ms"}


@dataclass(frozen=True, slots=True)
class PingFigures:
    """The figures of one probe (see the module docstring); ``duplicates`` counts replies
    beyond the first to one request, ``strays`` matching replies from another address than
    the one pinged (neither is counted as received)."""

    sent: int
    received: int
    loss: float
    rtt_min: float | None
    rtt_avg: float | None
    rtt_max: float | None
    jitter: float | None
    duplicates: int = 0
    strays: int = 0

    def details(self) -> dict[str, Any]:
        """The check's meta: sent, received, loss and the RTT figures (ms, rounded to
        0.001)."""
        return {
            "sent": self.sent,
            "received": self.received,
            "packet_loss": self.loss,
            "rtt_min": self.rtt_min,
            "rtt_avg": self.rtt_avg,
            "rtt_max": self.rtt_max,
            "jitter": self.jitter,
        }


@dataclass(frozen=True, slots=True)
class PingSpec:
    """What an icmp:// monitor's probe judges besides the replies: its ``assertions``, or
    ``broken``, the words every probe fails with when the stored ones are not ping
    assertions (kept from a monitor of another scheme)."""

    assertions: tuple[Mapping[str, Any], ...]
    broken: str | None = None


def spec(assertions: Iterable[Mapping[str, Any]]) -> PingSpec:
    """The spec of stored assertions, :attr:`PingSpec.broken` naming the first that is not
    a ping assertion."""
    got = tuple(assertions)
    for a in got:
        source = a.get("source")
        if source not in SOURCES or a.get("comparison") not in COMPARISONS or not isinstance(
                a.get("target"), int | float) or isinstance(a.get("target"), bool):
            return PingSpec((), f"assertion on {str(source)[:40]} does not apply to ping: "
                                "give this monitor its assertions again")
    return PingSpec(got)


def _ms(v: float) -> float:
    return round(v, 3)


def figures(rtts: Sequence[float | None], duplicates: int = 0, strays: int = 0) -> PingFigures:
    """The figures of a probe whose requests got ``rtts`` (ms, None: no reply), in the
    order they were sent."""
    sent = len(rtts)
    got = [r for r in rtts if r is not None]
    received = len(got)
    loss = round(100.0 * (sent - received) / sent, 1) if sent else 100.0
    if not got:
        return PingFigures(sent, 0, loss, None, None, None, None, duplicates, strays)
    jitter = None
    if received >= 2:
        jitter = _ms(sum(abs(b - a) for a, b in pairwise(got))
                     / (received - 1))
    return PingFigures(sent, received, loss, _ms(min(got)), _ms(sum(got) / received),
                       _ms(max(got)), jitter, duplicates, strays)


def no_reply_words(sent: int, waited: float) -> str:
    """The error of a probe none of whose requests got a reply."""
    plural = "" if sent == 1 else "s"
    return f"100 % packet loss: no reply to {sent} echo request{plural} in {waited:g} s"


def _number_text(v: float) -> str:
    return f"{v:g}" if v == int(v) else f"{v:.3f}".rstrip("0").rstrip(".")


def _figure(source: str, f: PingFigures) -> float | None:
    if source == "packet_loss":
        return f.loss
    if source == "rtt_avg":
        return f.rtt_avg
    if source == "rtt_max":
        return f.rtt_max
    return f.jitter


def assertion_words(a: Mapping[str, Any]) -> str:
    """``rtt_avg less_than 50``: how an assertion is named in its failure."""
    return f"{a['source']} {a['comparison']} {_number_text(float(a['target']))}"


def check(assertions: Iterable[Mapping[str, Any]], f: PingFigures) -> str | None:
    """The words of the first assertion ``f`` fails, or None when all hold. A figure that
    could not be measured (an RTT without replies, jitter with fewer than two) fails any
    assertion on it: ``got no figure (1 reply)``."""
    for a in assertions:
        source = a["source"]
        value = _figure(source, f)
        target = float(a["target"])
        if value is None:
            replies = f"{f.received} repl{'y' if f.received == 1 else 'ies'}"
            return f"{assertion_words(a)} failed: got no figure ({replies})"
        c = a["comparison"]
        if c == "less_than":
            ok = value < target
        elif c == "greater_than":
            ok = value > target
        elif c == "equals":
            ok = value == target
        else:
            ok = value != target
        if not ok:
            return f"{assertion_words(a)} failed: got {_number_text(value)}{UNITS[source]}"
    return None
