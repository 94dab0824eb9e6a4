"""The app uninstalled or suspended under running debates, over HTTP against the fakes."""

from __future__ import annotations

import time

from testkit.harness.scenarios import (
    bot_markers,
    command,
    debate_under_way,
    delivery_states,
    runs,
    seed_issue,
)
from testkit.harness.service import INSTALLATION, REPO, Harness, delivery


def installation(action: str) -> dict[str, object]:
    return delivery("installation.created", action=action, **{"installation.id": INSTALLATION})


def repositories_removed(*names: str) -> dict[str, object]:
    doc = delivery("installation.created", action="removed", **{"installation.id": INSTALLATION})
    doc.pop("repositories", None)
    doc["repository_selection"] = "selected"
    doc["repositories_added"] = []
    doc["repositories_removed"] = [{"full_name": n, "name": n.split("/")[1]} for n in names]
    return doc


def state_of_only_run(h: Harness) -> str:
    [(_, state, _)] = runs(h)
    return state


def test_uninstall_ends_running_debates_quietly_and_ignores_what_follows(
    harness: Harness,
) -> None:
    h = harness
    number = debate_under_way(h)

    assert h.post("installation", installation("deleted")).json() == {"status": "queued"}
    h.wait_for(lambda: state_of_only_run(h) == "cancelled", what="the run to be cancelled")
    paid, markers = len(h.models.requests), bot_markers(h, number)
    time.sleep(1.5)  # several batches' worth of model latency
    assert len(h.models.requests) - paid <= 3  # at most the calls already in flight
    assert bot_markers(h, number) == markers  # nothing posted for a removed app
    assert not any("debate-bot:aborted" in m or "verdict" in m for m in markers)

    # A command arriving afterwards (a late delivery) starts nothing and says nothing.
    other = seed_issue(h, title="Another question")
    late, comment_id = command(h, other, "/debate")
    delivery_id = "late-after-uninstall"
    h.post("issue_comment", late, delivery_id=delivery_id)
    h.wait_for(lambda: delivery_states(h).get(delivery_id) == "ignored", what="late delivery")
    assert len(runs(h)) == 1
    assert bot_markers(h, other) == []
    assert h.github.reactions(REPO, comment_id=comment_id) == []


def test_suspend_then_unsuspend(harness: Harness) -> None:
    h = harness
    h.start()
    number = seed_issue(h)
    assert h.post("installation", installation("suspend")).json() == {"status": "queued"}
    h.wait_for(lambda: "pending" not in delivery_states(h).values(), what="the suspension")

    while_suspended, _ = command(h, number, "/debate --rounds 1")
    h.post("issue_comment", while_suspended, delivery_id="while-suspended")
    h.wait_for(lambda: delivery_states(h).get("while-suspended") == "ignored", what="ignored")
    assert runs(h) == [] and bot_markers(h, number) == []

    h.post("installation", installation("unsuspend"))
    h.wait_for(lambda: "pending" not in delivery_states(h).values(), what="the unsuspension")
    after, comment_id = command(h, number, "/debate --rounds 1")
    h.post("issue_comment", after)
    h.wait_for(lambda: runs(h) and state_of_only_run(h) == "done", what="a debate after it")
    assert "eyes" in h.github.reactions(REPO, comment_id=comment_id)


def test_a_repository_removed_from_the_installation_ends_its_runs_only(
    harness: Harness,
) -> None:
    h = harness
    debate_under_way(h)

    h.post("installation_repositories", repositories_removed("someone/else"))
    h.wait_for(lambda: "pending" not in delivery_states(h).values(), what="an unrelated removal")
    assert state_of_only_run(h) == "running"

    h.post("installation_repositories", repositories_removed(REPO))
    h.wait_for(lambda: state_of_only_run(h) == "cancelled", what="the run to be cancelled")
