"""Scale-out on PostgreSQL: `migrate`, one `web` and two `worker` processes."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from bot.store import RunStore
from testkit.harness.scenarios import bot_markers, command, seed_issue
from testkit.harness.service import Harness, Service, free_port


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
    workers = [Service({**env}, h.tmp / "worker0.log").start("worker")]
    # The second worker serves its probes and metrics: its counters are its own.
    ops_env = {**env, "DEBATE_BOT_WORKER_PORT": str(free_port())}
    workers.append(Service(ops_env, h.tmp / "worker1.log").start("worker"))
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
        ops = workers[1].url
        assert httpx.get(ops + "/healthz").json() == {"status": "ok"}
        assert httpx.get(ops + "/readyz").json() == {"status": "ready"}
        assert httpx.post(ops + "/api/github/webhooks").status_code == 404  # no webhooks here
        metrics = httpx.get(ops + "/metrics").text
        assert 'debate_bot_model_tokens_total{kind="input",provider="openai"}' in metrics
        assert 'debate_bot_runs{state="done"} 4.0' in metrics  # the database's, as on web
        assert "debate_bot_github_calls_total{" in metrics
        # The web process drove no run: its model counters stay empty.
        assert "debate_bot_model_tokens_total{" not in httpx.get(web.url + "/metrics").text
    finally:
        for w in workers:
            w.stop()
        store.dispose()
