"""The local run's hooks of ``bot.run.execute``: progress on stderr.

Like the service's driver, but the turns live in memory only (a local run is
short and restarts cheaply): each batch is announced, and each finished turn is
reported the moment it completes and kept for the transcript.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.status import Status
from rich.text import Text

from bot.engine.types import Batch, Outcome, Turn, TurnKey


def step_label(key: TurnKey) -> str:
    """``opening, round 1`` / ``synthesis``; escalation tiers are named when used."""
    label = key.phase if key.round == 0 else f"{key.phase}, round {key.round}"
    return label + (f" (tier {key.tier})" if key.tier else "")


@dataclass
class Progress:
    """Progress lines on stderr: one per batch, one per finished turn, and a
    spinner while a batch waits (on a terminal only; piped stderr gets lines)."""

    console: Console
    started: float = field(default_factory=time.monotonic)
    batches: int = 0
    turns: list[Turn] = field(default_factory=list)
    _status: Status | None = field(default=None, init=False)
    _sent: dict[str, float] = field(default_factory=dict, init=False)

    async def before_step(self) -> None:
        self.close()  # the batch is through

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        """Announce the batch (nothing is posted locally: the transcript is
        written at the end)."""
        if isinstance(step, Outcome):
            return
        self.batches += 1
        first = step.requests[0].key
        slots = ", ".join(r.key.slot for r in step.requests)
        how = "in parallel" if len(step.requests) > 1 else "one request"
        self.console.print(
            Text.assemble(
                (f"▸ {step_label(first)}", "bold"),
                f" — {slots} ({how})",
            )
        )
        now = time.monotonic()
        self._sent = {r.key.id(): now for r in step.requests}
        if self.console.is_terminal:
            # A Text, not a str: a status reads a str as markup whatever the console says.
            waiting = Text(f"waiting for {len(step.requests)} model call(s)…")
            self._status = self.console.status(waiting)
            self._status.start()

    async def on_turn(self, turn: Turn) -> None:
        self.turns.append(turn)
        elapsed_s = time.monotonic() - self._sent.get(turn.key.id(), self.started)
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

    def close(self) -> None:
        """Stop the spinner (between batches, at the end, or on a failure)."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started
