"""A debate of one eval case, through the run layer the service and the CLI
use (``bot.runner.execute``): exactly the engine and prompts they run.

Turns already made (a resumed case) are passed in and never asked for again;
each new turn goes to ``hooks.turn`` the moment it completes, and
``hooks.proceed`` is asked before each model call (the budget).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.debate.types import DebateSpec, ModelRequest, Outcome, Turn
from bot.llm.router import ModelRouter
from bot.runner import NoHooks, execute


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
    calls = _Budgeted(router, hooks)
    outcome = await execute(spec, done, models=calls, hooks=_Collect(done, hooks))
    return done, outcome


@dataclass(frozen=True)
class _Budgeted:
    """The router, asked first whether the budget allows another call."""

    router: ModelRouter
    hooks: Hooks

    async def complete(self, request: ModelRequest) -> Turn:
        if not self.hooks.proceed():
            raise Stopped
        return await self.router.complete(request)  # never raises for model failures


@dataclass(frozen=True)
class _Collect(NoHooks):
    done: list[Turn]
    hooks: Hooks

    async def on_turn(self, turn: Turn) -> None:
        self.done.append(turn)
        self.hooks.turn(turn)
