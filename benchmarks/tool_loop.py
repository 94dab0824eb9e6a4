"""Tool loop: what reading the repository costs in wall time and in input tokens.

Both parts drive the real router and tool loop (``bot/run/tool_loop.py``) against
the loopback tool-calling fake server (``testkit/fakes/tool_server.py``), over an
in-memory repository; the debate runs through the one run layer
(``bot.run.execute``, as the worker and the CLI run it).

1. Critical path. A 3-round debate of two personas (parallel) whose personas and
   judge make k = 3 tool calls per turn, one per step, then answer: 4 model
   steps a turn, each answered after a fixed latency L. The critical path is
   the sum, over the engine's batches, of the longest turn's steps × L. Target:
   wall ≤ 1.10 × critical path (the loop, the tools and the store add little).
2. Tokens. One persona turn with k = 3 tool steps, in the Anthropic wire format
   with the cache breakpoints the provider sends, billed as Anthropic bills
   (fresh input 1×, cache writes 1.25×, cache reads 0.1×), against the same
   loop resending everything uncached (every step's whole input at 1×). Target:
   ≤ 0.6×. The OpenAI form (automatic prefix cache, reads 0.1×, no write
   premium) is printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from benchmarks._support_models import drive, served_in_child
from benchmarks.common import print_table
from bot.core.settings import Settings
from bot.engine import rehearsal
from bot.engine.types import (
    DebateSpec,
    ModelRequest,
    PersonaSpec,
    Prompt,
    ToolBudget,
    TurnKey,
)
from bot.models.router import ModelRouter
from bot.run.tool_loop import ToolLoop
from testkit.fakes.memory_repo import MemoryReader, run_tool
from testkit.fakes.tool_server import Call, Seen, ToolModelServer

K = 3
WALL_TARGET = 1.10
TOKEN_TARGET = 0.6
CACHE_WRITE = 1.25
CACHE_READ = 0.1
KEY = "sk-bench"


def repository(files: int = 12, lines: int = 60) -> dict[str, str]:
    return {
        f"src/mod{i}.py": "\n".join(
            f"def f{i}_{n}(x):  # step {n} of module {i} handles the {n % 7} case"
            for n in range(lines)
        )
        for i in range(files)
    }


def script(seen: Seen) -> str | list[Call]:
    """k calls, one per step (a search, then two reads), then the rehearsal answer."""
    if seen.may_call and seen.step < K:
        if seen.step == 0:
            return [Call("search_code", {"pattern": "def f1_1\\b"})]
        return [
            Call("read_file", {"path": f"src/mod{seen.step}.py", "start_line": 1, "end_line": 40})
        ]
    return rehearsal.reply(seen.text)


def settings(url: str) -> Settings:
    return Settings(
        _env_file=None,
        openai_api_key=KEY,
        openai_base_url=url + "/v1",
        anthropic_api_key=KEY,
        anthropic_base_url=url,
        model_timeout_s=30.0,
    )


def _serve_in_child(urls: Any, stop: Any, latency_s: float) -> None:
    with ToolModelServer(script=script, latency_s=latency_s, openai_api_key=KEY) as server:
        urls.put(server.url)
        stop.wait()


@contextmanager
def server_process(latency_s: float) -> Iterator[str]:
    """The fake server in its own process, as in benchmarks/critical_path.py: in
    process, its parsing and tokenizing would compete with the loop for the GIL."""
    with served_in_child(_serve_in_child, latency_s) as url:
        yield url


def tool_loop(router: ModelRouter, reader: MemoryReader) -> ToolLoop:
    return ToolLoop(
        routes=router,
        plain=router.complete,
        reader=reader,
        run_tool=run_tool,
        caps=None,
        run_id="bench",
    )


# --- 1. critical path -------------------------------------------------------------


@dataclass
class Walled:
    wall_s: float
    critical_s: float
    batches: int
    steps: int


async def debate(url: str, latency_s: float, rounds: int) -> Walled:
    spec = DebateSpec(
        mode="debate",
        title="Should the worker retry on every 5xx?",
        subject="Should the worker retry on every 5xx? " + "Consider the queue. " * 20,
        personas=(
            PersonaSpec("Atlas", "Correctness first.", "openai/gpt-bench"),
            PersonaSpec("Forge", "Ship it.", "anthropic/claude-bench"),
        ),
        judge="openai/gpt-bench",
        rounds=rounds,
        tools=True,
        seed="bench",
    )
    async with ModelRouter(settings(url)) as router:
        driven = await drive(spec, router, tool_loop(router, MemoryReader(repository())))
    critical = 0.0
    steps = 0
    for stage in driven.stages:
        per_turn = [t.evidence.steps if t.evidence else 1 for t in stage.turns]
        critical += max(per_turn) * latency_s
        steps += sum(per_turn)
    return Walled(driven.elapsed_s, critical, len(driven.stages), steps)


# --- 2. tokens ----------------------------------------------------------------------


@dataclass
class Billed:
    api: str
    steps: int
    input_tokens: int
    cached_billed: float
    uncached_billed: float

    @property
    def ratio(self) -> float:
        return self.cached_billed / self.uncached_billed


async def one_turn(api: str, prefix_words: int) -> Billed:
    server = ToolModelServer(script=script, openai_api_key=KEY, anthropic_api_key=KEY).start()
    try:
        ref = "anthropic/claude-bench" if api == "anthropic" else "openai/gpt-bench"
        prompt = Prompt(
            system="You debate.\n",
            prefix="# Debate material\n"
            + "the subject and its context files " * (prefix_words // 6),
            suffix="## Your task\nOPENING round.\n\nTASK: opening\nPOINTS: 1\n",
        )
        budget = ToolBudget(("list_files", "read_file", "search_code"), 10, 48_000, 6)
        request = ModelRequest(TurnKey("opening", 1, "Atlas"), (ref,), prompt, 600, budget)
        async with ModelRouter(settings(server.url)) as router:
            turn = await tool_loop(router, MemoryReader(repository())).complete(request)
        assert turn.status == "ok", turn.drop_class
        cached = uncached = 0.0
        total = 0
        for r in server.requests:
            u: dict[str, Any] = r.usage
            if api == "anthropic":
                fresh, write, read = (
                    u["input_tokens"],
                    u["cache_creation_input_tokens"],
                    u["cache_read_input_tokens"],
                )
                whole = fresh + write + read
                cached += fresh + CACHE_WRITE * write + CACHE_READ * read
            else:
                whole = u["prompt_tokens"]
                read = u["prompt_tokens_details"]["cached_tokens"]
                cached += (whole - read) + CACHE_READ * read
            uncached += whole
            total += whole
        return Billed(api, len(server.requests), total, cached, uncached)
    finally:
        server.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks tool_loop")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--latency", type=float, default=None, help="model latency L (s)")
    args = parser.parse_args(argv)
    latency = args.latency or (0.1 if args.quick else 0.25)
    rounds = 2 if args.quick else 3

    with server_process(latency) as url:
        asyncio.run(debate(url, latency, 1))  # warm-up: imports, connections
        walled = asyncio.run(debate(url, latency, rounds))
    wall_ratio = walled.wall_s / walled.critical_s
    print_table(
        f"Tool loop: {rounds}-round debate, k = {K} tool calls per turn, L = {latency:g} s",
        ["batches", "model steps", "critical path (s)", "wall (s)", "wall / critical", "target"],
        [
            [
                str(walled.batches),
                str(walled.steps),
                f"{walled.critical_s:.2f}",
                f"{walled.wall_s:.2f}",
                f"{wall_ratio:.3f}",
                f"≤ {WALL_TARGET}",
            ]
        ],
    )
    billed = [asyncio.run(one_turn(api, 3000)) for api in ("anthropic", "openai")]
    print_table(
        f"Tool loop: billed-equivalent input of one turn with k = {K} tool steps",
        [
            "wire format",
            "model steps",
            "input tokens",
            "cached billed",
            "uncached billed",
            "ratio",
            "target",
        ],
        [
            [
                b.api,
                str(b.steps),
                f"{b.input_tokens:,}",
                f"{b.cached_billed:,.0f}",
                f"{b.uncached_billed:,.0f}",
                f"{b.ratio:.3f}",
                f"≤ {TOKEN_TARGET}" if b.api == "anthropic" else "(beside)",
            ]
            for b in billed
        ],
    )
    ok = wall_ratio <= WALL_TARGET and billed[0].ratio <= TOKEN_TARGET
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1
