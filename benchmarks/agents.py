"""Agent seats: what seating a coding-agent CLI costs beside its model's time.

Real CLIs (``deploy/agents/package.json``, installed where ``--agents DIR`` or
TEST_AGENT_CLIS says) in bubblewrap, through the gateway, against the loopback
fake of their providers (``testkit/fakes/agent_upstream.py``), with the
default settings (``AgentHost.from_settings``).

1. Overhead: one turn that reads k = 3 files, one tool step each, then answers:
   4 model calls, each answered after L = 1 s. Wall of the turn ÷ the sum of
   its gateway calls' upstream time. Target: ≤ 1.3.
   With it, the peak resident memory of the turn's process tree (polled while
   the turn runs, so measured on these 4-second turns).
2. Cold start: spawn → the CLI's first gateway request (p50, p95), answered at
   once (L = 0); for Gemini CLI also without Node's compile cache, turn for turn.
3. Capacity: 3 × the default ``DEBATE_BOT_AGENT_CONCURRENCY`` turns asked at
   once (L = 1 s, one tool step): how long a turn waits for its slot, and the
   whole burst's wall against the waves the limit allows.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import httpx

from benchmarks.common import percentile, print_table
from bot.core.settings import Settings
from bot.engine.agents import CLIS, Cli
from bot.engine.types import ModelRequest, Prompt, TurnKey, Usage
from bot.models.agents.clis import CLI_SPECS
from bot.models.agents.host import AgentHost
from bot.run.agent_seat import AgentSeats, TurnStats
from testkit.fakes.agent_upstream import AgentScript, FakeAgentUpstream
from testkit.harness.agents import BINS, MODELS, UPSTREAM_KEY, git_repo, upstreams

OVERHEAD_TARGET = 1.3
FILES = {f"src/part{i}.py": f"PART_{i} = {i * 7}\n" for i in range(1, 4)}


def _host(agents: Path, root: Path) -> AgentHost:
    settings = Settings(  # defaults everywhere but where the CLIs are
        _env_file=None,
        agent_claude_code_bin=str(agents / BINS["claude-code"]),
        agent_codex_bin=str(agents / BINS["codex"]),
        agent_gemini_bin=str(agents / BINS["gemini"]),
        agent_claude_code_model=MODELS["claude-code"],
        agent_codex_model=MODELS["codex"],
        agent_gemini_model=MODELS["gemini"],
        agent_dir=root,
    )
    return AgentHost.from_settings(settings)


def _free(model: str, usage: Usage) -> Usage:
    return usage


async def _turns(
    host: AgentHost, fake: FakeAgentUpstream, reader: object, cli: Cli, n: int, run: str
) -> tuple[list[float], list[TurnStats]]:
    """``n`` turns of ``cli`` at once; each turn's wall, and what the seat measured."""
    async with httpx.AsyncClient(timeout=None) as client:
        seats = AgentSeats(
            host=host, upstreams=upstreams(fake.url), client=client, charge=_free,
            run_id=run, reader=reader,  # type: ignore[arg-type]
        )  # fmt: skip
        prompt = Prompt("You are a debater.", "Subject: what do the parts hold?", "Answer.")

        async def one(i: int) -> float:
            started = time.monotonic()
            turn = await seats.complete(
                ModelRequest(TurnKey("opening", 1, f"s{i}"), (f"agent:{cli}",), prompt, 800)
            )
            if turn.status != "ok":
                raise RuntimeError(f"{cli}: turn dropped ({turn.drop_class})")
            return time.monotonic() - started

        try:
            walls = await asyncio.gather(*(one(i) for i in range(n)))
        finally:
            await seats.close()
    return list(walls), seats.stats


def overhead(host: AgentHost, reader: object, clis: Sequence[Cli], repeats: int) -> None:
    script = AgentScript(files=tuple(FILES), answer="Parts: {content}. See {file}:L1")
    rows = []
    with FakeAgentUpstream(script=script, api_key=UPSTREAM_KEY) as fake:
        fake.latency_s = 1.0
        for cli in clis:
            ratios, model, rss = [], [], []
            for r in range(repeats):
                walls, stats = asyncio.run(_turns(host, fake, reader, cli, 1, f"ovh-{cli}-{r}"))
                ratios.append(walls[0] / stats[0].model_seconds)
                model.append(stats[0].model_seconds)
                rss.append(stats[0].peak_rss)
            worst = max(ratios)
            rows.append([
                cli, str(stats[0].calls), f"{statistics.median(model):.2f} s",
                f"{statistics.median(ratios):.2f}", f"{worst:.2f}",
                "✅" if worst <= OVERHEAD_TARGET else "❌", f"{max(rss) / 1024**2:.0f} MB",
            ])  # fmt: skip
    print_table(
        f"Agent turn overhead: wall ÷ model time (k = 3 tool steps, L = 1 s, {repeats} turns)",
        ["CLI", "calls", "model time", "p50", "worst", f"≤ {OVERHEAD_TARGET}", "peak RSS (tree)"],
        rows,
    )


def cold_start(host: AgentHost, reader: object, clis: Sequence[Cli], turns: int) -> None:
    """Each CLI's start; a Node CLI's also without the compile cache, turn for turn
    in the same run (the cache's effect as a ratio)."""
    rows = []
    one_read = AgentScript(files=("src/part1.py",))
    warm = host.sandbox()
    with FakeAgentUpstream(script=one_read, api_key=UPSTREAM_KEY) as fake:

        def first(cli: Cli, run: str) -> float | None:
            return asyncio.run(_turns(host, fake, reader, cli, 1, run))[1][0].first_call_s

        for cli in clis:
            node = CLI_SPECS[cli].on_node and warm.compile_cache is not None
            firsts: list[float] = []
            colds: list[float] = []
            for r in range(turns):
                if (t := first(cli, f"cold-{cli}-{r}")) is not None:
                    firsts.append(t)
                if node:
                    host._sandbox = replace(warm, compile_cache=None)
                    try:
                        if (t := first(cli, f"cold-nocache-{cli}-{r}")) is not None:
                            colds.append(t)
                    finally:
                        host._sandbox = warm
            p50 = percentile(firsts, 50)
            rows.append([
                cli, f"{p50:.2f} s", f"{percentile(firsts, 95):.2f} s",
                f"{percentile(colds, 50):.2f} s ({p50 / percentile(colds, 50):.2f}×)"
                if colds else "—",
            ])  # fmt: skip
    print_table(
        f"Agent cold start: spawn → first gateway request ({turns} turns each, answered at once)",
        ["CLI", "p50", "p95", "p50 without the compile cache"],
        rows,
    )


def capacity(host: AgentHost, reader: object, cli: Cli) -> None:
    n = 3 * host.concurrency
    one_read = AgentScript(files=("src/part1.py",))
    with FakeAgentUpstream(script=one_read, api_key=UPSTREAM_KEY) as fake:
        fake.latency_s = 1.0
        started = time.monotonic()
        _, stats = asyncio.run(_turns(host, fake, reader, cli, n, f"cap-{cli}"))
        burst = time.monotonic() - started
    alone = statistics.median(s.seconds for s in stats)
    waves = math.ceil(n / host.concurrency)
    waits = [s.waited_s for s in stats]
    print_table(
        f"Agent capacity: {n} {cli} turns at once, default concurrency {host.concurrency} "
        f"({os.cpu_count()} cores)",
        ["turns ok", "a turn alone", "burst wall", "÷ waves × turn", "slot wait p50", "p95"],
        [[
            f"{len(stats)}/{n}", f"{alone:.2f} s", f"{burst:.2f} s",
            f"{burst / (waves * alone):.2f}", f"{percentile(waits, 50):.2f} s",
            f"{percentile(waits, 95):.2f} s",
        ]],
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks agents", description=__doc__)
    parser.add_argument("--agents", default=os.environ.get("TEST_AGENT_CLIS", ""),
                        help="npm prefix holding deploy/agents/package.json's CLIs")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="fewer turns")
    parser.add_argument("--cli", action="append", choices=CLIS, help="only these CLIs")
    args = parser.parse_args(argv)
    agents = Path(args.agents)
    if not args.agents or not (agents / BINS["codex"]).exists():
        print("agents: the CLIs are not installed: pass --agents DIR (an npm prefix of "
              "deploy/agents/package.json) or set TEST_AGENT_CLIS")  # fmt: skip
        return 2
    clis: list[Cli] = args.cli or list(CLIS)
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as folder:
        root = Path(folder)
        reader = git_repo(root, FILES)
        host = _host(agents, root)
        # Once per worker process, not per turn: the sandbox's probe and each
        # CLI's `--version` (Gemini CLI's also warms Node's compile cache).
        host.check([f"agent:{cli}" for cli in clis])
        overhead(host, reader, clis, 2 if args.quick else 5)
        cold_start(host, reader, clis, 3 if args.quick else 10)
        capacity(host, reader, "codex" if "codex" in clis else clis[0])
    return 0
