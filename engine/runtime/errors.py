"""The one exception tree of Upwatch.

Everything the engine raises on purpose derives from :class:`UpwatchError`. At the probe
boundary errors never escape: they become outcomes with a reason string.
"""

import asyncio


class UpwatchError(Exception):
    """Base of every error Upwatch raises on purpose."""


class ConfigError(UpwatchError):
    """A setting is invalid; the message names it. Start-up stops with one line."""


class DatabaseUnavailable(UpwatchError):
    """PostgreSQL cannot be reached right now (the API answers 503)."""


class NotFound(UpwatchError):
    """The resource does not exist or belongs to another account (both are 404)."""


class ValidationFailed(UpwatchError):
    """Input failed validation; ``errors`` maps a field name to messages (a 422)."""

    def __init__(self, errors: dict[str, list[str]], message: str | None = None) -> None:
        self.errors = errors
        first = next(iter(errors.values()))[0] if errors else "The given data was invalid."
        super().__init__(message or first)


class LimitReached(UpwatchError):
    """An account limit (monitor count) would be exceeded."""


class BlockedAddress(UpwatchError):
    """A target resolves to a non-public address while private targets are not allowed."""


class PeerAuthError(UpwatchError):
    """An instance-to-instance request failed authentication."""


def stray_cancel(exc: BaseException) -> bool:
    """``exc`` is a CancelledError while nothing cancels the running task: a library's own
    (asyncpg can let one out when the server cuts a connection it is closing). Nobody asked
    the caller to stop: what it was doing failed, and it goes on."""
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0
