"""No silent failures on GitHub: a command whose handling meets an answer GitHub
gives for good (here a 422 where the review pins the default branch) gets one
reply with the error class and a sentence, like a failed run; the fake GitHub
speaks HTTP. (An empty repository is an answer of its own: tests/e2e/
test_repo_review_e2e.py.)"""

from __future__ import annotations

from testkit.harness.scenarios import bot_markers, command, delivery_states, seed_issue
from testkit.harness.service import REPO, Harness

GIT_REF = "/repos/{owner}/{repo}/git/ref/{ref}"


def test_a_final_github_answer_to_a_command_is_answered(harness: Harness) -> None:
    h = harness
    h.start()
    number = seed_issue(h)
    h.github.inject_faults(script=[422], applies_to=lambda m, route: route == GIT_REF)
    payload, _ = command(h, number, "/debate review")
    h.post("issue_comment", payload)
    h.wait_for(lambda: bot_markers(h, number), what="the failure reply")
    h.wait_for(lambda: "pending" not in delivery_states(h).values(), what="the delivery")
    replies = [c["body"] for c in h.github.comments(REPO, number) if c["body"].startswith("<!--")]
    assert len(replies) == 1, replies
    [reply] = replies
    assert "(`github_error`)" in reply and "GitHub answered 422" in reply
    assert "Comment `/debate` to try again" in reply
    assert "Traceback" not in reply and "/repos/" not in reply
    assert list(delivery_states(h).values()) == ["failed"]
