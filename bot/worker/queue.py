"""Work queued behind a finished run on the same issue or PR.

Runs are keyed by repo and issue number (one active run per issue), so work
that needs several runs on one PR — `/debate arbitrate --bots` with several
comments, automatic reviews of several plans — is a chain: each run's trigger
carries a ``queue`` entry, and when the run has been released the next run is
started from it. Nothing here may fail the run that just finished.
"""

from __future__ import annotations

from bot.github.gateway import InstallationClient
from bot.logs import get_logger
from bot.store.rows import RunRow
from bot.worker.intake import Services

log = get_logger(__name__)


async def continue_queue(svc: Services, gh: InstallationClient, run: RunRow) -> None:
    queue = run.trigger.get("queue")
    if not isinstance(queue, dict):
        return
    try:
        if queue.get("kind") == "arbitrate_bots":
            from bot.worker.arbitration import continue_bots

            await continue_bots(svc, gh, run)
        elif queue.get("kind") == "design_review":
            from bot.worker.reviews import continue_auto

            await continue_auto(svc, gh, run)
    except Exception:  # the finished run stays finished; the queue just stops here
        log.exception("queue.continue_failed", run=run.id, kind=queue.get("kind"))
