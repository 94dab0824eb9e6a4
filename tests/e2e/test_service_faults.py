"""GitHub failing at awkward moments: outcomes stay exactly-once, outages are waited out."""

from __future__ import annotations

from testkit.harness.scenarios import (
    bot_markers,
    command,
    finished,
    never_converge,
    runs,
    seed_issue,
    stored_turns,
)
from testkit.harness.service import REPO, Harness

ISSUES_POST = "/repos/{owner}/{repo}/issues"


def test_a_topic_issue_filed_behind_a_lost_502_is_filed_once(harness: Harness) -> None:
    h = harness
    h.github.inject_faults(
        script=["lost502"], applies_to=lambda m, route: m == "POST" and route == ISSUES_POST
    )
    h.start()
    number = seed_issue(h, title="Planning")
    payload, _ = command(h, number, "/debate Should we adopt a monorepo? --rounds 1")
    h.post("issue_comment", payload)
    h.wait_for(lambda: finished(h), what="the run on the new issue")
    filed = [i for i in h.github.issues(REPO) if i["number"] != number]
    assert len(filed) == 1 and runs(h)[0][1] == "done"


def test_a_proposal_filed_behind_a_lost_502_is_filed_once(harness: Harness) -> None:
    h = harness
    h.github.inject_faults(
        script=["lost502"], applies_to=lambda m, route: m == "POST" and route == ISSUES_POST
    )
    h.start()
    number = seed_issue(h, title="Which queue?", body="Kafka, NATS or PostgreSQL.")
    payload, _ = command(h, number, "/debate --mode proposal -s --rounds 2")
    h.post("issue_comment", payload)
    h.wait_for(lambda: finished(h), what="the proposal run")
    assert runs(h)[0][1] == "done"
    proposals = [i for i in h.github.issues(REPO) if i["title"].startswith("[PROPOSAL]")]
    assert len(proposals) == 1
    assert "Filed by debate-bot from" in proposals[0]["body"]


def test_a_github_outage_mid_run_is_waited_out_not_failed(harness: Harness) -> None:
    h = harness
    h.models.latency_s = 0.2
    h.models.responder = never_converge
    h.start(DEBATE_BOT_GITHUB_MAX_RETRY_WAIT_S="0.1")
    number = seed_issue(h)
    payload, comment_id = command(h, number, "/debate --rounds 3")
    h.post("issue_comment", payload)
    h.wait_for(lambda: stored_turns(h) >= 2, what="the run under way")
    # Every GitHub call fails for a while: longer than the gateway's own retries
    # (five attempts), so the run itself must break off and resume.
    h.github.inject_faults(
        script=[503] * 7, applies_to=lambda m, route: "access_tokens" not in route
    )
    h.wait_for(lambda: finished(h), timeout=90, what="the run after the outage")
    assert runs(h)[0][1:] == ("done", "verdict")
    bodies = [c["body"] for c in h.github.comments(REPO, number)]
    assert not any("The debate stopped" in b for b in bodies)
    markers = bot_markers(h, number)
    assert len(markers) == len(set(markers))
    assert "rocket" in h.github.reactions(REPO, comment_id=comment_id)
    assert '"run.interrupted"' in (h.tmp / "service.log").read_text()  # it really broke off
