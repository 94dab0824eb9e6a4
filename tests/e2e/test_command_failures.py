"""No silent failures on GitHub: a command whose handling meets an answer GitHub
gives for good (here the 409 of an empty repository) gets one reply with the
error class and a sentence, like a failed run; the fake GitHub speaks HTTP."""

from __future__ import annotations

from testkit.harness.scenarios import bot_markers, command, delivery_states, seed_issue
from testkit.harness.service import REPO, Harness


def test_review_of_an_empty_repository_is_answered(harness: Harness) -> None:
    h = harness
    h.start()
    number = seed_issue(h)
    h.github.make_empty(REPO)  # as GitHub holds it before the first push
    payload, _ = command(h, number, "/debate review")
    h.post("issue_comment", payload)
    h.wait_for(lambda: bot_markers(h, number), what="the failure reply")
    h.wait_for(lambda: "pending" not in delivery_states(h).values(), what="the delivery")
    replies = [c["body"] for c in h.github.comments(REPO, number) if c["body"].startswith("<!--")]
    assert len(replies) == 1, replies
    [reply] = replies
    assert "(`github_error`)" in reply and "409" in reply and "Git Repository is empty" in reply
    assert "Traceback" not in reply and "/repos/" not in reply
    assert list(delivery_states(h).values()) == ["failed"]
