"""LISTEN/NOTIFY on PostgreSQL in the store: work handed back is announced (split
from tests/e2e/test_notify.py, where a delivery wakes a worker process)."""

from __future__ import annotations

import psycopg
import pytest

from bot.engine.types import DebateSpec
from bot.store import NewDelivery, NewRun, RunStore
from bot.store.notify import WORK_CHANNEL


@pytest.mark.postgres
def test_work_handed_back_is_announced(pg_database: str) -> None:
    """A draining worker's runs and deliveries go back with a notice, so a peer
    takes them at once rather than at its next poll."""
    store = RunStore.from_url(pg_database)
    store.migrate()
    conninfo = pg_database.replace("postgresql+psycopg://", "postgresql://", 1)
    listener = psycopg.connect(conninfo, autocommit=True)
    try:
        listener.execute(f"LISTEN {WORK_CHANNEL}")

        def notices() -> int:
            return sum(1 for _ in listener.notifies(timeout=0.5))

        spec = DebateSpec(mode="debate", title="t", subject="s")
        run = store.create_run(NewRun(repo="o/r", issue_number=1, spec=spec))
        store.record_deliveries([NewDelivery("d-1", "issue_comment", "created", 1, b"{}")])
        assert notices() >= 1  # queued work is announced (as before)
        assert store.claim_runs("w1", 30, 1) and store.claim_deliveries("w1", 30, 1)
        assert notices() == 0  # a claim is not
        assert store.release_run(run.id, "w1", "queued", handed_back=True)
        assert notices() == 1
        assert store.finish_delivery("d-1", "pending")
        assert notices() == 1
        assert store.claim_runs("w2", 30, 1)
        assert store.release_run(run.id, "w2", "done")
        assert notices() == 0  # a finished run is no work
    finally:
        listener.close()
        store.dispose()
