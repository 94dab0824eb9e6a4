"""App factories for the ingestion benchmark, served by ``uvicorn --factory``.

Configuration comes from the environment the benchmark gives the subprocess.
"""

from __future__ import annotations

import os

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import SecretStr

from bot.core.logs import configure_logging
from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.web.main import create_app
from bot.store import RunStore

ROUTE = "/api/github/webhooks"
SECRET_ENV = "BENCH_WEBHOOK_SECRET"
DATABASE_ENV = "BENCH_DATABASE_URL"


def real_app() -> FastAPI:
    """The service's web side, wired as ``bot.service.main`` wires it (JSON logs at INFO
    included: the route logs every queued delivery in production too)."""
    settings = Settings(
        webhook_secret=SecretStr(os.environ[SECRET_ENV]), database_url=os.environ[DATABASE_ENV]
    )
    configure_logging(settings.log_level, json=settings.log_json)
    store = RunStore.from_url(settings.database_url)  # migrated by the benchmark beforehand
    metrics = Metrics()
    metrics.watch_runs(store.counts_by_state)
    return create_app(settings, store, metrics, deliveries=DELIVERY_FILTER)


def bare_app() -> FastAPI:
    """The floor: read the body, answer 202 with a body of the same shape."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post(ROUTE)
    async def receive(request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse({"status": "queued"}, status_code=202)

    return app
