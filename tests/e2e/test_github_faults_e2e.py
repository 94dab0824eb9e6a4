"""GitHub-side faults under a running `debate-bot serve`: a revoked token, secondary
and primary rate limits, and the issue deleted, transferred or locked mid-debate."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import httpx
import pytest

from testkit.fakes.github_server import FakeGitHub
from testkit.harness.scenarios import (
    MARKER,
    bot_markers,
    command,
    finished,
    never_converge,
    runs,
    seed_issue,
)
from testkit.harness.service import INSTALLATION, REPO, Harness

COMMENTS = "/repos/{owner}/{repo}/issues/{issue_number}/comments"


def _is_comment_post(method: str, route: str) -> bool:
    return method == "POST" and route == COMMENTS


def error_classes(h: Harness) -> dict[int, tuple[str, str | None]]:
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        rows = db.execute("select issue_number, state, error_class from runs")
        return {int(n): (state, error) for n, state, error in rows}


def start_debate(h: Harness, title: str, text: str = "/debate --rounds 1") -> tuple[int, int]:
    number = seed_issue(h, title=title)
    payload, comment_id = command(h, number, text)
    h.post("issue_comment", payload)
    return number, comment_id


def assert_finished_once(h: Harness, number: int, comment_id: int) -> None:
    assert runs(h)[0][1:] == ("done", "verdict")
    markers = bot_markers(h, number)
    assert len(markers) == len(set(markers))  # no comment posted twice
    assert any("debate-bot:verdict" in m for m in markers)
    assert not any("The debate stopped" in c["body"] for c in h.github.comments(REPO, number))
    assert "rocket" in h.github.reactions(REPO, comment_id=comment_id)


def test_a_token_revoked_mid_run_is_replaced_and_the_run_finishes(harness: Harness) -> None:
    h = harness
    h.models.latency_s = 0.3
    h.start()
    number, comment_id = start_debate(h, "Revoked token")
    h.wait_for(lambda: bot_markers(h, number), what="the first round digest")
    h.github.revoke_tokens(INSTALLATION)
    h.wait_for(lambda: finished(h), what="the run after the revocation")
    assert h.github.count(status=401) == 1  # one refused call, then a fresh token
    assert h.github.token_requests == 2
    assert_finished_once(h, number, comment_id)


@pytest.mark.parametrize("retry_after", [True, False], ids=["retry-after", "no-header"])
def test_a_secondary_limit_mid_run_is_waited_out_once(harness: Harness, retry_after: bool) -> None:
    h = harness
    # The window opens at the first digest; the harness caps waits at 2 s, so the
    # header-less case waits 2 s instead of GitHub's minute.
    h.github.limit_installation(
        INSTALLATION, window_s=1, retry_after=retry_after, applies_to=_is_comment_post
    )
    h.start()
    number, comment_id = start_debate(h, "Secondary limit")
    h.wait_for(lambda: finished(h), what="the run past the secondary limit")
    assert h.github.limited_requests(INSTALLATION) == 1  # nothing sent inside the window
    assert_finished_once(h, number, comment_id)
    assert h.service is not None
    metrics = httpx.get(h.service.url + "/metrics").text
    assert 'debate_bot_github_errors_total{kind="rate_limited"} 1.0' in metrics
    assert 'debate_bot_github_errors_total{kind="client"}' not in metrics


def test_a_digest_held_by_a_secondary_limit_holds_back_no_model_call(harness: Harness) -> None:
    """A round digest is posted while the next round's model calls run: a post
    that waits out a secondary limit delays the comment, not the debate."""
    h = harness
    h.models.latency_s = 0.3
    h.models.responder = never_converge
    h.github.limit_installation(INSTALLATION, window_s=2, applies_to=_is_comment_post)
    h.start()
    number, comment_id = start_debate(h, "Slow digest", "/debate --rounds 2")
    h.wait_for(lambda: finished(h), what="the run past the slow digest")
    assert h.github.limited_requests(INSTALLATION) == 1
    assert_finished_once(h, number, comment_id)
    posted = [
        r for r in h.github.requests if _is_comment_post(r.method, r.route) and r.status == 201
    ]
    round_one = posted[0].received
    # Classify, two openings, then both rebuttals: sent while round 1 waited.
    assert sum(r.received < round_one for r in h.models.requests) == 5
    rounds = [
        m.group(3) for m in map(MARKER.match, bot_markers(h, number)) if m and m.group(1) == "round"
    ]
    assert rounds == ["1", "2"]  # each once, still in order


def test_a_primary_limit_within_the_cap_delays_the_run(harness: Harness) -> None:
    h = harness
    h.github.limit_installation(
        INSTALLATION, kind="primary", window_s=1, applies_to=_is_comment_post
    )
    h.start(DEBATE_BOT_GITHUB_MAX_RETRY_WAIT_S="5")
    number, comment_id = start_debate(h, "Primary limit")
    h.wait_for(lambda: finished(h), what="the run past the reset")
    assert h.github.limited_requests(INSTALLATION) == 1
    assert '"run.interrupted"' not in (h.tmp / "service.log").read_text()
    assert_finished_once(h, number, comment_id)


def attempts(h: Harness) -> list[tuple[int, int]]:
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        return list(db.execute("select attempts, handbacks from runs order by created_at"))


@pytest.mark.parametrize("kind", ["primary", "secondary"])
def test_a_limit_beyond_the_cap_hands_the_run_back_until_it_lifts(
    harness: Harness, kind: str
) -> None:
    """The window outlasts MAX_ATTEMPTS one-second leases: a run left to lapse and
    be claimed again each time would have failed `too_many_attempts`."""
    h = harness
    h.models.responder = never_converge
    h.models.latency_s = 0.5  # the rebuttals are in flight when the digest is refused
    h.github.limit_installation(INSTALLATION, kind=kind, window_s=8, applies_to=_is_comment_post)
    h.start(DEBATE_BOT_GITHUB_MAX_RETRY_WAIT_S="1", DEBATE_BOT_LEASE_S="1")
    number, comment_id = start_debate(h, f"{kind} limit, long", "/debate --rounds 2")
    h.wait_for(lambda: finished(h), timeout=60, what="the run resumed after the limit")
    log = (h.tmp / "service.log").read_text()
    assert log.count('"run.rate_limited"') == 1
    assert '"run.interrupted"' not in log and '"run.poisoned"' not in log
    assert attempts(h) == [(2, 1)]  # claimed twice, the first given back: no crash
    assert h.github.limited_requests(INSTALLATION) == 1  # nothing sent before it lifted
    assert_finished_once(h, number, comment_id)
    # The round-1 digest was refused while the rebuttals ran: they finished and were
    # stored, and the resumed attempt paid for no model call twice.
    calls = [(r.model, r.prompt_text) for r in h.models.requests]
    assert len(calls) == len(set(calls))


def _thread_requests(github: FakeGitHub, number: int) -> int:
    """Requests about issue ``number``: its own routes and its comments by id."""
    ids = {c["id"] for c in github.comments(REPO, number)}
    own = f"/repos/{REPO}/issues/{number}"
    return sum(
        1
        for r in github.requests
        if r.path == own
        or r.path.startswith(own + "/")
        or any(r.path.startswith(f"/repos/{REPO}/issues/comments/{i}") for i in ids)
    )


@pytest.mark.parametrize(
    "fault",
    [FakeGitHub.delete_issue, FakeGitHub.transfer_issue, FakeGitHub.lock_issue],
    ids=["deleted", "transferred", "locked"],
)
def test_the_issue_gone_mid_run_fails_it_target_gone_at_once(
    harness: Harness, fault: Callable[[FakeGitHub, str, int], None]
) -> None:
    h = harness
    h.models.latency_s = 0.2
    h.models.responder = never_converge
    h.start()
    gone, gone_comment = start_debate(h, "Soon gone", "/debate --rounds 3")
    kept, kept_comment = start_debate(h, "Stays", "/debate --rounds 1")
    h.wait_for(lambda: bot_markers(h, gone), what="the first round digest")
    fault(h.github, REPO, gone)
    before = _thread_requests(h.github, gone)
    comments_before = h.github.comments(REPO, gone)
    h.wait_for(lambda: error_classes(h).get(gone, ("",))[0] == "failed", what="the gone run")
    model_calls = len(h.models.requests)
    h.wait_for(lambda: finished(h), what="the other run")
    assert error_classes(h)[gone] == ("failed", "target_gone")
    assert error_classes(h)[kept] == ("done", None)
    # One refused call ended it: no retry, no failure notice, reaction or label.
    assert _thread_requests(h.github, gone) - before == 1
    assert h.github.comments(REPO, gone) == comments_before
    assert h.github.reactions(REPO, comment_id=gone_comment) == ["eyes"]
    log = (h.tmp / "service.log").read_text()
    assert '"run.target_gone"' in log and '"run.interrupted"' not in log
    # The other run went on; the gone one asked its models nothing more.
    assert "rocket" in h.github.reactions(REPO, comment_id=kept_comment)

    def about_gone(prompt: str) -> bool:
        return "Soon gone" in prompt

    assert any(about_gone(r.prompt_text) for r in h.models.requests[:model_calls])
    assert not any(about_gone(r.prompt_text) for r in h.models.requests[model_calls:])
