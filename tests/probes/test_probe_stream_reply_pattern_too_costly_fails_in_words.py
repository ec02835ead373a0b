"""A tcp/tls/mail monitor's ``matches`` assertion on a reply too long for its pattern fails
in the URL monitors' words, naming its own (tighter) budget, without searching; a short
reply is searched as usual."""

from __future__ import annotations

from engine.probes.streamspec import MAX_REPLY, StreamSpec

COSTLY = "[a-z]{400}"  # about 400 RE2 instructions: 64 KiB of reply is over 16 Mi


def spec(pattern: str) -> StreamSpec:
    return StreamSpec.from_config(
        None, [{"source": "response", "comparison": "matches", "target": pattern}])


def test_a_costly_search_of_a_long_reply_fails_in_words() -> None:
    why = spec(COSTLY).check(b"a" * MAX_REPLY, False, 5.0, 1.0)
    assert why is not None
    assert why.startswith('response matches "')
    assert "RE2 instructions) is too costly to search 64 KiB" in why
    assert why.endswith(": a search may cost 16 Mi characters times instructions")


def test_a_short_reply_is_searched() -> None:
    assert spec(COSTLY).check(b"a" * 400, False, 5.0, 1.0) is None
    why = spec(COSTLY).check(b"1" * 400, False, 5.0, 1.0)
    assert why is not None and why.endswith("no match in the response")


def test_a_cut_reply_names_what_was_read() -> None:
    why = spec("^OK$").check(b"ERR", True, 5.0, 1.0)
    assert why is not None and why.endswith("no match in the first 64 KiB of the response")
