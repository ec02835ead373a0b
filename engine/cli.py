"""The ``upwatch`` command line. Thin: parse, load settings once, call into the package."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from engine import __version__
from engine.errors import ConfigError, UpwatchError
from engine.settings import Settings, load_settings

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

T = TypeVar("T")


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", help="TOML settings file (else UPWATCH_CONFIG)")

    p = argparse.ArgumentParser(prog="upwatch", description="Upwatch website monitoring.")
    p.add_argument("--version", action="version", version=f"upwatch {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", parents=[common], help="run the service")
    run.add_argument("--role", choices=["all", "api", "engine"], default="all")

    sub.add_parser("migrate", parents=[common], help="apply pending schema migrations and exit")

    acc = sub.add_parser("account", help="manage accounts")
    acc_sub = acc.add_subparsers(dest="account_command", required=True)
    create = acc_sub.add_parser("create", parents=[common], help="create an account")
    create.add_argument("--name", required=True)
    create.add_argument("--webhook-url", default=None)
    create.add_argument("--plan", default=None)
    create.add_argument("--operator", action="store_true", help="may list cluster nodes")
    create.add_argument("--json", action="store_true", help="print one JSON object")
    lst = acc_sub.add_parser("list", parents=[common], help="list accounts")
    lst.add_argument("--json", action="store_true")
    rot = acc_sub.add_parser("rotate-token", parents=[common], help="issue a new API token")
    rot.add_argument("id", type=int)
    rot.add_argument("--json", action="store_true")
    return p


def _with_store(settings: Settings, fn: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``fn(store)`` against the configured database (embedded started if needed)."""
    import uvloop

    from engine.daemon import database, open_store

    async def go(dsn: str) -> T:
        store = await open_store(dsn, max_size=2)
        try:
            return await fn(store)
        finally:
            await store.close()

    with database(settings) as (dsn, _server):
        return uvloop.run(go(dsn))


def _account_create(settings: Settings, args: argparse.Namespace) -> int:
    plan = args.plan or settings.default_plan
    if plan not in settings.plans:
        raise ConfigError(f"--plan: unknown plan {plan!r}; known: {', '.join(settings.plans)}")
    if args.webhook_url is not None:
        from engine.web.validation import validate_webhook_url

        args.webhook_url = asyncio.run(
            validate_webhook_url(args.webhook_url, allow_private=settings.allow_private_targets)
        )

    async def create(store: Any) -> tuple[Any, str]:
        return await store.create_account(
            args.name, plan=plan, webhook_url=args.webhook_url, is_operator=args.operator
        )

    account, token = _with_store(settings, create)
    if args.json:
        sys.stdout.write(
            orjson.dumps({"id": account.id, "name": account.name, "token": token}).decode() + "\n"
        )
    else:
        sys.stdout.write(
            f"Created account {account.id} ({account.name}), plan {account.plan}.\n"
            f"API token (shown only now): {token}\n"
        )
    return 0


def _account_list(settings: Settings, args: argparse.Namespace) -> int:
    async def fetch(store: Any) -> Any:
        return await store.list_accounts()

    rows = _with_store(settings, fetch)
    if args.json:
        for acc, count in rows:
            sys.stdout.write(
                orjson.dumps(
                    {
                        "id": acc.id,
                        "name": acc.name,
                        "plan": acc.plan,
                        "webhook_url": acc.webhook_url,
                        "is_operator": acc.is_operator,
                        "monitors": count,
                    }
                ).decode()
                + "\n"
            )
        return 0
    sys.stdout.write(f"{'ID':>5}  {'NAME':<24} {'PLAN':<12} {'MONITORS':>8}  WEBHOOK URL\n")
    for acc, count in rows:
        sys.stdout.write(
            f"{acc.id:>5}  {acc.name[:24]:<24} {acc.plan[:12]:<12} {count:>8}  "
            f"{acc.webhook_url or '-'}\n"
        )
    return 0


def _account_rotate(settings: Settings, args: argparse.Namespace) -> int:
    async def rotate(store: Any) -> Any:
        return await store.rotate_token(args.id)

    res = _with_store(settings, rotate)
    if res is None:
        sys.stderr.write(f"upwatch: no account with id {args.id}\n")
        return 1
    account, token = res
    if args.json:
        sys.stdout.write(orjson.dumps({"id": account.id, "token": token}).decode() + "\n")
    else:
        sys.stdout.write(
            f"New API token for account {account.id} (the old one stops working): {token}\n"
        )
    return 0


def _migrate(settings: Settings, args: argparse.Namespace) -> int:
    async def noop(store: Any) -> None:  # open_store applies migrations
        return None

    _with_store(settings, noop)
    sys.stdout.write("schema is up to date\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(getattr(args, "config", None))
        from engine import logs

        logs.configure(settings.log_level, settings.log_format)
        if args.command == "run":
            from engine.daemon import run

            return run(settings, args.role)
        if args.command == "migrate":
            return _migrate(settings, args)
        if args.command == "account":
            return {
                "create": _account_create,
                "list": _account_list,
                "rotate-token": _account_rotate,
            }[args.account_command](settings, args)
    except ConfigError as exc:
        sys.stderr.write(f"upwatch: {exc}\n")
        return 2
    except UpwatchError as exc:
        sys.stderr.write(f"upwatch: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    logging.getLogger(__name__).error("unknown command")
    return 2
