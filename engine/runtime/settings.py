"""Settings, validated once at start-up, the same for the service and every command.

Sources, highest priority first: keyword arguments, ``UPWATCH_*`` environment variables,
``UPWATCH_*_FILE`` (a file holding the value: systemd credentials), then the TOML files
(keys are the names without the prefix, lower case): the one given by ``--config`` or
``UPWATCH_CONFIG``, ``<data_dir>/upwatch.toml``, ``/etc/upwatch/upwatch.toml``. Each file
is read when it exists, the more specific winning key by key. ``data_dir`` itself comes from
the sources above the data directory's file (it is where that file is looked for), so that
file may not set it; a key no setting has is an error naming the file and the key.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from engine.runtime.errors import ConfigError

ALLOWED_INTERVALS: tuple[int, ...] = (
    30,
    60,
    120,
    300,
    900,
    1800,
    3600,
    7200,
    14400,
    28800,
    86400,
)
ALLOWED_THRESHOLDS: tuple[int, ...] = (0, 15, 30, 60, 120, 300, 600, 900, 1800)

# Settings that may hold secrets and so may come from ``UPWATCH_<NAME>_FILE``.
_FILE_SETTINGS = ("database_url", "cluster_secret", "secret_key")

# The settings files read without being named (the explicit one comes from --config or
# UPWATCH_CONFIG): the system's, and the one in the data directory.
SYSTEM_FILE = Path("/etc/upwatch/upwatch.toml")
DATA_DIR_FILE = "upwatch.toml"
DEFAULT_DATA_DIR = Path("./.upwatch")


class Plan(BaseModel):
    """What an account on a plan may do."""

    allowed_intervals: list[int] = Field(default_factory=lambda: list(ALLOWED_INTERVALS))
    monitor_limit: int = Field(default=10_000, ge=0)

    @field_validator("allowed_intervals")
    @classmethod
    def _intervals_known(cls, v: list[int]) -> list[int]:
        bad = [i for i in v if i not in ALLOWED_INTERVALS]
        if bad:
            raise ValueError(f"intervals {bad} are not among {list(ALLOWED_INTERVALS)}")
        if not v:
            raise ValueError("a plan must allow at least one interval")
        return sorted(set(v))


class _FileSecretsSource(PydanticBaseSettingsSource):
    """Reads ``UPWATCH_<NAME>_FILE`` for secret settings, else the systemd credential
    ``<name>`` when there is one (``LoadCredential=<name>:...``, in
    ``$CREDENTIALS_DIRECTORY``)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        creds = os.environ.get("CREDENTIALS_DIRECTORY")
        for name in _FILE_SETTINGS:
            path = os.environ.get(f"UPWATCH_{name.upper()}_FILE")
            if not path and creds and os.path.isfile(os.path.join(creds, name)):
                path = os.path.join(creds, name)
            if path:
                try:
                    out[name] = Path(path).read_text(encoding="utf-8").strip()
                except OSError as exc:
                    raise ConfigError(
                        f"UPWATCH_{name.upper()}_FILE: cannot read {path}: {exc.strerror}"
                    ) from exc
        return out


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="UPWATCH_",
        extra="ignore",
        case_sensitive=False,
        validate_default=True,
    )

    database_url: SecretStr | None = None
    data_dir: Path = Path("./.upwatch")
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    base_url: str | None = None
    region: str = Field(default="local", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    node_url: str | None = None
    cluster_secret: SecretStr | None = None
    # Fernet key for secrets at rest (engine/runtime/secretbox.py); unset: <data_dir>/secret.key.
    secret_key: SecretStr | None = None
    time_scale: float = Field(default=1.0, gt=0, le=1000)
    probe_timeout: float = Field(default=10.0, gt=0, le=300)
    slow_threshold_ms: int = Field(default=3000, gt=0)
    allow_private_targets: bool = False
    probe_source_address: str | None = None
    ca_bundle: Path | None = None
    # Probe name lookups (engine/probes/resolver.py). dns_servers: "ip[:port]" separated by
    # commas; empty: those of resolv.conf. TTLs in seconds.
    dns_servers: str = ""
    dns_timeout: float = Field(default=2.0, gt=0, le=60)
    dns_tries: int = Field(default=2, ge=1, le=10)
    dns_min_ttl: float = Field(default=5.0, ge=0, le=86_400)
    dns_max_ttl: float = Field(default=3600.0, ge=0, le=604_800)
    dns_negative_ttl: float = Field(default=30.0, ge=0, le=3600)
    dns_failure_ttl: float = Field(default=5.0, ge=0, le=600)
    dns_cache_names: int = Field(default=200_000, ge=1, le=10_000_000)
    # A name's last answer served this long past its TTL while our resolver times out (RFC
    # 8767 serve-stale; 0: never). Answers about the name (NXDOMAIN, SERVFAIL) are not.
    dns_serve_stale: float = Field(default=300.0, ge=0, le=86_400)
    # TLS sessions the uptime probes keep to resume (engine/probes/sessions.py): one per
    # HTTPS address, port and name, ~0.5 KB each; 0: every handshake full.
    tls_sessions: int = Field(default=50_000, ge=0, le=10_000_000)
    # Under load (the probes' sockets waking the loop more than once per this interval),
    # their events are taken every this many ms instead of one wake-up each: at 1 ms, 18%
    # less CPU per HTTPS probe at 633 a second, and each step of a probe may wait up to this
    # long (+3 ms a resumed HTTPS probe; engine/probes/reactor.py). 0: every ready socket at
    # once, whatever the load.
    probe_batch_ms: float = Field(default=1.0, ge=0, le=50)
    # Body bytes a probe reads for its body and json assertions (engine/probes/request.py).
    max_assertion_body: int = Field(default=1 << 20, ge=1024, le=64 << 20)
    # Domain expiry (docs/domain-expiry.md): where the IANA RDAP bootstrap is read (http(s)
    # or file://; the bundled copy serves when it cannot be), and one registry query's limit.
    rdap_bootstrap_url: str = "https://data.iana.org/rdap/dns.json"
    rdap_timeout: float = Field(default=10.0, gt=0, le=120)

    # Operations
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    # Where the very first start shows the first account's token (engine/daemon.py): "auto",
    # on stdout when it is a terminal, else in <data_dir>/first-token (0600); "print", on
    # stdout always (a container's log, readable only by who controls the container).
    first_token: Literal["auto", "print"] = "auto"

    # Engine capacity
    max_in_flight: int = Field(default=1000, ge=1, le=100_000)
    per_host_limit: int = Field(default=8, ge=1, le=10_000)
    result_buffer_limit: int = Field(default=200_000, ge=100)
    result_flush_interval: float = Field(default=0.5, gt=0, le=60)
    resync_interval: float = Field(default=30.0, gt=0)
    results_retention_days: int = Field(default=8, ge=1, le=400)
    rollup_retention_days: int = Field(default=400, ge=31)

    # Cluster
    heartbeat_interval: float = Field(default=5.0, gt=0, le=600)

    # Webhooks
    webhook_timeout: float = Field(default=10.0, gt=0, le=120)
    webhook_concurrency: int = Field(default=64, ge=1, le=10_000)

    # Notification channels (engine.delivery.notify): seconds one Apprise try may take, threads that
    # send (Apprise's providers block), and the alert-storm window (seconds, scaled by
    # time_scale) with the number of events per channel and window sent one by one.
    notify_timeout: float = Field(default=15.0, gt=0, le=300)
    notify_threads: int = Field(default=4, ge=1, le=64)
    notify_group_seconds: float = Field(default=30.0, ge=0, le=86_400)
    notify_group_max: int = Field(default=5, ge=0, le=10_000)

    # API
    rate_limit_per_second: float = Field(default=50.0, ge=0)
    # Requests handled at once per process; more wait their turn (engine.web.concurrency).
    api_concurrency: int = Field(default=8, ge=1, le=10_000)
    rate_limit_burst: int = Field(default=200, ge=1)

    # Plans: name -> limits. Accounts name their plan; the default plan allows everything.
    plans: dict[str, Plan] = Field(default_factory=lambda: {"default": Plan()})
    default_plan: str = "default"

    # The settings files read, most specific first (``upwatch status`` shows them).
    _files: tuple[Path, ...] = PrivateAttr(default=())

    def __init__(self, **values: Any) -> None:
        files = settings_files(values)
        token = _READ.set(files)
        try:
            super().__init__(**values)
        finally:
            _READ.reset(token)
        self._files = tuple(path for path, _ in files)

    @property
    def files(self) -> tuple[Path, ...]:
        """The settings files this was read from, the one that wins first."""
        return self._files

    def database_label(self) -> str:
        """Which database this uses, in words and without a password: the data directory
        of the embedded server, or the database and host of ``database_url``."""
        if self.database_url is None:
            return f"data directory {self.data_dir.resolve()} (embedded PostgreSQL)"
        return (f"{dsn_label(self.database_url.get_secret_value())} (UPWATCH_DATABASE_URL; "
                f"data directory {self.data_dir.resolve()})")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        files = _READ.get()
        if files is None:  # built without load_settings: look the files up now
            files = settings_files(getattr(init_settings, "init_kwargs", {}))
        return (
            init_settings,
            env_settings,
            _FileSecretsSource(settings_cls),
            *(_TomlSource(settings_cls, path, table) for path, table in files),
        )

    @field_validator("probe_source_address")
    @classmethod
    def _source_is_ip(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        ipaddress.ip_address(v)  # raises ValueError with a clear message
        return v

    @field_validator("ca_bundle")
    @classmethod
    def _bundle_exists(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_file():
            raise ValueError(f"file {v} does not exist")
        return v

    @field_validator("base_url", "node_url")
    @classmethod
    def _absolute_http(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        assert v is not None
        if not (v.startswith("http://") or v.startswith("https://")):
            raise ValueError("must be an absolute http(s) URL")
        return v.rstrip("/")

    @field_validator("secret_key")
    @classmethod
    def _fernet_key(cls, v: SecretStr | None) -> SecretStr | None:
        """A Fernet key (engine/runtime/secretbox.py): 32 bytes in urlsafe base64."""
        if v is not None:
            from cryptography.fernet import Fernet

            try:
                Fernet(v.get_secret_value().strip().encode("ascii"))
            except (ValueError, TypeError, UnicodeError):
                raise ValueError("must be a Fernet key (32 bytes, urlsafe base64)") from None
        return v

    @model_validator(mode="after")
    def _derive(self) -> Settings:
        if self.default_plan not in self.plans:
            raise ValueError(f"default_plan {self.default_plan!r} is not one of the plans")
        if self.base_url is None:
            host = f"[{self.host}]" if ":" in self.host else self.host
            self.base_url = f"http://{host}:{self.port}"
        if self.node_url is None:
            self.node_url = self.base_url
        if self.dns_max_ttl < self.dns_min_ttl:
            raise ValueError("dns_max_ttl must not be below dns_min_ttl")
        return self

    # Convenience accessors -------------------------------------------------------------

    @property
    def public_base_url(self) -> str:
        assert self.base_url is not None
        return self.base_url

    @property
    def dns_server_list(self) -> list[str]:
        """``dns_servers`` split (empty: resolv.conf's)."""
        return [s.strip() for s in self.dns_servers.split(",") if s.strip()]

    @property
    def peer_url(self) -> str:
        assert self.node_url is not None
        return self.node_url

    def plan(self, name: str) -> Plan:
        return self.plans.get(name) or self.plans[self.default_plan]

    def scaled(self, seconds: float) -> float:
        """Seconds of real time for a duration the API shows (intervals, thresholds, back-off)."""
        return seconds * self.time_scale


class _TomlSource(PydanticBaseSettingsSource):
    """One settings file, already read and checked by :func:`settings_files`."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path, table: dict[str, Any]):
        super().__init__(settings_cls)
        self.path, self.table = path, table

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.table)


_READ: ContextVar[list[tuple[Path, dict[str, Any]]] | None] = ContextVar(
    "upwatch_settings_files", default=None
)


def _read_toml(path: Path, *, data_dir_file: bool) -> dict[str, Any]:
    """The file's table with lower-case keys; ConfigError naming the file for a file that
    cannot be read or parsed, a key no setting has, or data_dir in the data directory's."""
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"settings file {path}: cannot read it: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"settings file {path}: not valid TOML: {exc}") from None
    table = {str(k).lower(): v for k, v in raw.items()}
    known = set(Settings.model_fields)
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"settings file {path}: unknown setting {key!r}{hint}")
    if data_dir_file and "data_dir" in table:
        raise ConfigError(
            f"settings file {path}: data_dir cannot be set in the data directory's own file "
            "(it is where that file is looked for); set UPWATCH_DATA_DIR, or data_dir in "
            f"{SYSTEM_FILE} or the --config file"
        )
    return table


def settings_files(init: dict[str, Any] | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """The settings files that exist, most specific first, each with its table: the
    ``UPWATCH_CONFIG`` file, ``<data_dir>/upwatch.toml``, :data:`SYSTEM_FILE`. The data
    directory is the one the keyword arguments, the environment or the other two files
    give (in that order), else ``./.upwatch``."""
    found: list[tuple[Path, dict[str, Any]]] = []
    explicit = os.environ.get("UPWATCH_CONFIG")
    if explicit:
        path = Path(explicit).expanduser().absolute()
        found.append((path, _read_toml(path, data_dir_file=False)))
    system: list[tuple[Path, dict[str, Any]]] = []
    try:
        if SYSTEM_FILE.is_file():
            system.append((SYSTEM_FILE, _read_toml(SYSTEM_FILE, data_dir_file=False)))
    except PermissionError:
        raise ConfigError(f"settings file {SYSTEM_FILE}: cannot read it as this user") from None
    data_dir: Any = (init or {}).get("data_dir") or os.environ.get("UPWATCH_DATA_DIR")
    for _, table in (*found, *system):
        data_dir = data_dir or table.get("data_dir")
    own = (Path(data_dir or DEFAULT_DATA_DIR).expanduser() / DATA_DIR_FILE).absolute()
    try:
        exists = own.is_file()
    except PermissionError:
        # A data directory this user may not enter (a systemd unit's): the command that
        # needs it says so, naming the directory (engine.db.embedded_lease).
        exists = False
    if exists:
        found.append((own, _read_toml(own, data_dir_file=True)))
    return found + system


def dsn_label(dsn: str) -> str:
    """``database D on HOST as USER`` for a PostgreSQL URL: never its password or options."""
    parts = urlsplit(dsn)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    hosts = hosts or parse_qs(parts.query).get("host", ["the local socket"])[0]
    database = parts.path.lstrip("/") or user or "postgres"
    return f"database {database} on {hosts}" + (f" as {user}" if user else "")


def load_settings(config_file: str | None = None, **overrides: Any) -> Settings:
    """Build and validate settings once; a bad one raises ConfigError naming the setting."""
    if config_file:
        if not Path(config_file).is_file():
            raise ConfigError(f"UPWATCH_CONFIG: file {config_file} does not exist")
        os.environ["UPWATCH_CONFIG"] = config_file
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "settings"
        name = "UPWATCH_" + str(err["loc"][0]).upper() if err["loc"] else "settings"
        detail = err["msg"]
        if len(err["loc"]) > 1:
            detail = f"{loc}: {detail}"
        raise ConfigError(f"invalid setting {name}: {detail}") from None
    except ValueError as exc:  # e.g. malformed TOML
        raise ConfigError(f"invalid settings file: {exc}") from None
