"""The figures an operator alerts on, as /metrics renders them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.core.metrics import Metrics, github_error_kind
from bot.store import NewRun, RunStore
from testkit.harness.engine import spec_for


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[RunStore, Clock]]:
    clock = Clock()
    s = RunStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}", clock=clock)
    s.migrate()
    yield s, clock
    s.dispose()


def test_run_health_at_scrape_time(store: tuple[RunStore, Clock]) -> None:
    s, clock = store
    assert s.run_health() == {
        "oldest_queued_age_seconds": 0.0,
        "expired_leases": 0.0,
        "resumed_active": 0.0,
    }
    spec = spec_for("debate")
    s.create_run(NewRun(repo="o/r", issue_number=1, spec=spec))  # will lapse
    clock.now += timedelta(seconds=1)
    s.create_run(NewRun(repo="o/r", issue_number=2, spec=spec))  # stays queued
    clock.now += timedelta(minutes=10)
    claimed = s.claim_run("w1", lease_s=30)
    assert claimed is not None and claimed.issue_number == 1
    clock.now += timedelta(minutes=1)  # w1 died: its lease lapsed
    health = s.run_health()
    assert health["oldest_queued_age_seconds"] == pytest.approx(660.0)
    assert health["expired_leases"] == 1.0 and health["resumed_active"] == 0.0
    assert s.claim_run("w2", lease_s=30) is not None  # resumed by another worker

    metrics = Metrics()
    metrics.watch_runs(s.counts_by_state, s.run_health)
    text = metrics.render().decode()
    assert "debate_bot_runs_oldest_queued_age_seconds 660.0" in text
    assert "debate_bot_runs_expired_leases 0.0" in text
    assert "debate_bot_runs_resumed_active 1.0" in text

    # A run handed back waits in the queue from then, not from its creation.
    second = s.claim_run("w3", lease_s=30)
    assert second is not None and second.issue_number == 2
    clock.now += timedelta(minutes=5)
    assert s.release_run(second.id, "w3", "queued", handed_back=True)
    clock.now += timedelta(seconds=30)
    assert s.run_health()["oldest_queued_age_seconds"] == pytest.approx(30.0)


def test_a_scrape_survives_a_database_that_is_down(store: tuple[RunStore, Clock]) -> None:
    s, _ = store

    def down() -> dict[str, float]:
        raise OSError("connection refused")

    metrics = Metrics()
    metrics.watch_runs(s.counts_by_state, down)
    assert b"debate_bot_runs{" in metrics.render()


@pytest.mark.parametrize(
    ("status", "limited", "kind"),
    [
        (0, False, "no_response"),
        (403, True, "rate_limited"),
        (403, False, "client"),  # a missing permission, a locked issue
        (429, False, "rate_limited"),
        (502, False, "server"),
        (422, False, "client"),
        (404, False, None),
        (201, False, None),
    ],
)
def test_github_error_classes(status: int, limited: bool, kind: str | None) -> None:
    assert github_error_kind(status, limited) == kind
