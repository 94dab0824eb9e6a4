"""A tool loop's model steps are calls like any other: they wait their fair turn
at the endpoint's gate under the run's share, and are priced by the router's book."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.core.fair import Share
from bot.core.settings import Settings
from bot.engine.types import ModelRequest, Prompt, RepoRef, ToolBudget, TurnKey
from bot.models.fair import CallInfo
from bot.models.gate import Ticket
from bot.models.router import ModelRouter
from bot.run.tool_loop import ToolLoop
from bot.service.worker.pool import Worker
from testkit.fakes.memory_repo import MemoryReader, run_tool
from testkit.fakes.tool_server import Call, ToolModelServer, stop_after
from testkit.harness.engine import spec_for
from testkit.harness.tool_models import settings_for, tool_server

FILES = {"app/views.py": "def view(user):\n    return user.name\n"}
ANSWER = 'POSITION: fine.\nSee `app/views.py:L2` "return user.name".\nPOINT 1: HOLD — read'
BUDGET = ToolBudget(tools=("read_file",), max_calls=3, max_bytes=10_000, max_steps=3)
OLDER = Share(installation=7, run="run-old", since=10.0)  # a plain call of an older run
NEWER = Share(installation=7, run="run-new", since=50.0)  # the tool loop's run


def request(slot: str, tools: ToolBudget | None) -> ModelRequest:
    return ModelRequest(
        key=TurnKey("opening", 1, slot),
        models=("openai/gpt-test",),
        prompt=Prompt(system="You debate.\n", prefix=f"# Subject {slot}\n", suffix="Go.\n"),
        max_output_tokens=200,
        tools=tools,
    )


@pytest.fixture
def server() -> Iterator[ToolModelServer]:
    with tool_server(stop_after([[Call("read_file", {"path": "app/views.py"})]], ANSWER)) as srv:
        yield srv


def settings(server: ToolModelServer, prices: Path | None = None) -> Settings:
    return settings_for(server, concurrency={"openai": 1}, prices=prices)  # a window of one


def test_a_tool_step_waits_its_fair_turn_at_the_gate(server: ToolModelServer) -> None:
    """Window 1, held: a newer run's tool step and an older run's plain call of the
    same installation queue; the older run goes first, as it would between two
    plain calls. (A step outside the run's share would count as installation
    None and the oldest call there is, and jump the line.)"""

    async def scenario() -> list[str]:
        async with ModelRouter(settings(server)) as router:
            gate = router.gate("openai")
            assert gate is not None and gate.window.slots == 1
            loop = ToolLoop(
                routes=router,
                plain=router.complete,
                reader=MemoryReader(dict(FILES)),
                run_tool=run_tool,
                caps=None,
                run_id="run-new",
                share=NEWER,
            )
            # The one slot, taken.
            held = await gate.enter(CallInfo(Share(installation=1, since=0.0), 10, 10))
            tool_turn = asyncio.create_task(loop.complete(request("Atlas", BUDGET)))
            plain_turn = asyncio.create_task(router.complete(request("Beacon", None), OLDER))
            for _ in range(1000):  # until both wait (no clock involved)
                if gate.waiting == 2:
                    break
                await asyncio.sleep(0)
            assert gate.waiting == 2
            gate.leave(held)
            turns = await asyncio.gather(tool_turn, plain_turn)
            assert all(t.status == "ok" for t in turns)
            return ["tools" if "tools" in r.body else "plain" for r in server.requests]

    # The plain call first; then the tool loop's two steps (a read, the answer).
    assert asyncio.run(scenario()) == ["plain", "tools", "tools"]


def test_tool_steps_carry_the_runs_share_and_an_estimate(server: ToolModelServer) -> None:
    async def scenario() -> list[tuple[Share, float]]:
        async with ModelRouter(settings(server)) as router:
            gate = router.gate("openai")
            assert gate is not None
            seen: list[tuple[Share, float]] = []
            enter = gate.enter

            async def recording(
                call_info: CallInfo | None = None, place: int | None = None
            ) -> Ticket:
                ticket = await enter(call_info, place)
                seen.append((ticket.share, ticket.tokens))
                return ticket

            gate.enter = recording  # type: ignore[method-assign]
            loop = ToolLoop(router, router.complete, MemoryReader(dict(FILES)), run_tool, None, "r")
            loop.share = NEWER
            turn = await loop.complete(request("Atlas", BUDGET))
            assert turn.status == "ok"
            return seen

    seen = asyncio.run(scenario())
    assert [share for share, _ in seen] == [NEWER, NEWER]
    # Each counts its input against the endpoint's token budget (0 without a CallInfo).
    assert all(tokens > 0 for _, tokens in seen)


def test_tool_steps_are_priced_by_the_operators_book(
    server: ToolModelServer, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("openai/gpt-test: {input: 1000000, cached_input: 0, output: 0}\n")

    async def scenario() -> tuple[float, int]:
        async with ModelRouter(settings(server, prices)) as router:
            loop = ToolLoop(router, router.complete, MemoryReader(dict(FILES)), run_tool, None, "r")
            turn = await loop.complete(request("Atlas", BUDGET))
            uncached = turn.usage.input_tokens - turn.usage.cached_tokens
            return turn.usage.cost_usd, uncached

    cost, uncached = asyncio.run(scenario())
    # One dollar per uncached input token: the book's price, not the built-in table's.
    assert uncached > 0 and cost == pytest.approx(uncached)


def test_the_answer_of_a_server_that_refuses_tools_is_priced_by_the_book(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("openai/gpt-test: {input: 0, cached_input: 0, output: 1000000}\n")

    async def scenario(server: ToolModelServer) -> tuple[float, int, str]:
        async with ModelRouter(settings(server, prices)) as router:
            loop = ToolLoop(router, router.complete, MemoryReader(dict(FILES)), run_tool, None, "r")
            turn = await loop.complete(request("Atlas", BUDGET))
            assert turn.evidence is not None
            return turn.usage.cost_usd, turn.usage.output_tokens, turn.evidence.static_reason

    with tool_server(stop_after([], ANSWER), reject_tools=True) as server:
        cost, output, why = asyncio.run(scenario(server))
    assert why  # answered from the prompt alone
    assert output > 0 and cost == pytest.approx(output)  # a dollar an output token


def test_the_worker_gives_a_runs_tool_loop_the_runs_share() -> None:
    """``Worker._models``: the tool loop of a run with tools takes the share its
    plain calls have (``RunCalls.of(run)``), so both wait in the same fair queue."""
    snapshot = MemoryReader(dict(FILES))

    class Repos:
        async def snapshot(self, gh: object, ref: RepoRef) -> MemoryReader:
            return snapshot

    async def scenario() -> object:
        settings = Settings(_env_file=None)
        async with ModelRouter(settings) as router:
            svc = SimpleNamespace(models=router, repos=Repos(), store=None, metrics=None)
            worker = SimpleNamespace(svc=svc)
            ref = RepoRef("acme/widgets", "0" * 40)
            spec = spec_for("debate", tools=True, repo_ref=ref)
            run = SimpleNamespace(
                id="run-new",
                installation_id=NEWER.installation,
                created_at=datetime.fromtimestamp(NEWER.since, UTC),
            )
            made = await Worker._models(worker, None, run, spec)  # type: ignore[arg-type]
            async with made as loop:
                return loop

    loop = asyncio.run(scenario())
    assert isinstance(loop, ToolLoop)
    assert loop.share == NEWER and loop.reader is snapshot and loop.run_id == "run-new"
