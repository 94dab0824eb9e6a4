"""The figures an operator alerts on, counted by a running `debate-bot serve`
(split from tests/unit/test_metrics.py)."""

from __future__ import annotations

import re

import httpx

from testkit.fakes.model_server import Fault
from testkit.harness.scenarios import command, finished, seed_issue
from testkit.harness.service import Harness


def test_dropped_turns_and_failed_github_calls_are_counted(harness: Harness) -> None:
    h = harness
    # The second persona's model refuses every request (a 400 is not retried).
    h.models.add_faults(*[Fault("status", status=400)] * 40, model="claude-sonnet-4-5")
    h.start()
    number = seed_issue(h)
    payload, _ = command(h, number, "/debate --rounds 1")
    h.post("issue_comment", payload)
    h.wait_for(lambda: finished(h), timeout=60, what="the run to end")
    assert h.service is not None
    text = httpx.get(h.service.url + "/metrics").text
    dropped = re.search(
        r'debate_bot_model_errors_total\{[^}]*provider="anthropic"[^}]*\} (\S+)', text
    )
    assert dropped is not None and float(dropped.group(1)) >= 1.0, text
    # The bot's own config lookups answer 404: an answer, not an error.
    assert 'debate_bot_github_errors_total{kind="client"}' not in text
