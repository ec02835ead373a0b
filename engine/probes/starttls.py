"""The plaintext steps before TLS on a mail port: SMTP, IMAP and POP3 STARTTLS.

:class:`Dialogue` is pure: fed what the server sent, it says what to send next, whether
TLS may start, or why the server cannot be probed, in words. The probes drive it over their
connection (``engine/probes/tcp.py`` for the uptime check, ``engine/probes/tls.py`` for the
certificate check):

- smtp: the ``220`` greeting (multi-line allowed), ``EHLO``, its ``250`` reply must list
  ``STARTTLS``, then ``STARTTLS`` and its ``220``;
- imap: the ``* OK`` (or ``* PREAUTH``) greeting, then ``a1 STARTTLS`` and its ``a1 OK``
  (untagged lines in between are skipped);
- pop3: the ``+OK`` greeting, then ``STLS`` and its ``+OK``.

Everything the server sends before TLS counts against :data:`MAX_DIALOGUE` bytes, so a
server that talks without end is a failure, not a growing buffer.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

MAIL_SCHEMES: Final[tuple[str, ...]] = ("smtp", "imap", "pop3")
DEFAULT_PORTS: Final = {"smtp": 25, "imap": 143, "pop3": 110}
# Bytes a server may send before TLS starts (greeting, capabilities, replies).
MAX_DIALOGUE: Final = 64 * 1024
# Characters of a server's line quoted in an error.
_QUOTED: Final = 120
_PROTOCOL_NAME: Final = {"smtp": "SMTP", "imap": "IMAP", "pop3": "POP3"}


def line_words(line: bytes) -> str:
    """A server's line fit for an error: printable ASCII, cut to a readable length."""
    text = "".join(c if " " <= c <= "~" else "?" for c in line.decode("latin-1"))
    text = text.strip()
    return text if len(text) <= _QUOTED else text[:_QUOTED] + "..."


class Dialogue:
    """One STARTTLS exchange (see the module docstring).

    :meth:`feed` returns the bytes to send now (empty: wait for more). Afterwards ``ready``
    says TLS may start, ``error`` holds the failure's words; ``greeting`` is the server's
    greeting (its lines joined with newlines) once it is read. ``waiting`` names what the
    dialogue waits for, for a deadline's words.
    """

    __slots__ = (
        "_buf", "_helo", "_lines", "_seen", "_step", "error", "greeting", "ready", "scheme",
    )

    def __init__(self, scheme: str, helo: str = "upwatch.invalid") -> None:
        if scheme not in MAIL_SCHEMES:
            raise ValueError(f"no STARTTLS dialogue for {scheme!r}")
        self.scheme = scheme
        self._helo = helo.encode("ascii")
        self._buf = bytearray()
        self._lines: list[bytes] = []  # the lines of the reply being read (smtp)
        self._seen = 0
        self._step = "greeting"
        self.error: str | None = None
        self.greeting: str | None = None
        self.ready = False

    @property
    def waiting(self) -> str:
        name = _PROTOCOL_NAME[self.scheme]
        if self._step == "greeting":
            return f"waiting for the {name} greeting"
        if self._step == "ehlo":
            return "waiting for the answer to EHLO"
        return "waiting for the answer to STARTTLS"

    def feed(self, data: bytes) -> bytes:
        if self.ready or self.error is not None:
            return b""
        self._seen += len(data)
        if self._seen > MAX_DIALOGUE:
            self.error = (f"the server sent more than {MAX_DIALOGUE >> 10} KiB before"
                          " STARTTLS")
            return b""
        buf = self._buf
        scanned = len(buf)  # holds no newline: only the new bytes need a look
        buf += data
        out = b""
        while not self.ready and self.error is None:
            end = buf.find(b"\n", scanned)
            scanned = 0
            if end < 0:
                break
            line = bytes(buf[:end]).rstrip(b"\r")
            del buf[: end + 1]
            out += self._line(line)
        return out

    def closed_words(self) -> str:
        """Words for the server closing the connection before TLS."""
        return f"connection closed {self.waiting}"

    def _line(self, line: bytes) -> bytes:
        if self.scheme == "smtp":
            return self._smtp(line)
        if self.scheme == "imap":
            return self._imap(line)
        return self._pop3(line)

    def _smtp(self, line: bytes) -> bytes:
        self._lines.append(line)
        if len(line) > 3 and line[3:4] == b"-":
            return b""  # a multi-line reply goes on
        lines, self._lines = self._lines, []
        code = line[:3]
        step = self._step
        if step == "greeting":
            self.greeting = "\n".join(line_words(x) for x in lines)
            if code != b"220":
                self.error = "SMTP greeting: " + line_words(line)
                return b""
            self._step = "ehlo"
            return b"EHLO " + self._helo + b"\r\n"
        if step == "ehlo":
            if code != b"250":
                self.error = "EHLO refused: " + line_words(line)
                return b""
            if not any(x[4:].strip().upper() == b"STARTTLS" for x in lines):
                self.error = "the server does not offer STARTTLS"
                return b""
            self._step = "starttls"
            return b"STARTTLS\r\n"
        if code == b"220":
            self.ready = True
        else:
            self.error = "STARTTLS refused: " + line_words(line)
        return b""

    def _imap(self, line: bytes) -> bytes:
        if self._step == "greeting":
            self.greeting = line_words(line)
            upper = line.upper()
            if not (upper.startswith(b"* OK") or upper.startswith(b"* PREAUTH")):
                self.error = "IMAP greeting: " + line_words(line)
                return b""
            self._step = "starttls"
            return b"a1 STARTTLS\r\n"
        upper = line.upper()
        if not upper.startswith(b"A1 "):
            return b""  # untagged data (a capability list) before the answer
        if upper.startswith(b"A1 OK"):
            self.ready = True
        else:
            self.error = "STARTTLS refused: " + line_words(line)
        return b""

    def _pop3(self, line: bytes) -> bytes:
        ok = line.upper().startswith(b"+OK")
        if self._step == "greeting":
            self.greeting = line_words(line)
            if not ok:
                self.error = "POP3 greeting: " + line_words(line)
                return b""
            self._step = "starttls"
            return b"STLS\r\n"
        if ok:
            self.ready = True
        else:
            self.error = "STARTTLS refused: " + line_words(line)
        return b""


class _Conn(Protocol):
    """The part of ``engine.probes._net.ClientConn`` :func:`advance` drives."""

    def send(self, data: bytes) -> None: ...
    def start_tls(self, ctx: Any, server_hostname: str | None) -> None: ...
    def finish(self, error: str | None = None) -> None: ...


def advance(
    dialogue: Dialogue, conn: _Conn, data: memoryview, ctx: Any, server_hostname: str | None,
    prefix: str = "",
) -> bytes:
    """Feed ``data`` (plaintext the server sent) to ``dialogue`` and act on ``conn``: send
    the next command, start TLS once the server agreed, or finish with the failure's words
    (after ``prefix``). Returns the command sent (empty when none)."""
    answer = dialogue.feed(bytes(data))
    if dialogue.error is not None:
        conn.finish(prefix + dialogue.error)
    elif dialogue.ready:
        conn.start_tls(ctx, server_hostname)
    elif answer:
        conn.send(answer)
    return answer


def starttls_scheme(url: str) -> str | None:
    """The mail scheme of a monitor ``url`` whose TLS begins with STARTTLS, else None."""
    colon = url.find("://")
    scheme = url[:colon].lower() if colon > 0 else ""
    return scheme if scheme in MAIL_SCHEMES else None


__all__ = [
    "DEFAULT_PORTS", "MAIL_SCHEMES", "MAX_DIALOGUE", "Dialogue", "advance", "line_words",
    "starttls_scheme",
]
