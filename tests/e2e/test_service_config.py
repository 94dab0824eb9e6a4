"""Repo config and bad values on GitHub: clear replies, no runs, no noise."""

from __future__ import annotations

from testkit.harness.scenarios import bot_markers, command, delivery_states, runs, seed_issue
from testkit.harness.service import REPO, Harness


def settled(h: Harness) -> bool:
    states = delivery_states(h).values()
    return bool(states) and "pending" not in states


def test_broken_config_answers_maintainers_once_and_strangers_never(harness: Harness) -> None:
    h = harness
    h.github.set_permission(REPO, "reader", "read")
    h.github.put_file(REPO, ".github/debate.yml", "rounds: 2\npersonas: [\n")
    h.start()
    number = seed_issue(h)
    for text, user in (("/assign me", "reader"), ("/debate", "reader"), ("/lgtm", "Codertocat")):
        payload, _ = command(h, number, text, user=user)
        h.post("issue_comment", payload)
    h.wait_for(lambda: settled(h) and len(delivery_states(h)) == 3, what="intake")
    assert bot_markers(h, number) == []
    payload, _ = command(h, number, "/debate")
    h.post("issue_comment", payload)
    h.wait_for(lambda: bot_markers(h, number), what="the config error reply")
    [reply] = [c["body"] for c in h.github.comments(REPO, number) if c["body"].startswith("<!--")]
    assert "cannot read its configuration" in reply and "line 3" in reply
    assert "Traceback" not in reply and runs(h) == []


def test_wrong_persona_count_is_a_usage_reply_not_a_failed_run(harness: Harness) -> None:
    h = harness
    h.start()
    number = seed_issue(h)
    payload, comment_id = command(h, number, '/debate --personas "Atlas vs Forge vs Quill"')
    h.post("issue_comment", payload)
    h.wait_for(lambda: bot_markers(h, number), what="the reply")
    body = h.github.comments(REPO, number)[-1]["body"]
    assert "exactly 2 personas" in body
    assert runs(h) == []
    assert "eyes" not in h.github.reactions(REPO, comment_id=comment_id)


def test_repo_config_shapes_the_run(harness: Harness) -> None:
    h = harness
    h.github.put_file(
        REPO,
        ".github/debate.yml",
        "rounds: 1\n"
        "personas:\n"
        "  - {name: Hawk, perspective: 'cost first', model: anthropic/claude-sonnet-4-5}\n"
        "  - {name: Dove, perspective: 'users first', model: openai/gpt-4.1-mini}\n",
    )
    h.start()
    number = seed_issue(h)
    payload, _ = command(h, number, "/debate")
    h.post("issue_comment", payload)
    h.wait_for(lambda: runs(h) and runs(h)[0][1] == "done", what="the run")
    verdict = next(c["body"] for c in h.github.comments(REPO, number) if ":verdict" in c["body"])
    assert "Hawk: `anthropic/claude-sonnet-4-5`" in verdict
    assert "Dove: `openai/gpt-4.1-mini`" in verdict
    assert sum(1 for m in bot_markers(h, number) if ":round " in m) == 1
    # the persona models really were called, each on its own vendor's API
    paths = {r.path for r in h.models.requests}
    assert {"/v1/messages", "/v1/chat/completions"} <= paths
