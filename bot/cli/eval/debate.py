"""A debate of one eval case, through the run layer the service and the CLI
use (``bot.run.execute``): exactly the engine and prompts they run.

Turns already made (a resumed case) are passed in and never asked for again;
each new turn goes to ``hooks.turn`` the moment it completes, and
``hooks.proceed`` is asked before each model call (the budget). With tools on
(and a case with files, ``reader``) a turn is the service's tool loop
(bot/run/tool_loop.py) over those files; its steps are not stored, so a case cut
short pays its unfinished turn again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.engine.types import DebateSpec, ModelRequest, Outcome, Turn
from bot.models.router import ModelRouter
from bot.repo.snapshot import Snapshot
from bot.run.completers import Wiring, run_models
from bot.run.execute import Completer, NoHooks, execute


class Hooks(Protocol):
    def turn(self, turn: Turn) -> None:
        """A turn completed (store it, count its cost)."""

    def proceed(self) -> bool:
        """False: start no more model calls (the budget is spent)."""


class Stopped(Exception):
    """The case was left unfinished because ``hooks.proceed`` said stop."""


async def debate_case(
    spec: DebateSpec,
    turns: Sequence[Turn],
    *,
    router: ModelRouter,
    hooks: Hooks,
    reader: Snapshot | None = None,
) -> tuple[list[Turn], Outcome]:
    done = list(turns)
    # run_id names nothing stored: eval keeps no step log.
    async with run_models(spec, Wiring(router, router, reader, "eval")) as m:
        calls = _Budgeted(m, hooks)
        outcome = await execute(spec, done, models=calls, hooks=_Collect(done, hooks))
    return done, outcome


@dataclass(frozen=True)
class _Budgeted:
    """The router (or the tool loop), asked first whether the budget allows another
    turn."""

    models: Completer
    hooks: Hooks

    async def complete(self, request: ModelRequest) -> Turn:
        if not self.hooks.proceed():
            raise Stopped
        return await self.models.complete(request)  # never raises for model failures


@dataclass(frozen=True)
class _Collect(NoHooks):
    done: list[Turn]
    hooks: Hooks

    async def on_turn(self, turn: Turn) -> None:
        self.done.append(turn)
        self.hooks.turn(turn)
