"""The uptime probe's fast URL splitter agrees with the general (urlsplit) one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.probes._net import ProbeFailure
from engine.probes.http import _PLAIN_TARGET, _PLAIN_URL, HttpProber, _plain_target, _Target

URLS = [
    "http://example.com/",
    "http://example.com",
    "https://example.com/a/b?c=d&e=f",
    "https://example.com?x",
    "http://example.com/p?",
    "http://example.com/p?a?b",
    "http://example.com:80/p",
    "https://example.com:443/p",
    "http://example.com:443/p",
    "https://example.com:8443/p",
    "http://example.com:00080/p",
    "http://example.com:0/p",
    "http://example.com:65535/p",
    "http://example.com:65536/p",
    "http://example.com:/p",
    "http://127.0.1.5:18080/m/1234",
    "http://10.0.0.1/",
    "http://a..b/p",
    "http://-/p",
    "http://example.com/%7Euser/%zz",
    "http://example.com/p#frag",
    "http://Example.COM/p",
    "HTTP://example.com/p",
    "http://[::1]:8080/p",
    "http://user@example.com/p",
    "http://example.com/p q",
    "http://exa_mple.com/p",
    "http://example.com/\u00e9",
    "ftp://example.com/p",
    "http:///p",
    "http://example.com/a\\b",
    "http://example.com/p;x=1",
]


def _split(make: str, url: str) -> tuple[object, ...] | str:
    if make == "plain" and _PLAIN_URL.match(url) is None:
        return "no match"
    try:
        t = _Target(url, general=make != "plain")
    except ProbeFailure as exc:
        return f"failure: {exc}"
    return (t.tls, t.ip, t.host, t.port, t.host_header, t.target)


@pytest.mark.parametrize("url", URLS)
def test_plain_form_splits_as_urlsplit_does(url: str) -> None:
    fast = _split("plain", url)
    if fast == "no match":
        return  # taken by the general splitter
    assert fast == _split("general", url)


def test_api_form_takes_the_plain_splitter() -> None:
    for url in ("http://example.com/", "https://example.com:8443/a?b=c", "http://127.0.0.1/x"):
        assert _PLAIN_URL.match(url) is not None


def _request(url: str) -> bytes | str:
    """The request line and Host header the general splitter gives for ``url``."""
    try:
        t = _Target(url, general=True)
    except ProbeFailure as exc:
        return f"failure: {exc}"
    return b"GET %s HTTP/1.1\r\nHost: %s" % (t.target.encode(), t.host_header.encode())


@pytest.mark.parametrize("first", URLS)
def test_known_authorities_give_the_same_requests(first: str) -> None:
    """Whatever URL taught the prober an authority, every URL gets the request urlsplit
    would give."""
    p = HttpProber(timeout=1.0, user_agent="t", allow_private=True)
    for url in [first, *URLS, first + "x", first + "?", first + "??", first + "/a?b"]:
        try:
            hop, request = p._hop(url)
        except ProbeFailure as exc:
            assert _request(url) == f"failure: {exc}"
            continue
        head = request.split(b"\r\nUser-Agent:")[0]
        assert head == _request(url), url
        t = _Target(url, general=True)
        assert (hop.tls, hop.host, hop.port, hop.ip) == (t.tls, t.host, t.port, t.ip), url


@given(st.text(alphabet=st.characters(max_codepoint=0x17F), max_size=40).map(lambda t: "/" + t))
def test_the_plain_target_check_answers_as_its_pattern(target: str) -> None:
    assert _plain_target(target) == (_PLAIN_TARGET.fullmatch(target) is not None)


@pytest.mark.parametrize("target", ["/", "/a?b", "/?", "/a b", "/a#b", "/\x7f", "/é", "/a?"])
def test_the_plain_target_check_on_its_edges(target: str) -> None:
    assert _plain_target(target) == (_PLAIN_TARGET.fullmatch(target) is not None)
