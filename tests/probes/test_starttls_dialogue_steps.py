"""The STARTTLS dialogue alone (pure): what it sends for what the server says, however the
server's bytes are split, and its words when the server says no."""

from __future__ import annotations

from engine.probes.starttls import MAX_DIALOGUE, Dialogue, starttls_scheme


def run(d: Dialogue, *chunks: bytes) -> list[bytes]:
    return [d.feed(c) for c in chunks]


def test_smtp_multi_line_greeting_and_ehlo_byte_by_byte() -> None:
    d = Dialogue("smtp", helo="probe.test")
    server = b"220-mx.test ESMTP\r\n220 ready\r\n"
    sent = b"".join(d.feed(server[i:i + 1]) for i in range(len(server)))
    assert sent == b"EHLO probe.test\r\n"
    assert d.greeting == "220-mx.test ESMTP\n220 ready"
    assert d.waiting == "waiting for the answer to EHLO"
    assert run(d, b"250-mx.test\r\n250-SIZE 1000\r\n", b"250 starttls\r\n") == [
        b"", b"STARTTLS\r\n"]
    assert not d.ready
    assert run(d, b"220 2.0.0 go ahead\r\n") == [b""]
    assert d.ready and d.error is None
    assert d.feed(b"anything") == b""  # done: nothing more is read


def test_imap_skips_untagged_lines_and_pop3_answers_stls() -> None:
    imap = Dialogue("imap")
    assert run(imap, b"* OK ready\r\n", b"* CAPABILITY IMAP4rev1\r\na1 OK go\r\n") == [
        b"a1 STARTTLS\r\n", b""]
    assert imap.ready
    pop = Dialogue("pop3")
    assert run(pop, b"+OK hi\n", b"+OK begin\n") == [b"STLS\r\n", b""]
    assert pop.ready


def test_refusals_and_floods_in_words() -> None:
    bye = Dialogue("imap")
    bye.feed(b"* BYE overloaded\r\n")
    assert bye.error == "IMAP greeting: * BYE overloaded"
    weird = Dialogue("smtp")
    weird.feed(b"220 ok\r\n")
    weird.feed(b"500 \x00\x01what\r\n")
    assert weird.error == "EHLO refused: 500 ??what"
    flood = Dialogue("pop3")
    for _ in range(MAX_DIALOGUE // 4096 + 1):
        flood.feed(b"x" * 4096)
    assert flood.error == "the server sent more than 64 KiB before STARTTLS"
    assert flood.waiting == "waiting for the POP3 greeting"


def test_which_urls_begin_with_starttls() -> None:
    assert starttls_scheme("smtp://mail.example.com:587") == "smtp"
    assert starttls_scheme("imap://mail.example.com") == "imap"
    assert starttls_scheme("tls://mail.example.com:993") is None
    assert starttls_scheme("https://example.com/") is None
