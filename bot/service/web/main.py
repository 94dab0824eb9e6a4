"""The FastAPI application: webhook route, health, readiness, metrics."""

from __future__ import annotations

import gc
from collections.abc import Callable
from importlib.metadata import version

import anyio
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.service.web.filter import DeliveryFilter
from bot.service.web.ingest import DeliveryWriter
from bot.service.web.webhook import WEBHOOK_PATH, webhook_endpoint
from bot.store import RunStore
from bot.store.aio import AsyncStore


def settle_gc() -> None:
    """Garbage-collector settings for a long-lived server process.

    Everything built at start-up lives as long as the process: frozen out of the
    collector's sight, full collections no longer walk it and stall requests
    (p99 at 50 concurrent deliveries: ~75 ms -> ~30 ms). A larger first-generation
    threshold stops the collector running every few parsed payloads (about +15 %
    deliveries per second; see benchmarks/ingest.py)."""
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def front_page(settings: Settings) -> str:
    """What `/` says: that the service runs, and what is still missing to receive
    and process webhooks (names of settings only, never their values)."""
    missing = [
        name
        for name, present in (
            ("DEBATE_BOT_WEBHOOK_SECRET", settings.webhook_secret is not None),
            ("DEBATE_BOT_APP_ID", settings.app_id is not None),
            (
                "DEBATE_BOT_PRIVATE_KEY or DEBATE_BOT_PRIVATE_KEY_FILE",
                settings.private_key is not None or settings.private_key_file is not None,
            ),
        )
        if not present
    ]
    head = f"debate-bot {version('debate-bot')} is running. Webhooks: POST {WEBHOOK_PATH}\n"
    if not missing:
        return head
    return head + (
        "\nNo GitHub App is configured yet. Still missing: "
        + ", ".join(missing)
        + ".\nRegister the app with `debate-bot setup` (it writes them to .env), "
        "then restart; `debate-bot doctor` checks the result. Until then webhooks "
        "are refused (503) or stored unprocessed.\n"
    )


def create_app(
    settings: Settings,
    store: RunStore,
    metrics: Metrics,
    *,
    deliveries: DeliveryFilter,
    wake: Callable[[], None] = lambda: None,
) -> FastAPI:
    """``deliveries`` (the trigger table's filter) says which deliveries are worth
    storing; ``wake`` nudges an in-process worker when one was queued."""
    app = FastAPI(title="debate-bot", docs_url=None, redoc_url=None, openapi_url=None)
    writer = DeliveryWriter(store)
    app.add_route(
        WEBHOOK_PATH,
        webhook_endpoint(settings, writer, metrics, wake, deliveries),
        methods=["POST"],
    )

    front = front_page(settings)

    @app.get("/")
    async def index() -> Response:
        return Response(front, media_type="text/plain; charset=utf-8")

    add_ops_routes(app, store, metrics)
    settle_gc()
    return app


def create_ops_app(store: RunStore, metrics: Metrics) -> FastAPI:
    """What a `worker` serves on ``DEBATE_BOT_WORKER_PORT``: no webhooks, only the
    routes an orchestrator probes and Prometheus scrapes."""
    app = FastAPI(title="debate-bot worker", docs_url=None, redoc_url=None, openapi_url=None)
    add_ops_routes(app, store, metrics)
    return app


def add_ops_routes(app: FastAPI, store: RunStore, metrics: Metrics) -> None:
    """``/healthz`` (the process answers), ``/readyz`` (and so does its database),
    ``/metrics`` (this process's metrics)."""
    db = AsyncStore(store)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        ok = await db.ping()
        return JSONResponse(
            {"status": "ready" if ok else "database unreachable"}, status_code=200 if ok else 503
        )

    @app.get("/metrics")
    async def metrics_route() -> Response:
        body = await anyio.to_thread.run_sync(metrics.render)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
