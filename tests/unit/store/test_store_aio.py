"""AsyncStore: every query of the store awaitable, run off the event loop."""

from __future__ import annotations

import inspect
import threading
from datetime import datetime

import anyio

from bot.store import RunStore
from bot.store.aio import SYNC_ONLY, AsyncStore


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
