"""The first start of the embedded default under a service manager (stdout is no terminal):
the first account's token goes to a file only the service's user may read, never to the log;
a command on that data directory names it on its first line, and the stop's last line says
it stopped and how long the drain took. Run by hand on a terminal, the token is shown there."""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from engine.daemon import FIRST_TOKEN_FILE
from engine.db.embedded import EmbeddedPostgres
from tests.support.cli import upwatch
from tests.support.instances import Instance
from tests.support.targets import free_port


@pytest.fixture
def root() -> Iterator[Path]:
    # Not tmp_path: as root the server runs as embedded_postgres, which must reach it
    # (test_embedded_default_survives_its_operators.py says why).
    path = Path(tempfile.mkdtemp(prefix="upwatch-first-"))
    yield path
    server = EmbeddedPostgres(path / "data" / "pg")
    if server.running():
        server.stop(mode="immediate")
    shutil.rmtree(path, ignore_errors=True)


async def test_the_first_token_is_written_0600_and_never_logged(root: Path) -> None:
    data = root / "data"
    inst = Instance("", root, data_dir=data)
    await inst.start(timeout=120)
    try:
        path = data.resolve() / FIRST_TOKEN_FILE
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        text = path.read_text()
        token = next(w for w in text.split() if w.startswith("uw_"))
        log = inst.log_text()
        assert token not in log
        assert str(path) in log  # where to find it
        async with aiohttp.ClientSession() as http, http.get(
            f"{inst.base_url}/webapi/monitors", headers={"Authorization": f"Bearer {token}"}
        ) as r:
            assert r.status == 200

        # A command from elsewhere on that data directory says which one on its first line.
        res = upwatch("status", env={"UPWATCH_DATA_DIR": str(data)}, cwd=root,
                      unset=("UPWATCH_SECRET_KEY",), timeout=120)
        assert res.returncode == 0, res.stderr
        first = res.stdout.splitlines()[0]
        assert first == f"Using data directory {data.resolve()} (embedded PostgreSQL)"
        assert "Account 1 (admin)" in res.stdout
    finally:
        code = await inst.stop()
    assert code == 0, inst.log_text()[-3000:]
    last = inst.output[-1]
    assert "stopped (exit 0): components drained in " in last, inst.output[-5:]
    assert token not in inst.log_text()


def test_on_a_terminal_the_first_token_is_shown_and_no_file_written(root: Path) -> None:
    """``upwatch run`` by hand: stdout is a terminal, the token is printed there."""
    data = root / "data"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
    env.update(UPWATCH_DATA_DIR=str(data), UPWATCH_PORT=str(port), PYTHONUNBUFFERED="1")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "engine", "run"], env=env, cwd=root,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 120
        while b"ready at" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
        assert b"ready at" in seen, seen.decode(errors="replace")[-3000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        os.close(master)
    text = seen.decode(errors="replace")
    assert "Its API token, shown only now" in text and "Bearer uw_" in text
    assert not (data / FIRST_TOKEN_FILE).exists()
    assert code == 0


async def test_first_token_print_shows_it_on_stdout_off_a_terminal(root: Path) -> None:
    """``UPWATCH_FIRST_TOKEN=print`` (the container image's setting, where stdout is the
    container's log): the token is on stdout though it is no terminal, and no file is
    written; the token works."""
    data = root / "data"
    inst = Instance("", root, data_dir=data, env={"UPWATCH_FIRST_TOKEN": "print"})
    await inst.start(timeout=120)
    try:
        text = inst.log_text()
        assert "Its API token, shown only now" in text
        token = next(w for w in text.split() if w.startswith("uw_"))
        assert not (data / FIRST_TOKEN_FILE).exists()
        async with aiohttp.ClientSession() as http, http.get(
            f"{inst.base_url}/webapi/monitors", headers={"Authorization": f"Bearer {token}"}
        ) as r:
            assert r.status == 200
    finally:
        code = await inst.stop()
    assert code == 0, inst.log_text()[-3000:]
