"""A tcp/tls/mail monitor's request body and assertions, as its probe uses them.

Built once when the engine loads a check (:meth:`StreamSpec.from_config`, from values the
API validated: ``engine/monitors/streams.py``). The assertions have the URL monitors' shape
and failure words (``response contains "OK" failed: got "ERR"``); their sources:

- ``response``: the text the server sent (the reply to ``request.body`` on tcp/tls, the
  greeting on smtp/imap/pop3), read up to :data:`MAX_REPLY` bytes, decoded as UTF-8;
- ``response_time``: the whole probe in ms; ``connect_time``: the TCP connect in ms.

Reading the reply stops at the server's end, at :data:`MAX_REPLY` bytes, once it has
paused (``engine.probes.tcp.REPLY_IDLE``), at the deadline, or as soon as every
``response`` assertion holds and none could still turn (:meth:`StreamSpec.settled`: only
``contains``, ``matches`` and ``not_empty`` can). A regex
search is judged on the event loop, so its cost is bounded tighter than a URL monitor's
(:data:`REGEX_BUDGET`).
"""

from __future__ import annotations

from typing import Any, Final

from engine.probes.request import Assertion, _compare, size_words, text_compare

# Bytes of a reply read at most.
MAX_REPLY: Final = 64 * 1024
SOURCES: Final = ("response", "response_time", "connect_time")
SOURCE_COMPARISONS: Final = {
    "response": ("equals", "not_equals", "contains", "not_contains", "matches", "is_empty",
                 "not_empty"),
    "response_time": ("less_than", "greater_than"),
    "connect_time": ("less_than", "greater_than"),
}
# Comparisons a growing reply can satisfy for good.
_SETTLING: Final = frozenset(("contains", "matches", "not_empty"))
# Length times RE2 instructions a search on the loop may cost (a few ms at worst).
REGEX_BUDGET: Final = 16 << 20


class StreamSpec:
    """What a tcp/tls/mail probe sends and what the answer must satisfy."""

    __slots__ = ("assertions", "body", "early", "reads")

    def __init__(self, body: bytes | None, assertions: list[Assertion]) -> None:
        self.body = body
        self.assertions = assertions
        replies = [a for a in assertions if a.source == "response"]
        # Whether the probe reads a reply at all (else connected is enough).
        self.reads = bool(replies)
        # Whether reading may stop before the server's end once every one holds.
        self.early = bool(replies) and all(a.comparison in _SETTLING for a in replies)

    @classmethod
    def from_config(
        cls, request: dict[str, Any] | None, assertions: list[dict[str, Any]] | None
    ) -> StreamSpec:
        body_text = (request or {}).get("body")
        body = body_text.encode("utf-8") if isinstance(body_text, str) and body_text else None
        return cls(body, [
            Assertion(a["source"], a.get("property") or "", a["comparison"], a.get("target"))
            for a in assertions or []
        ])

    def settled(self, reply: bytes) -> bool:
        """Whether every ``response`` assertion holds on ``reply`` for good (reading may
        stop); always False unless ``early``."""
        if not self.early:
            return False
        text = reply.decode("utf-8", "replace")
        return all(
            _response(a, text, False) is None
            for a in self.assertions if a.source == "response"
        )

    def check(self, reply: bytes, cut: bool, total_ms: float,
              connect_ms: float | None) -> str | None:
        """The first failed assertion's words, or None when all hold. ``cut``: reading
        stopped at :data:`MAX_REPLY`."""
        text: str | None = None
        for a in self.assertions:
            if a.source == "response":
                if text is None:
                    text = reply.decode("utf-8", "replace")
                why = _response(a, text, cut)
            elif a.source == "connect_time":
                why = (_compare(a, f"{connect_ms:.0f}", connect_ms, " ms")
                       if connect_ms is not None else "not connected")
            else:
                why = _compare(a, f"{total_ms:.0f}", total_ms, " ms")
            if why is not None:
                return a.failed(why)
        return None


def _response(a: Assertion, text: str, cut: bool) -> str | None:
    where = f"the first {size_words(MAX_REPLY)} of the response" if cut else "the response"
    return text_compare(a, text, where, REGEX_BUDGET)


__all__ = ["MAX_REPLY", "SOURCES", "SOURCE_COMPARISONS", "StreamSpec"]
