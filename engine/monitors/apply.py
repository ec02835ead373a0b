"""Monitors as code, end to end: export an account's monitors as a document, and apply a
document to an account. Shared by ``upwatch export``/``upwatch apply`` and
``GET /webapi/monitors/export``/``PUT /webapi/monitors``, so both follow the same rules.

Applying: validate every entry (engine.monitors.file: the API's rules), plan against the
account's monitors (engine.monitors.plan), apply the private-address rule to every URL that
is new or changed, then carry the plan out in one transaction (engine.db.monitor_batches),
re-planned under the account's lock so that a concurrent change is not overwritten blindly.
An unchanged file writes nothing: no lock, no row, no NOTIFY.

A monitor's ``request`` and ``assertions`` follow the file's rule for every
field: the file states the whole monitor, so an entry without them means a monitor
without them (as a dropped ``alias`` means the default alias), and an entry's ``request``
replaces the stored one whole. As in the API's update, a header value ``"********"`` keeps
the stored value of that header (any case): a file exported with its secrets masked
applies back unchanged, while on a monitor without that header (one the file creates, say)
it is refused, as it is on an entry whose URL moves to another origin (the secret was
given for the old one). Secret values are stored encrypted
(engine.monitors.requests.to_stored).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from engine.domain.secretheaders import origin, origin_text
from engine.domain.words import plural
from engine.monitors import file as monitorfile
from engine.monitors import requests as requestconfig
from engine.monitors import validation
from engine.monitors.heartbeat_apply import apply_heartbeats
from engine.monitors.heartbeat_file import HEARTBEATS, HeartbeatPlan, validate_entries
from engine.monitors.heartbeat_file import entry_of as heartbeat_entry
from engine.monitors.offloop import off_loop
from engine.monitors.plan import MonitorSpec, Plan, SameRequest, plan
from engine.probes import patterns
from engine.runtime.errors import LimitReached, ValidationFailed
from engine.runtime.secretbox import SecretBox
from engine.runtime.settings import Plan as AccountPlan
from engine.runtime.settings import Settings

# DNS look-ups at once for the private-address rule of an apply.
RESOLVE_CONCURRENCY = 16
# Entries a file may hold, whatever the plan (checked before any entry is validated).
MAX_ENTRIES = 20_000
# Compiling new patterns a file may cost (engine.probes.patterns.allowance): about 20,000
# JSONPaths or small regexes, or 500 of the largest.
PATTERN_ALLOWANCE = 20_000


class ApplyProgress(Protocol):
    """Told how far an apply is: ``start(phase, total)``, ``advance(n)`` any number of
    times, ``done()``."""

    def start(self, phase: str, total: int) -> None: ...

    def advance(self, n: int) -> None: ...

    def done(self) -> None: ...


@dataclass
class ApplyResult:
    plan: Plan
    specs: list[MonitorSpec]
    created_ids: dict[int, int]  # entry index -> new monitor id
    dry_run: bool
    # The file's [[heartbeats]] (engine.monitors.heartbeat_file); None: it names none.
    heartbeats: HeartbeatPlan | None = None

    def as_json(self) -> dict[str, Any]:
        """The answer of ``PUT /webapi/monitors``: what was (with ``dry_run``: would be)
        created, updated and deleted."""
        p = self.plan
        return {
            "dry_run": self.dry_run,
            "created": [{"index": i, "id": self.created_ids.get(i), "key": s.key, "url": s.url}
                        for i, s in p.creates],
            "updated": [{"index": u.index, "id": u.current.id, "key": u.desired.key,
                         "url": u.desired.url, "changes": list(u.changes)}
                        for u in p.updates],
            "deleted": [{"id": m.id, "key": m.spec.key, "url": m.spec.url}
                        for m in p.deletes],
            "unchanged": p.unchanged,
            "kept": p.kept,
            **({} if self.heartbeats is None else {"heartbeats": self.heartbeats.as_json()}),
        }

    def lines(self) -> list[str]:
        """The plan, one line per create, update and delete (``upwatch apply --dry-run``)."""
        out = []
        for _, s in self.plan.creates:
            out.append(f"create  {_name(s.key, s.url)}")
        for u in self.plan.updates:
            out.append(f"update  {_name(u.desired.key, u.desired.url)} (monitor {u.current.id}):"
                       f" {', '.join(u.changes)}")
        for m in self.plan.deletes:
            out.append(f"delete  {_name(m.spec.key, m.spec.url)} (monitor {m.id})")
        if self.heartbeats is not None:
            out += self.heartbeats.lines()
        return out

    def summary(self) -> str:
        """What was done, each count with its verb in English number: "1 monitor was
        created, 2 were updated, 0 were deleted, 3 were unchanged" (``dry_run``: "would
        be")."""
        p = self.plan
        created = len(p.creates)
        text = (f"{plural(created, 'monitor')} {self._verb(created)} created, "
                f"{len(p.updates)} {self._verb(len(p.updates))} updated, "
                f"{len(p.deletes)} {self._verb(len(p.deletes))} deleted, "
                f"{p.unchanged} {self._verb(p.unchanged)} unchanged")
        if p.kept:
            it = "it" if p.kept == 1 else "them"
            text += (f", {p.kept} not in the file {self._verb(p.kept)} kept"
                     f" (--prune deletes {it})")
        h = self.heartbeats
        if h is not None:
            text += (f"; {plural(len(h.creates), 'heartbeat')} "
                     f"{self._verb(len(h.creates))} created, {len(h.updates)} "
                     f"{self._verb(len(h.updates))} updated, {len(h.deletes)} "
                     f"{self._verb(len(h.deletes))} deleted, {h.unchanged} "
                     f"{self._verb(h.unchanged)} unchanged")
        return text

    def _verb(self, n: int) -> str:
        if self.dry_run:
            return "would be"
        return "was" if n == 1 else "were"


def _name(key: str | None, url: str) -> str:
    return f"{key} ({url})" if key is not None else url


class TargetCheck:
    """The private-address rule (``settings.allow_private_targets``) for the URLs a plan
    creates or changes: each host and port resolved once per apply, a few at a time.
    Raises ValidationFailed keyed ``monitors[<index>].url`` for every entry refused."""

    def __init__(self, settings: Settings, progress: ApplyProgress | None = None) -> None:
        self._allow = settings.allow_private_targets
        self._progress = progress
        self._verdicts: dict[tuple[str, str, str], list[str] | None] = {}

    async def __call__(self, todo: Plan) -> None:
        if self._allow:
            return
        entries = [(i, s) for i, s in todo.creates]
        entries += [(u.index, u.desired) for u in todo.updates if u.url_changed]
        pending: dict[tuple[str, str, str], MonitorSpec] = {}
        for _, s in entries:
            where = (s.scheme, s.host, s.port)
            if where not in self._verdicts:
                pending.setdefault(where, s)
        if pending:
            await self._resolve(pending)
        errors: dict[str, list[str]] = {}
        for i, s in entries:
            messages = self._verdicts[(s.scheme, s.host, s.port)]
            if messages:
                errors[monitorfile.entry_field(i, "url")] = list(messages)
        if errors:
            n = len(errors)
            raise ValidationFailed(
                errors, f"{plural(n, 'monitor URL')} {'is' if n == 1 else 'are'} not allowed.")

    async def _resolve(self, pending: dict[tuple[str, str, str], MonitorSpec]) -> None:
        gate = asyncio.Semaphore(RESOLVE_CONCURRENCY)
        if self._progress is not None and len(pending) > 1:
            self._progress.start("checking addresses", len(pending))

        async def one(where: tuple[str, str, str], s: MonitorSpec) -> None:
            target = validation.TargetUrl(url=s.url, scheme=s.scheme, host=s.host, port=s.port)
            async with gate:
                try:
                    await validation.check_target(target, allow_private=False)
                    self._verdicts[where] = None
                except ValidationFailed as exc:
                    self._verdicts[where] = [m for ms in exc.errors.values() for m in ms]
            if self._progress is not None and len(pending) > 1:
                self._progress.advance(1)

        await asyncio.gather(*(one(w, s) for w, s in pending.items()))
        if self._progress is not None and len(pending) > 1:
            self._progress.done()


def unkept_masks(todo: Plan) -> None:
    """Refuse a plan that would keep a stored secret a monitor does not have: a header
    value ``"********"`` in an entry created, or updated to a request without that header,
    or in an entry whose URL moves to another origin (the secret was given for the old one).
    ValidationFailed keyed ``monitors[<index>].request.headers.<name>``."""
    errors: dict[str, list[str]] = {}
    entries = [(i, s, None) for i, s in todo.creates]
    entries += [(u.index, u.desired, u.current.spec.request) for u in todo.updates
                if "request" in u.changes]
    for i, s, previous in entries:
        if s.request is not None:
            for name, messages in requestconfig.unkept_masks(s.request, previous).items():
                errors[monitorfile.entry_field(i, name)] = messages
    for u in todo.updates:
        # Secrets stay with the origin they were given for (as the API's update).
        was, now = u.current.spec, u.desired
        moved = origin(now.scheme, now.host, now.port)
        if moved != origin(was.scheme, was.host, was.port):
            given = requestconfig.Config.REMOVE if now.request is None else now.request
            for name, messages in requestconfig.moved_secrets(
                    given, was.request, origin_text(moved)).items():
                errors[monitorfile.entry_field(u.index, name)] = messages
    if errors:
        n = len(errors)
        raise ValidationFailed(errors, f"{plural(n, 'masked header value')}"
                                       " cannot keep a stored value.")


def _request_rules(box: SecretBox) -> SameRequest:
    def same(stored: Any, desired: Any) -> bool:
        return requestconfig.same_request(stored, desired, box)
    return same


def _entry_count(doc: Any) -> int:
    """How many entries the document's ``monitors`` list holds (0 when it is not a list);
    over :data:`MAX_ENTRIES`, a 422 under ``monitors``."""
    raw = doc.get(monitorfile.MONITORS) if isinstance(doc, dict) else None
    count = len(raw) if isinstance(raw, list) else 0
    if count > MAX_ENTRIES:
        raise ValidationFailed({monitorfile.MONITORS: [
            f"A file may hold at most {MAX_ENTRIES} monitors; this one holds {count}."]})
    return count


def _validated(doc: Any, account_plan: AccountPlan) -> list[MonitorSpec]:
    """validate_document under the pattern allowance (run in a worker thread)."""
    try:
        with patterns.allowance(PATTERN_ALLOWANCE):
            return monitorfile.validate_document(doc, account_plan)
    except patterns.TooManyPatterns:
        raise ValidationFailed({monitorfile.MONITORS: [
            "The file's regular expressions and JSONPaths take too long to check (over"
            f" {PATTERN_ALLOWANCE} units: a JSONPath or small regex is 1, a large regex up"
            " to 41); repeat patterns or make them smaller."]}) from None


async def apply_document(
    store: Any,
    settings: Settings,
    account_id: int,
    plan_name: str,
    doc: Any,
    *,
    prune: bool = False,
    dry_run: bool = False,
    progress: ApplyProgress | None = None,
) -> ApplyResult:
    """Make the account's monitors match ``doc`` (the JSON form). ValidationFailed lists
    every bad entry (keys ``monitors[<index>].<field>``) and nothing is written;
    LimitReached when the file holds more monitors than the plan allows."""
    account_plan = settings.plan(plan_name)
    beats = (validate_entries(doc[HEARTBEATS])
             if isinstance(doc, dict) and HEARTBEATS in doc else None)
    result = await _apply_monitors(store, settings, account_id, account_plan, doc,
                                   prune=prune, dry_run=dry_run, progress=progress)
    if beats is not None:
        result.heartbeats = await apply_heartbeats(
            store, account_id, beats, prune=prune, dry_run=dry_run,
            monitor_limit=account_plan.monitor_limit)
    return result


async def _apply_monitors(
    store: Any, settings: Settings, account_id: int, account_plan: AccountPlan, doc: Any, *,
    prune: bool, dry_run: bool, progress: ApplyProgress | None,
) -> ApplyResult:
    """The ``[[monitors]]`` part of :func:`apply_document`."""
    entries = _entry_count(doc)
    current = await store.monitor_set(account_id)
    # Counted before any entry is validated: a file too large for the plan is refused at
    # once. Entries name distinct monitors, so more entries than the account has means a
    # create, and at least as many monitors after as entries.
    if entries > account_plan.monitor_limit and entries > len(current):
        raise LimitReached(f"The file holds {entries} monitors; the account's limit is "
                           f"{account_plan.monitor_limit}.")
    specs = await off_loop(lambda: _validated(doc, account_plan), monitor_set=True)
    target_check = TargetCheck(settings, progress)
    box = requestconfig.secret_box(settings)
    same_request = _request_rules(box)

    async def check(todo: Plan) -> None:
        unkept_masks(todo)
        await target_check(todo)

    def store_request(request: Any, previous: Any) -> Any:
        return requestconfig.to_stored(request, box, previous)

    todo = plan(current, specs, prune=prune, same_request=same_request)
    over = todo.over_limit(len(current), account_plan.monitor_limit)
    if over is not None:
        raise LimitReached(over)
    await check(todo)
    if dry_run or todo.empty:
        return ApplyResult(todo, specs, {}, dry_run)
    step: Callable[[int], None] | None = None
    if progress is not None:
        progress.start("writing", len(todo.creates) + len(todo.updates) + len(todo.deletes))
        step = progress.advance
    todo, created = await store.apply_monitor_set(
        account_id, specs, prune=prune, monitor_limit=account_plan.monitor_limit,
        verify=check, progress=step, same_request=same_request,
        store_request=store_request)
    if progress is not None:
        progress.done()
    return ApplyResult(todo, specs, created, False)


async def export_document(store: Any, account_id: int) -> dict[str, Any]:
    """The account's monitors as a document (JSON form), in id order; its heartbeats under
    ``heartbeats`` when it has any."""
    doc = monitorfile.export_document(await store.monitor_set(account_id))
    beats = await store.heartbeat_set(account_id)
    if beats:
        doc[HEARTBEATS] = [heartbeat_entry(b) for b in beats]
    return doc
