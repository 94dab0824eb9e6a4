"""Scenario helpers for the service tests: seed an issue, post a command, read
back the bot's comments, runs and deliveries, a responder that never converges."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from testkit.harness.service import INSTALLATION, REPO, Harness, delivery

MARKER = re.compile(r"^<!-- debate-bot:(\w[\w-]*) run=(\S+)(?: round=(\d+))?(?: part=(\d+))? -->")


def seed_issue(
    h: Harness,
    title: str = "Should we use gRPC or REST for the public API?",
    body: str = "We expose a public API to partners.",
) -> int:
    return h.github.add_issue(REPO, title=title, body=body, user="Codertocat")


def command(
    h: Harness,
    number: int,
    text: str,
    *,
    user: str = "Codertocat",
    user_type: str = "User",
    action: str = "created",
) -> tuple[dict[str, Any], int]:
    comment_id = h.github.add_comment(REPO, number, text, user=user)
    payload = delivery(
        "issue_comment.created.with-installation",
        **{
            "action": action,
            "comment.body": text,
            "comment.id": comment_id,
            "comment.user.login": user,
            "issue.number": number,
            "issue.title": h.github.issue(REPO, number)["title"],
            "issue.body": h.github.issue(REPO, number)["body"],
            "sender.login": user,
            "sender.type": user_type,
            "installation.id": INSTALLATION,
        },
    )
    return payload, comment_id


def bot_markers(h: Harness, number: int) -> list[str]:
    return [
        c["body"].split("\n", 1)[0]
        for c in h.github.comments(REPO, number)
        if c["body"].startswith("<!-- debate-bot:")
    ]


def posted_rounds(h: Harness, number: int) -> list[int]:
    """The numbers of the round digests posted on an issue, sorted (repeats kept)."""
    found = (MARKER.match(m) for m in bot_markers(h, number))
    return sorted(int(m.group(3)) for m in found if m and m.group(1) == "round")


def assert_thread_complete(h: Harness, number: int, comment_id: int) -> None:
    """The one run is done with a verdict: each comment once, no round missing (at
    least three), one verdict, and the command answered with `rocket`."""
    [(_, state, kind)] = runs(h)
    assert (state, kind) == ("done", "verdict")
    markers = bot_markers(h, number)
    assert len(markers) == len(set(markers)), f"duplicate comments: {markers}"
    rounds = posted_rounds(h, number)
    assert rounds == list(range(1, rounds[-1] + 1)) and rounds[-1] >= 3, rounds
    assert sum("debate-bot:verdict" in m for m in markers) == 1
    assert "rocket" in h.github.reactions(REPO, comment_id=comment_id)


def runs(h: Harness) -> list[tuple[str, str, str | None]]:
    path = h.db_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        return list(db.execute("select id, state, outcome_kind from runs order by created_at"))


def delivery_states(h: Harness) -> dict[str, str]:
    path = h.db_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        return dict(db.execute("select delivery_id, state from deliveries"))


def stored_turns(h: Harness) -> int:
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        return int(db.execute("select count(*) from turns").fetchone()[0])


def finished(h: Harness) -> bool:
    return bool(runs(h)) and all(state in ("done", "failed", "aborted") for _, state, _ in runs(h))


def never_converge(prompt: str) -> str:
    from bot.engine.rehearsal import reply

    text = reply(prompt)
    return text.replace("AGREE", "HOLD").replace("CONCEDE", "HOLD")


def debate_under_way(h: Harness, rounds: int = 4) -> int:
    """Start the service and a slow debate that will not converge early; return its
    issue once round 1 is posted (later turns are in flight)."""
    h.models.latency_s = 0.3
    h.models.responder = never_converge
    h.start()
    number = seed_issue(h)
    payload, _ = command(h, number, f"/debate --rounds {rounds}")
    h.post("issue_comment", payload)
    h.wait_for(lambda: any("round=1" in m for m in bot_markers(h, number)), what="round 1")
    return number
