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
from bot.repo.tools import ToolCaps, run_tool
from bot.run.execute import Completer, NoHooks, execute
from bot.run.tool_loop import ToolLoop


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
    models: Completer = router
    if spec.tools and reader is not None:
        models = ToolLoop(
            routes=router,
            plain=router.complete,
            reader=reader,
            run_tool=run_tool,
            caps=ToolCaps(),
            run_id="eval",  # no step log: the id names nothing stored
        )
    calls = _Budgeted(models, hooks)
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
