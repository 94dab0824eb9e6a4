"""AsyncStore: every query of the store awaitable: SQLite on the event loop, a
pooled store in worker threads, as many at once as its pool holds."""

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


class Pooled(RunStore):
    """The same SQLite file, dressed as a store with a pool of two connections
    (PostgreSQL's kind): its calls go to worker threads."""

    @property
    def local(self) -> bool:
        return False

    @property
    def parallel_calls(self) -> int:
        return 2


def _threads_of_one_delivery(store: RunStore) -> tuple[int, list[int]]:
    """Where the store's clock (read inside every write) ran, and the loop's thread."""
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
    return loop_thread[0], threads


def test_a_sqlite_query_runs_on_the_event_loop(store: RunStore) -> None:
    """Same results as the store's own call; a local store's call costs less than
    the thread hop, so it runs on the loop's thread."""
    assert store.local
    loop_thread, threads = _threads_of_one_delivery(store)
    assert set(threads) == {loop_thread}


def test_a_pooled_store_runs_the_query_in_a_worker_thread(store: RunStore) -> None:
    loop_thread, threads = _threads_of_one_delivery(Pooled(store.engine))
    assert loop_thread not in threads


def test_a_hop_runs_the_stores_own_method(store: RunStore) -> None:
    """Looked up on the store, not fixed at class creation: a subclass's override
    (or a method patched on the store) is what runs."""

    class Down(RunStore):
        def ping(self) -> bool:
            return False

    down = Down(store.engine)
    assert store.ping() is True
    assert anyio.run(AsyncStore(down).ping) is False


def test_a_pooled_stores_calls_wait_their_turn_as_coroutines(store: RunStore) -> None:
    """At most ``parallel_calls`` in threads at once, over two AsyncStores of the
    one store (the service builds several); the rest wait on the event loop, not
    as threads blocked on the pool."""
    pooled = Pooled(store.engine)
    lock = threading.Lock()
    running: list[int] = [0]
    most: list[int] = [0]
    real_ping = pooled.ping

    def ping() -> bool:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)  # long enough that the two threads overlap
        with lock:
            running[0] -= 1
        return real_ping()

    pooled.ping = ping  # type: ignore[method-assign]
    dbs = [AsyncStore(pooled), AsyncStore(pooled)]

    async def one(db: AsyncStore) -> None:
        await db.ping()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(30):
                tg.start_soon(one, dbs[i % 2])

    anyio.run(main)
    assert most[0] == 2


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
