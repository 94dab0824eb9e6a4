"""Proposal mode on GitHub: stalemate → `/debate decide` → `[PROPOSAL]` issue."""

from __future__ import annotations

from typing import Any

from testkit.harness.scenarios import bot_markers, command, delivery_states, runs, seed_issue
from testkit.harness.service import REPO, Harness


def state(h: Harness) -> str:
    return runs(h)[0][1] if runs(h) else ""


def proposal_issues(h: Harness, source: int) -> list[dict[str, Any]]:
    return [i for i in h.github.issues(REPO) if i["title"].startswith("[PROPOSAL]")]


def test_stalemate_waits_for_a_maintainer_decision(harness: Harness) -> None:
    h = harness
    h.start()
    number = seed_issue(
        h,
        title="How should we version the public API?",
        body="Options: URL versioning, header versioning, or date-based versions.",
    )
    payload, _ = command(h, number, "/debate --mode proposal --rounds 2")
    h.post("issue_comment", payload)
    h.wait_for(lambda: state(h) == "waiting", what="the run to wait for a decision")
    status = [
        c["body"]
        for c in h.github.comments(REPO, number)
        if c["body"].startswith("<!-- debate-bot:status")
    ]
    assert status and "/debate decide" in status[-1]
    assert proposal_issues(h, number) == []

    wrong, _ = command(h, number, "/debate decide 9 A")
    h.post("issue_comment", wrong)
    h.wait_for(
        lambda: any("Point 9 is not open" in c["body"] for c in h.github.comments(REPO, number)),
        what="the reply to a decision on a point that is not open",
    )
    assert state(h) == "waiting"

    decide, _ = command(h, number, "/debate decide 1 A")
    h.post("issue_comment", decide)
    h.wait_for(lambda: state(h) == "done", what="the run to finish after the decision")
    [proposal] = proposal_issues(h, number)
    assert f"#{number}" in proposal["body"]  # linked back to the source
    links = [
        c["body"]
        for c in h.github.comments(REPO, number)
        if c["body"].startswith("<!-- debate-bot:proposal-link")
    ]
    assert len(links) == 1 and f"#{proposal['number']}" in links[0]  # and forward
    markers = bot_markers(h, number)
    assert len(markers) == len(set(markers))
    assert "failed" not in delivery_states(h).values()


def test_vote_stalemates_settles_without_a_maintainer(harness: Harness) -> None:
    h = harness
    h.start()
    number = seed_issue(
        h,
        title="Which queue should the ingestion service use?",
        body="Kafka, NATS JetStream or PostgreSQL as a queue.",
    )
    payload, _ = command(h, number, "/debate --mode proposal -s --rounds 2")
    h.post("issue_comment", payload)
    h.wait_for(lambda: state(h) in ("done", "failed", "aborted"), what="the run to finish")
    assert state(h) == "done"
    assert len(proposal_issues(h, number)) == 1
