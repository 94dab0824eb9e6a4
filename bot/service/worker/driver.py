"""Driving one claimed run through ``bot.run.execute``: persisted turns, posts.

The loop holds no state of its own worth keeping: every turn is saved the
moment it completes and every post is an idempotent upsert of a pure render,
so a run whose worker dies is resumed by another from the store, paying for no
model call twice and posting no comment twice.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from bot.core.fair import Share
from bot.core.logs import get_logger
from bot.engine.render import render_rounds
from bot.engine.types import PERSONA_PHASES, Batch, DebateSpec, ModelRequest, Outcome, Turn
from bot.github.gateway import InstallationClient
from bot.models.router import ModelRouter
from bot.run.execute import Completer, execute
from bot.run.tool_loop import attach_evidence
from bot.service.worker.publish import Publisher
from bot.store.aio import AsyncStore
from bot.store.rows import RunControl, RunRow

log = get_logger(__name__)



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


@dataclass(frozen=True)
class RunCalls:
    """A run's model calls, each saying whose it is: a busy endpoint serves
    installations fairly, and older runs first within one (bot/models/fair.py)."""

    router: ModelRouter
    share: Share

    @classmethod
    def of(cls, router: ModelRouter, run: RunRow) -> RunCalls:
        return cls(router, Share(run.installation_id, run.id, run.created_at.timestamp()))

    async def complete(self, request: ModelRequest) -> Turn:
        return await self.router.complete(request, self.share)


@dataclass
class RunDriver:
    """The worker's hooks of ``bot.run.execute``: store each turn first, check
    the lease, the cancel flag and the drain between batches, and post the
    finished rounds' digests while the next batch's calls run."""

    db: AsyncStore
    # Completes one request (``ModelRouter``, or a tool-calling loop around it).
    models: Completer
    publisher: Publisher
    run: RunRow
    spec: DebateSpec
    # Raises LeaseLost / Cancelled / Draining; given the run's control as the last
    # saved turn read it, or None to read it afresh.
    check_alive: Callable[[RunControl | None], Awaitable[None]]
    on_stored: Callable[[Turn], None] = lambda turn: None
    # Each round digest as last posted by this driver: every step renders the
    # finished rounds again, and an unchanged one needs no sanitizing, hashing
    # or store lookup (the publisher would find it unchanged, at a cost).
    _posted: dict[tuple[int, int], tuple[int, str]] = field(default_factory=dict, init=False)
    # The run's lease owner and cancel flag as the batch's last saved turn read
    # them: the check between batches needs no query of its own.
    _control: RunControl | None = field(default=None, init=False)
    _saved: set[str] = field(default_factory=set, init=False)  # keys stored by this driver

    async def drive(self) -> Outcome:
        turns = await self.db.load_turns(self.run.id)
        if self.spec.tools:  # the turns table does not carry what the tool loop found
            evidence = await self.db.load_evidence(self.run.id)
            turns = attach_evidence(turns, evidence)
        return await execute(self.spec, turns, models=self.models, hooks=self)

    async def before_step(self) -> None:
        control, self._control = self._control, None
        await self.check_alive(control)

    async def on_turn(self, turn: Turn) -> None:
        # Persist before anything else: a crash after this line never pays twice.
        # In a thread (off the event loop); a cancel still waits for the write.
        saved = await self.db.save_turn(self.run.id, turn)
        self._control = saved.control  # the last save of the batch is read last
        self._saved.add(turn.key.id())
        self.on_stored(turn)

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        """Post the rounds that just finished while the next batch's model calls
        run: a digest costs a GitHub round trip (and a paced slot) that the debate
        need not wait for. The run layer lets a post that fails for now (GitHub
        down or rate-limited) wait for the calls, as they are paid for, and
        cancels them for one that fails for good (the issue gone); a failed call
        lets the post finish, so no comment is left posted but unrecorded. The
        next step waits for both, so digests still go out in order."""
        await self._publish_finished_rounds(finished, step)
        if isinstance(step, Batch) and {r.key.id() for r in step.requests} <= self._saved:
            # The post outlasted the calls (a paced or rate-limited write): what
            # the last save read is stale by then; read it afresh.
            self._control = None

    async def _publish_finished_rounds(self, turns: Sequence[Turn], step: Batch | Outcome) -> None:
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
