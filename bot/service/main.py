"""Process wiring for `serve`, `web` and `worker`: build the parts, run them."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import signal
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import uvicorn
from anyio.abc import TaskGroup, TaskStatus
from fastapi import FastAPI

from bot.core.explain import check_sqlite_folder
from bot.core.listen import bind_socket
from bot.core.logs import configure_logging, get_logger
from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.web.main import create_app, create_ops_app, settle_gc
from bot.service.web.proxy import follow_channel
from bot.service.web.redeliver import redeliver_forever
from bot.service.web.webhook import local_webhook_url
from bot.store import RunStore
from bot.store.notify import listen_for_work

if TYPE_CHECKING:
    from bot.service.worker.pool import Worker

log = get_logger(__name__)


def open_store(settings: Settings) -> RunStore:
    check_sqlite_folder(settings.database_url)
    size = settings.database_pool_size
    # A fixed pool, opened as needed and kept: connections opened for a burst and
    # closed after it cost PostgreSQL a backend process each, and the burst a wait.
    store = RunStore.from_url(settings.database_url, pool_size=size, max_overflow=0)
    # The embedded SQLite default migrates itself; PostgreSQL deployments run
    # `debate-bot migrate` once, so that many processes never race on it.
    if store.engine.dialect.name == "sqlite":
        store.migrate()
    return store


class _Server(uvicorn.Server):
    """Signals are the service's (the worker drains first), not uvicorn's: uvicorn
    would re-raise SIGTERM after its shutdown and kill the process mid-drain."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _skip_missing_sniffio() -> None:
    """httpcore tries `import sniffio` on every request and falls back to asyncio
    when it is missing; each failed import searches sys.path again (a fifth of
    the worker's CPU with a hundred runs in flight). A None entry makes the
    failure immediate; nothing is lost, the module is not there."""
    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


_M_ARENA_MAX = -8  # glibc's mallopt parameter behind MALLOC_ARENA_MAX


def _limit_malloc_arenas(arenas: int = 2) -> None:
    """glibc gives each thread that allocates a malloc arena of its own, kept for
    the life of the process; store calls run in threads, about one per run in
    flight, so those arenas were most of the memory a first burst of runs left
    behind (10 runs: 9 MB, 6 MB with two arenas). The same as
    ``MALLOC_ARENA_MAX=2``, which wins when set; nothing happens outside glibc."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        # The process's own symbols, libc's among them: find_library would run
        # ldconfig in a subprocess at every start.
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no mallopt: not glibc (macOS)
        return
    mallopt(_M_ARENA_MAX, arenas)


def bind_service(settings: Settings, *, web: bool) -> socket.socket | None:
    """The socket the service will listen on (None: a worker without a port),
    bound first: a busy port is a ConfigError before anything starts."""
    if web:
        return bind_socket(settings.host, settings.port, setting="DEBATE_BOT_PORT")
    if settings.worker_port is not None:
        return bind_socket(settings.host, settings.worker_port, setting="DEBATE_BOT_WORKER_PORT")
    return None


@dataclass
class _Parts:
    """What one process serves with: its settings, store and metrics, its worker
    (None in a web process), the socket it listens on, and the event that starts
    its stop (set by the first signal, or by a web server that ended)."""

    settings: Settings
    store: RunStore
    metrics: Metrics
    worker: Worker | None
    sock: socket.socket | None
    stop: anyio.Event = field(default_factory=anyio.Event)


async def serve_async(
    settings: Settings, *, web: bool, worker: bool, sock: socket.socket | None = None
) -> None:
    if sock is None:
        sock = bind_service(settings, web=web)
    _skip_missing_sniffio()
    _limit_malloc_arenas()  # before the first store call starts a thread
    store = open_store(settings)
    metrics = _watching(settings, store)
    w = _build_worker(settings, store, metrics, web=web) if worker else None
    if web and settings.webhook_secret is None:
        log.warning("webhooks.refused", reason="DEBATE_BOT_WEBHOOK_SECRET is not set")
    # Every role, not only the web app: a worker imports the same libraries
    # (githubkit's models alone are a large heap), and full collections walking
    # them stall its event loop, late for paced writes and model calls alike.
    settle_gc()
    parts = _Parts(settings, store, metrics, w, sock)
    server: uvicorn.Server | None = None
    async with anyio.create_task_group() as tg:
        await tg.start(_on_signals, parts.stop, w)
        if w is not None:
            _start_worker(tg, parts, w)
        if web:
            server = _start_web(tg, parts)
        elif settings.worker_port is not None:
            server = _start_ops(tg, parts)
        await parts.stop.wait()
        await _stop(server, w, web=web)
        tg.cancel_scope.cancel()
    if w is not None:
        await w.svc.gateway.aclose()
        await w.svc.models.aclose()
    store.dispose()


def _watching(settings: Settings, store: RunStore) -> Metrics:
    """The process's metrics, reading the runs, spend and deliveries from the store."""
    metrics = Metrics()
    metrics.watch_runs(store.counts_by_state, store.run_health)
    metrics.watch_spend(
        store.spend_totals, store.installation_month_spend, settings.budget_installation_month_usd
    )
    metrics.watch_deliveries(store.delivery_backlog)
    return metrics


def _build_worker(
    settings: Settings, store: RunStore, metrics: Metrics, *, web: bool
) -> Worker | None:
    """The process's worker; None when `serve` has no app id to call GitHub with."""
    if settings.app_id is None and web:
        log.warning(
            "worker.disabled",
            reason="DEBATE_BOT_APP_ID is not set; deliveries are stored but not processed",
        )
        return None
    # Imported here: a `web` process runs no feature handler, model adapter or
    # repository reader, and loads none (its route reads the features'
    # declarations, DELIVERY_FILTER).
    from bot.service.features.table import build_triggers
    from bot.service.worker.pool import Worker
    from bot.service.worker.wiring import build_services

    # The router once per process.
    return Worker(build_services(settings, store, metrics), build_triggers())


def _start_worker(tg: TaskGroup, parts: _Parts, w: Worker) -> None:
    """The worker's loop, its wake-ups from other processes, and its features' loops."""
    tg.start_soon(w.run)
    if parts.store.engine.dialect.name == "postgresql":  # other processes queue work too
        tg.start_soon(listen_for_work, parts.settings.database_url, w.wake)
    for loop in w.routes.loops:
        tg.start_soon(loop, w.svc, w.id)


def _no_wake() -> None:
    return None


def _start_web(tg: TaskGroup, parts: _Parts) -> _Server:
    """The web app (webhooks, probes, metrics), the redelivery of missed
    webhooks, and the webhook proxy's channel when one is set."""
    settings, store, metrics, w = parts.settings, parts.store, parts.metrics, parts.worker
    if settings.webhook_proxy_url:
        log.info("proxy.enabled")  # the channel URL is a secret of sorts: not logged
        tg.start_soon(follow_channel, settings.webhook_proxy_url, local_webhook_url(settings))
    deliveries = DELIVERY_FILTER
    wake = w.wake if w is not None else _no_wake
    app = create_app(settings, store, metrics, deliveries=deliveries, wake=wake)
    server = _http_server(app, settings.host, settings.port)
    gateway = w.svc.gateway if w is not None else None
    owner = w.id if w is not None else f"{socket.gethostname()}:{os.getpid()}:web"
    tg.start_soon(
        redeliver_forever,
        settings,
        store,
        deliveries,
        owner,
        metrics,
        gateway,
        lambda: server.started,
    )
    log.info("web.listening", host=settings.host, port=settings.port)
    tg.start_soon(_serve_web, server, parts.stop, parts.sock)
    return server


def _start_ops(tg: TaskGroup, parts: _Parts) -> _Server:
    """A worker's own port: probes and metrics."""
    settings = parts.settings
    assert settings.worker_port is not None
    app = create_ops_app(parts.store, parts.metrics)
    server = _http_server(app, settings.host, settings.worker_port)
    log.info("worker.listening", host=settings.host, port=settings.worker_port)
    tg.start_soon(_serve_web, server, parts.stop, parts.sock)
    return server


async def _stop(server: uvicorn.Server | None, w: Worker | None, *, web: bool) -> None:
    """SIGTERM: stop taking webhooks, drain the worker (in-flight model calls
    finish within the grace, their runs are handed back), then end the rest.
    A worker's own port (probes, metrics) stays up through its drain."""
    if server is not None and web:
        server.should_exit = True
    if w is not None:
        w.stop()
        await w.stopped.wait()
    if server is not None:
        server.should_exit = True


def _http_server(app: FastAPI, host: str, port: int) -> _Server:
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, lifespan="off"
    )
    return _Server(config)


async def _serve_web(server: uvicorn.Server, stop: anyio.Event, sock: socket.socket | None) -> None:
    # returns once should_exit is set (or it failed to start)
    await server.serve(sockets=[sock] if sock is not None else None)
    stop.set()


async def _on_signals(
    stop: anyio.Event, worker: Worker | None, *, task_status: TaskStatus[None]
) -> None:
    """The first SIGTERM/SIGINT starts the graceful stop; another cuts the grace short."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
        log.info("service.ready")  # signals handled from here on
        task_status.started()
        async for signum in received:
            name = signal.Signals(signum).name
            if not stop.is_set():
                log.info("service.stopping", signal=name)
                stop.set()
            elif worker is not None:
                log.warning("service.hurried", signal=name)
                worker.hurry()


def run_service(settings: Settings, *, web: bool, worker: bool) -> None:
    sock = bind_service(settings, web=web)  # before the first log line says anything
    configure_logging(settings.log_level, json=settings.log_json)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(lambda: serve_async(settings, web=web, worker=worker, sock=sock))
    finally:
        if sock is not None:
            sock.close()
