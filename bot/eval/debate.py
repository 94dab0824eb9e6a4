"""A debate of one eval case: the engine's loop, as `debate-bot run` drives it
(bot/local/execute.py) and the worker (bot/worker/driver.py): ``next_step`` →
the batch's model calls side by side → the next step, until an ``Outcome``.

The one place the eval runs the engine, so it can be swapped for a shared
runner in one line. Turns already made (a resumed case) are passed in and
never asked for again; each new turn goes to ``hooks.turn`` the moment it
completes, and ``hooks.proceed`` is asked before each batch (the budget).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import anyio

from bot.debate.protocol import next_step
from bot.debate.types import Batch, DebateSpec, ModelRequest, Outcome, Turn
from bot.errors import ProtocolError
from bot.llm.router import ModelRouter


class Hooks(Protocol):
    def turn(self, turn: Turn) -> None:
        """A turn completed (store it, count its cost)."""

    def proceed(self) -> bool:
        """False: start no more model calls (the budget is spent)."""


class Stopped(Exception):
    """The case was left unfinished because ``hooks.proceed`` said stop."""


async def debate_case(
    spec: DebateSpec, turns: Sequence[Turn], *, router: ModelRouter, hooks: Hooks
) -> tuple[list[Turn], Outcome]:
    done = list(turns)
    asked: set[str] = set()
    while True:
        step = next_step(spec, done)
        if isinstance(step, Outcome):
            return done, step
        ids = {r.key.id() for r in step.requests}
        if ids & asked:  # a deterministic engine never asks twice; don't loop paying for it
            raise ProtocolError(f"the engine asked again for {sorted(ids & asked)}")
        asked |= ids
        if not hooks.proceed():
            raise Stopped
        await _run_batch(step, router, done, hooks)


async def _run_batch(batch: Batch, router: ModelRouter, done: list[Turn], hooks: Hooks) -> None:
    async def one(request: ModelRequest) -> None:
        turn = await router.complete(request)  # never raises for model failures
        done.append(turn)
        hooks.turn(turn)

    async with anyio.create_task_group() as tg:
        for request in batch.requests:
            tg.start_soon(one, request)
