"""Settings, validated once at start-up.

Sources, highest priority first: keyword arguments, ``UPWATCH_*`` environment variables,
``UPWATCH_*_FILE`` (a file holding the value: systemd credentials), then a TOML file given by
``--config`` or ``UPWATCH_CONFIG`` (keys are the names without the prefix, lower case).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

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
    """Reads ``UPWATCH_<NAME>_FILE`` for secret settings (systemd ``LoadCredential=``)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in _FILE_SETTINGS:
            path = os.environ.get(f"UPWATCH_{name.upper()}_FILE")
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

    # Operations
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"

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

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [
            init_settings,
            env_settings,
            _FileSecretsSource(settings_cls),
        ]
        config_file = os.environ.get("UPWATCH_CONFIG")
        if config_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
        return tuple(sources)

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
