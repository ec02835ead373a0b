"""Carrying out a heartbeat plan (:mod:`engine.monitors.heartbeat_file`) through the store:
each create, update and delete in its own transaction, after the URL monitors of the same
file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from engine.monitors.heartbeat_file import HeartbeatEntry, HeartbeatPlan, plan


async def apply_heartbeats(
    store: Any, account_id: int, desired: Sequence[HeartbeatEntry], *, prune: bool,
    dry_run: bool, monitor_limit: int,
) -> HeartbeatPlan:
    """Make the account's heartbeats match ``desired``; the plan (carried out unless
    ``dry_run``)."""
    todo = plan(await store.heartbeat_set(account_id), desired, prune=prune)
    if dry_run:
        return todo
    for e in todo.creates:
        monitor, beat = await store.create_heartbeat(
            account_id, alias=e.alias, config=e.config, monitor_limit=monitor_limit,
            recovery_threshold=e.recovery_threshold, ping_uuid=e.ping_uuid, slug=e.slug,
            key=e.key)
        if e.assertions:
            await store.update_monitor(account_id, monitor.id, config=(None, e.assertions))
        if not e.enabled:
            await store.set_check_enabled(account_id, beat.check_id, False)
    for current, d in todo.updates:
        assert current.monitor_id is not None and current.check_id is not None
        if (current.alias, current.assertions or None) != (d.alias, d.assertions or None):
            await store.update_monitor(account_id, current.monitor_id, alias=d.alias,
                                       config=(None, d.assertions or None))
        if current.config != d.config:
            await store.update_heartbeat(account_id, current.check_id, asdict(d.config))
        if current.recovery_threshold != d.recovery_threshold:
            await store.update_check(account_id, current.check_id,
                                     recovery_threshold_s=d.recovery_threshold)
        if current.enabled != d.enabled:
            await store.set_check_enabled(account_id, current.check_id, d.enabled)
    for e in todo.deletes:
        assert e.monitor_id is not None
        await store.delete_monitor(account_id, e.monitor_id)
    return todo
