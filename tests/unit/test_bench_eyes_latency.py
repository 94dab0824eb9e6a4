"""The eyes_latency benchmark's bookkeeping: which request is whose eyes, token
and phase (pure helpers; the benchmark itself is timed, not tested)."""

from __future__ import annotations

from typing import Any

from testkit.fakes.github_server import RecordedRequest
from testkit.latency import PHASES, Command, eyes_at, first_token_at, phases


def request(
    method: str, path: str, at: float, json: Any = None, status: int = 201
) -> RecordedRequest:
    return RecordedRequest(
        method=method, path=path, route="", query={}, json=json, status=status, headers={}, at=at
    )


def test_eyes_are_matched_to_their_comment_first_answer_only() -> None:
    requests = [
        request("POST", "/repos/org1/repo/issues/comments/7/reactions", 1.0, {"content": "+1"}),
        request("POST", "/repos/org1/repo/issues/comments/7/reactions", 2.0, {"content": "eyes"}),
        request("POST", "/repos/org1/repo/issues/comments/7/reactions", 3.0, {"content": "eyes"}),
        request(
            "POST", "/repos/org2/repo/issues/comments/8/reactions", 4.0, {"content": "eyes"}, 500
        ),
        request("POST", "/repos/org2/repo/issues/3/reactions", 5.0, {"content": "eyes"}),
    ]
    assert eyes_at(requests) == {7: 2.0}


def test_the_first_answered_token_per_installation() -> None:
    requests = [
        request("POST", "/app/installations/1001/access_tokens", 1.0, status=401),
        request("POST", "/app/installations/1001/access_tokens", 2.0),
        request("POST", "/app/installations/1001/access_tokens", 3.0),
        request("GET", "/app/installations/1002", 4.0, status=200),
    ]
    assert first_token_at(requests) == {1001: 2.0}


def test_phases_run_from_stored_through_each_milestone() -> None:
    done = Command(1001, 7, b"", delivery_id="d1", accepted_at=10.05)
    unseen = Command(1002, 8, b"", delivery_id="d2", accepted_at=10.05)  # claim missed
    split = phases(
        [done, unseen],
        eyes={7: 10.5, 8: 10.6},
        tokens={1001: 10.2, 1002: 10.3},
        stored={"d1": 10.0, "d2": 10.0},
        claimed={"d1": (10.1, "worker-a")},
        queued={1001: 10.4, 1002: 10.45},
    )
    assert {k: [round(x) for x in v] for k, v in split.items()} == dict(
        zip(PHASES, [[50], [100], [100], [200], [100]], strict=True)
    )
