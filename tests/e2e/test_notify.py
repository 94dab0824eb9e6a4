"""Across processes on PostgreSQL a delivery wakes a worker at once (LISTEN/NOTIFY):
the worker's poll is set to a minute, so only the notice can explain a prompt answer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bot.store import RunStore
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
