"""Scheduled design reviews: claimed once across workers, caught up once after
downtime, never for a repository without the key; end to end over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.store import RunStore


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[RunStore, RunStore, Clock]]:
    clock = Clock()
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    a = RunStore.from_url(url, clock=clock)
    a.migrate()
    b = RunStore.from_url(url, clock=clock)
    yield a, b, clock
    a.dispose()
    b.dispose()


def test_a_due_review_is_claimed_by_one_worker_and_caught_up_once(
    stores: tuple[RunStore, RunStore, Clock],
) -> None:
    a, b, clock = stores
    a.set_schedule("o/r", 1, "weekly", ())
    with ThreadPoolExecutor(8) as pool:
        claims = list(
            pool.map(lambda i: (a if i % 2 else b).claim_due_schedule(f"w{i}", 60), range(8))
        )
    winners = [c for c in claims if c is not None]
    assert len(winners) == 1  # several workers, one review
    a.schedule_started(
        "o/r", next(f"w{i}" for i, c in enumerate(claims) if c), issue=5, run_id="r1"
    )
    assert a.claim_due_schedule("w9", 60) is None  # not due before a week

    clock.now += timedelta(days=7 * 5)  # down for five periods
    row = b.claim_due_schedule("w1", 60)
    assert row is not None and row.last_issue == 5 and row.last_run == "r1"
    b.schedule_started("o/r", "w1", issue=6, run_id="r2")
    assert b.claim_due_schedule("w2", 60) is None  # one catch-up, not five
    clock.now += timedelta(days=7)
    assert a.claim_due_schedule("w3", 60) is not None


def test_a_repository_that_drops_the_key_is_forgotten(
    stores: tuple[RunStore, RunStore, Clock],
) -> None:
    a, _, _ = stores
    a.set_schedule("o/kept", 1, "monthly", ("src",))
    a.set_schedule("o/dropped", 1, "weekly", ())
    a.set_schedule("x/other-installation", 2, "weekly", ())
    assert a.drop_schedules(1, keep=["o/kept"]) == 1
    assert [s.repo for s in a.list_schedules()] == ["o/kept", "x/other-installation"]
    [kept, _] = a.list_schedules()
    assert kept.scope == ("src",) and kept.cadence == "monthly"


# --- end to end ---------------------------------------------------------------------
