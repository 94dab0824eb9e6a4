"""SIGTERM: the process stops claiming, lets the model calls in flight finish and
stores their turns, hands its runs back and exits 0; another process resumes them
at once (the lease is far too long for a lapse to explain it), with no duplicate
comment, no missing round and no model call paid twice."""

from __future__ import annotations

import signal
import sqlite3
import subprocess

import pytest

from testkit.harness.scenarios import (
    assert_thread_complete,
    bot_markers,
    command,
    finished,
    never_converge,
    runs,
    seed_issue,
    stored_turns,
)
from testkit.harness.service import Harness, Service, free_port

# A resume that waited for this lease to lapse would outlast every wait below.
LONG_LEASE = {"DEBATE_BOT_LEASE_S": "600"}


def start_debate(h: Harness) -> tuple[int, int]:
    number = seed_issue(h)
    payload, comment_id = command(h, number, "/debate --rounds 3")
    assert h.post("issue_comment", payload).json()["status"] == "queued"
    h.wait_for(lambda: any("round=1" in m for m in bot_markers(h, number)), what="round 1")
    h.wait_for(lambda: len(h.models.requests) > stored_turns(h), what="a turn in flight")
    return number, comment_id


def terminate(svc: Service, timeout: float) -> int:
    assert svc.proc is not None
    svc.proc.send_signal(signal.SIGTERM)
    try:
        code = svc.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        svc.proc.kill()
        raise AssertionError("the process did not exit within the grace") from None
    svc.proc = None
    return code


def test_sigterm_on_serve_drains_and_another_process_resumes_at_once(harness: Harness) -> None:
    h = harness
    h.models.latency_s = 1.0
    h.models.responder = never_converge
    h.start(**LONG_LEASE, DEBATE_BOT_SHUTDOWN_GRACE_S="20")
    number, comment_id = start_debate(h)
    assert h.service is not None
    assert terminate(h.service, timeout=25) == 0
    # The calls in flight were answered and stored, and the run was handed back.
    assert len(h.models.requests) == stored_turns(h)
    [(_, state, _)] = runs(h)
    assert state == "queued"
    log = (h.tmp / "service.log").read_text()
    assert "worker.handed_back" in log and "worker.grace_expired" not in log
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        claims = db.execute("select attempts, handbacks from runs").fetchall()
    assert claims == [(1, 1)]  # claimed once, handed back cleanly: not a crash

    h.models.latency_s = 0.05
    h.start(**LONG_LEASE)
    h.wait_for(lambda: finished(h), timeout=60, what="the handed-back run to finish")
    assert_thread_complete(h, number, comment_id)
    assert len(h.models.requests) == stored_turns(h), "a model call was paid twice"


def test_sigterm_on_a_worker_with_web_apart(harness: Harness) -> None:
    h = harness
    h.models.latency_s = 1.0
    h.models.responder = never_converge
    env = {**h.env, **LONG_LEASE, "DEBATE_BOT_SHUTDOWN_GRACE_S": "20"}
    h.service = Service(env, h.tmp / "web.log").start("web")
    first = Service(env, h.tmp / "worker1.log").start("worker")
    second: Service | None = None
    try:
        number, comment_id = start_debate(h)
        assert terminate(first, timeout=25) == 0
        assert len(h.models.requests) == stored_turns(h)
        h.models.latency_s = 0.05
        second = Service(env, h.tmp / "worker2.log").start("worker")
        h.wait_for(lambda: finished(h), timeout=60, what="the handed-back run to finish")
        assert_thread_complete(h, number, comment_id)
        assert len(h.models.requests) == stored_turns(h), "a model call was paid twice"
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_grace_expired_hands_the_run_back_anyway(harness: Harness) -> None:
    h = harness
    h.models.responder = never_converge
    h.models.latency_s = 0.3
    h.start(**LONG_LEASE, DEBATE_BOT_SHUTDOWN_GRACE_S="0.5")
    number = seed_issue(h)
    payload, comment_id = command(h, number, "/debate --rounds 3")
    h.post("issue_comment", payload)
    h.wait_for(lambda: any("round=1" in m for m in bot_markers(h, number)), what="round 1")
    h.models.latency_s = 30.0  # far beyond the grace: the calls in flight are cut
    sent = len(h.models.requests)
    h.wait_for(lambda: len(h.models.requests) > sent, what="a slow call in flight")
    assert h.service is not None
    assert terminate(h.service, timeout=10) == 0
    assert "worker.grace_expired" in (h.tmp / "service.log").read_text()
    [(_, state, _)] = runs(h)
    assert state == "queued"
    cut = len(h.models.requests) - stored_turns(h)

    h.models.latency_s = 0.05
    h.start(**LONG_LEASE)
    h.wait_for(lambda: finished(h), timeout=60, what="the handed-back run to finish")
    assert_thread_complete(h, number, comment_id)
    # Only the calls cut at the grace are paid again.
    assert len(h.models.requests) <= stored_turns(h) + cut


@pytest.mark.parametrize("command_name", ["web", "worker", "worker with its port"])
def test_sigterm_when_idle_exits_zero(harness: Harness, command_name: str) -> None:
    h = harness
    log = h.tmp / f"{command_name}.log"
    env = dict(h.env)
    if command_name == "worker with its port":
        command_name, env["DEBATE_BOT_WORKER_PORT"] = "worker", str(free_port())
    svc = Service(env, log).start(command_name)
    h.wait_for(lambda: "service.ready" in log.read_text(), what="signal handlers")
    assert terminate(svc, timeout=10) == 0


def test_the_cli_entry_exits_zero_on_sigint(harness: Harness) -> None:
    h = harness
    svc = Service(h.env, h.tmp / "serve.log").start()
    assert svc.proc is not None
    svc.proc.send_signal(signal.SIGINT)
    assert svc.proc.wait(timeout=10) == 0
    svc.proc = None
