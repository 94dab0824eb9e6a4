"""The deliveries debates act on (data: read by the web tier, bound by the handlers)."""

from __future__ import annotations

from bot.github.events import (
    IssueCommentEvent,
    IssuesEvent,
    PullRequestEvent,
    PullRequestReviewCommentEvent,
)
from bot.service.web.filter import trigger

ISSUE_COMMENT = trigger(IssueCommentEvent, "created", command_in="comment")
REVIEW_COMMENT = trigger(PullRequestReviewCommentEvent, "created", command_in="comment")
ISSUE_LABELED = trigger(IssuesEvent, "labeled")
PULL_LABELED = trigger(PullRequestEvent, "labeled")

TRIGGERS = (ISSUE_COMMENT, REVIEW_COMMENT, ISSUE_LABELED, PULL_LABELED)
