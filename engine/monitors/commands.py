"""``upwatch export [--account ID] [FILE]`` and ``upwatch apply FILE [--account ID] [--prune]
[--dry-run]``: monitors as code from the command line, straight against the database (beside
a running service, like the other commands).

Exit status of apply: 0 applied (or, with ``--dry-run``, planned), 1 the file is invalid
for the account (every error printed with its line, nothing applied; a file that is not
UTF-8 text, not TOML, nested too deeply or over ``file.MAX_FILE_BYTES`` is one line), 2 bad
usage (no such file or account, ``--account`` needed).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from engine.domain.words import plural
from engine.monitors import file as monitorfile
from engine.monitors.apply import ApplyResult, apply_document, export_document
from engine.runtime.errors import LimitReached, ValidationFailed
from engine.runtime.settings import Settings

# cli._with_store: runs a coroutine function against the database, first naming the database
# on ``shown`` (keyword argument) when given.
WithStore = Callable[..., Any]

# Applies of more entries than this show a progress bar on stderr.
PROGRESS_ABOVE = 1000
USAGE = 2


class UsageError(Exception):
    """Bad usage: exit status 2 with the message."""


class ProgressBar:
    """A progress bar on ``out``: redrawn in place on a terminal, else one line at every
    quarter (logs and pipes get a few lines, not thousands)."""

    WIDTH = 30

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._tty = out.isatty()
        self._phase = ""
        self._total = 0
        self._done = 0
        self._shown = -1

    def start(self, phase: str, total: int) -> None:
        self._phase, self._total, self._done, self._shown = phase, max(1, total), 0, -1
        self._draw()

    def advance(self, n: int) -> None:
        self._done = min(self._total, self._done + n)
        self._draw()

    def done(self) -> None:
        self._done = self._total
        self._draw()
        if self._tty:
            self._out.write("\n")
        self._out.flush()

    def _draw(self) -> None:
        share = self._done / self._total
        if self._tty:
            filled = int(share * self.WIDTH)
            self._out.write(f"\r{self._phase:<20} [{'#' * filled}{'.' * (self.WIDTH - filled)}]"
                            f" {share:4.0%} {self._done:,}/{self._total:,}")
            self._out.flush()
            return
        step = int(share * 4)
        if step != self._shown:
            self._shown = step
            self._out.write(f"{self._phase}: {share:.0%} ({self._done:,}/{self._total:,})\n")
            self._out.flush()


async def _account(store: Any, account_id: int | None) -> Any:
    """The account named by --account, or the only one there is."""
    if account_id is not None:
        account = await store.get_account(account_id)
        if account is None:
            raise UsageError(f"no account with id {account_id}")
        return account
    accounts = [a for a, _ in await store.list_accounts()]
    if len(accounts) != 1:
        ids = ", ".join(str(a.id) for a in accounts[:20]) or "none"
        raise UsageError(f"--account is required: there are {len(accounts)} accounts ({ids})")
    return accounts[0]


def export(settings: Settings, args: argparse.Namespace, with_store: WithStore) -> int:
    async def go(store: Any) -> tuple[Any, dict[str, Any]]:
        account = await _account(store, args.account)
        return account, await export_document(store, account.id)

    # The database is named on stdout's first line, or on stderr when stdout is the file.
    shown = sys.stderr if args.file in (None, "-") else sys.stdout
    try:
        account, doc = with_store(settings, go, shown=shown)
    except UsageError as exc:
        sys.stderr.write(f"upwatch export: {exc}\n")
        return USAGE
    from engine.domain.timefmt import fmt, utcnow

    header = monitorfile.export_header(account.id, account.name, fmt(utcnow()))
    text = monitorfile.render_toml(doc, header)
    if args.file in (None, "-"):
        sys.stdout.write(text)
    else:
        try:
            Path(args.file).write_text(text, encoding="utf-8")
        except OSError as exc:
            sys.stderr.write(f"upwatch export: cannot write {args.file}: {exc.strerror}\n")
            return USAGE
        sys.stderr.write(f"Exported {plural(len(doc['monitors']), 'monitor')} of account"
                         f" {account.id} to {args.file}.\n")
    return 0


def _read(path: str) -> bytes:
    """The file's bytes (stdin for ``-``), at most one byte over the size limit (enough to
    tell that it is over); UsageError when it cannot be read."""
    limit = monitorfile.MAX_FILE_BYTES + 1
    try:
        if path == "-":
            return sys.stdin.buffer.read(limit)
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def _report_errors(path: str, text: str, doc: Any, exc: ValidationFailed) -> None:
    """Every error, one per line: ``FILE:LINE: monitors[3] (shop): uptime.interval: ...``,
    in file order."""
    lines = monitorfile.LineMap.of(text)
    entries = doc.get(monitorfile.MONITORS) if isinstance(doc, dict) else None
    out: list[tuple[int, str]] = []
    for key, messages in exc.errors.items():
        line = lines.line_of(key)
        where = f"{path}:{line}" if line is not None else path
        label = key
        index, _, field = key.partition("].")
        if key.startswith("monitors[") and isinstance(entries, list):
            i = int(index.removeprefix("monitors[").rstrip("]"))
            entry = entries[i] if i < len(entries) else None
            name = None
            if isinstance(entry, dict):
                name = entry.get("key") or entry.get("url")
            label = f"{index}]" + (f" ({name})" if isinstance(name, str) else "")
            label += f": {field}" if field else ""
        for message in messages:
            out.append((line or 0, f"{where}: {label}: {message}"))
    for _, text_line in sorted(out, key=lambda item: item[0]):
        sys.stderr.write(text_line + "\n")


def _invalid_file(path: str, message: str) -> int:
    sys.stderr.write(f"{path}: {message} Nothing was applied.\n")
    return 1


def apply(settings: Settings, args: argparse.Namespace, with_store: WithStore) -> int:
    try:
        data = _read(args.file)
    except UsageError as exc:
        sys.stderr.write(f"upwatch apply: {exc}\n")
        return USAGE
    try:
        text = monitorfile.decode_file(data)
        doc = monitorfile.parse_toml(text)
    except ValidationFailed as exc:
        return _invalid_file(args.file, exc.errors["file"][0])
    entries = doc.get(monitorfile.MONITORS)
    count = len(entries) if isinstance(entries, list) else 0
    progress = ProgressBar(sys.stderr) if count > PROGRESS_ABOVE else None

    async def go(store: Any) -> tuple[Any, ApplyResult]:
        account = await _account(store, args.account)
        result = await apply_document(
            store, settings, account.id, account.plan, doc, prune=args.prune,
            dry_run=args.dry_run, progress=progress)
        return account, result

    try:
        account, result = with_store(settings, go, shown=sys.stdout)
    except UsageError as exc:
        sys.stderr.write(f"upwatch apply: {exc}\n")
        return USAGE
    except ValidationFailed as exc:
        _report_errors(args.file, text, doc, exc)
        sys.stderr.write(f"upwatch apply: {args.file} is not valid: {exc} Nothing was"
                         " applied.\n")
        return 1
    except RecursionError:  # a document the parser read but too deep to walk
        return _invalid_file(args.file, "Its values are nested too deeply.")
    except LimitReached as exc:
        sys.stderr.write(f"upwatch apply: {exc} Nothing was applied.\n")
        return 1
    if args.dry_run:
        for line in result.lines():
            sys.stdout.write(line + "\n")
    sys.stdout.write(f"{os.path.basename(args.file)} -> account {account.id}: "
                     f"{result.summary()}.\n")
    return 0
