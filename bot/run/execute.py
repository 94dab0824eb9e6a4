"""``execute``: engine step → the batch's requests side by side → next step.

The loop keeps nothing worth keeping: each finished turn goes to the hooks the
moment it completes (the worker stores it there), so a run resumed from its
stored turns carries on where it stopped and pays for no model call twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.core.aio import beside, each
from bot.core.errors import ProtocolError, Transient
from bot.engine.protocol import next_step
from bot.engine.types import Batch, DebateSpec, ModelRequest, Outcome, Turn


class Completer(Protocol):
    """Completes one request as a turn. A model failure is a dropped turn, not an
    exception; what raises is an outage of something else (a store, GitHub).
    ``bot.models.router.ModelRouter`` is one; a tool-calling loop wrapping it is another."""

    async def complete(self, request: ModelRequest) -> Turn: ...


class Hooks(Protocol):
    """What differs by shell; each hook may raise to stop the run."""

    async def before_step(self) -> None:
        """Before the engine is asked for the next step, every turn so far having
        reached ``on_turn`` (the worker checks its lease, the cancel flag and the
        drain here)."""

    async def on_turn(self, turn: Turn) -> None:
        """Each turn as it completes, before the run moves on (the worker stores
        it; the CLI prints it; eval collects it)."""

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        """Side work while ``step``'s calls run (or before the outcome is returned),
        given the turns finished before it: the worker posts the round digests,
        the CLI announces the batch. It starts before any of the batch's calls.
        A ``Transient`` failure lets the batch finish and is raised after it; any
        other failure cancels the calls in flight; a failed batch lets it finish."""


class NoHooks:
    """Hooks that do nothing: a run that only needs its outcome."""

    async def before_step(self) -> None:
        return None

    async def on_turn(self, turn: Turn) -> None:
        return None

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        return None


class Collect(NoHooks):
    """Hooks that keep every turn in the order it finished (eval, tests): the
    run's turns beside its outcome, with nothing stored or printed."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []

    async def on_turn(self, turn: Turn) -> None:
        self.turns.append(turn)


async def execute(
    spec: DebateSpec, turns: Sequence[Turn], *, models: Completer, hooks: Hooks
) -> Outcome:
    """Drive ``spec`` from ``turns`` (those already stored, if resumed) to its outcome.

    Raises ``ProtocolError`` if the engine asks again for a turn it has: a
    deterministic engine never does, and looping would pay for it each time. A
    hook's or the completer's failure is raised as itself (its type tells an
    outage from a verdict); a batch's failure is raised before the side work's.
    """
    done = list(turns)
    asked = {t.key.id() for t in done}
    while True:
        await hooks.before_step()
        step = next_step(spec, done)
        if isinstance(step, Outcome):
            await hooks.alongside(tuple(done), step)
            return step
        ids = {r.key.id() for r in step.requests}
        if ids & asked:
            raise ProtocolError(f"the engine asked again for {sorted(ids & asked)}")
        asked |= ids
        await _step(step, done, models, hooks)


async def _step(batch: Batch, done: list[Turn], models: Completer, hooks: Hooks) -> None:
    finished = tuple(done)  # as they stand now: the batch appends meanwhile

    async def one(request: ModelRequest) -> None:
        turn = await models.complete(request)
        await hooks.on_turn(turn)  # stored first: a crash after it never pays twice
        done.append(turn)

    await beside(
        lambda: each(batch.requests, one),
        lambda: hooks.alongside(finished, batch),
        wait_out=lambda exc: isinstance(exc, Transient),
    )
