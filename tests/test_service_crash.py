"""A worker killed mid-run: another process resumes it from the stored turns."""

from __future__ import annotations

import time

from tests.harness.scenarios import (
    MARKER,
    bot_markers,
    command,
    finished,
    never_converge,
    runs,
    seed_issue,
    stored_turns,
)
from tests.harness.service import REPO, Harness


def test_killed_worker_resumes_without_duplicates_or_gaps(harness: Harness) -> None:
    h = harness
    h.models.latency_s = 0.3
    h.models.responder = never_converge
    h.start()
    number = seed_issue(h)
    payload, comment_id = command(h, number, "/debate --rounds 3")
    h.post("issue_comment", payload)
    # Kill the process once the first round is posted and later turns are in flight.
    h.wait_for(lambda: any("round=1" in m for m in bot_markers(h, number)), what="round 1")
    h.wait_for(lambda: len(h.models.requests) > stored_turns(h), what="a turn in flight")
    assert h.service is not None
    h.service.kill()
    paid_before = len(h.models.requests)
    turns_before = stored_turns(h)
    assert not finished(h)

    time.sleep(0.5)
    h.start()  # a new process; the lease (3 s) lapses and it resumes the run
    h.wait_for(lambda: finished(h), timeout=60, what="the resumed run to finish")

    [(_, state, kind)] = runs(h)
    assert (state, kind) == ("done", "verdict")
    markers = bot_markers(h, number)
    assert len(markers) == len(set(markers)), f"duplicate comments: {markers}"
    rounds = sorted(
        int(m.group(3)) for m in map(MARKER.match, markers) if m and m.group(1) == "round"
    )
    assert rounds == list(range(1, rounds[-1] + 1)) and rounds[-1] >= 3, rounds
    assert sum(1 for m in markers if "debate-bot:verdict" in m) == 1
    # No completed call is paid twice: only the calls in flight at the kill repeat.
    in_flight = paid_before - turns_before
    assert len(h.models.requests) <= stored_turns(h) + in_flight
    assert "rocket" in h.github.reactions(REPO, comment_id=comment_id)
