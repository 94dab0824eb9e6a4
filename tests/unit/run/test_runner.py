"""bot/run: the one run loop, through a completer and hooks.

The completer is the product's own placeholder completer (the dry run's scripted
rehearsal) or, end to end, the real ``ModelRouter`` against the loopback fake
model server; the hooks are what a shell passes in (the protocol under test).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import anyio
import pytest
from pydantic import SecretStr

from bot.cli.local.dry_run import Placeholders
from bot.core.errors import ProtocolError, StoreError, TargetGone, TransientGitHubError
from bot.core.settings import Settings
from bot.engine.types import (
    Batch,
    DebateSpec,
    ModelRequest,
    Outcome,
    PersonaSpec,
    Turn,
)
from bot.models.router import ModelRouter
from bot.run.execute import Collect, NoHooks, execute
from testkit.fakes.model_server import FakeModelServer

MODEL = "scripted/rehearsal"
SPEC = DebateSpec(
    mode="debate",
    title="gRPC or REST?",
    subject="Should the internal billing API use gRPC or REST?",
    personas=(PersonaSpec("Atlas", "scale", MODEL), PersonaSpec("Forge", "ship it", MODEL)),
    judge=MODEL,
    rounds=3,
    seed="runner-test",
)


@dataclass
class Recorder:
    """Hooks that record what they were told, in order."""

    events: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    side: list[tuple[int, str]] = field(default_factory=list)

    async def before_step(self) -> None:
        self.events.append("check")

    async def on_turn(self, turn: Turn) -> None:
        self.turns.append(turn)
        self.events.append(f"turn:{turn.key.id()}")

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        kind = "outcome" if isinstance(step, Outcome) else f"batch:{len(step.requests)}"
        self.events.append(kind)
        self.side.append((len(finished), "outcome" if isinstance(step, Outcome) else "batch"))


@dataclass
class Counting:
    """The placeholder completer, counting what it is asked (and optionally slow)."""

    delay_s: float = 0.0
    asked: list[str] = field(default_factory=list)
    inner: Placeholders = field(default_factory=Placeholders)

    async def complete(self, request: ModelRequest) -> Turn:
        self.asked.append(request.key.id())
        await anyio.sleep(self.delay_s)
        return await self.inner.complete(request)


def _run(spec: DebateSpec, turns: Sequence[Turn], models: object, hooks: object) -> Outcome:
    return anyio.run(lambda: execute(spec, turns, models=models, hooks=hooks))  # type: ignore[arg-type]


def test_a_run_goes_from_spec_to_outcome_and_every_turn_reaches_the_hooks_first() -> None:
    hooks, models = Recorder(), Counting()
    outcome = _run(SPEC, (), models, hooks)
    assert outcome.kind == "verdict"
    assert [t.key.id() for t in hooks.turns] == models.asked  # each turn once, as it came
    assert len(set(models.asked)) == len(models.asked)
    assert hooks.events[-2:] == ["check", "outcome"]
    assert hooks.events[0] == "check" and hooks.events[1].startswith("batch:")
    # Every batch is announced before any of its turns, and checked after them.
    batches = [i for i, e in enumerate(hooks.events) if e.startswith("batch:")]
    assert all(hooks.events[i - 1] == "check" for i in batches)
    # The side work sees the turns finished before each step, then all of them.
    assert hooks.side[0] == (0, "batch") and hooks.side[-1] == (len(hooks.turns), "outcome")
    assert [n for n, _ in hooks.side] == sorted(n for n, _ in hooks.side)


def test_a_resumed_run_pays_for_no_turn_twice() -> None:
    whole = Collect()
    first = _run(SPEC, (), Counting(), whole)
    stored = whole.turns[: len(whole.turns) // 2]
    models = Counting()
    resumed = _run(SPEC, stored, models, NoHooks())
    assert resumed == first
    assert not set(models.asked) & {t.key.id() for t in stored}
    assert len(models.asked) == len(whole.turns) - len(stored)


class Misfiled(Counting):
    """A completer that files each turn under another key (a broken tool loop)."""

    async def complete(self, request: ModelRequest) -> Turn:
        turn = await super().complete(request)
        return replace(turn, key=replace(turn.key, slot=turn.key.slot + "-x"))


def test_the_engine_asking_again_is_a_protocol_error_not_a_paid_loop() -> None:
    models = Misfiled()
    with pytest.raises(ProtocolError, match="asked again"):
        _run(SPEC, (), models, NoHooks())
    # The first batch, once: asked again, it is refused before any call is paid.
    assert models.asked == ["t0:opening:1:Atlas", "t0:opening:1:Forge"]


class Side(Recorder):
    """Side work that fails (after ``delay_s``) beside the first two-request batch."""

    def __init__(self, error: Exception, delay_s: float = 0.0) -> None:
        super().__init__()
        self.error, self.delay_s, self.finished_side = error, delay_s, 0

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        await anyio.sleep(self.delay_s)
        if isinstance(step, Batch) and len(step.requests) > 1:
            raise self.error
        self.finished_side += 1


def _two_persona_batch_turns(hooks: Recorder) -> list[Turn]:
    return [t for t in hooks.turns if t.key.phase == "opening"]


def test_a_transient_side_failure_lets_the_batch_finish_then_is_raised() -> None:
    hooks = Side(TransientGitHubError("GitHub is down"))
    with pytest.raises(TransientGitHubError):
        _run(SPEC, (), Counting(delay_s=0.05), hooks)
    assert len(_two_persona_batch_turns(hooks)) == 2  # both calls finished and were stored


def test_a_final_side_failure_cancels_the_calls_in_flight() -> None:
    hooks = Side(TargetGone("the issue was deleted"))
    with pytest.raises(TargetGone):
        _run(SPEC, (), Counting(delay_s=5.0), hooks)
    assert _two_persona_batch_turns(hooks) == []  # cancelled: nothing more was paid for


class FailingStore(Recorder):
    """Storing a turn fails on the persona batch; the side work is slow there."""

    def __init__(self) -> None:
        super().__init__()
        self.side_done = 0

    async def on_turn(self, turn: Turn) -> None:
        if turn.key.phase == "opening":
            raise StoreError("save_turn failed: IntegrityError")
        await super().on_turn(turn)

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        if isinstance(step, Batch) and step.requests[0].key.phase == "opening":
            await anyio.sleep(0.2)
            self.side_done += 1
            raise TransientGitHubError("and GitHub failed too")


def test_a_failed_batch_lets_the_side_work_finish_and_is_raised_first() -> None:
    hooks = FailingStore()
    with pytest.raises(StoreError) as info:
        _run(SPEC, (), Counting(), hooks)
    assert not isinstance(info.value, TransientGitHubError)  # the batch's verdict first
    assert hooks.side_done == 1  # the post was not cut off half-way


def test_end_to_end_through_the_model_router() -> None:
    key = "test-openai-" + secrets.token_hex(8)
    with FakeModelServer(openai_api_key=key) as fake:
        settings = Settings(
            _env_file=None,
            openai_api_key=SecretStr(key),
            openai_base_url=fake.openai_base_url,
        )
        model = "openai/gpt-test"
        spec = replace(
            SPEC,
            personas=tuple(replace(p, model=model) for p in SPEC.personas),
            judge=model,
            rounds=1,
        )

        async def go() -> tuple[Outcome, Recorder]:
            hooks = Recorder()
            async with ModelRouter(settings) as router:
                return await execute(spec, (), models=router, hooks=hooks), hooks

        outcome, hooks = anyio.run(go)
    assert outcome.kind == "verdict"
    assert len(fake.requests) == len(hooks.turns) > 0
    assert all(t.status == "ok" for t in hooks.turns)
