"""Scale-out on PostgreSQL: `migrate`, one `web` and two `worker` processes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bot.store import RunStore
from tests.harness.scenarios import bot_markers, command, seed_issue
from tests.harness.service import Harness, Service


@pytest.mark.postgres
def test_web_and_two_workers_share_postgres(harness: Harness, pg_database: str) -> None:
    h = harness
    h.models.latency_s = 0.2
    # One run at a time per worker, so the four runs must spread over both.
    env = {**h.env, "DEBATE_BOT_DATABASE_URL": pg_database, "DEBATE_BOT_WORKER_CONCURRENCY": "1"}
    migrate = subprocess.run(
        [sys.executable, "-m", "bot", "migrate"], env=env, capture_output=True, text=True
    )
    assert migrate.returncode == 0, migrate.stderr
    web = Service(env, h.tmp / "web.log").start("web")
    workers = [Service({**env}, h.tmp / f"worker{i}.log").start("worker") for i in range(2)]
    h.service = web
    store = RunStore.from_url(pg_database)
    try:
        issues = [seed_issue(h, title=f"Question {i}: Kafka or NATS?") for i in range(4)]
        for number in issues:
            payload, _ = command(h, number, "/debate --rounds 1")
            assert h.post("issue_comment", payload).json()["status"] == "queued"

        def all_done() -> bool:
            counts = store.counts_by_state()
            return counts.get("done", 0) == len(issues)

        h.wait_for(all_done, timeout=60, what="four runs done across two workers")
        for number in issues:
            markers = bot_markers(h, number)
            assert len(markers) == len(set(markers))
            assert sum("debate-bot:verdict" in m for m in markers) == 1
        for i in range(2):
            assert "turn.done" in (h.tmp / f"worker{i}.log").read_text(), f"worker {i} idle"
    finally:
        for w in workers:
            w.stop()
        store.dispose()
