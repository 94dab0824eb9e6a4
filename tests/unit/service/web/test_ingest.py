"""DeliveryWriter: group commit of concurrent webhook deliveries."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from bot.core.errors import StoreError
from bot.service.web.ingest import DeliveryWriter
from bot.store import NewDelivery, RunStore


class CountingStore(RunStore):
    """A real store that also counts its transactions."""

    batches: list[int]

    def record_deliveries(self, items: Sequence[NewDelivery]) -> list[bool]:
        self.batches.append(len(items))
        return super().record_deliveries(items)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    """SQLite commits on the loop; PostgreSQL from a thread: both must batch."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    else:
        url = request.getfixturevalue("pg_database")
    s = CountingStore.from_url(url)
    assert isinstance(s, CountingStore)  # from_url builds cls; typed as RunStore
    s.batches = []
    s.migrate()
    yield s
    s.dispose()


def delivery(i: int) -> NewDelivery:
    return NewDelivery(f"d-{i}", "issue_comment", "created", 1, f'{{"n": {i}}}')


async def test_concurrent_deliveries_share_commits(store: CountingStore) -> None:
    writer = DeliveryWriter(store)
    results = await asyncio.gather(*(writer.record(delivery(i)) for i in range(50)))
    assert results == [True] * 50
    assert sum(store.batches) == 50 and len(store.batches) < 5
    assert await writer.record(delivery(7)) is False  # a redelivery is a duplicate
    assert store.get_delivery("d-49") is not None


async def test_a_failed_write_answers_with_store_error_never_hangs(store: CountingStore) -> None:
    writer = DeliveryWriter(store)
    broken = NewDelivery("x", "issues", "labeled", 1, b"\xff\xfe")  # not UTF-8
    with pytest.raises(StoreError):
        await writer.record(broken)
