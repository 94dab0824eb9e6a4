"""Scheduled design reviews end to end over HTTP: a running `debate-bot serve`
files the review when it is due, and catches up once after downtime (split from
tests/unit/store/test_schedules.py, which claims them in the store)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta

from testkit.harness.scenarios import finished, runs
from testkit.harness.service import REPO, Harness

FAST = {"DEBATE_BOT_SCHEDULE_POLL_S": "0.5", "DEBATE_BOT_SCHEDULE_DISCOVERY_S": "0.5"}
CONFIG = "design_review:\n  schedule: weekly\n  scope: /\nrounds: 1\n"


def scheduled_issues(h: Harness) -> list[dict[str, object]]:
    return [i for i in h.github.issues(REPO) if str(i["title"]).startswith("Design review ")]


def move_due_into_the_past(h: Harness, days: int) -> None:
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        (due,) = db.execute("select next_due from schedules").fetchone()
        earlier = datetime.fromisoformat(str(due)) - timedelta(days=days)
        db.execute("update schedules set next_due = ?", (earlier.isoformat(sep=" "),))


def test_scheduled_reviews_end_to_end(harness: Harness) -> None:
    h = harness
    h.github.put_file(REPO, "README.md", "# Shop\n\nOrders and payments.\n")
    h.github.put_file(REPO, "src/orders.py", '"""Orders own their lifecycle."""\n')
    h.github.add_repo("Codertocat/unscheduled", installation_id=1)
    h.github.put_file("Codertocat/unscheduled", "README.md", "# Nothing scheduled here\n")
    h.github.put_file(REPO, ".github/debate.yml", CONFIG)
    h.start(**FAST)
    h.wait_for(lambda: len(scheduled_issues(h)) == 1 and finished(h), timeout=90, what="review")
    [first] = scheduled_issues(h)
    assert h.github.issues("Codertocat/unscheduled") == []  # no key, no review
    assert h.service is not None
    h.service.stop()

    h.start(**FAST)  # not due yet: nothing new
    h.wait_for(lambda: h.github.count("GET", "/installation/repositories") >= 2, what="a pass")
    assert len(scheduled_issues(h)) == 1
    h.service.stop()

    move_due_into_the_past(h, days=30)  # the service was down for four weeks
    h.start(**FAST)
    h.wait_for(lambda: len(runs(h)) == 2 and finished(h), timeout=90, what="the catch-up")
    passes = h.github.count("GET", "/installation/repositories")
    h.wait_for(lambda: h.github.count("GET", "/installation/repositories") > passes + 1)
    issues = scheduled_issues(h)
    assert len(issues) == 2  # caught up once, not once per missed week
    second = issues[-1]
    assert f"#{first['number']}" in str(second["body"])  # links the previous review
    comments = [c["body"] for c in h.github.comments(REPO, int(str(second["number"])))]
    assert any("Since the previous review" in c and "Still open:" in c for c in comments)
