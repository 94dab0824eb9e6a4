"""Many runs at once: model calls bounded per provider and per model (settings),
runs by `worker_concurrency`, not by a small fixed slot count."""

from __future__ import annotations

import anyio
import pytest

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.engine.types import ModelRequest, Prompt, TurnKey
from bot.models.router import ModelRouter
from testkit.fakes.model_server import FakeModelServer

PROMPT = Prompt(system="SYS|", prefix="PREFIX|", suffix="SUFFIX")


def settings(server: FakeModelServer, **values: object) -> Settings:
    base: dict[str, object] = {
        "openai_api_key": "k",
        "openai_base_url": server.openai_base_url,
        "model_max_retries": 0,
    }
    return Settings(_env_file=None, **base, **values)  # type: ignore[arg-type]


async def complete_all(router: ModelRouter, model: str, n: int) -> None:
    async def one(i: int) -> None:
        turn = await router.complete(
            ModelRequest(
                key=TurnKey(phase="opening", round=1, slot=f"P{i}"),
                models=(model,),
                prompt=PROMPT,
                max_output_tokens=50,
            )
        )
        assert turn.status == "ok", turn

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)


async def test_a_model_limit_bounds_that_model_only() -> None:
    with FakeModelServer(latency_s=0.5, openai_api_key="k") as server:
        limits = {"openai/gpt-4.1-mini": 2}
        async with ModelRouter(settings(server, model_concurrency=limits)) as router:
            await complete_all(router, "openai/gpt-4.1-mini", 6)
            assert server.max_in_flight == 2
            server.reset()
            await complete_all(router, "openai/gpt-4o", 6)  # no limit of its own
            assert server.max_in_flight == 6


async def test_a_provider_limit_bounds_all_its_models() -> None:
    with FakeModelServer(latency_s=0.5, openai_api_key="k") as server:
        s = settings(server, provider_concurrency={"openai": 3}, provider_max_concurrency=50)
        async with ModelRouter(s) as router:
            async with anyio.create_task_group() as tg:
                tg.start_soon(complete_all, router, "openai/gpt-4.1-mini", 4)
                tg.start_soon(complete_all, router, "ollama/llama3.1", 4)  # same server
            assert server.max_in_flight == 3


async def test_a_limit_on_an_unknown_provider_stops_startup() -> None:
    with (
        FakeModelServer(openai_api_key="k") as server,
        pytest.raises(ConfigError, match="unknown model provider"),
    ):
        ModelRouter(settings(server, model_concurrency={"opnai/gpt-4.1-mini": 2}))


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Settings(_env_file=None, model_concurrency={"openai/x": 0})
