"""Group commit for webhook deliveries.

Concurrent deliveries are handed to one writer thread that commits whatever has
queued in a single transaction, then answers every waiting request. Each
delivery is durable before its 202, yet a burst shares commits instead of
fighting over SQLite's single write lock from a pool of threads (which cost a
p99 of hundreds of milliseconds under 50 concurrent clients; see benchmarks/ingest.py).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from dataclasses import dataclass

from bot.errors import StoreError
from bot.logs import get_logger
from bot.store import NewDelivery, RunStore

log = get_logger(__name__)


@dataclass
class _Pending:
    delivery: NewDelivery
    future: asyncio.Future[bool]
    loop: asyncio.AbstractEventLoop


def _settle(future: asyncio.Future[bool], result: bool | BaseException) -> None:
    if future.done():  # the client went away and the request was cancelled
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


class DeliveryWriter:
    def __init__(self, store: RunStore, *, max_batch: int = 256) -> None:
        self._store = store
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure_started(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="delivery-writer", daemon=True
                )
                self._thread.start()

    async def record(self, delivery: NewDelivery) -> bool:
        """True if stored as new (or a failed one re-queued); False for a duplicate."""
        self._ensure_started()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._queue.put(_Pending(delivery, future, loop))
        return await future

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # finish this batch, then stop
                    break
                batch.append(item)
            self._commit(batch)

    def _commit(self, batch: list[_Pending]) -> None:
        results: list[bool | BaseException]
        try:
            results = list(self._store.record_deliveries([p.delivery for p in batch]))
        except StoreError as exc:
            log.error("deliveries.write_failed", error=str(exc), batch=len(batch))
            results = [exc] * len(batch)
        except Exception as exc:  # never let the writer thread die silently
            log.exception("deliveries.writer_crashed")
            results = [StoreError(type(exc).__name__)] * len(batch)
        for pending, result in zip(batch, results, strict=True):
            pending.loop.call_soon_threadsafe(_settle, pending.future, result)
