"""Failed webhook deliveries are asked of GitHub again (bot/service/web/redeliver.py), end
to end: `debate-bot serve` down while GitHub delivers, then up (split from
tests/unit/app/test_redelivery.py)."""

from __future__ import annotations

import httpx

from testkit.fakes.github_server import FakeGitHub
from testkit.harness.scenarios import bot_markers, command, delivery_states, runs, seed_issue
from testkit.harness.service import SECRET, Harness

LIST = "/app/hook/deliveries"
ATTEMPTS = "/app/hook/deliveries/{delivery_id}/attempts"


def asked(fake: FakeGitHub) -> list[int]:
    """The attempt ids GitHub was asked to send again, in order."""
    return [
        int(r.path.rsplit("/", 2)[-2])
        for r in fake.requests
        if r.method == "POST" and r.route == ATTEMPTS
    ]


def guids_asked(fake: FakeGitHub) -> list[str]:
    by_id = {d.id: d.guid for d in fake.hook_deliveries}
    return [by_id[i] for i in asked(fake)]


# -- end to end ---------------------------------------------------------------------


def test_deliveries_that_failed_while_the_service_was_down_are_debated_once(
    harness: Harness,
) -> None:
    h = harness
    h.github.configure_webhook(
        f"http://127.0.0.1:{h.env['DEBATE_BOT_PORT']}/api/github/webhooks", SECRET
    )
    fast = {"DEBATE_BOT_REDELIVER_INTERVAL_S": "0.2"}
    h.start(**fast)
    delivered_issue = seed_issue(h, title="Tabs or spaces?")
    payload, _ = command(h, delivered_issue, "/debate --rounds 1")
    delivered = h.github.deliver("issue_comment", payload)
    assert delivered.status_code == 202
    h.wait_for(lambda: [r[1] for r in runs(h)] == ["done"], what="the first run")

    h.stop()
    lost_issues = [seed_issue(h, title=f"Question {i}?") for i in (1, 2)]
    lost = [
        h.github.deliver("issue_comment", command(h, n, "/debate --rounds 1")[0])
        for n in lost_issues
    ]
    assert [d.status_code for d in lost] == [0, 0]  # connection refused

    h.start(**fast)
    h.wait_for(
        lambda: len(runs(h)) == 3 and all(state == "done" for _, state, _ in runs(h)),
        timeout=60,
        what="both lost deliveries debated",
    )
    # Several passes more: none of them asks again.
    passes = h.github.count("GET", LIST)
    h.wait_for(lambda: h.github.count("GET", LIST) >= passes + 3, what="three more passes")

    assert sorted(guids_asked(h.github)) == sorted(d.guid for d in lost)
    assert delivered.guid not in guids_asked(h.github)
    assert delivery_states(h) == dict.fromkeys([delivered.guid, *(d.guid for d in lost)], "done")
    for number in (delivered_issue, *lost_issues):
        verdicts = [m for m in bot_markers(h, number) if "debate-bot:verdict" in m]
        assert len(verdicts) == 1, number
    assert len(runs(h)) == 3
    assert h.service is not None
    metrics = httpx.get(h.service.url + "/metrics").text
    assert 'debate_bot_redeliveries_total{outcome="requested"} 2.0' in metrics
    redelivered = [d for d in h.github.hook_deliveries if d.redelivery]
    assert sorted(d.guid for d in redelivered) == sorted(d.guid for d in lost)
    assert all(d.status_code == 202 for d in redelivered)
