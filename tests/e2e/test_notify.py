"""Across processes on PostgreSQL a delivery wakes a worker at once (LISTEN/NOTIFY):
the worker's poll is set to a minute, so only the notice can explain a prompt answer."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

from bot.debate.types import DebateSpec
from bot.store import NewDelivery, RunStore
from bot.store.notify import WORK_CHANNEL
from testkit.harness.scenarios import bot_markers, command, seed_issue
from testkit.harness.service import REPO, Harness, Service


@pytest.mark.postgres
def test_a_delivery_to_web_wakes_a_sleeping_worker(harness: Harness, pg_database: str) -> None:
    h = harness
    env = {**h.env, "DEBATE_BOT_DATABASE_URL": pg_database, "DEBATE_BOT_WORKER_POLL_S": "60"}
    migrate = subprocess.run(
        [sys.executable, "-m", "bot", "migrate"], env=env, capture_output=True, text=True
    )
    assert migrate.returncode == 0, migrate.stderr
    worker = Service(env, h.tmp / "worker.log").start("worker")
    h.service = Service(env, h.tmp / "web.log").start("web")
    store = RunStore.from_url(pg_database)
    try:
        h.wait_for(
            lambda: "notify.listening" in (h.tmp / "worker.log").read_text(), what="listening"
        )
        for i in range(2):  # the second proves the listener survives its first notice
            number = seed_issue(h, title=f"Question {i}: Kafka or NATS?")
            payload, comment_id = command(h, number, "/debate --rounds 1")
            assert h.post("issue_comment", payload).json()["status"] == "queued"

            def acknowledged(c: int = comment_id) -> bool:
                return "eyes" in h.github.reactions(REPO, comment_id=c)

            def answered(n: int = number) -> bool:
                return any("verdict" in m for m in bot_markers(h, n))

            # A third of the poll interval each.
            h.wait_for(acknowledged, timeout=20, what="the eyes reaction")
            h.wait_for(answered, timeout=20, what="the verdict")
    finally:
        worker.stop()
        store.dispose()


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
        run = store.create_run(repo="o/r", issue_number=1, spec=spec)
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
