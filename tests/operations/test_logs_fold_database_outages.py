"""While PostgreSQL is down, a library's reconnect warnings are one line each, with the
error's words; an unexpected exception keeps its traceback."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import asyncpg
import orjson
import pytest

from engine.runtime import logs


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _refused() -> BaseException:
    try:
        await asyncpg.connect(host="127.0.0.1", port=_closed_port(), user="x", timeout=5)
    except Exception as exc:  # the real error asyncpg raises is the subject
        return exc
    raise AssertionError("a connection to a closed port succeeded")


@pytest.mark.parametrize("fmt", ["text", "json"])
async def test_a_refused_reconnect_is_one_line_with_its_words(
    fmt: str, capsys: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    exc = await _refused()
    logs.configure("INFO", fmt)
    try:
        raise exc
    except Exception:
        logging.getLogger("asyncpg.pool").warning(
            "Failed to restore the pool connection floor; retrying", exc_info=True)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    line = orjson.loads(err)["msg"] if fmt == "json" else err
    assert "Failed to restore the pool connection floor; retrying" in line
    assert "Connection refused" in line or "Connect call failed" in line


async def test_an_unexpected_exception_keeps_its_traceback(
    capsys: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    logs.configure("INFO", "text")
    try:
        raise ValueError("a bug")
    except ValueError:
        logging.getLogger("asyncpg.pool").warning("something else", exc_info=True)
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError: a bug" in err
