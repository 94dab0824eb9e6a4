"""Server settings (environment / ``.env``).

Nothing here is instantiated at import time: ``Settings()`` is built by the CLI
and passed explicitly to whatever needs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    SecretStr,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.core.errors import ConfigError


class Endpoint(BaseModel):
    """A named model endpoint from the server config (never from repo config)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["openai", "anthropic"] = "openai"
    base_url: str
    api_key: SecretStr | None = None
    max_concurrency: int = Field(default=4, ge=1, le=64)


class RateCeiling(BaseModel):
    """An operator's per-minute ceilings for one model endpoint."""

    model_config = ConfigDict(extra="forbid")
    requests_per_minute: PositiveInt | None = None
    tokens_per_minute: PositiveInt | None = None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DEBATE_BOT_", env_file=".env", extra="ignore", populate_by_name=True
    )

    app_id: int | None = None
    private_key: SecretStr | None = None
    private_key_file: Path | None = None
    webhook_secret: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    database_url: str = "sqlite:///./debate-bot.db"
    default_model: str | None = None
    # Models for auto-picked personas, seat by seat, when the repo config names none;
    # e.g. '["openai/gpt-4.1-mini","anthropic/claude-sonnet-4-5"]'.
    default_models: list[str] = Field(default_factory=list)
    host: str = "127.0.0.1"
    # Development only: a smee.io-style channel whose forwarded deliveries `serve`
    # and `web` post to their own webhook route (bot/service/web/proxy.py).
    webhook_proxy_url: str | None = None
    port: int = Field(default=3000, ge=1, le=65535)
    # A `worker` serves no webhooks; on this port it serves /healthz, /readyz and
    # /metrics (its model and GitHub counters live in its own process). Unset: none.
    worker_port: int | None = Field(default=None, ge=1, le=65535)
    log_level: str = "INFO"
    log_json: bool = True

    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "openai_api_key")
    )
    openai_base_url: str = Field(
        default="https://api.openai.com/v1",
        validation_alias=AliasChoices("OPENAI_BASE_URL", "openai_base_url"),
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "anthropic_api_key")
    )
    anthropic_base_url: str = Field(
        default="https://api.anthropic.com",
        validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "anthropic_base_url"),
    )
    # Gemini's API: the upstream of `agent:gemini` seats (docs/agents-operators.md).
    gemini_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("GEMINI_API_KEY", "gemini_api_key")
    )
    gemini_base_url: str = Field(
        default="https://generativelanguage.googleapis.com",
        validation_alias=AliasChoices("GEMINI_BASE_URL", "gemini_base_url"),
    )
    # Named endpoints, as JSON: {"local": {"kind": "openai", "base_url": "http://..."}}
    endpoints: dict[str, Endpoint] = Field(default_factory=dict)

    model_timeout_s: float = 120.0
    model_max_retries: int = 3
    model_max_retry_wait_s: float = 30.0
    # The ceiling on model calls in flight per built-in provider. Below it the
    # window adapts (bot/models/limits.py): it grows while calls succeed and backs
    # off on 429/529/503, and the providers' rate-limit headers pace the calls.
    provider_max_concurrency: int = 1024

    github_max_retry_wait_s: float = 60.0
    github_write_interval_s: float = 1.0  # pacing of content-creating calls per installation

    max_webhook_bytes: int = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB
    # Runs one worker process drives at once; model calls are bounded separately
    # (provider and model limits below), GitHub writes by per-installation pacing.
    # A run waiting on its model calls costs about 0.2 MB and no CPU: a busy
    # organisation's burst (hundreds of debates) is driven at once, not in waves.
    worker_concurrency: PositiveInt = 256
    worker_poll_s: float = 1.0
    # How often a worker looks for due scheduled design reviews; 0 turns them off.
    schedule_poll_s: float = Field(default=300.0, ge=0)
    # How often it re-reads every installed repository's config for `schedule`
    # (one request per repository: kept rare for the rate limit).
    schedule_discovery_s: float = 6 * 3600.0
    lease_s: float = 60.0
    # Database connections kept open per process (as many again may open for a
    # burst): store calls run in threads, one per run or delivery in flight, and
    # SQLAlchemy's default of 5 made them queue for a connection. On PostgreSQL,
    # mind `max_connections` (100 by default) across every process.
    database_pool_size: PositiveInt = 20
    # Deliveries processed at once per worker: a burst of commands is taken in
    # together (each waits on GitHub round trips, not on the CPU); their payloads
    # are bounded apart, by intake_max_mb.
    intake_concurrency: PositiveInt = 64
    # Payload bytes a worker holds in intake (MB): past it no more deliveries are
    # claimed until some finish (a payload is up to 25 MB; a batch of 8 may pass it).
    intake_max_mb: PositiveInt = 64
    # Ceiling on calls in flight per provider name (built-in or endpoint), overriding
    # provider_max_concurrency / the endpoint's max_concurrency: {"openai": 32}.
    provider_concurrency: dict[str, PositiveInt] = Field(default_factory=dict)
    # Calls in flight per model reference, on top of its provider's limit:
    # {"anthropic/claude-opus-4-1": 4}. Unlisted models share only the provider's.
    model_concurrency: dict[str, PositiveInt] = Field(default_factory=dict)
    # -- model capacity (bot/models/gate.py) --
    # The adaptive window's start per endpoint, before any answer (slow start
    # doubles it every round trip up to the ceiling; with PostgreSQL a new process
    # starts from the window the others learned).
    provider_initial_concurrency: PositiveInt = 128
    # Operators' own per-minute ceilings per provider name, on top of what the
    # providers' headers say: {"openai": {"requests_per_minute": 500,
    # "tokens_per_minute": 200000}}. Per process.
    model_rate_limits: dict[str, RateCeiling] = Field(default_factory=dict)
    # A call waits out 429s that state a wait (retry-after) for this long in all
    # before it is dropped as rate_limited; it is not a failed attempt.
    model_rate_limit_wait_s: float = Field(default=300.0, ge=0)

    # SIGTERM: stop claiming, let in-flight model calls finish for this long, store
    # their turns, hand the runs back. The Helm chart's terminationGracePeriodSeconds
    # must exceed it.
    shutdown_grace_s: float = Field(default=20.0, ge=0)

    # Failed webhook deliveries asked of GitHub again (bot/service/web/redeliver.py) by
    # processes that run `web`: at start, then every interval (0: never); looking
    # back at most the window (GitHub keeps deliveries for 3 days); at most
    # max_per_pass asks a pass.
    redeliver_interval_s: float = Field(default=300.0, ge=0)
    redeliver_window_s: float = Field(default=6 * 3600.0, gt=0, le=3 * 24 * 3600.0)
    redeliver_max_per_pass: int = Field(default=25, ge=1)

    # Repository snapshots the debaters read (bot/repo; docs/configuration.md).
    # Held per process, shared by the runs on one commit, evicted past this size.
    repo_snapshot_cache_mb: int = Field(default=512, ge=0)
    # A commit whose files sum to at most this is read as one archive (2 requests);
    # a larger one file by file, as the debaters ask (1 request per distinct file).
    repo_archive_max_mb: int = Field(default=64, ge=0)
    # The archive download and unpacking, together; past it, reads turn lazy.
    repo_fetch_timeout_s: float = Field(default=60.0, gt=0)
    # Money (docs/configuration.md, "Money"): the operator's price file (YAML,
    # model reference -> {input, cached_input, output, cache_write?} USD per
    # million tokens), what a model with no price costs ("refuse", or a price
    # assumed for input and output alike; unset: refused only where a budget
    # applies), and the budgets in USD (unset: no cap).
    prices_file: Path | None = None
    unknown_price: Literal["refuse"] | float | None = None
    budget_run_usd: float | None = Field(default=None, gt=0)
    budget_repo_month_usd: float | None = Field(default=None, gt=0)
    budget_installation_month_usd: float | None = Field(default=None, gt=0)

    # Agent seats, `agent:<cli>[/<model>]` (docs/agents-operators.md): each CLI's
    # executable (unset: found on PATH) and the model a seat without one runs;
    # the sandbox (`none` is unsafe: the CLI then runs as the worker's user, with
    # the host's network and files) and its bubblewrap; agent processes at once
    # per worker (unset: from cores and memory); one turn's wall time, time to its
    # first output and longest silence; model calls one turn may make.
    agent_claude_code_bin: str | None = None
    agent_codex_bin: str | None = None
    agent_gemini_bin: str | None = None
    agent_claude_code_model: str = ""
    agent_codex_model: str = ""
    agent_gemini_model: str = ""
    agent_sandbox: Literal["bwrap", "none"] = "bwrap"
    agent_bwrap: str | None = None
    agent_concurrency: PositiveInt | None = None
    agent_timeout_s: float = Field(default=600.0, gt=0)
    agent_first_event_s: float = Field(default=120.0, gt=0)
    agent_idle_s: float = Field(default=180.0, gt=0)
    agent_max_calls: PositiveInt = 60
    # Where agent turns' folders go (workspace, home, /tmp); unset: the system's.
    agent_dir: Path | None = None

    def private_key_pem(self) -> str | None:
        if self.private_key is not None:
            return self.private_key.get_secret_value()
        if self.private_key_file is not None:
            try:
                return self.private_key_file.read_text()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read DEBATE_BOT_PRIVATE_KEY_FILE: {exc.strerror}"
                ) from exc
        return None
