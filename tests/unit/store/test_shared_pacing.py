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
            pool.map(lambda i: stores[i % 2].reserve_write(installation, interval).wait_s, range(n))
        )


def test_writes_stay_within_githubs_minute_and_hour_limits(
    two_workers: tuple[RunStore, RunStore, Clock],
) -> None:
    a, b, _ = two_workers
    waits = reserve_many((a, b), 7, 700, interval=0.0)  # no spacing: only the limits hold
    assert most_in_any_window(waits, 60.0) <= 80
    assert most_in_any_window(waits, 3600.0) <= 500
    assert sum(1 for w in waits if w == 0.0) == 40  # a burst, then the refill rate
    other = a.reserve_write(8, 0.0).wait_s
    assert other == 0.0  # another installation is not held back


def test_writes_are_spaced_across_processes(
    two_workers: tuple[RunStore, RunStore, Clock],
) -> None:
    a, b, clock = two_workers
    waits = sorted(reserve_many((a, b), 7, 30, interval=1.0))
    assert waits == [float(i) for i in range(30)]  # one a second, none twice
    clock.now += timedelta(seconds=100)  # later, the installation is idle again
    assert b.reserve_write(7, 1.0).wait_s == 0.0


def test_the_pacer_waits_what_the_database_reserved(
    two_workers: tuple[RunStore, RunStore, Clock],
) -> None:
    a, _, _ = two_workers
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def reserve() -> float:
        return a.reserve_write(9, 1.0).wait_s

    pacer = WritePacer(1.0, clock=lambda: 0.0, sleep=sleep, reserve=reserve)

    async def three_writes() -> list[float]:
        return [await pacer.wait_turn() for _ in range(3)]

    assert anyio.run(three_writes) == [0.0, 1.0, 2.0]
    assert slept == [1.0, 2.0]


def test_a_late_writer_moves_the_next_slot_back_unless_it_is_taken(
    two_workers: tuple[RunStore, RunStore, Clock],
) -> None:
    a, b, _ = two_workers
    first = a.reserve_write(10, 1.0)
    assert first.wait_s == 0.0
    # Woken 0.3 s late, nobody waiting: the next slot moves back as much.
    assert a.extend_write_slot(10, first.next_at, 0.3)
    assert b.reserve_write(10, 1.0).wait_s == pytest.approx(1.3)
    # A slot already handed out after ours is not moved: reserve again instead.
    mine = a.reserve_write(10, 1.0)
    theirs = b.reserve_write(10, 1.0)
    assert not a.extend_write_slot(10, mine.next_at, 0.3)
    assert a.reserve_write(10, 1.0).wait_s == pytest.approx(theirs.wait_s + 1.0)


def test_the_pacer_takes_a_new_slot_when_woken_too_late() -> None:
    now = [0.0]
    waits = iter([1.0, 2.0, 0.5])
    late: list[float] = []
    moved = iter([False, True])

    async def reserve() -> float:
        return next(waits)

    async def oversleep(seconds: float) -> None:
        now[0] += seconds + 0.4  # a busy event loop wakes us 0.4 s late

    async def on_late(late_s: float) -> bool:
        late.append(late_s)
        return next(moved)

    pacer = WritePacer(1.0, clock=lambda: now[0], sleep=oversleep, reserve=reserve, on_late=on_late)
    # Late for the first slot, whose next one was taken: a second slot; late for
    # that too, but its next one was free and moved back: send.
    assert anyio.run(pacer.wait_turn) == 3.0
    assert late == [pytest.approx(0.4), pytest.approx(0.4)]
    assert next(waits) == 0.5  # no third reservation


def test_the_pacer_sends_at_once_when_woken_on_time() -> None:
    now = [0.0]
    called: list[float] = []

    async def reserve() -> float:
        return 1.0

    async def sleep(seconds: float) -> None:
        now[0] += seconds + 0.01  # within the margin

    async def on_late(late_s: float) -> bool:
        called.append(late_s)
        return True

    pacer = WritePacer(1.0, clock=lambda: now[0], sleep=sleep, reserve=reserve, on_late=on_late)
    assert anyio.run(pacer.wait_turn) == 1.0
    assert called == []


def test_a_slot_that_has_already_come_is_taken_at_once() -> None:
    """Nobody ahead (or the hop back from the database outlasted the wait): send
    now, without a second round trip to the database."""
    late: list[float] = []

    async def reserve() -> float:
        return -0.3

    async def sleep(seconds: float) -> None:
        raise AssertionError("nothing to wait for")

    async def on_late(late_s: float) -> bool:
        late.append(late_s)
        return True

    pacer = WritePacer(1.0, clock=lambda: 0.0, sleep=sleep, reserve=reserve, on_late=on_late)
    assert anyio.run(pacer.wait_turn) == 0.0
    assert late == []


def test_a_hold_delays_every_processs_next_slot_and_a_far_slot_is_not_taken(
    two_workers: tuple[RunStore, RunStore, Clock],
) -> None:
    a, b, clock = two_workers
    assert a.reserve_write(7, 1.0).wait_s == 0.0
    until = clock.now + timedelta(seconds=120)
    a.hold_writes(7, until)  # GitHub told worker a to wait two minutes
    a.hold_writes(7, clock.now + timedelta(seconds=30))  # a shorter hold never shortens it
    assert b.reserve_write(7, 1.0, max_wait_s=60.0) == (120.0, until)  # not taken
    assert b.reserve_write(7, 1.0, max_wait_s=60.0) == (120.0, until)  # so nothing drifts
    clock.now += timedelta(seconds=119)
    assert b.reserve_write(7, 1.0, max_wait_s=60.0) == (1.0, until + timedelta(seconds=1))
    b.hold_writes(8, clock.now + timedelta(seconds=5))  # an installation without a row yet
    assert a.reserve_write(8, 1.0).wait_s == 5.0
