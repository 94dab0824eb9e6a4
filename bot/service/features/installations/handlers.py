"""The app removed from or suspended on an installation, or from some of its repositories.

GitHub sends these as `installation` (`deleted`, `suspend`, `unsuspend`) and
`installation_repositories` (`removed`) deliveries. Once removed or suspended,
no token can be had for the installation, so its active runs end here without
a word on GitHub, its pending deliveries are dropped, and the router ignores
anything else that arrives for it until `unsuspend` (or a new installation).
"""

from __future__ import annotations

from bot.core.logs import get_logger
from bot.github.events import InstallationEvent, InstallationRepositoriesEvent
from bot.service.features.installations import triggers as declared
from bot.service.worker.respond import Responder
from bot.service.worker.routes import TriggerTable
from bot.store.rows import DeliveryRow, InstallationState

log = get_logger(__name__)

_GONE: dict[str, InstallationState] = {"deleted": "removed", "suspend": "suspended"}


def register(triggers: TriggerTable) -> None:
    triggers.on_installation_event(declared.GONE, installation_gone)
    triggers.on_installation_event(declared.BACK, installation_back)
    triggers.on_installation_event(declared.REPOSITORIES_REMOVED, repositories_gone)


async def installation_gone(r: Responder, event: InstallationEvent, row: DeliveryRow) -> str:
    installation, state = event.installation.id, _GONE[event.action]
    db = r.svc.db
    await db.set_installation_state(installation, state)
    reason = f"installation_{state}"
    runs = await db.end_installation_runs(installation, reason)
    dropped = await db.drop_installation_deliveries(installation, reason, keep=row.delivery_id)
    log.info(
        "installation.gone", installation=installation, state=state, runs=runs, dropped=dropped
    )
    r.svc.wake()  # a worker driving one of the runs notices at its next lease check
    return "done"


async def installation_back(r: Responder, event: InstallationEvent, row: DeliveryRow) -> str:
    await r.svc.db.set_installation_state(event.installation.id, "active")
    log.info("installation.back", installation=event.installation.id)
    return "done"


async def repositories_gone(
    r: Responder, event: InstallationRepositoriesEvent, row: DeliveryRow
) -> str:
    repos = [repo.full_name for repo in event.repositories_removed]
    if not repos:
        return "ignored"
    runs = await r.svc.db.end_installation_runs(
        event.installation.id, "repository_removed", repos=repos
    )
    log.info("installation.repositories_removed", installation=event.installation.id, runs=runs)
    return "done"
