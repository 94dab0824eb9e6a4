"""Store test helpers shared by the store's test modules: a clock tests move by
hand, a thread race, and the SQLite / PostgreSQL ``db_url`` fixtures (the
PostgreSQL half needs DEBATE_BOT_TEST_PG_URL's server; see testkit/harness/postgres.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from bot.store import RunStore
from bot.store.engine import create_engine
from bot.store.schema import metadata
from testkit.harness.postgres import fresh_pg_database


class FakeClock:
    """A clock tests move by hand, so leases expire without sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += timedelta(seconds=seconds)


def race(n: int, body: Callable[[int], None]) -> None:
    """Run ``body(0..n-1)`` on n threads released together; fail on any error."""
    barrier = threading.Barrier(n)
    errors: list[Exception] = []

    def start(i: int) -> None:
        barrier.wait()
        try:
            body(i)
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# -- fixtures -------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh database for this session on the PostgreSQL server."""
    with fresh_pg_database("debate_bot_test") as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    url: str = request.getfixturevalue("pg_url")
    # The session database is shared: start every test from empty tables.
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for table in reversed(metadata.sorted_tables):
                if sa.inspect(conn).has_table(table.name):
                    conn.execute(table.delete())
    finally:
        engine.dispose()
    yield url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[RunStore]:
    s = RunStore.from_url(db_url, clock=clock)
    s.migrate()
    yield s
    s.dispose()
