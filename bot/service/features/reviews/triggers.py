"""The deliveries design reviews act on (data: read by the web tier, bound by the
handlers)."""

from __future__ import annotations

from bot.github.events import PullRequestEvent
from bot.service.web.filter import trigger

# A pull request that changes plans under `design_review.paths`; a labelled one
# is reviewed instead of debated (the handler declines the rest).
PULL_CHANGED = trigger(PullRequestEvent, "opened", "synchronize", "labeled")

TRIGGERS = (PULL_CHANGED,)
