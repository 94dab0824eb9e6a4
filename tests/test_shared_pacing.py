"""GitHub write pacing shared by every process through the database: whatever the
number of workers, one installation's writes stay apart and within GitHub's limits."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from bot.github.pacing import WritePacer
from bot.store import RunStore


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["sqlite", "postgresql"])
def two_workers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[RunStore, RunStore, Clock]]:
    """Two stores (two worker processes' worth) on one database, one frozen clock."""
    clock = Clock()
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    else:
        url = request.getfixturevalue("pg_database")
    a = RunStore.from_url(url, clock=clock)
    a.migrate()
    b = RunStore.from_url(url, clock=clock)
    yield a, b, clock
    a.dispose()
    b.dispose()


def most_in_any_window(slots: list[float], window: float) -> int:
    slots = sorted(slots)
    return max(bisect_left(slots, s + window) - i for i, s in enumerate(slots))


def reserve_many(
    stores: tuple[RunStore, RunStore], installation: int, n: int, interval: float
) -> list[float]:
    with ThreadPoolExecutor(8) as pool:
        return list(
            pool.map(lambda i: stores[i % 2].reserve_write(installation, interval), range(n))
        )


def test_writes_stay_within_githubs_minute_and_hour_limits(
    two_workers: tuple[RunStore, RunStore, Clock],
) -> None:
    a, b, _ = two_workers
    waits = reserve_many((a, b), 7, 700, interval=0.0)  # no spacing: only the limits hold
    assert most_in_any_window(waits, 60.0) <= 80
    assert most_in_any_window(waits, 3600.0) <= 500
    assert sum(1 for w in waits if w == 0.0) == 40  # a burst, then the refill rate
    other = a.reserve_write(8, 0.0)
    assert other == 0.0  # another installation is not held back


def test_writes_are_spaced_across_processes(
    two_workers: tuple[RunStore, RunStore, Clock],
) -> None:
    a, b, clock = two_workers
    waits = sorted(reserve_many((a, b), 7, 30, interval=1.0))
    assert waits == [float(i) for i in range(30)]  # one a second, none twice
    clock.now += timedelta(seconds=100)  # later, the installation is idle again
    assert b.reserve_write(7, 1.0) == 0.0


def test_the_pacer_waits_what_the_database_reserved(
    two_workers: tuple[RunStore, RunStore, Clock],
) -> None:
    a, _, _ = two_workers
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def reserve() -> float:
        return a.reserve_write(9, 1.0)

    pacer = WritePacer(1.0, clock=lambda: 0.0, sleep=sleep, reserve=reserve)

    async def three_writes() -> list[float]:
        return [await pacer.wait_turn() for _ in range(3)]

    assert anyio.run(three_writes) == [0.0, 1.0, 2.0]
    assert slept == [1.0, 2.0]
