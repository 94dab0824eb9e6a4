"""A worker killed mid-run: another process resumes it from the stored turns."""

from __future__ import annotations

import time

from testkit.harness.scenarios import (
    assert_thread_complete,
    bot_markers,
    command,
    finished,
    never_converge,
    seed_issue,
    stored_turns,
)
from testkit.harness.service import Harness


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

    assert_thread_complete(h, number, comment_id)
    # No completed call is paid twice: only the calls in flight at the kill repeat.
    in_flight = paid_before - turns_before
    assert len(h.models.requests) <= stored_turns(h) + in_flight
