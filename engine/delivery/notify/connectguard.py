"""The private-address rule where Apprise's providers connect.

:func:`engine.delivery.notify.urls.check_targets` checks a channel's hosts before each try, through
our resolver. Apprise's providers (requests, smtplib) then resolve the name again with
``socket.getaddrinfo``; between the two a name can change its answer (DNS rebinding), and a
service can answer with a redirect to another host. Both would reach an address the check
never saw.

So inside a send that must reach only public addresses (:func:`public_only`), every lookup
the blocking providers make goes through :func:`_guarded`, which refuses an answer holding
any non-public address, as the probes do ("an answer mixing public and private addresses"
is blocked). The connection then fails before a socket is opened, and the try fails with
the rule's words. Lookups anywhere else (other threads, the event loop's own resolver) are
untouched: the switch is a context variable, and Apprise copies the sending thread's
context into its worker threads.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import threading
from collections.abc import Iterator
from typing import Any

from engine.domain import netpolicy

# True inside a send to a channel whose hosts must be public.
_public_only: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "upwatch_notify_public_only", default=False
)
_original_getaddrinfo = socket.getaddrinfo
_install_lock = threading.Lock()
_installed = False


class BlockedLookup(socket.gaierror):
    """A lookup inside a public-only send answered a non-public address.

    A ``gaierror`` so that every client treats it as the name failing to resolve: no
    connection is tried."""


def _guarded(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
             flags: int = 0) -> list[Any]:
    infos = _original_getaddrinfo(host, port, family, type, proto, flags)
    if _public_only.get():
        for info in infos:
            address = str(info[4][0]).split("%", 1)[0]
            if not netpolicy.is_public_ip(address):
                raise BlockedLookup(
                    socket.EAI_FAIL,
                    # No parentheses: the sender quotes a provider's error up to the first.
                    f"{host} resolves to the non-public address {address}; private targets "
                    "are not allowed",
                )
    return infos


def install() -> None:
    """Put the guard in front of ``socket.getaddrinfo`` (once per process; idempotent).
    Outside :func:`public_only` it only passes the call on."""
    global _installed
    with _install_lock:
        if not _installed:
            socket.getaddrinfo = _guarded
            _installed = True


@contextlib.contextmanager
def public_only(enabled: bool = True) -> Iterator[None]:
    """Within the block (and the threads that copy its context), lookups made through
    ``socket.getaddrinfo`` refuse non-public answers when ``enabled``."""
    install()
    token = _public_only.set(enabled)
    try:
        yield
    finally:
        _public_only.reset(token)
