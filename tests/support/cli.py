"""The ``upwatch`` command line run as a real process, as an operator runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def upwatch(
    *args: str,
    dsn: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
    unset: tuple[str, ...] = (),
    prefix: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """``upwatch <args>`` in ``cwd`` (default: this one) with no ``UPWATCH_*`` variable but
    the installation's key, ``dsn`` and ``env``; ``unset`` removes some of those again;
    ``prefix`` runs it under another program (``setpriv ...``)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
    # The installation's key for secrets at rest (conftest's), as an operator's shell has it.
    full_env["UPWATCH_SECRET_KEY"] = os.environ["UPWATCH_SECRET_KEY"]
    if dsn:
        full_env["UPWATCH_DATABASE_URL"] = dsn
    full_env.update(env or {})
    for name in unset:
        full_env.pop(name, None)
    return subprocess.run(
        [*prefix, sys.executable, "-m", "engine", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )
