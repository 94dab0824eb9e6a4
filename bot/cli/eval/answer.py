"""One case under one configuration → a ``Result``.

``single`` and ``vote`` ask the model directly (``material.single_prompt``), N
times for a vote, and take the majority of the answers that decide; ``debate``
runs the service's engine (``debate.debate_case``). Turns come from and go to
the cache, so a resumed case asks only for what it lacks.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass

import anyio

from bot.cli.eval.cache import Cache, Result
from bot.cli.eval.cases import Loaded
from bot.cli.eval.configs import EvalConfig
from bot.cli.eval.debate import Stopped, debate_case
from bot.cli.eval.material import SINGLE_MAX_OUTPUT_TOKENS, is_correct, read_answer, single_prompt
from bot.cli.eval.reader import case_reader
from bot.engine.types import DebateSpec, ModelRequest, Outcome, Turn, TurnKey
from bot.models.router import ModelRouter
from bot.run.completers import Wiring, run_models
from bot.run.execute import Completer

ABSTAIN = "ESCALATED"


@dataclass(frozen=True)
class Job:
    loaded: Loaded
    config: EvalConfig
    spec: DebateSpec
    key: str  # cache key: (case, configuration, models)


class Spend:
    """Money spent by this invocation, against an optional cap."""

    def __init__(self, cap_usd: float | None) -> None:
        self.cap_usd = cap_usd
        self.spent_usd = 0.0
        self.stopped = False

    def add(self, usd: float) -> None:
        self.spent_usd += usd

    def proceed(self) -> bool:
        if self.cap_usd is not None and self.spent_usd >= self.cap_usd:
            self.stopped = True
        return not self.stopped


class _Hooks:
    def __init__(self, job: Job, cache: Cache, spend: Spend) -> None:
        self.job, self.cache, self.spend = job, cache, spend

    def turn(self, turn: Turn) -> None:
        self.cache.save_turn(self.job.key, turn)  # first: a turn paid is a turn kept
        self.spend.add(turn.usage.cost_usd)

    def proceed(self) -> bool:
        return self.spend.proceed()


async def answer(job: Job, router: ModelRouter, cache: Cache, spend: Spend) -> Result:
    """Raises ``Stopped`` when the budget ran out before the case finished."""
    hooks = _Hooks(job, cache, spend)
    stored = cache.turns(job.key)
    started = time.monotonic()
    if job.config.kind == "debate":
        turns, outcome = await debate_case(
            job.spec, stored, router=router, hooks=hooks, reader=case_reader(job.loaded)
        )
        said, status, detail = _from_outcome(job, turns, outcome)
    else:
        turns = await _samples(job, stored, router, hooks)
        said, status, detail = _majority(job, turns)
    correct = is_correct(job.loaded, said) if status == "answered" and said else None
    return Result(
        case_id=job.loaded.id,
        config=job.config.name,
        answer=said,
        status=status,
        correct=correct,
        cost_usd=math.fsum(t.usage.cost_usd for t in turns),
        tokens=sum(t.usage.input_tokens + t.usage.output_tokens for t in turns),
        seconds=round(time.monotonic() - started, 3),
        detail=detail,
    )


async def _samples(job: Job, stored: list[Turn], router: ModelRouter, hooks: _Hooks) -> list[Turn]:
    have = {t.key.slot: t for t in stored}
    missing = [i for i in range(1, job.config.samples + 1) if f"sample-{i}" not in have]
    if missing and not hooks.proceed():
        raise Stopped
    got: list[Turn] = []

    async def one(models: Completer, i: int) -> None:
        request = ModelRequest(
            TurnKey("opening", 1, f"sample-{i}"),
            job.config.models,
            single_prompt(job.spec, i),
            SINGLE_MAX_OUTPUT_TOKENS,
        )
        turn = await models.complete(request)
        got.append(turn)
        hooks.turn(turn)

    async with (
        run_models(
            job.spec,
            Wiring(router, router, case_reader(job.loaded), "eval",
                   models_beyond_spec=job.config.models),
        ) as models,
        anyio.create_task_group() as tg,
    ):  # fmt: skip
        for i in missing:
            tg.start_soon(one, models, i)
    return [*stored, *got]


def _majority(job: Job, turns: list[Turn]) -> tuple[str | None, str, str]:
    ok = [t for t in turns if t.status == "ok"]
    if not ok:
        drops = sorted({t.drop_class or "dropped" for t in turns})
        return None, "failed", "every model call dropped (" + ", ".join(drops) + ")"
    answers = [read_answer(job.loaded, t.text) for t in ok]
    votes = Counter(a for a in answers if a is not None and a != ABSTAIN)
    if not votes:
        if any(a == ABSTAIN for a in answers):
            return ABSTAIN, "escalated", "the model escalated"
        return None, "failed", "no answer could be read from the reply"
    (top, n), *rest = votes.most_common()
    if rest and rest[0][1] == n:
        return ABSTAIN, "escalated", f"a tied vote ({n} each)"
    return top, "answered", ""


def _from_outcome(job: Job, turns: list[Turn], outcome: Outcome) -> tuple[str | None, str, str]:
    if outcome.kind == "aborted":
        return None, "failed", f"the debate aborted ({outcome.reason or 'no reason given'})"
    if outcome.kind == "arbitration":
        if outcome.verdict in (None, ABSTAIN):
            return ABSTAIN, "escalated", "the debate escalated"
        return outcome.verdict, "answered", ""
    synthesis = next(
        (t for t in reversed(turns) if t.key.phase == "synthesis" and t.status == "ok"), None
    )
    said = read_answer(job.loaded, synthesis.text) if synthesis is not None else None
    if said is None:
        return None, "failed", "the verdict has no CALL line to read an answer from"
    return said, "answered", ""
