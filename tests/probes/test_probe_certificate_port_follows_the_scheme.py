"""The port a certificate check probes (decisions.md): an https URL's own port, else 443;
an http URL's port carries plain HTTP, so its host's certificate is read on 443. tls and
mail URLs are read on their own port (smtp 25, imap 143, pop3 110 by default)."""

from __future__ import annotations

import pytest

from engine.probes.tls import HTTPS_PORT, certificate_port


@pytest.mark.parametrize(("url", "port", "expected"), [
    ("https://example.com/", 0, 443),
    ("https://example.com:8443/", 8443, 8443),
    ("http://example.com/", 0, 443),
    ("http://example.com:8080/", 8080, 443),  # not the URL's plain-HTTP port
    ("http://[::1]:8080/", 8080, 443),
    ("tls://example.com:5432", 5432, 5432),
    ("smtp://mail.example.com", 0, 25),
    ("smtp://mail.example.com:587", 587, 587),
    ("imap://mail.example.com", 0, 143),
    ("pop3://mail.example.com", 0, 110),
])
def test_the_certificate_port_follows_the_scheme(url: str, port: int, expected: int) -> None:
    assert certificate_port(url, port) == expected
    assert HTTPS_PORT == 443
