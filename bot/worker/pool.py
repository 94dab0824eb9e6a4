"""The worker loop: claim deliveries and runs, drive runs under a renewed lease."""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

import anyio
from structlog.contextvars import bound_contextvars

from bot.debate.types import Outcome, Turn
from bot.errors import BotError
from bot.logs import get_logger
from bot.store.rows import DeliveryRow, RunRow
from bot.worker.driver import Cancelled, LeaseLost, RunDriver, tokens_and_cost
from bot.worker.finish import Finisher
from bot.worker.intake import Intake, Services
from bot.worker.publish import Publisher, Thread

log = get_logger(__name__)

MAX_ATTEMPTS = 5


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    def __init__(self, svc: Services, *, worker_id: str | None = None) -> None:
        self.svc = svc
        self.id = worker_id or new_worker_id()
        self.intake = Intake(svc)
        self._wake = anyio.Event()
        self._slots = anyio.Semaphore(max(1, svc.settings.worker_concurrency))

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Runs until cancelled."""
        settings = self.svc.settings
        async with anyio.create_task_group() as tg:
            while True:
                self._wake = anyio.Event()
                await self.poll_once(tg)
                with anyio.move_on_after(settings.worker_poll_s):
                    await self._wake.wait()

    async def poll_once(self, tg: Any) -> None:
        store, lease = self.svc.store, self.svc.settings.lease_s
        while (
            row := await anyio.to_thread.run_sync(store.claim_delivery, self.id, lease)
        ) is not None:
            await self.process_delivery(row)
        while self._slots.value > 0:
            run = await anyio.to_thread.run_sync(store.claim_run, self.id, lease)
            if run is None:
                break
            await self._slots.acquire()
            tg.start_soon(self._drive_slot, run)

    async def _drive_slot(self, run: RunRow) -> None:
        try:
            await self.drive(run)
        except Exception:
            # GitHub unreachable even for the failure notice: the lease lapses and
            # another attempt resumes the run from its stored turns.
            log.exception("run.crashed_outside_driver", run=run.id)
        finally:
            self._slots.release()

    async def process_delivery(self, row: DeliveryRow) -> None:
        # Context variables: every log line below (gateway and store included)
        # carries the delivery and installation ids.
        with bound_contextvars(
            delivery=row.delivery_id, gh_event=row.event, installation=row.installation_id
        ):
            await self._process_delivery(row)

    async def _process_delivery(self, row: DeliveryRow) -> None:
        try:
            state = await self.intake.handle(row)
            self.svc.store.finish_delivery(row.delivery_id, state)  # type: ignore[arg-type]
        except BotError as exc:
            log.warning("delivery.failed", error=exc.code, detail=str(exc))
            self.svc.store.finish_delivery(row.delivery_id, "failed", exc.code)
        except Exception:
            log.exception("delivery.crashed")
            self.svc.store.finish_delivery(row.delivery_id, "failed", "internal_error")

    async def drive(self, run: RunRow) -> None:
        with bound_contextvars(
            run=run.id, repo=run.repo, issue=run.issue_number, installation=run.installation_id
        ):
            await self._drive(run)

    async def _drive(self, run: RunRow) -> None:
        svc, lease = self.svc, self.svc.settings.lease_s
        assert run.installation_id is not None
        gh = await svc.gateway.installation(run.installation_id)
        thread = Thread(
            run.repo, run.issue_number, review_comment_id=run.trigger.get("review_thread")
        )
        publisher = Publisher(gh, svc.store, run.id, thread, resumed=run.attempts > 1)
        finisher = Finisher(svc, gh, run, publisher)
        spec = run.debate_spec()
        lost = anyio.Event()

        async def renew() -> None:
            while True:
                await anyio.sleep(lease / 3)
                ok = await anyio.to_thread.run_sync(svc.store.renew_lease, run.id, self.id, lease)
                if not ok:
                    lost.set()
                    return

        async def check_alive() -> None:
            if lost.is_set():
                raise LeaseLost(run.id)
            current = svc.store.get_run(run.id)
            if current is None or current.lease_owner != self.id:
                raise LeaseLost(run.id)
            if current.cancel_requested:
                raise Cancelled(run.id)

        def on_turn(turn: Turn) -> None:
            provider = turn.model.split("/", 1)[0] if turn.model else "none"
            svc.metrics.model_latency.labels(provider, turn.status).observe(
                turn.usage.latency_ms / 1000
            )
            m = svc.metrics.model_tokens
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

        if run.attempts > MAX_ATTEMPTS:
            # A run that keeps killing its workers must not be resumed forever.
            log.error("run.poisoned", attempts=run.attempts)
            await finisher.failed("too_many_attempts", "The debate failed repeatedly.", self.id)
            return
        driver = RunDriver(svc.store, svc.router, publisher, run, spec, check_alive, on_turn)
        outcome: Outcome | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(renew)
            try:
                outcome = await driver.drive()
                await finisher.finish(
                    outcome, tokens_and_cost(svc.store.load_turns(run.id)), self.id
                )
            except LeaseLost:
                log.warning("run.lease_lost")
            except Cancelled:
                await finisher.cancelled(self.id)
            except BotError as exc:
                log.warning("run.failed", error=exc.code, detail=str(exc))
                await finisher.failed(exc.code, exc.public, self.id)
            except Exception:
                log.exception("run.crashed")
                await finisher.failed(
                    "internal_error", "debate-bot hit an internal error.", self.id
                )
            finally:
                tg.cancel_scope.cancel()
        log.info("run.released", outcome=outcome.kind if outcome else None)
