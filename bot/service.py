"""Process wiring for `serve`, `web` and `worker`: build the parts, run them."""

from __future__ import annotations

import contextlib

import anyio
import uvicorn

from bot.app.main import create_app
from bot.app.proxy import follow_channel
from bot.app.redeliver import redeliver_forever
from bot.app.webhook import local_webhook_url
from bot.config import Settings
from bot.errors import ConfigError
from bot.github.gateway import GitHubGateway
from bot.llm.router import ModelRouter
from bot.logs import configure_logging, get_logger
from bot.metrics import Metrics, github_error_kind
from bot.store import RunStore
from bot.store.notify import listen_for_work
from bot.worker.context import Services
from bot.worker.pool import Worker
from bot.worker.schedules import schedule_loop

log = get_logger(__name__)


def open_store(settings: Settings) -> RunStore:
    store = RunStore.from_url(settings.database_url)
    # The embedded SQLite default migrates itself; PostgreSQL deployments run
    # `debate-bot migrate` once, so that many processes never race on it.
    if store.engine.dialect.name == "sqlite":
        store.migrate()
    return store


def build_services(settings: Settings, store: RunStore, metrics: Metrics) -> Services:
    if settings.app_id is None or settings.private_key_pem() is None:
        raise ConfigError(
            "the worker needs DEBATE_BOT_APP_ID and DEBATE_BOT_PRIVATE_KEY "
            "(or DEBATE_BOT_PRIVATE_KEY_FILE)"
        )

    def on_request(method: str, route: str, status: int) -> None:
        metrics.github_calls.labels(method, route, str(status)).inc()
        if kind := github_error_kind(status):
            metrics.github_errors.labels(kind).inc()
        for installation, remaining in gateway.rate_limits.items():
            metrics.github_rate_remaining.labels(str(installation)).set(remaining)

    # Several processes share one PostgreSQL: they pace each installation's writes
    # together; the single SQLite process paces in memory.
    shared = store.engine.dialect.name == "postgresql"
    gateway = GitHubGateway(
        settings, on_request=on_request, write_slots=store.reserve_write if shared else None
    )
    return Services(settings, store, gateway, ModelRouter(settings), metrics)


async def serve_async(settings: Settings, *, web: bool, worker: bool) -> None:
    store = open_store(settings)
    metrics = Metrics()
    metrics.watch_runs(store.counts_by_state, store.run_health)
    wake = lambda: None  # noqa: E731
    svc: Services | None = None
    if worker:
        if settings.app_id is None and web:
            log.warning(
                "worker.disabled",
                reason="DEBATE_BOT_APP_ID is not set; deliveries are stored but not processed",
            )
        else:
            svc = build_services(settings, store, metrics)
    if web and settings.webhook_secret is None:
        log.warning("webhooks.refused", reason="DEBATE_BOT_WEBHOOK_SECRET is not set")
    async with anyio.create_task_group() as tg:
        if svc is not None:
            w = Worker(svc)
            wake = w.wake
            tg.start_soon(w.run)
            if store.engine.dialect.name == "postgresql":  # other processes queue work too
                tg.start_soon(listen_for_work, settings.database_url, w.wake)
            tg.start_soon(schedule_loop, svc, w.id)
        if web:
            if settings.webhook_proxy_url:
                log.info("proxy.enabled")  # the channel URL is a secret of sorts: not logged
                tg.start_soon(
                    follow_channel, settings.webhook_proxy_url, local_webhook_url(settings)
                )
            app = create_app(settings, store, metrics, wake=wake)
            config = uvicorn.Config(
                app,
                host=settings.host,
                port=settings.port,
                log_config=None,
                access_log=False,
                lifespan="off",
            )
            server = uvicorn.Server(config)
            gateway = svc.gateway if svc is not None else None
            tg.start_soon(
                redeliver_forever, settings, store, metrics, gateway, lambda: server.started
            )
            log.info("web.listening", host=settings.host, port=settings.port)
            await server.serve()  # returns on SIGINT/SIGTERM
            tg.cancel_scope.cancel()
    if svc is not None:
        await svc.gateway.aclose()
        await svc.router.aclose()
    store.dispose()


def run_service(settings: Settings, *, web: bool, worker: bool) -> None:
    configure_logging(settings.log_level, json=settings.log_json)
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(lambda: serve_async(settings, web=web, worker=worker))
