"""The ``upwatch`` command line. Thin: parse, load settings once, call into the package."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

import orjson

from engine import __version__
from engine.runtime.errors import ConfigError, UpwatchError
from engine.runtime.settings import Settings, load_settings

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

T = TypeVar("T")


_JSON_HELP = "print one JSON object per line (the database used is named on stderr)"
_EPILOG = """\
settings a newcomer needs first (environment variables, or keys of a settings file):
  UPWATCH_DATA_DIR     where the embedded PostgreSQL and local state live (default ./.upwatch);
                       every command uses the same one, so run them where the service runs or
                       set it to the service's (systemd units: /var/lib/upwatch)
  UPWATCH_PORT         the API's port (default 8080; UPWATCH_HOST: the address, 127.0.0.1)
  UPWATCH_ALLOW_PRIVATE_TARGETS=true   to monitor something on this machine or network

settings files, read by the service and every command without being named (the first wins):
  --config FILE / UPWATCH_CONFIG, <data dir>/upwatch.toml, /etc/upwatch/upwatch.toml;
  an environment variable beats them all. Every setting: config/upwatch.example.toml.
"""


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config", metavar="FILE",
        help="a TOML settings file that wins over <data dir>/upwatch.toml and "
             "/etc/upwatch/upwatch.toml (else UPWATCH_CONFIG)",
    )

    p = argparse.ArgumentParser(
        prog="upwatch", description="Upwatch website monitoring.", epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"upwatch {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", parents=[common], help="run the service")
    run.add_argument("--role", choices=["all", "api", "engine"], default="all",
                     help="all: API, check engine and deliveries in one process (default); "
                          "api or engine: one side, for instances sharing a database")

    sub.add_parser("migrate", parents=[common],
                   help="apply pending schema migrations and exit (creates the embedded "
                        "database if there is none)")

    acc = sub.add_parser("account", help="manage accounts")
    acc_sub = acc.add_subparsers(dest="account_command", required=True, metavar="COMMAND")
    create = acc_sub.add_parser("create", parents=[common], help="create an account")
    create.add_argument("--name", required=True, help="the account's name, shown in lists")
    create.add_argument("--webhook-url", default=None, metavar="URL",
                        help="where the account's signed webhooks go (default: none)")
    create.add_argument("--plan", default=None,
                        help="a plan defined in the settings ([plans.NAME]); default: "
                             "default_plan")
    create.add_argument("--operator", action="store_true", help="may list cluster nodes")
    create.add_argument("--json", action="store_true", help=_JSON_HELP)
    lst = acc_sub.add_parser("list", parents=[common], help="list accounts")
    lst.add_argument("--json", action="store_true", help=_JSON_HELP)
    rot = acc_sub.add_parser("rotate-token", parents=[common], help="issue a new API token")
    rot.add_argument("id", type=int, metavar="ID",
                     help="the account's id (upwatch account list); its old token stops working")
    rot.add_argument("--json", action="store_true", help=_JSON_HELP)
    nodes = sub.add_parser("nodes", parents=[common], help="list cluster nodes")
    nodes.add_argument("--json", action="store_true", help=_JSON_HELP)
    status = sub.add_parser("status", parents=[common], help="monitors and their checks' states")
    status.add_argument("--account", type=int, default=None, help="account id (default: all)")
    status.add_argument("--json", action="store_true", help=_JSON_HELP)
    exp = sub.add_parser("export", parents=[common],
                         help="write an account's monitors as a TOML file (monitors as code)")
    exp.add_argument("--account", type=int, default=None, help="account id (default: the only one)")
    exp.add_argument("file", nargs="?", default=None, metavar="FILE", help="default: stdout")
    app = sub.add_parser("apply", parents=[common],
                         help="make an account's monitors match a TOML file")
    app.add_argument("file", metavar="FILE", help="the file ('-': stdin)")
    app.add_argument("--account", type=int, default=None, help="account id (default: the only one)")
    app.add_argument("--prune", action="store_true", help="delete monitors the file lacks")
    app.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    imp = sub.add_parser("import", help="import monitors from another service")
    imp_sub = imp.add_subparsers(dest="import_command", required=True, metavar="SOURCE")
    hci = imp_sub.add_parser(
        "healthchecks", parents=[common],
        help="heartbeats from Healthchecks checks, keeping each uuid (ping URLs)",
        description="Create heartbeats from the JSON of Healthchecks' GET /api/v3/checks/ "
                    "(read with a read-write API key, so each check has its uuid). Each "
                    "heartbeat keeps its check's uuid: cron lines need only the host "
                    "changed. Importing again updates, never duplicates. What cannot be "
                    "mapped is listed by check name.")
    hci.add_argument("file", metavar="FILE",
                     help="the saved answer, e.g. curl -H 'X-Api-Key: KEY' "
                          "https://healthchecks.io/api/v3/checks/ > checks.json ('-': stdin)")
    hci.add_argument("--account", type=int, default=None,
                     help="account id (default: the only one)")
    hci.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    bak = sub.add_parser("backup", parents=[common],
                         help="write a consistent dump of the database to FILE, also while "
                              "the service runs (keep the secret key apart from it)")
    bak.add_argument("file", metavar="FILE",
                     help="the backup to write (a tar of pg_dump's custom format and a "
                          "header; mode 0600, replaced atomically)")
    res = sub.add_parser("restore", parents=[common],
                         help="restore a backup into an empty data directory or database")
    res.add_argument("file", metavar="FILE", help="a file written by upwatch backup")
    res.add_argument("--without-key", action="store_true",
                     help="restore even without the secret key the backup's secrets were "
                          "sealed with (they then cannot be read: no webhook or notification "
                          "is sent until the key is in place)")
    notify = sub.add_parser("notify", help="notification channels (Apprise URLs)")
    notify_sub = notify.add_subparsers(dest="notify_command", required=True, metavar="COMMAND")
    ntest = notify_sub.add_parser(
        "test", parents=[common],
        help="send a test message to an Apprise URL now; exit 0 if delivered, else 1",
    )
    ntest.add_argument("url", help="an Apprise URL, e.g. mailtos://user:pass@smtp.example.com")
    # Only listed here: main() hands everything after "bench" to the bench's own parser.
    sub.add_parser("bench", add_help=False,
                   help="measure capacity against local targets (the upwatch-bench package: "
                        "pip install ./bench from a checkout)")
    return p


def _with_store(
    settings: Settings,
    fn: Callable[[Any], Awaitable[T]],
    *,
    shown: TextIO | None = None,
    create: bool = False,
    detail: str = "",
) -> T:
    """Run ``fn(store)`` against the configured database, first naming it (and ``detail``)
    on ``shown`` when given. The embedded server is started if needed but created only
    with ``create`` (``upwatch migrate``): any other command exits 1 naming the data
    directory where there is none, and creates nothing."""
    import uvloop

    from engine.daemon import database, open_store

    if shown is not None:
        shown.write(f"Using {settings.database_label()}\n{detail}")
    if settings.database_url is None and not create:
        from engine.db.embedded_lease import require_database

        require_database(settings.data_dir)

    async def go(dsn: str) -> T:
        store = await open_store(dsn, max_size=2, settings=settings)
        try:
            return await fn(store)
        finally:
            await store.close()

    with database(settings) as (dsn, _lease):
        return uvloop.run(go(dsn))


def _shown(args: argparse.Namespace) -> TextIO:
    """Where a command names the database it used: the first line of its output, or
    stderr when that output is JSON."""
    return sys.stderr if getattr(args, "json", False) else sys.stdout


def _account_create(settings: Settings, args: argparse.Namespace) -> int:
    plan = args.plan or settings.default_plan
    if plan not in settings.plans:
        raise ConfigError(f"--plan: unknown plan {plan!r}; known: {', '.join(settings.plans)}")
    if args.webhook_url is not None:
        from engine.monitors.validation import validate_webhook_url

        args.webhook_url = asyncio.run(
            validate_webhook_url(args.webhook_url, allow_private=settings.allow_private_targets)
        )

    async def create(store: Any) -> tuple[Any, str]:
        return await store.create_account(
            args.name, plan=plan, webhook_url=args.webhook_url, is_operator=args.operator
        )

    account, token = _with_store(settings, create, shown=_shown(args))
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

    rows = _with_store(settings, fetch, shown=_shown(args))
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

    res = _with_store(settings, rotate, shown=_shown(args))
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


def _nodes(settings: Settings, args: argparse.Namespace) -> int:
    from engine.cluster.nodes import node_table
    from engine.domain.timefmt import fmt

    async def fetch(store: Any) -> list[dict[str, Any]]:
        return await node_table(store, settings)

    rows = _with_store(settings, fetch, shown=_shown(args))
    for row in rows:
        row["started_at"] = fmt(row["started_at"])
        row["last_heartbeat_at"] = fmt(row["last_heartbeat_at"])
    if args.json:
        for row in rows:
            sys.stdout.write(orjson.dumps(row).decode() + "\n")
        return 0
    sys.stdout.write(f"{'NODE':<34} {'REGION':<10} {'STATE':<9} {'CHECKS':>7}  "
                     f"{'LAST HEARTBEAT':<19}  URL\n")
    for r in rows:
        state = "stopping" if r["stopping"] else ("live" if r["live"] else "dead")
        sys.stdout.write(f"{r['id'][:34]:<34} {r['region'][:10]:<10} {state:<9} "
                         f"{r['checks_owned']:>7}  {r['last_heartbeat_at']:<19}  {r['url']}\n")
        if r["load"] is not None:
            sys.stdout.write(f"  {_load_words(r['load'])}\n")
    return 0


def _load_words(load: dict[str, Any]) -> str:
    """A node's load in one line: asked, done, capacity, ratio, and the cost per probe."""
    costs = ", ".join(f"{k} {v:.0f} us" for k, v in load["cost_us_by_kind"].items())
    over = "OVERLOADED: " if load["overloaded"] else ""
    headroom = load["capacity_per_s"] - load["asked_per_s"]
    return (f"{over}asked {load['asked_per_s']:.0f} probes/s, doing {load['done_per_s']:.0f}/s, "
            f"capacity {load['capacity_per_s']:.0f}/s (load {load['ratio']:.2f}, "
            f"headroom {headroom:.0f}/s); CPU per probe: {costs or 'not measured yet'}")


def _status(settings: Settings, args: argparse.Namespace) -> int:
    from engine.cluster.nodes import node_table
    from engine.domain.timefmt import fmt
    from engine.domain.words import plural

    nodes: list[dict[str, Any]] = []

    async def fetch(store: Any) -> list[tuple[Any, list[Any]]]:
        accounts = [a for a, _ in await store.list_accounts()]
        if args.account is not None:
            accounts = [a for a in accounts if a.id == args.account]
            if not accounts:
                raise UpwatchError(f"no account with id {args.account}")
        nodes.extend(n for n in await node_table(store, settings) if n["live"])
        return [(a, await store.list_monitors(a.id)) for a in accounts]

    shown = _shown(args)
    files = ", ".join(str(f) for f in settings.files) or "none (environment and defaults)"
    from engine.monitors import schemes

    data = _with_store(settings, fetch, shown=shown, detail=(
        f"Settings files: {files}\nMonitor URL schemes: {', '.join(schemes.names())}\n"))
    if args.json:
        for n in nodes:
            sys.stdout.write(orjson.dumps({"node": n["id"], "region": n["region"],
                                           "load": n["load"]}).decode() + "\n")
        for account, monitors in data:
            for m in monitors:
                up, cert = m.checks.get("uptime"), m.checks.get("certificate_health")
                sys.stdout.write(orjson.dumps({
                    "account": account.id, "monitor": m.id, "alias": m.alias, "url": m.url,
                    "uptime": up and up.status, "uptime_error": up and up.error,
                    "certificate_health": cert and cert.status,
                    "certificate_error": cert and cert.error,
                    "last_check_at": fmt(up and up.last_check_at),
                }).decode() + "\n")
        return 0
    for n in nodes:
        load = _load_words(n["load"]) if n["load"] is not None else "no engine"
        sys.stdout.write(f"Node {n['id']} ({n['region']}): {load}\n")
    from engine.probes.icmp import ping_access

    sys.stdout.write(f"Ping (icmp:// monitors) from this node: {ping_access().words()}\n")
    for account, monitors in data:
        sys.stdout.write(f"Account {account.id} ({account.name}): "
                         f"{plural(len(monitors), 'monitor')}\n")
        if not monitors:
            continue
        sys.stdout.write(f"  {'ID':>6}  {'ALIAS':<28} {'UPTIME':<9} {'CERT':<9} {'30D %':>8}  "
                         f"{'LAST CHECK':<19}  ERROR\n")
        for m in monitors:
            up, cert = m.checks.get("uptime"), m.checks.get("certificate_health")
            err = (up and up.error) or (cert and cert.error) or ""
            pct = f"{m.uptime.uptime_percentage:>8.3f}" if m.uptime is not None else f"{'-':>8}"
            sys.stdout.write(
                f"  {m.id:>6}  {m.alias[:28]:<28} {up.status if up else '-':<9} "
                f"{cert.status if cert else '-':<9} {pct}  "
                f"{fmt(up and up.last_check_at) or '-':<19}  {err[:60]}\n")
    return 0


def _apply(settings: Settings, args: argparse.Namespace, apply: Callable[..., int]) -> int:
    """``upwatch apply``, then (in the same database session) a warning on stderr when the
    enabled checks now ask for more than the live nodes can hold. Never refuses."""
    from engine.cluster.nodes import capacity_check

    said: list[str] = []

    def with_store(settings: Settings, fn: Callable[[Any], Awaitable[T]], **kw: Any) -> T:
        async def then_check(store: Any) -> T:
            result = await fn(store)
            if not args.dry_run:
                warning = await capacity_check(store, settings)
                if warning is not None:
                    said.append(warning)
            return result

        return _with_store(settings, then_check, **kw)

    code = apply(settings, args, with_store)
    for warning in said:
        sys.stderr.write(f"upwatch apply: warning: {warning}\n")
    return code


def _notify_test(settings: Settings, args: argparse.Namespace) -> int:
    """Send the test message to ``args.url`` without the daemon or a database: exit 0 when
    the service took it, 1 with its reason (secrets masked) when not."""
    import uvloop

    from engine.delivery.notify import urls
    from engine.delivery.notify.sender import send_test

    try:
        parsed = urls.parse(args.url)
    except UpwatchError as exc:
        errors = getattr(exc, "errors", {}) or {}
        sys.stderr.write(f"upwatch: {'; '.join(m for ms in errors.values() for m in ms)}\n")
        return 1
    shown = urls.masked(parsed.url)
    result = uvloop.run(send_test(
        parsed.url, allow_private=settings.allow_private_targets,
        timeout=settings.notify_timeout,
    ))
    if result.delivered:
        sys.stdout.write(f"delivered to {shown}\n")
        return 0
    sys.stderr.write(f"upwatch: not delivered to {shown}: {result.error}\n")
    return 1


def _migrate(settings: Settings, args: argparse.Namespace) -> int:
    async def noop(store: Any) -> None:  # open_store applies migrations
        return None

    _with_store(settings, noop, shown=sys.stdout, create=True)
    sys.stdout.write("schema is up to date\n")
    return 0


def _backup(settings: Settings, args: argparse.Namespace) -> int:
    """Dump the database beside a running service (engine/db/backup.py); never migrates."""
    import uvloop

    from engine.daemon import database
    from engine.db import backup

    sys.stdout.write(f"Using {settings.database_label()}\n")
    if settings.database_url is None:
        from engine.db.embedded_lease import require_database

        require_database(settings.data_dir)
    key = backup.find_key(settings)
    target = Path(args.file).expanduser().absolute()
    with database(settings) as (dsn, _lease):
        done = uvloop.run(backup.write_backup(
            dsn, target, key, embedded=settings.database_url is None, version=__version__,
        ))
    head = done.header
    sys.stdout.write(
        f"Wrote {args.file} ({done.size} bytes of dump, one snapshot taken "
        f"{head['created_at']}, schema version {head['schema_version']}): "
        f"{backup.describe_counts(head['counts'])}.\n")
    if head["secret_key_fingerprint"]:
        sys.stdout.write(
            f"Its secrets need the secret key of fingerprint {head['secret_key_fingerprint']} "
            f"({key.where}): keep a copy of it, apart from this file.\n")
    if done.key_warning:
        sys.stderr.write(f"upwatch: warning: {done.key_warning}\n")
    return 0


def _restore(settings: Settings, args: argparse.Namespace) -> int:
    from engine.db import backup, restore

    sys.stdout.write(f"Using {settings.database_label()}\n")
    done = restore.restore(settings, Path(args.file), without_key=args.without_key)
    head = done.header
    sys.stdout.write(
        f"Restored {args.file} (taken {head['created_at']}, schema version "
        f"{head['schema_version']}): {backup.describe_counts(head['counts'])}.\n"
        "Start it with `upwatch run`: it migrates the schema if needed and sends what is "
        "pending.\n")
    if done.key_note:
        sys.stderr.write(f"upwatch: warning: restored without its secret key: "
                         f"{done.key_note}\n")
    return 0


def _bench(argv: list[str]) -> int:
    """``upwatch bench ...``: the bench's own command line, when the bench is installed."""
    try:
        from upwatch_bench.cli import main as bench_main
    except ModuleNotFoundError as exc:
        if exc.name != "upwatch_bench":
            raise
        sys.stderr.write("upwatch bench: the bench is not installed; from a checkout of "
                         "upwatch: pip install ./bench\n")
        return 2
    code: int = bench_main(argv, prog="upwatch bench")
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        return _bench(argv[1:])
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(getattr(args, "config", None))
        from engine.runtime import logs

        logs.configure(settings.log_level, settings.log_format)
        if args.command != "notify":
            from engine.runtime.secretbox import SecretBox

            SecretBox.from_settings(settings)  # a key file others may read stops us here
        if args.command == "run":
            from engine.daemon import run

            return run(settings, args.role)
        if args.command == "migrate":
            return _migrate(settings, args)
        if args.command == "backup":
            return _backup(settings, args)
        if args.command == "restore":
            return _restore(settings, args)
        if args.command == "nodes":
            return _nodes(settings, args)
        if args.command == "status":
            return _status(settings, args)
        if args.command in ("export", "apply"):
            from engine.monitors import commands as monitorcli

            if args.command == "export":
                return monitorcli.export(settings, args, _with_store)
            return _apply(settings, args, monitorcli.apply)
        if args.command == "import":
            from engine.monitors.hcimport_command import import_healthchecks

            return import_healthchecks(settings, args, _with_store)
        if args.command == "notify":
            return _notify_test(settings, args)
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
