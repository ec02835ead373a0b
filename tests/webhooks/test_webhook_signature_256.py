"""X-Service-Signature-256: every try carries ``t=<unix seconds>,v1=<HMAC-SHA256 of
"<t>.<body>">`` beside the seed's X-Service-Signature, checked here by an HMAC computed in
the test (not by engine code), and by the receiver docs/webhooks.md publishes."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from pathlib import Path
from typing import Any

from engine.db.store import Store
from engine.delivery.webhooks.signing import verify, verify_256
from tests.support.wait import wait_until
from tests.support.webhook_support import Receiver, make_settings, queue, running, status_is

DOCS = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"


def documented_receiver(token: str) -> Any:
    """``is_fresh_from_upwatch`` exactly as docs/webhooks.md prints it, keyed with ``token``."""
    text = DOCS.read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S)
                 if "def is_fresh_from_upwatch" in b)
    namespace: dict[str, Any] = {}
    exec(block.replace('"uw_..."', repr(token)), namespace)  # our own docs
    return namespace["is_fresh_from_upwatch"]


async def test_every_try_carries_a_timestamped_sha256_signature_beside_the_old_one(
    store: Store, receiver: Receiver, tmp_path: Path
) -> None:
    account, token = await store.create_account("a", webhook_url=receiver.url())
    receiver.behaviour = lambda hit: "500" if len(receiver.hits) == 1 else "ok"
    event = await queue(store, account.id, 1)
    before = time.time()
    async with running(store, make_settings(tmp_path)):
        await wait_until(status_is(store, event, "delivered"), what="delivered on try 2")
    after = time.time()
    assert len(receiver.hits) == 2
    for hit in receiver.hits:
        assert verify(hit.body, token, hit.headers["X-Service-Signature"])  # unchanged
        header = hit.headers["X-Service-Signature-256"]
        m = re.fullmatch(r"t=(\d+),v1=([0-9a-f]{64})", header)
        assert m, header
        t = int(m.group(1))
        assert int(before) <= t <= after + 1
        independent = hmac.new(token.encode(), f"{t}.".encode() + hit.body,
                               hashlib.sha256).hexdigest()
        assert hmac.compare_digest(independent, m.group(2))
        wrong_key = hmac.new(b"not-" + token.encode(), f"{t}.".encode() + hit.body,
                             hashlib.sha256).hexdigest()
        assert wrong_key != m.group(2)
        # The documented receiver takes it now, and refuses it replayed 5 minutes later or
        # with a moved timestamp or body.
        fresh = documented_receiver(token)
        assert fresh(hit.body, header)
        assert fresh(hit.body, header, now=t + 299)
        assert not fresh(hit.body, header, now=t + 301)
        assert not fresh(hit.body, header, now=t - 301)
        assert not fresh(hit.body, header.replace(f"t={t}", f"t={t + 1}"))
        assert not fresh(hit.body + b" ", header)
        assert not fresh(hit.body, None) and not fresh(hit.body, "t=x,v1=y")
        assert verify_256(hit.body, token, header, now=t + 10)
        assert not verify_256(hit.body, token, header, now=t + 400)
