"""What the stages read: the spec and the turns completed so far."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property

from bot.engine import prompts
from bot.engine.replies import read_reply
from bot.engine.types import Batch, DebateSpec, ModelRequest, Prompt, Turn, TurnKey
from bot.engine.view import RunView, evolve


class Inputs:
    def __init__(self, spec: DebateSpec, turns: Sequence[Turn]) -> None:
        self.spec = spec
        self.by_id: dict[str, Turn] = {}
        for t in turns:
            self.by_id.setdefault(t.key.id(), t)

    @cached_property
    def _prefix(self) -> str:
        # Built on the first request only: a replay of a finished run needs none.
        return prompts.shared_prefix(self.spec)

    def prompt(self, suffix: str) -> Prompt:
        return Prompt(system=prompts.system_for(self.spec), prefix=self._prefix, suffix=suffix)

    def take(
        self, run: RunView, keys: Sequence[TurnKey], build: Callable[[TurnKey], ModelRequest]
    ) -> tuple[RunView, tuple[Turn, ...] | None]:
        """The turns of ``keys``, consumed by ``run`` with what each says (its
        ``Reply``, the one reading of its text); or, if any is missing, no turns
        and ``run`` stopped at the batch of the missing requests."""
        missing = [k for k in keys if k.id() not in self.by_id]
        if missing:
            return evolve(run, stop=Batch(tuple(build(k) for k in missing))), None
        got = tuple(self.by_id[k.id()] for k in keys)
        n = len(run.points)
        replies = {**run.replies, **{t.key: read_reply(run.spec, t, n) for t in got}}
        return evolve(run, used=run.used + got, replies=replies), got
