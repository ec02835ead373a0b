"""``upwatch import healthchecks FILE [--account ID] [--dry-run]``: the checks of a
Healthchecks export (:mod:`engine.monitors.hcimport`) made heartbeats of an account,
straight against the database like ``upwatch apply``.

Output: the database on the first line, then one line per heartbeat created or updated
(with ``--dry-run``: planned), per check skipped and per setting not kept, then a summary.
Exit status: 0 done (some checks may be listed as skipped), 1 the file is not a v3 check
list or the account's monitor limit stops the import (nothing created), 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import asyncpg

from engine.domain.words import plural
from engine.monitors import hcimport
from engine.monitors.commands import USAGE, UsageError, WithStore
from engine.monitors.commands import _account as account_of
from engine.monitors.heartbeat_apply import apply_heartbeats
from engine.monitors.heartbeat_file import HeartbeatEntry, plan
from engine.runtime.errors import LimitReached, ValidationFailed
from engine.runtime.settings import Settings

NAME = "upwatch import healthchecks"


def _read(path: str) -> bytes:
    try:
        if path == "-":
            return sys.stdin.buffer.read(hcimport.MAX_IMPORT_BYTES + 1)
        with open(path, "rb") as f:
            return f.read(hcimport.MAX_IMPORT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def _describe(e: HeartbeatEntry) -> str:
    c = e.config
    every = (f"every {c.period_s} s" if c.schedule is None
             else f"schedule {c.schedule!r} ({c.time_zone})")
    paused = ", disabled (paused)" if not e.enabled else ""
    return f"{e.alias} ({e.ping_uuid}): {every}, grace {c.grace_s} s{paused}"


async def _create(store: Any, account_id: int, entries: list[HeartbeatEntry],
                  monitor_limit: int, mapped: hcimport.HcImport) -> list[HeartbeatEntry]:
    """Create ``entries`` (as monitors as code would, one transaction each); one whose ping
    id another account holds is skipped and listed."""
    made = []
    for e in entries:
        try:
            _, beat = await store.create_heartbeat(
                account_id, alias=e.alias, config=e.config, monitor_limit=monitor_limit,
                ping_uuid=e.ping_uuid, slug=e.slug, key=e.key)
        except asyncpg.UniqueViolationError:
            mapped.skipped.append(hcimport.Unmapped(
                e.alias, e.ping_uuid, "another account holds this ping id"))
            continue
        if not e.enabled:
            await store.set_check_enabled(account_id, beat.check_id, False)
        made.append(e)
    return made


def import_healthchecks(settings: Settings, args: argparse.Namespace,
                        with_store: WithStore) -> int:
    try:
        data = _read(args.file)
        checks = hcimport.read_checks(data)
    except UsageError as exc:
        sys.stderr.write(f"{NAME}: {exc}\n")
        return USAGE
    except ValidationFailed as exc:
        sys.stderr.write(f"{args.file}: {exc.errors['file'][0]} Nothing was imported.\n")
        return 1

    async def go(store: Any) -> tuple[Any, hcimport.HcImport, list[str], int]:
        account = await account_of(store, args.account)
        current = await store.heartbeat_set(account.id)
        mapped = hcimport.map_checks(
            checks, slugs={c.slug: c.key for c in current if c.slug},
            owned_uuids={c.ping_uuid: c.key for c in current if c.ping_uuid})
        todo = plan(current, mapped.entries, prune=False)
        limit = settings.plan(account.plan).monitor_limit
        if await store.count_monitors(account.id) + len(todo.creates) > limit:
            raise LimitReached(
                f"Importing {plural(len(todo.creates), 'heartbeat')} would pass the"
                f" account's limit of {limit} monitors.")
        count = len(todo.creates) + len(todo.updates) + todo.unchanged
        verb = "would create" if args.dry_run else "created"
        lines = [f"{verb} {_describe(e)}" for e in todo.creates]
        lines += [f"{'would update' if args.dry_run else 'updated'} {_describe(d)}"
                  for _, d in todo.updates]
        if not args.dry_run:
            updates = [d for _, d in todo.updates]
            if updates:
                await apply_heartbeats(store, account.id, updates, prune=False,
                                       dry_run=False, monitor_limit=limit)
            made = await _create(store, account.id, todo.creates, limit, mapped)
            lines = [ln for ln in lines if not ln.startswith("created ")]
            lines = [f"created {_describe(e)}" for e in made] + lines
            count -= len(todo.creates) - len(made)
        return account, mapped, lines, count

    try:
        account, mapped, lines, count = with_store(settings, go, shown=sys.stdout)
    except UsageError as exc:
        sys.stderr.write(f"{NAME}: {exc}\n")
        return USAGE
    except LimitReached as exc:
        sys.stderr.write(f"{NAME}: {exc} Nothing was imported.\n")
        return 1
    for line in lines + mapped.lines():
        sys.stdout.write(line + "\n")
    done = "planned" if args.dry_run else "imported"
    sys.stdout.write(
        f"{os.path.basename(args.file)} -> account {account.id}: "
        f"{plural(count, 'heartbeat')} {done}, "
        f"{plural(len(mapped.skipped), 'check')} skipped, "
        f"{plural(len(mapped.not_kept), 'setting')} not kept.\n")
    return 0
