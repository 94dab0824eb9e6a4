"""The worker loop: claim deliveries and runs, drive runs under a renewed lease."""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import cast

import anyio
import orjson
from anyio.abc import TaskGroup
from structlog.contextvars import bound_contextvars

from bot.core.errors import BotError, RateLimited, TargetGone, Transient
from bot.core.logs import get_logger
from bot.engine.types import DebateSpec, Outcome, Turn
from bot.github.gateway import InstallationClient
from bot.run.completers import Wiring, needs_reader, run_models
from bot.run.execute import Completer
from bot.service.worker.context import Services
from bot.service.worker.driver import (
    Cancelled,
    Draining,
    LeaseLost,
    RunCalls,
    RunDriver,
    tokens_and_cost,
)
from bot.service.worker.finish import Finisher
from bot.service.worker.publish import Publisher, Thread
from bot.service.worker.respond import Responder
from bot.service.worker.routes import TriggerTable
from bot.store.rows import DeliveryRow, DeliveryState, RunControl, RunRow

log = get_logger(__name__)

# Rows claimed per transaction: few enough that two workers polling at once
# share a burst between them, many enough that a burst is not a transaction a row.
CLAIM_BATCH = 8
MAX_ATTEMPTS = 5  # claims of one run (crashes, expired leases; not hand-backs) before it fails
DELIVERY_LEASE_S = 300.0
DELIVERY_RETENTION = timedelta(days=7)
PRUNE_EVERY_S = 3600.0


def issue_key(payload: str) -> str:
    """The repository and issue (or pull request) a delivery is about."""
    try:
        doc = orjson.loads(payload)
        repo = doc["repository"]["full_name"]
        thing = doc.get("issue") or doc.get("pull_request") or {}
        return f"{repo}#{thing.get('number')}"
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return "?"


def is_transient(exc: BaseException) -> bool:
    """An outage worth waiting out (the lease lapses and the run resumes from its
    stored turns), as opposed to a verdict on the run itself. The type says which:
    see ``bot.core.errors`` (GitHub failures are judged in ``bot.github.session``)."""
    return isinstance(exc, Transient)


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    def __init__(
        self, svc: Services, routes: TriggerTable, *, worker_id: str | None = None
    ) -> None:
        self.svc = svc
        self.routes = routes
        self.id = worker_id or new_worker_id()
        self.respond = Responder(svc)
        self._wake = anyio.Event()
        self._slots = anyio.Semaphore(max(1, svc.settings.worker_concurrency))
        self._intake_slots = anyio.Semaphore(max(1, svc.settings.intake_concurrency))
        # Payload bytes in intake, and the bound past which no more are claimed.
        self._intake_bytes = 0
        self._intake_max_bytes = svc.settings.intake_max_mb * 1024 * 1024
        self._issue_tails: dict[str, anyio.Event] = {}
        self._last_prune = -PRUNE_EVERY_S
        # The drain (SIGTERM): claim nothing more, wait for the work in flight.
        self._draining = False
        self._in_flight = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._hurried = False
        self._grace: anyio.CancelScope | None = None  # the drain's wait, once it starts
        self.stopped = anyio.Event()  # set when `run` has returned

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Begin the drain: claim nothing more; `run` returns once every run and
        delivery in flight has finished or been handed back."""
        self._draining = True
        self._wake.set()

    def hurry(self) -> None:
        """Cut the grace short (a second signal): hand everything back now."""
        self._draining = self._hurried = True
        if self._grace is not None:
            self._grace.cancel()
        self._wake.set()

    async def run(self) -> None:
        """Runs until cancelled or stopped (then drains). A store or GitHub outage is
        logged and waited out: it never ends the loop (in `serve`, that would take the
        web server down too)."""
        try:
            await self._loop()
        finally:
            self.stopped.set()

    async def _loop(self) -> None:
        settings = self.svc.settings
        backoff = settings.worker_poll_s
        async with anyio.create_task_group() as tg:
            while not self._draining:
                self._wake = anyio.Event()
                try:
                    await self.poll_once(tg)
                    backoff = settings.worker_poll_s
                except Exception:
                    log.exception("worker.poll_failed")
                    backoff = min(max(backoff * 2, 1.0), 30.0)
                with anyio.move_on_after(backoff):
                    await self._wake.wait()
            await self._drain(tg)

    async def _drain(self, tg: TaskGroup) -> None:
        """Let the batches in flight finish (their turns are stored), up to the
        grace; then cancel the rest. Each slot hands its run or delivery back on
        the way out, so another worker takes it over at once, not at lease expiry."""
        grace = self.svc.settings.shutdown_grace_s
        log.info("worker.draining", in_flight=self._in_flight, grace_s=grace)
        self._grace = anyio.CancelScope(deadline=anyio.current_time() + grace)
        if self._hurried:
            self._grace.cancel()
        with self._grace:
            await self._idle.wait()
        if self._in_flight:
            log.warning("worker.grace_expired", in_flight=self._in_flight)
        tg.cancel_scope.cancel()

    def _enter(self) -> None:
        self._in_flight += 1
        if self._idle.is_set():
            self._idle = anyio.Event()

    def _leave(self) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._idle.set()
        self.wake()  # a slot is free: claim the next piece of work now, not at the next poll

    async def poll_once(self, tg: TaskGroup) -> None:
        lease = self.svc.settings.lease_s
        await self._maybe_prune()
        # Intake may wait on GitHub's rate limits; a long lease keeps a second
        # worker from processing the same delivery meanwhile.
        delivery_lease = max(lease, DELIVERY_LEASE_S)
        # Deliveries run side by side (each may wait on GitHub), a few at a time,
        # but those about one issue run in arrival order: `/debate` then
        # `/debate cancel` must not be answered the other way round. Deliveries
        # and runs are claimed in turns, a batch each, so a burst of webhooks does
        # not hold back the runs it has already queued.
        while not self._draining:
            more_deliveries = await self._claim_deliveries(tg, delivery_lease)
            more_runs = not self._draining and await self._claim_runs(tg, lease)
            if not (more_deliveries or more_runs):
                break

    async def _claim_deliveries(self, tg: TaskGroup, lease_s: float) -> bool:
        """Claim a batch of deliveries into free intake slots; True if it was full."""
        batch = min(self._intake_slots.value, CLAIM_BATCH)
        if batch == 0 or self._intake_bytes >= self._intake_max_bytes:
            return False  # a finishing delivery wakes the loop
        rows = await self.svc.db.claim_deliveries(self.id, lease_s, batch)
        for row in rows:  # oldest first: the issue tails keep arrival order
            await self._intake_slots.acquire()
            self._intake_bytes += len(row.payload)
            self._enter()
            key = issue_key(row.payload)
            before = self._issue_tails.get(key)
            done = anyio.Event()
            self._issue_tails[key] = done
            tg.start_soon(self._intake_slot, row, key, before, done)
        return len(rows) == batch

    async def _claim_runs(self, tg: TaskGroup, lease_s: float) -> bool:
        """Claim a batch of runs into free slots; True if it was full."""
        batch = min(self._slots.value, CLAIM_BATCH)
        if batch == 0:
            return False
        runs = await self.svc.db.claim_runs(self.id, lease_s, batch)
        for run in runs:
            await self._slots.acquire()
            self._enter()
            tg.start_soon(self._drive_slot, run)
        return len(runs) == batch

    async def _maybe_prune(self) -> None:
        """Drop finished deliveries (payloads up to 25 MB each) after a week."""
        now = time.monotonic()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        before = datetime.now(UTC) - DELIVERY_RETENTION
        removed = await self.svc.db.prune_deliveries(before)
        if removed:
            log.info("deliveries.pruned", removed=removed)

    async def _intake_slot(
        self, row: DeliveryRow, key: str, before: anyio.Event | None, done: anyio.Event
    ) -> None:
        processed = False
        try:
            if before is not None:
                await before.wait()
            await self.process_delivery(row)
            processed = True
        finally:
            if not processed and self._draining:
                await self._hand_back("delivery", row.delivery_id)
            done.set()
            if self._issue_tails.get(key) is done:
                del self._issue_tails[key]
            self._intake_bytes -= len(row.payload)
            self._intake_slots.release()
            self._leave()

    async def _drive_slot(self, run: RunRow) -> None:
        try:
            await self.drive(run)
        except Exception:
            # GitHub unreachable even for the failure notice: the lease lapses and
            # another attempt resumes the run from its stored turns.
            log.exception("run.crashed_outside_driver", run=run.id)
        finally:
            if self._draining:  # a no-op unless the run is still ours and running
                await self._hand_back("run", run.id)
            self._slots.release()
            self._leave()

    async def _hand_back(self, kind: str, key: str) -> None:
        """Release a run (``queued``) or a delivery (``pending``) for another
        worker to claim at once. Shielded: it runs while the drain cancels."""
        db = self.svc.db
        with anyio.CancelScope(shield=True):
            try:
                if kind == "run":
                    done = await db.release_run(key, self.id, "queued", handed_back=True)
                else:
                    done = await db.finish_delivery(key, "pending")
            except BotError as exc:  # the lease lapses instead
                log.warning("worker.hand_back_failed", kind=kind, id=key, error=exc.code)
                return
        if done:
            log.info("worker.handed_back", kind=kind, id=key)

    async def process_delivery(self, row: DeliveryRow) -> None:
        # Context variables: every log line below (gateway and store included)
        # carries the delivery and installation ids.
        with bound_contextvars(
            delivery=row.delivery_id, gh_event=row.event, installation=row.installation_id
        ):
            # Its writes wait their turn by the webhook's arrival: the client the
            # table builds for it says so (bot/service/worker/routes.py).
            await self._process_delivery(row)

    async def _process_delivery(self, row: DeliveryRow) -> None:
        state: str = "failed"
        error: str | None = None
        if row.attempts > MAX_ATTEMPTS:  # it kept killing or stalling its workers
            log.error("delivery.poisoned", attempts=row.attempts)
            await self.svc.db.finish_delivery(row.delivery_id, "failed", "too_many_attempts")
            return
        try:
            state = await self.routes.handle(self.respond, row)
        except BotError as exc:
            log.warning("delivery.failed", error=exc.code, detail=str(exc))
            error = exc.code
        except Exception:
            log.exception("delivery.crashed")
            error = "internal_error"
        try:
            final = cast(DeliveryState, state)  # the router returns a delivery state
            await self.svc.db.finish_delivery(row.delivery_id, final, error)
        except BotError as exc:  # the lease lapses and the delivery is retried
            log.warning("delivery.finish_failed", error=exc.code)

    async def drive(self, run: RunRow) -> None:
        with bound_contextvars(
            run=run.id, repo=run.repo, issue=run.issue_number, installation=run.installation_id
        ):
            await self._drive(run)

    async def _drive(self, run: RunRow) -> None:
        svc = self.svc
        if run.installation_id is None or run.crashes > MAX_ATTEMPTS:
            # A run that keeps killing its workers (or has nowhere to post) must
            # not be resumed forever: end it first, tell GitHub if it can.
            log.error("run.poisoned", attempts=run.attempts, handbacks=run.handbacks)
            await svc.db.release_run(run.id, self.id, "failed", error_class="too_many_attempts")
            if run.installation_id is not None:
                with contextlib.suppress(BotError):
                    gh = await svc.gateway.installation(run.installation_id)
                    await self._finisher(gh, run).failed_notice(
                        "too_many_attempts", "The debate failed repeatedly."
                    )
            return
        try:
            spec = run.debate_spec()
            # The run's posts (the finisher's too) wait for the installation's write
            # turn by the run's age, as its model calls do (bot/models/fair.py).
            gh = await svc.gateway.installation(
                run.installation_id, since=run.created_at.timestamp()
            )
        except BotError as exc:
            if is_transient(exc):  # GitHub or the store is down: try again later
                log.warning("run.deferred", error=exc.code, detail=str(exc))
                return
            # Uninstalled app, deleted repo, undecodable spec: nothing to resume.
            log.warning("run.unstartable", error=exc.code, detail=str(exc))
            await svc.db.release_run(run.id, self.id, "failed", error_class=exc.code)
            return
        await self._drive_with(gh, run, spec)

    def _finisher(self, gh: InstallationClient, run: RunRow) -> Finisher:
        thread = Thread(run.repo, run.issue_number, review_comment_id=run.trigger.review_thread)
        publisher = Publisher(
            gh, self.svc.store, run.id, thread, resumed=run.attempts > 1 or self.svc.resume_comments
        )
        return Finisher(
            self.svc, gh, run, publisher, self._continue_queue, self.routes.finish_actions
        )

    async def _continue_queue(self, gh: InstallationClient, run: RunRow) -> None:
        await self.routes.continue_queue(self.respond, gh, run)

    async def _models(
        self, gh: InstallationClient, run: RunRow, spec: DebateSpec
    ) -> contextlib.AbstractAsyncContextManager[Completer]:
        """The run's calls (bot/run/completers.py): with ``spec.tools`` a tool loop,
        with agent seats their sandboxed CLIs, both over the snapshot of its pinned
        commit (shared by the process's runs on that commit); each step of a turn
        is stored, so a resumed run pays no finished step twice."""
        svc = self.svc
        plain = RunCalls.of(svc.models, run)
        reader = None
        if needs_reader(spec) and spec.repo_ref is not None:
            reader = await svc.repos.snapshot(gh, spec.repo_ref)
        spent = (await svc.db.run_spend(run.id)).usd if spec.max_cost_usd is not None else 0.0
        return run_models(
            spec,
            Wiring(
                router=svc.models,
                plain=plain,
                reader=reader,
                run_id=run.id,
                steps=svc.store,
                metrics=svc.metrics,
                share=plain.share,
                spent_usd=spent,
            ),
        )

    async def _drive_with(self, gh: InstallationClient, run: RunRow, spec: DebateSpec) -> None:
        svc = self.svc
        finisher = self._finisher(gh, run)
        lost = anyio.Event()

        async def check_alive(control: RunControl | None) -> None:
            await self._check_alive(run.id, lost, control)

        calls = RunCalls.of(svc.models, run)
        driver = RunDriver(svc.db, calls, finisher.publisher, run, spec, check_alive, self._on_turn)
        outcome: Outcome | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._renew, run.id, lost)
            try:
                outcome = await self._drive_to_end(gh, run, spec, driver, finisher)
            finally:
                tg.cancel_scope.cancel()
        log.info("run.released", outcome=outcome.kind if outcome else None)

    async def _renew(self, run_id: str, lost: anyio.Event) -> None:
        """Renew the run's lease every third of it; set ``lost`` when it is gone."""
        svc, lease = self.svc, self.svc.settings.lease_s
        failures = 0
        while True:
            await anyio.sleep(lease / 3)
            try:
                ok = await svc.db.renew_lease(run_id, self.id, lease)
                failures = 0
            except BotError:  # a blip: two more tries before the lease can lapse
                failures += 1
                ok = failures < 3
            if not ok:
                lost.set()
                return

    async def _check_alive(
        self, run_id: str, lost: anyio.Event, control: RunControl | None
    ) -> None:
        """Between batches: raise LeaseLost, Draining or Cancelled when the run
        must stop here (``control`` as the last saved turn read it, or None)."""
        if lost.is_set():
            raise LeaseLost(run_id)
        if self._draining:  # between batches: every finished turn is stored
            raise Draining(run_id)
        if control is None:
            control = await self.svc.db.run_control(run_id)
        if control is None or control.lease_owner != self.id:
            raise LeaseLost(run_id)
        if control.cancel_requested:
            raise Cancelled(run_id)

    def _on_turn(self, turn: Turn) -> None:
        """A stored turn's metrics and log line."""
        metrics = self.svc.metrics
        provider = turn.model.split("/", 1)[0] if turn.model else "none"
        metrics.model_latency.labels(provider, turn.status).observe(turn.usage.latency_ms / 1000)
        if turn.status == "dropped":
            metrics.model_errors.labels(provider, turn.drop_class or "unknown").inc()
        m = metrics.model_tokens
        m.labels(provider, "input").inc(turn.usage.input_tokens)
        m.labels(provider, "output").inc(turn.usage.output_tokens)
        m.labels(provider, "cached").inc(turn.usage.cached_tokens)
        log.info(
            "turn.done",
            turn=turn.key.id(),
            model=turn.model,
            status=turn.status,
            drop=turn.drop_class,
            ms=turn.usage.latency_ms,
        )

    async def _drive_to_end(
        self,
        gh: InstallationClient,
        run: RunRow,
        spec: DebateSpec,
        driver: RunDriver,
        finisher: Finisher,
    ) -> Outcome | None:
        """Drive the run and finish it, or end it as what stopped it says: lost,
        drained, cancelled, rate-limited, gone, interrupted or failed. The outcome,
        when the debate reached one."""
        svc = self.svc
        outcome: Outcome | None = None
        try:
            async with await self._models(gh, run, spec) as models:
                driver.models = models
                outcome = await driver.drive()
            turns = await svc.db.load_turns(run.id)
            await finisher.finish(outcome, tokens_and_cost(turns), self.id)
        except LeaseLost:
            log.warning("run.lease_lost")
        except Draining:
            log.info("run.draining")  # handed back by `_drive_slot`
        except Cancelled:
            await finisher.cancelled(self.id)
        except RateLimited as exc:
            # Not a crash: every finished turn is stored, and no worker waits
            # out the limit; whichever claims the run after it resumes it.
            until = datetime.fromtimestamp(exc.resume_at, UTC)
            log.warning("run.rate_limited", resume_at=until.isoformat(), detail=str(exc))
            await svc.db.defer_run(run.id, self.id, until)
        except TargetGone as exc:
            # Deleted, transferred or locked: end the run now, and post nothing
            # more there (it would fail the same way).
            log.warning("run.target_gone", error=exc.code, detail=str(exc))
            await finisher.failed(exc.code, exc.public, self.id, notice=False)
        except BotError as exc:
            if is_transient(exc) and run.crashes < MAX_ATTEMPTS:
                # Every finished turn is stored: a later attempt resumes for free.
                log.warning("run.interrupted", error=exc.code, detail=str(exc))
            else:
                log.warning("run.failed", error=exc.code, detail=str(exc))
                await finisher.failed(exc.code, exc.public, self.id)
        except Exception:
            log.exception("run.crashed")
            await finisher.failed("internal_error", "debate-bot hit an internal error.", self.id)
        return outcome
