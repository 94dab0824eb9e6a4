"""Webhooks through a proxy channel: `debate-bot serve` with
DEBATE_BOT_WEBHOOK_PROXY_URL follows a loopback smee-style event stream and
feeds each delivery through its own webhook route."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from typing import Any

import pytest

from bot.github.webhooks import sign
from bot.service.web.proxy import delivery_of
from testkit.fakes.sse_channel import FakeChannel
from testkit.harness.service import INSTALLATION, REPO, SECRET, Harness, delivery, run_rows


def forwarded(payload: dict[str, Any], delivery_id: str, *, raw: bool = False) -> dict[str, Any]:
    """What the channel relays for one GitHub delivery."""
    if raw:  # the exact bytes GitHub signed, in any formatting
        body = json.dumps(payload, indent=2).encode()
    else:  # only the parsed body: GitHub's compact JSON is rebuilt
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    event = {
        "x-github-event": "issue_comment",
        "x-github-delivery": delivery_id,
        "x-hub-signature-256": sign(SECRET.encode(), body),
        "content-type": "application/json",
        "body": payload,
        "query": {},
        "timestamp": int(time.time() * 1000),
    }
    if raw:
        event["rawBody"] = body.decode()
    return event


def command_on_new_issue(h: Harness, title: str) -> dict[str, Any]:
    number = h.github.add_issue(REPO, title=title, body="A public API.", user="Codertocat")
    comment_id = h.github.add_comment(REPO, number, "/debate --rounds 1", user="Codertocat")
    return delivery(
        "issue_comment.created.with-installation",
        **{
            "comment.body": "/debate --rounds 1",
            "comment.id": comment_id,
            "issue.number": number,
            "issue.title": title,
            "sender.login": "Codertocat",
            "installation.id": INSTALLATION,
        },
    )


def delivery_count(h: Harness) -> int:
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        return int(db.execute("select count(*) from deliveries").fetchone()[0])


def test_deliveries_arrive_through_the_channel_once(harness: Harness) -> None:
    h = harness
    with FakeChannel() as channel:
        h.start(DEBATE_BOT_WEBHOOK_PROXY_URL=channel.url)
        first_id = str(uuid.uuid4())
        first = forwarded(command_on_new_issue(h, "gRPC or REST?"), first_id)
        channel.publish(first)
        channel.publish(
            forwarded(command_on_new_issue(h, "Tabs or spaces?"), str(uuid.uuid4()), raw=True)
        )
        h.wait_for(lambda: len(run_rows(h)) == 2, what="two runs from the channel")
        # The stream drops; the service reconnects and a redelivery is deduped.
        channel.close_stream()
        h.wait_for(lambda: channel.connections >= 2, what="a reconnect")
        channel.publish(first)
        forged = forwarded(command_on_new_issue(h, "Forged?"), str(uuid.uuid4()))
        forged["x-hub-signature-256"] = "sha256=" + "0" * 64
        channel.publish(forged)
        time.sleep(1.5)
    assert len(run_rows(h)) == 2  # the redelivery and the forged one made no run
    assert delivery_count(h) == 2


def test_without_the_setting_no_channel_is_followed(harness: Harness) -> None:
    with FakeChannel() as channel:
        harness.start()
        time.sleep(0.5)
        assert channel.connections == 0


@pytest.mark.parametrize("data", ["not json", "[1]", '{"x-github-event": "ping"}'])
def test_unreadable_events_are_skipped(data: str) -> None:
    assert delivery_of(data) is None
