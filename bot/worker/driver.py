"""Driving one claimed run: engine step → model calls → persisted turns → posts.

The loop holds no state of its own worth keeping: every turn is saved the
moment it completes and every post is an idempotent upsert of a pure render,
so a run whose worker dies is resumed by another from the store, paying for no
model call twice and posting no comment twice.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio

from bot.aio import first_failure
from bot.debate.protocol import next_step
from bot.debate.render import render_rounds
from bot.debate.types import Batch, DebateSpec, Outcome, Turn
from bot.errors import BotError, Transient
from bot.github.gateway import InstallationClient
from bot.github.pacing import writer_since
from bot.llm.fair import Share
from bot.llm.router import ModelRouter
from bot.logs import get_logger
from bot.store import RunStore
from bot.store.rows import RunControl, RunRow
from bot.worker.publish import Publisher

log = get_logger(__name__)

PERSONA_PHASES = frozenset({"opening", "rebuttal", "counter"})


class LeaseLost(Exception):
    """Another worker owns the run now; stop without touching GitHub."""


class Cancelled(Exception):
    pass


class Draining(Exception):
    """The worker is shutting down: stop between batches and hand the run back."""


def persona_rounds(turns: Sequence[Turn]) -> list[tuple[int, int]]:
    """(tier, round) pairs that have persona turns, in order."""
    return sorted({(t.key.tier, t.key.round) for t in turns if t.key.phase in PERSONA_PHASES})


def pending_rounds(batch: Batch) -> set[tuple[int, int]]:
    return {(r.key.tier, r.key.round) for r in batch.requests if r.key.phase in PERSONA_PHASES}


def digest_number(pairs: list[tuple[int, int]], pair: tuple[int, int]) -> int:
    """Rounds are numbered across escalation tiers: 1, 2, 3, then 4, 5 … on tier 1."""
    return pairs.index(pair) + 1


@dataclass
class RunDriver:
    store: RunStore
    router: ModelRouter
    publisher: Publisher
    run: RunRow
    spec: DebateSpec
    # Raises LeaseLost / Cancelled / Draining; given the run's control as the last
    # saved turn read it, or None to read it afresh.
    check_alive: Callable[[RunControl | None], Awaitable[None]]
    on_turn: Callable[[Turn], None] = lambda turn: None
    # Each round digest as last posted by this driver: every step renders the
    # finished rounds again, and an unchanged one needs no sanitizing, hashing
    # or store lookup (the publisher would find it unchanged, at a cost).
    _posted: dict[tuple[int, int], tuple[int, str]] = field(default_factory=dict, init=False)
    # The run's lease owner and cancel flag as the batch's last saved turn read
    # them: the check between batches needs no query of its own.
    _control: RunControl | None = field(default=None, init=False)

    async def drive(self) -> Outcome:
        # This run's posts wait for an installation's write turn by its age (the
        # finisher's too: same task), as its model calls do (bot/llm/fair.py).
        writer_since.set(self.run.created_at.timestamp())
        turns = await anyio.to_thread.run_sync(self.store.load_turns, self.run.id)
        while True:
            await self.check_alive(self._control)
            self._control = None
            step = next_step(self.spec, turns)
            if isinstance(step, Outcome):
                await self._publish_finished_rounds(turns, step)
                return step
            await self._publish_while_running(step, turns)

    async def _publish_while_running(self, batch: Batch, turns: list[Turn]) -> None:
        """Post the rounds that just finished while the next batch's model calls
        run: a digest costs a GitHub round trip (and a paced slot) that the debate
        need not wait for. A post that fails for good (the issue gone) cancels the
        calls in flight; one that fails for now (GitHub down or rate-limited) lets
        them finish and be stored, as they are paid for, and fails the step after
        them. A failed call lets the post finish, so no comment is left posted but
        unrecorded. The next step waits for both, so digests still go out in order."""
        batch_error: Exception | None = None
        post_error: BotError | None = None
        posted = anyio.Event()
        finished = list(turns)  # as they stand now: the batch appends meanwhile

        async def publish() -> None:
            nonlocal post_error
            try:
                await self._publish_finished_rounds(finished, batch)
            except BotError as exc:
                if not isinstance(exc, Transient):
                    raise
                post_error = exc
                return
            posted.set()

        with first_failure():
            async with anyio.create_task_group() as tg:
                tg.start_soon(publish)
                try:
                    await self._run_batch(batch, turns)
                except Exception as exc:
                    batch_error = exc
                if not posted.is_set():
                    # The post outlasted the calls (a paced or rate-limited write):
                    # what the last save read is stale by then; read it afresh.
                    self._control = None
        if batch_error is not None:
            raise batch_error
        if post_error is not None:
            raise post_error

    async def _run_batch(self, batch: Batch, turns: list[Turn]) -> None:
        # Whose calls these are: a busy endpoint serves installations fairly, and
        # older runs first within one (bot/llm/fair.py).
        share = Share(self.run.installation_id, self.run.id, self.run.created_at.timestamp())

        async def one(index: int) -> None:
            turn = await self.router.complete(batch.requests[index], share)
            # Persist before anything else: a crash after this line never pays twice.
            # In a thread (off the event loop); a cancel still waits for the write.
            saved = await anyio.to_thread.run_sync(self.store.save_turn, self.run.id, turn)
            self._control = saved.control  # the last save of the batch is read last
            turns.append(turn)
            self.on_turn(turn)

        # A store or GitHub error in one request surfaces as itself: the worker
        # tells an outage (resume later) from a broken run by its type.
        with first_failure():
            async with anyio.create_task_group() as tg:
                for i in range(len(batch.requests)):
                    tg.start_soon(one, i)

    async def _publish_finished_rounds(self, turns: list[Turn], step: Batch | Outcome) -> None:
        pairs = persona_rounds(turns)
        if not pairs:
            return
        still_open = pending_rounds(step) if isinstance(step, Batch) else set()
        finished = [pair for pair in pairs if pair not in still_open]
        for pair, body in zip(finished, render_rounds(self.spec, turns, finished), strict=True):
            posted = (digest_number(pairs, pair), body)
            if self._posted.get(pair) == posted:
                continue
            await self.publisher.upsert("round", body, round=posted[0])
            self._posted[pair] = posted


def tokens_and_cost(turns: Sequence[Turn]) -> tuple[int, float]:
    tokens = sum(t.usage.input_tokens + t.usage.output_tokens for t in turns)
    cost = math.fsum(t.usage.cost_usd for t in turns)
    return tokens, cost


__all__ = [
    "Cancelled",
    "Draining",
    "InstallationClient",
    "LeaseLost",
    "RunDriver",
    "tokens_and_cost",
]
