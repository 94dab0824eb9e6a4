"""Scheduled design reviews: claimed once across workers, caught up once after
downtime, never for a repository without the key; end to end over HTTP."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.store import RunStore
from testkit.harness.scenarios import finished, runs
from testkit.harness.service import REPO, Harness


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

FAST = {"DEBATE_BOT_SCHEDULE_POLL_S": "0.5", "DEBATE_BOT_SCHEDULE_DISCOVERY_S": "0.5"}
CONFIG = "design_review:\n  schedule: weekly\n  scope: /\nrounds: 1\n"


def scheduled_issues(h: Harness) -> list[dict[str, object]]:
    return [i for i in h.github.issues(REPO) if str(i["title"]).startswith("Design review ")]


def move_due_into_the_past(h: Harness, days: int) -> None:
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        (due,) = db.execute("select next_due from schedules").fetchone()
        earlier = datetime.fromisoformat(str(due)) - timedelta(days=days)
        db.execute("update schedules set next_due = ?", (earlier.isoformat(sep=" "),))


def test_scheduled_reviews_end_to_end(harness: Harness) -> None:
    h = harness
    h.github.put_file(REPO, "README.md", "# Shop\n\nOrders and payments.\n")
    h.github.put_file(REPO, "src/orders.py", '"""Orders own their lifecycle."""\n')
    h.github.add_repo("Codertocat/unscheduled", installation_id=1)
    h.github.put_file("Codertocat/unscheduled", "README.md", "# Nothing scheduled here\n")
    h.github.put_file(REPO, ".github/debate.yml", CONFIG)
    h.start(**FAST)
    h.wait_for(lambda: len(scheduled_issues(h)) == 1 and finished(h), timeout=90, what="review")
    [first] = scheduled_issues(h)
    assert h.github.issues("Codertocat/unscheduled") == []  # no key, no review
    assert h.service is not None
    h.service.stop()

    h.start(**FAST)  # not due yet: nothing new
    h.wait_for(lambda: h.github.count("GET", "/installation/repositories") >= 2, what="a pass")
    assert len(scheduled_issues(h)) == 1
    h.service.stop()

    move_due_into_the_past(h, days=30)  # the service was down for four weeks
    h.start(**FAST)
    h.wait_for(lambda: len(runs(h)) == 2 and finished(h), timeout=90, what="the catch-up")
    passes = h.github.count("GET", "/installation/repositories")
    h.wait_for(lambda: h.github.count("GET", "/installation/repositories") > passes + 1)
    issues = scheduled_issues(h)
    assert len(issues) == 2  # caught up once, not once per missed week
    second = issues[-1]
    assert f"#{first['number']}" in str(second["body"])  # links the previous review
    comments = [c["body"] for c in h.github.comments(REPO, int(str(second["number"])))]
    assert any("Since the previous review" in c and "Still open:" in c for c in comments)
