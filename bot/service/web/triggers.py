"""The trigger table as the webhook route needs it: which deliveries are work.

Data, so that a ``web`` process judges deliveries without importing the worker,
the features' handlers or the model adapters. The features register their
handlers with the worker's router (bot/service/worker/triggers.py); the router checks at
start-up that what they registered is exactly this table (``check_complete``),
so the two cannot drift: a new trigger is one registration and one line here.
"""

from __future__ import annotations

from bot.service.web.filter import DeliveryFilter, EventTriggers

_ISSUE = ("issue", "repository", "sender")
_PULL = ("pull_request", "repository", "sender")

DELIVERY_FILTER = DeliveryFilter(
    {
        "issue_comment": EventTriggers(
            frozenset({"created"}), ("comment", *_ISSUE), command_in="comment"
        ),
        "pull_request_review_comment": EventTriggers(
            frozenset({"created"}), ("comment", *_PULL), command_in="comment"
        ),
        "issues": EventTriggers(frozenset({"labeled"}), _ISSUE),
        "pull_request": EventTriggers(frozenset({"labeled", "opened", "synchronize"}), _PULL),
        "installation": EventTriggers(
            frozenset({"deleted", "suspend", "unsuspend"}), ("installation",)
        ),
        "installation_repositories": EventTriggers(frozenset({"removed"}), ("installation",)),
    }
)
