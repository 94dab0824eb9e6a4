"""Nothing lost while the service was down: ask GitHub to redeliver what failed.

GitHub does not retry a webhook delivery that failed (the service was down, or
answered an error); its guidance is that the app asks for a redelivery. At start
and then every ``redeliver_interval_s``, a web process lists the app's delivery
attempts (``GET /app/hook/deliveries``, newest first) back to where the last
pass stopped, or ``redeliver_window_s`` at most, and asks GitHub to send again
(``POST /app/hook/deliveries/{id}/attempts``) each event that

- no attempt delivered (a delivery is an event ``guid``, the ``X-GitHub-Delivery``
  we store; its attempts share the guid; failed = ``status_code`` not 2xx),
- the store has neither received nor claimed, and
- the router acts on (``TriggerTable.accepts``), so nothing is asked in vain,

oldest first, at most ``redeliver_max_per_pass`` asks a pass.

Once per delivery, with any number of web processes: inserting the guid into
``redeliveries`` is the claim, and only the process whose insert made the row
asks. GitHub refusing (400/404/410/422: too old or gone) is recorded there and
never asked again; a transient failure drops the claim so a later pass asks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from bot.core.errors import ConfigError, GitHubError
from bot.core.logs import get_logger
from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.github.gateway import GitHubGateway
from bot.service.web.filter import DeliveryFilter
from bot.store import RunStore
from bot.store.aio import AsyncStore

log = get_logger(__name__)

SCAN = "app"  # the store's name for this scan's position
PER_PAGE = 100
MAX_PAGES = 10  # at most 1,000 attempts read a pass, however long the window
# An attempt still in flight when a pass lists is recorded later under an earlier
# ``delivered_at``; the next pass looks back this much before where it stopped.
OVERLAP = timedelta(minutes=5)
# GitHub will not redeliver these (too old, gone): asking again cannot help.
REFUSED = frozenset({400, 404, 410, 422})

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Attempt:
    """One row of ``GET /app/hook/deliveries``: one attempt to deliver one event."""

    id: int
    guid: str
    delivered_at: datetime
    status_code: int
    event: str
    action: str | None

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300

    @classmethod
    def parse(cls, item: Mapping[str, Any]) -> Attempt | None:
        """Leniently: an attempt missing what a pass needs is skipped, not fatal."""
        hook_id, guid, when = item.get("id"), item.get("guid"), item.get("delivered_at")
        status, event, action = item.get("status_code"), item.get("event"), item.get("action")
        if not (isinstance(hook_id, int) and isinstance(guid, str) and guid):
            return None
        if not (isinstance(when, str) and isinstance(event, str)):
            return None
        try:
            delivered_at = datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            return None
        if delivered_at.tzinfo is None:
            delivered_at = delivered_at.replace(tzinfo=UTC)
        return cls(
            id=hook_id,
            guid=guid,
            delivered_at=delivered_at,
            status_code=status if isinstance(status, int) else 0,
            event=event,
            action=action if isinstance(action, str) else None,
        )


@dataclass
class PassResult:
    listed: int = 0  # attempts read within the pass's range
    requested: list[str] = field(default_factory=list)  # guids GitHub agreed to send again
    refused: list[str] = field(default_factory=list)  # guids GitHub would not
    deferred: list[str] = field(default_factory=list)  # left for a later pass
    complete: bool = True  # False: the page cap stopped the listing early


class Redeliverer:
    """One web process's redelivery passes (see the module docstring)."""

    def __init__(
        self,
        gateway: GitHubGateway,
        store: RunStore,
        settings: Settings,
        *,
        deliveries: DeliveryFilter,
        owner: str,
        metrics: Metrics | None = None,
        clock: Clock = _utcnow,
    ) -> None:
        self.gateway = gateway
        self.db = AsyncStore(store)
        self.interval_s = settings.redeliver_interval_s
        self.window = timedelta(seconds=settings.redeliver_window_s)
        self.max_per_pass = settings.redeliver_max_per_pass
        self.metrics = metrics
        self.deliveries = deliveries
        self.owner = owner
        self._clock = clock

    async def _list(self, stop_at: datetime) -> tuple[list[Attempt], bool]:
        """The attempts delivered at or after ``stop_at``, newest first, and whether
        the listing reached ``stop_at`` (or the end) within ``MAX_PAGES``. Not
        filtered with ``status=failure``: that is 400-599 only, missing attempts
        nothing answered, and an event's successful attempts must be seen too."""
        attempts: list[Attempt] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page, cursor = await self.gateway.hook_deliveries(cursor=cursor, per_page=PER_PAGE)
            parsed = [a for a in map(Attempt.parse, page) if a is not None]
            attempts.extend(a for a in parsed if a.delivered_at >= stop_at)
            if cursor is None or any(a.delivered_at < stop_at for a in parsed):
                return attempts, True
        return attempts, False

    def _wanted(self, attempts: list[Attempt]) -> dict[str, list[Attempt]]:
        """Events no attempt delivered that the router acts on, oldest first,
        each with its attempts newest first."""
        by_guid: dict[str, list[Attempt]] = {}
        for a in reversed(attempts):  # oldest first: dicts keep insertion order
            by_guid.setdefault(a.guid, []).insert(0, a)
        return {
            guid: tries
            for guid, tries in by_guid.items()
            if not any(a.ok for a in tries)
            and self.deliveries.accepts(tries[0].event, tries[0].action)
        }

    async def run_pass(self) -> PassResult:
        now = self._clock()
        floor = now - self.window
        seen_until = await self.db.redelivery_scan(SCAN)
        stop_at = floor if seen_until is None else max(floor, seen_until - OVERLAP)
        attempts, complete = await self._list(stop_at)
        result = PassResult(listed=len(attempts), complete=complete)
        if not complete:
            log.warning("redeliver.scan_truncated", pages=MAX_PAGES)
        wanted = self._wanted(attempts)
        unseen = await self.db.unseen_guids(list(wanted))
        asked = 0
        for guid in unseen:
            if asked >= self.max_per_pass:
                result.deferred.append(guid)
                continue
            if not await self.db.claim_redelivery(guid, self.owner):
                continue  # another web process asks for this one
            asked += 1
            await self._ask(guid, wanted[guid][0], result)
        # Everything before the oldest event left for later has been handled.
        held = [wanted[g][-1].delivered_at for g in result.deferred]
        newest = [max(a.delivered_at for a in attempts)] if attempts else []
        if newest or held:
            await self.db.set_redelivery_scan(min(newest + held), SCAN)
        await self.db.prune_redeliveries(now - 2 * self.window)
        if result.requested or result.refused or result.deferred:
            log.info(
                "redeliver.pass",
                listed=result.listed,
                requested=len(result.requested),
                refused=len(result.refused),
                deferred=len(result.deferred),
            )
        return result

    async def _ask(self, guid: str, latest: Attempt, result: PassResult) -> None:
        """Ask GitHub to send ``guid`` again (its latest attempt); settle the claim."""
        try:
            await self.gateway.redeliver(latest.id)
        except GitHubError as exc:
            if exc.github_status in REFUSED:
                await self.db.settle_redelivery(guid, "refused")
                result.refused.append(guid)
                outcome = "refused"
            else:
                await self.db.settle_redelivery(guid, None)
                result.deferred.append(guid)
                outcome = "failed"
            log.warning(
                "redeliver.not_requested",
                delivery_id=guid,
                gh_event=latest.event,
                status=exc.github_status,
                outcome=outcome,
            )
        else:
            await self.db.settle_redelivery(guid, "requested")
            result.requested.append(guid)
            outcome = "requested"
            log.info("redeliver.requested", delivery_id=guid, gh_event=latest.event)
        if self.metrics is not None:
            self.metrics.redeliveries.labels(outcome).inc()

    async def run_forever(self) -> None:
        """A pass now, then one every interval. A failing pass is logged and the
        next one tried: redelivery never takes the service down."""
        while True:
            try:
                await self.run_pass()
            except Exception:
                log.exception("redeliver.pass_failed")
            await anyio.sleep(self.interval_s)


async def redeliver_forever(
    settings: Settings,
    store: RunStore,
    deliveries: DeliveryFilter,
    owner: str,
    metrics: Metrics | None = None,
    gateway: GitHubGateway | None = None,
    listening: Callable[[], bool] = lambda: True,
) -> None:
    """The loop a web process runs: with the worker's gateway when it has one,
    else its own (the app's credentials are all it needs). The first pass waits
    for ``listening()``: a redelivery sent before the route is up fails again."""
    if settings.redeliver_interval_s <= 0:
        log.info("redeliver.disabled", reason="DEBATE_BOT_REDELIVER_INTERVAL_S is 0")
        return
    while not listening():  # noqa: ASYNC110 (uvicorn offers a flag, not an event)
        await anyio.sleep(0.05)
    owned: GitHubGateway | None = None
    if gateway is None:
        try:
            gateway = owned = GitHubGateway(settings)
        except ConfigError as exc:
            log.warning("redeliver.disabled", reason=exc.public)
            return
    try:
        await Redeliverer(
            gateway, store, settings, deliveries=deliveries, owner=owner, metrics=metrics
        ).run_forever()
    finally:
        if owned is not None:
            with anyio.CancelScope(shield=True):
                await owned.aclose()
