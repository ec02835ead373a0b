"""``upwatch notify test URL``: an operator tries a channel before the daemon runs. Run as a
real process against a real SMTP server and HTTP receiver on loopback."""

from __future__ import annotations

import asyncio
import os
import sys

from tests.support.notify_support import HttpReceiver, SmtpServer
from tests.support.targets import free_port


async def upwatch(*args: str, private: bool = True) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
    env["UPWATCH_ALLOW_PRIVATE_TARGETS"] = "true" if private else "false"
    env["UPWATCH_NOTIFY_TIMEOUT"] = "5"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "engine", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_delivered_test_message_exits_0_and_a_refused_one_1_with_the_reason() -> None:
    with SmtpServer() as smtp:
        code, out, _ = await upwatch("notify", "test", smtp.url())
        assert code == 0 and "delivered to mailto://alerts:****@127.0.0.1" in out
        assert [m.subject for m in smtp.mails] == ["Upwatch test message"]
        code, out, err = await upwatch("notify", "test", smtp.url(password="bad-secret-9"))
        assert code == 1
        assert "535" in err and "Authentication credentials invalid" in err
        assert "bad-secret-9" not in err + out
    async with HttpReceiver() as receiver:
        code, _, _ = await upwatch("notify", "test", receiver.ntfy_url("ops"))
        assert code == 0 and receiver.delivered()[0].json()["title"] == "Upwatch test message"
    code, _, err = await upwatch("notify", "test", f"json://127.0.0.1:{free_port()}/x")
    assert code == 1 and "Connection refused" in err
    code, _, err = await upwatch("notify", "test", "foo://bar")
    assert code == 1 and "foo:// is not a notification service" in err
    code, _, err = await upwatch("notify", "test", "json://127.0.0.1:9/x", private=False)
    assert code == 1 and "non-public address" in err
