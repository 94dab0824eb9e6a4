"""Many runs at once in one `debate-bot serve` process: runs bounded by
`worker_concurrency`, not by a small fixed slot count (split from
tests/unit/llm/test_concurrency.py, which bounds the model calls)."""

from __future__ import annotations

from testkit.harness.scenarios import bot_markers, command, seed_issue
from testkit.harness.service import Harness, all_finished, run_rows


def test_one_process_drives_many_runs_at_once(harness: Harness) -> None:
    # Ten debates (the per-user daily quota) of two personas each: with the old
    # four slots at most eight calls were ever in flight; now all run at once.
    h = harness
    h.models.latency_s = 1.0
    h.start(DEBATE_BOT_PROVIDER_MAX_CONCURRENCY="64")
    issues = [seed_issue(h, title=f"Question {i}: Kafka or NATS?") for i in range(10)]
    for number in issues:
        payload, _ = command(h, number, "/debate --rounds 1")
        assert h.post("issue_comment", payload).json()["status"] == "queued"
    h.wait_for(lambda: all_finished(h, len(issues)), timeout=120, what="ten runs")
    assert {r["state"] for r in run_rows(h)} == {"done"}
    for number in issues:
        markers = bot_markers(h, number)
        assert len(markers) == len(set(markers))
        assert sum("debate-bot:verdict" in m for m in markers) == 1
    assert h.models.max_in_flight > 8
