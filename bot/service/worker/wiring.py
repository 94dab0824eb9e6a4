"""The worker's services, built once per process by bot/service/main.py (and only in
a process that runs a worker: a `web` process never imports this)."""

from __future__ import annotations

from bot.core.errors import ConfigError
from bot.core.metrics import Metrics, github_error_kind
from bot.core.settings import Settings
from bot.github.gateway import GitHubGateway
from bot.models.router import ModelRouter
from bot.repo.github import GitHubReader
from bot.service.worker.context import Services
from bot.store import RunStore


def build_services(settings: Settings, store: RunStore, metrics: Metrics) -> Services:
    if settings.app_id is None or settings.private_key_pem() is None:
        raise ConfigError(
            "the worker needs DEBATE_BOT_APP_ID and DEBATE_BOT_PRIVATE_KEY "
            "(or DEBATE_BOT_PRIVATE_KEY_FILE)"
        )

    def on_request(method: str, route: str, status: int, rate_limited: bool) -> None:
        metrics.github_calls.labels(method, route, str(status)).inc()
        if kind := github_error_kind(status, rate_limited):
            metrics.github_errors.labels(kind).inc()

    # Several processes share one PostgreSQL: they pace each installation's writes
    # together; the single SQLite process paces in memory.
    shared = store.engine.dialect.name == "postgresql"
    gateway = GitHubGateway(settings, on_request=on_request, write_slots=store if shared else None)
    # Read at scrape time: per request it cost a loop over every installation.
    metrics.watch_rate_limits(lambda: gateway.rate_limits)
    repos = GitHubReader.from_settings(
        cache_mb=settings.repo_snapshot_cache_mb,
        archive_max_mb=settings.repo_archive_max_mb,
        timeout_s=settings.repo_fetch_timeout_s,
    )
    # The learned model limits too (bot/models/gate.py).
    router = ModelRouter(settings, shared_limits=store if shared else None)
    return Services(settings, store, gateway, router, metrics, repos=repos)
