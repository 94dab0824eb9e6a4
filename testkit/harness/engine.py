"""Helpers for the engine tests: specs, fake turns, a driver loop.

The driver is the same loop the worker runs, minus I/O: next_step → answer
every request → Turn → repeat. Answers come from ``rehearsal.reply`` unless a
test's ``answer`` hook returns its own turn.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from bot.engine import rehearsal
from bot.engine.protocol import next_step
from bot.engine.types import (
    ArbitrationContext,
    Batch,
    DebateSpec,
    ModelRequest,
    Outcome,
    PersonaSpec,
    Turn,
    Usage,
)

ATLAS = PersonaSpec("Atlas", "Scale and correctness.", "openai/gpt-a", ("openai/gpt-a-mini",))
FORGE = PersonaSpec("Forge", "Ship it, YAGNI.", "anthropic/claude-f")
BEACON = PersonaSpec("Beacon", "It already exists.", "ollama/llama-b")

QUESTION = "Should our internal services talk gRPC or REST?"
PLAN = """# Move sessions to JWT

## Token format
Issue short-lived JWTs signed with a rotating key and keep refresh tokens in Redis.

## Revocation
Keep a deny list of revoked token ids in Redis with the token's remaining lifetime.

## Rollout
Ship behind a flag to ten percent of users, watch error rates for a week, then go to all.
Keep the old session path for one release so that a rollback is a flag flip.
"""

USAGE = Usage(
    input_tokens=1000, output_tokens=200, cached_tokens=400, latency_ms=1500, cost_usd=0.01
)

Answer = Callable[[ModelRequest], Turn | None]


def prompt_text(req: ModelRequest) -> str:
    return req.prompt.system + req.prompt.prefix + req.prompt.suffix


def rehearse(req: ModelRequest, usage: Usage = USAGE) -> Turn:
    return Turn(req.key, rehearsal.reply(prompt_text(req)), req.models[0], usage)


def reply_turn(req: ModelRequest, text: str, usage: Usage = USAGE) -> Turn:
    return Turn(req.key, text, req.models[0], usage)


def drop(req: ModelRequest, drop_class: str = "timeout") -> Turn:
    return Turn(req.key, "", req.models[0], Usage(), status="dropped", drop_class=drop_class)  # type: ignore[arg-type]


def spec_for(mode: str, **kw: object) -> DebateSpec:
    base: dict[str, object] = {
        "mode": mode,
        "title": QUESTION if mode == "debate" else "Move sessions to JWT",
        "subject": QUESTION if mode == "debate" else PLAN,
        "personas": (ATLAS, FORGE),
        "judge": "openai/gpt-judge",
        "seed": "run-1",
    }
    if mode == "arbitrate":
        base["title"] = "Arbitrate: possible None dereference"
        base["subject"] = "The reviewer says `user` may be None here."
        base["arbitration"] = ArbitrationContext(
            concern="`user` may be None here; this dereference can crash.",
            concern_author="review-bot",
            concern_author_is_bot=True,
            path="app/views.py",
            diff_hunk="@@ -10,3 +10,4 @@\n-    name = user.name\n+    name = user.name.strip()",
            file_excerpt=(
                "def view(user):\n    assert user is not None\n    name = user.name.strip()\n"
            ),
            pr_title="Strip names",
            pr_body="Small fix.",
            line=12,
        )
        base["personas"] = ()
    base.update(kw)
    return DebateSpec(**base)  # type: ignore[arg-type]


class Run:
    """Drives a run to its outcome, recording every step for later assertions."""

    def __init__(self, spec: DebateSpec, answer: Answer | None = None) -> None:
        self.spec = spec
        self.answer = answer
        self.turns: list[Turn] = []
        self.steps: list[tuple[int, Batch | Outcome]] = []  # (turns seen, result)

    @property
    def batches(self) -> list[Batch]:
        return [s for _, s in self.steps if isinstance(s, Batch)]

    @property
    def requests(self) -> list[ModelRequest]:
        return [r for b in self.batches for r in b.requests]

    def go(self, max_steps: int = 80) -> Outcome:
        for _ in range(max_steps):
            step = next_step(self.spec, self.turns)
            self.steps.append((len(self.turns), step))
            if isinstance(step, Outcome):
                return step
            assert step.requests, "an empty batch would loop forever"
            for req in step.requests:
                t = self.answer(req) if self.answer else None
                self.turns.append(t if t is not None else rehearse(req))
        raise AssertionError("no outcome after max_steps")

    def with_spec(self, **kw: object) -> Run:
        run = Run(replace(self.spec, **kw), self.answer)  # type: ignore[arg-type]
        run.turns = list(self.turns)
        return run


def stance_reply(
    points: int, stance: str, position: str = "I hold my position.", pad: int = 0
) -> str:
    body = "POSITION: " + position + "\n" + ("word " * pad) + "\n"
    return body + "\n".join(f"POINT {p}: {stance} — because" for p in range(1, points + 1))


def phases(requests: Sequence[ModelRequest]) -> list[str]:
    return [r.key.id() for r in requests]


def fenced_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every fenced block body in ``text`` (``prompts.fence`` output)."""
    spans = []
    pos = 0
    while (m := re.compile(r"^(`{3,})text\n", re.M).search(text, pos)) is not None:
        end = text.find("\n" + m.group(1) + "\n", m.end() - 1)
        end = len(text) if end < 0 else end
        spans.append((m.end(), end))
        pos = end + len(m.group(1)) + 1
    return spans


def only_fenced(text: str, needle: str) -> bool:
    """``needle`` occurs in ``text``, and every occurrence lies inside a fence."""
    spans = fenced_spans(text)
    hits = [m.start() for m in re.finditer(re.escape(needle), text)]
    return bool(hits) and all(any(a <= h and h + len(needle) <= b for a, b in spans) for h in hits)
