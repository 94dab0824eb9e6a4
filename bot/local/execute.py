"""The local run loop: engine step → model calls (a batch concurrently) → next step.

Like the service's driver, but the turns live in memory only (a local run is
short and restarts cheaply) and each finished turn is reported on stderr the
moment it completes.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import anyio
from rich.console import Console
from rich.text import Text

from bot.debate.protocol import next_step
from bot.debate.types import Batch, DebateSpec, ModelRequest, Outcome, Turn, TurnKey
from bot.errors import ProtocolError
from bot.llm.router import ModelRouter


def step_label(key: TurnKey) -> str:
    """``opening, round 1`` / ``synthesis``; escalation tiers are named when used."""
    label = key.phase if key.round == 0 else f"{key.phase}, round {key.round}"
    return label + (f" (tier {key.tier})" if key.tier else "")


@dataclass
class Progress:
    """Progress lines on stderr: one per batch, one per finished turn."""

    console: Console
    started: float = field(default_factory=time.monotonic)
    batches: int = 0

    def batch(self, batch: Batch) -> None:
        self.batches += 1
        first = batch.requests[0].key
        slots = ", ".join(r.key.slot for r in batch.requests)
        how = "in parallel" if len(batch.requests) > 1 else "one request"
        self.console.print(
            Text.assemble(
                (f"▸ {step_label(first)}", "bold"),
                f" — {slots} ({how})",
            )
        )

    def turn(self, turn: Turn, elapsed_s: float) -> None:
        ok = turn.status == "ok"
        status = "ok" if ok else f"dropped: {turn.drop_class}"
        usage = turn.usage
        tokens = f" · {usage.input_tokens:,} in / {usage.output_tokens:,} out" if ok else ""
        self.console.print(
            Text.assemble(
                ("  ✓ " if ok else "  ✗ ", "green" if ok else "red"),
                (turn.key.slot, "bold"),
                f" · {step_label(turn.key)} · {turn.model or '(no model)'} · {elapsed_s:.1f}s · ",
                (status, "green" if ok else "red"),
                tokens,
            )
        )

    def elapsed(self) -> float:
        return time.monotonic() - self.started


async def run_debate(
    spec: DebateSpec, router: ModelRouter, progress: Progress
) -> tuple[list[Turn], Outcome]:
    turns: list[Turn] = []
    asked: set[str] = set()
    while True:
        step = next_step(spec, turns)
        if isinstance(step, Outcome):
            return turns, step
        ids = {r.key.id() for r in step.requests}
        if ids & asked:  # a deterministic engine never asks twice; don't loop paying for it
            raise ProtocolError(f"the engine asked again for {sorted(ids & asked)}")
        asked |= ids
        progress.batch(step)
        await _run_batch(step, router, turns, progress)


async def _run_batch(
    batch: Batch, router: ModelRouter, turns: list[Turn], progress: Progress
) -> None:
    async def one(request: ModelRequest) -> None:
        started = time.monotonic()
        turn = await router.complete(request)  # never raises for model failures
        turns.append(turn)
        progress.turn(turn, time.monotonic() - started)

    waiting = f"waiting for {len(batch.requests)} model call(s)…"
    with _spinner(progress.console, waiting):
        async with anyio.create_task_group() as tg:
            for request in batch.requests:
                tg.start_soon(one, request)


def _spinner(console: Console, message: str) -> AbstractContextManager[object]:
    # A live spinner only on a terminal; piped stderr gets plain lines.
    return console.status(message) if console.is_terminal else nullcontext()
