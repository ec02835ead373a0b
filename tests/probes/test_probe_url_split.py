"""The uptime probe's fast URL splitter agrees with the general (urlsplit) one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.probes.failures import ProbeFailure
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


NAMED = [
    "http://m1.names.test:18080/m/1",
    "https://m12.names.test/m/12?a=b",
    "http://m1.names.test:80/p",
    "https://m1.names.test:443/p",
    "http://m1.names.test:08080/p",
    "http://m1.names.test:0/p",
    "http://m1.names.test:65536/p",
    "http://m1.names.test:123456/p",
    "http://m1.names.test:/p",
    "http://m1.names.test:8o/p",
    "http://m1.names.test:\u0668/p",
    "http://host1/p",
    "http://a..b/p",
    "http://-/p",
    "http://M1.names.test/p",
    "http://m1.names.test",
    "http://m1.names.test?x/y",
    "http://m1.names.test/p?",
    "http://m1.names.test/p#f",
    "http://m1.names.test/p q",
    "http://m1.n\u00e4mes.test/p",
    "http://m_1.names.test/p",
    "http://user@m1.names.test/p",
]


def _fields(t: _Target) -> tuple[object, ...]:
    return (t.tls, t.ip, t.host, t.port, t.host_header, t.target)


def _named(url: str) -> tuple[object, ...] | None:
    """What the name splitter alone makes of ``url`` (None: not its form)."""
    t = _Target("http://x/")
    return _fields(t) if t._named(url) else None


@pytest.mark.parametrize("url", URLS + NAMED)
def test_names_split_by_string_methods_as_by_the_pattern(url: str) -> None:
    """The name splitter (every probe by name runs it: the prober keeps 1,024 authorities
    split, not one per monitor) takes only URLs of the plain form and splits them as the
    pattern and urlsplit do."""
    named = _named(url)
    if named is None:
        return
    m = _PLAIN_URL.match(url)
    assert m is not None, url
    assert named == _split("general", url) == _split("plain", url)


def test_the_name_splitter_takes_the_bench_and_api_forms() -> None:
    for url in ("http://m1.names.test:18080/m/1", "https://example.com/", "https://a-b.example/x?y"):
        assert _named(url) is not None, url


@given(
    st.sampled_from(["http://", "https://"]),
    st.text(alphabet="abz09.-_AZ:/?#@ \u00e4\u0668", min_size=1, max_size=14),
    st.text(alphabet="az09/?#%. ", max_size=8),
)
def test_the_name_splitter_never_disagrees(scheme: str, authority: str, rest: str) -> None:
    url = scheme + authority + rest
    named = _named(url)
    if named is not None:
        assert _PLAIN_URL.match(url) is not None, url
        assert named == _split("plain", url) == _split("general", url), url
    try:
        fields: object = _fields(_Target(url))
    except ProbeFailure as exc:
        fields = f"failure: {exc}"
    assert fields == _split("general", url) or _PLAIN_URL.match(url) is None, url
