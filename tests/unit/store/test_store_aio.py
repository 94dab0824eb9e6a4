"""AsyncStore: every query of the store awaitable, run off the event loop."""

from __future__ import annotations

import inspect
import threading
import time
from datetime import datetime

import anyio

from bot.store import RunStore
from bot.store.aio import SYNC_ONLY, AsyncStore
from bot.store.base import UNBOUNDED_POOL_CALLS


def test_every_public_query_has_a_hop() -> None:
    queries = {
        name
        for name, member in inspect.getmembers(RunStore)
        if not name.startswith("_") and (inspect.isfunction(member) or inspect.ismethod(member))
    }
    hops = {name for name, member in vars(AsyncStore).items() if type(member).__name__ == "_Hop"}
    assert queries - SYNC_ONLY - hops == set(), "add the new queries to bot/store/aio.py"
    assert hops - queries == set(), "AsyncStore names a query the store no longer has"


def test_a_hop_runs_the_query_in_a_worker_thread(store: RunStore) -> None:
    """Same results as the store's own call, and never on the event loop's thread
    (the store's clock, read inside every write, records where it ran)."""
    threads: list[int] = []
    clock = store._clock

    def recording_clock() -> datetime:
        threads.append(threading.get_ident())
        return clock()

    store._clock = recording_clock
    db = AsyncStore(store)
    loop_thread: list[int] = []

    async def main() -> None:
        loop_thread.append(threading.get_ident())
        assert await db.record_delivery("d-1", "issues", "opened", 7, b"{}") is True
        assert await db.record_delivery("d-1", "issues", "opened", 7, b"{}") is False
        row = await db.get_delivery("d-1")
        assert row is not None and row.event == "issues" and row.installation_id == 7
        assert row == store.get_delivery("d-1")

    anyio.run(main)
    assert threads, "the clock was never read: the test proves nothing"
    assert loop_thread[0] not in threads


def test_a_hop_runs_the_stores_own_method(store: RunStore) -> None:
    """Looked up on the store, not fixed at class creation: a subclass's override
    (or a method patched on the store) is what runs."""

    class Down(RunStore):
        def ping(self) -> bool:
            return False

    down = Down(store.engine)
    assert store.ping() is True
    assert anyio.run(AsyncStore(down).ping) is False


def test_calls_wait_their_turn_as_coroutines_not_threads(store: RunStore) -> None:
    """SQLite serves one call at a time: 30 hops at once, over two AsyncStores of
    the one store (the service builds several), run one after another; the rest
    wait on the event loop, not as threads blocked on the write lock."""
    assert store.parallel_calls == 1
    lock = threading.Lock()
    running: list[int] = [0]
    most: list[int] = [0]
    real_ping = store.ping

    def ping() -> bool:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.002)
        with lock:
            running[0] -= 1
        return real_ping()

    store.ping = ping  # type: ignore[method-assign]
    dbs = [AsyncStore(store), AsyncStore(store)]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(30):
                tg.start_soon(dbs[i % 2].ping)

    anyio.run(main)
    assert most[0] == 1


def test_a_postgresql_store_takes_as_many_calls_as_its_pool_holds() -> None:
    url = "postgresql://bot@127.0.0.1:1/none"  # engines connect lazily: never here
    sized = RunStore.from_url(url, pool_size=12, max_overflow=3)
    unbounded = RunStore.from_url(url, pool_size=5, max_overflow=-1)
    try:
        assert sized.parallel_calls == 15
        assert unbounded.parallel_calls == UNBOUNDED_POOL_CALLS
    finally:
        sized.dispose()
        unbounded.dispose()
