"""Tokens: what a run's prompt layout costs, beside a naive resend-everything baseline.

Ours: a 2-persona critique of a ~2,000-word plan, turns of ~500 words, driven
through the real engine and router against the loopback fake model server. The
server reports cached input tokens as providers do: the longest token prefix a
request shares with an earlier request that had completed when it arrived.

Baseline: the same run's turns, replayed as a naive client would prompt: every
request is system + subject + *every previous turn's text in order* + the task
(the request's own role and instructions, minus the quoted turns our layout
sends). Its requests go through the same server, stage by stage like ours (so
simultaneous requests miss the cache alike), after the server's cache is reset.

Two parts:
1. A 3-round critique (the rehearsal script converges in round 3). Target
   (issue 2): billed-equivalent input (uncached + 0.1 × cached) ≤ 0.5× the
   baseline's, where the baseline resends the transcript *as fresh input*.
   The baseline billed with the cache hits its own layout happens to get is
   printed beside it.
2. Input tokens per round, rounds 1 to 5, with a responder that never converges
   (always HOLD) so every round runs. Ours must be flat per round (linear
   total); the baseline's grows per round (quadratic total).
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from benchmarks._support_models import (
    MODEL,
    PERSONA_PHASES,
    PERSONAS,
    Driven,
    billed_equivalent,
    drive,
    model_server,
    persona_responder,
    plan_text,
    router_settings,
    verdict,
    word_count,
)
from benchmarks.common import print_table
from bot.engine import prompts
from bot.engine.types import DebateSpec, ModelRequest, Prompt, Turn
from bot.models.router import ModelRouter
from testkit.fakes.model_server import FakeModelServer, tokenize

PLAN_WORDS = 2000
TURN_WORDS = 500
TARGET_RATIO = 0.5
# Flat: round 1 quotes nothing, so flatness is judged from round 2 (the first
# round that quotes the opponent and the persona's own last turn) to the last.
FLAT_FROM_ROUND = 2
FLAT_TOLERANCE = 1.15
# A small model delay keeps the requests of one batch simultaneous, as in a real
# run: a request only hits the prefix of requests that had completed.
LATENCY_S = 0.02

_QUOTED_HEADING = re.compile(r"^## .*(latest turn, round|Your last turn, round|final position)")


@dataclass
class Tally:
    requests: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0

    def add(self, turns: Iterable[Turn]) -> None:
        for t in turns:
            self.requests += 1
            self.input_tokens += t.usage.input_tokens
            self.cached_tokens += t.usage.cached_tokens

    @property
    def uncached(self) -> int:
        return self.input_tokens - self.cached_tokens

    @property
    def billed(self) -> float:
        return billed_equivalent(self.input_tokens, self.cached_tokens)


def spec_for(rounds: int) -> DebateSpec:
    return DebateSpec(
        mode="critique",
        title="Plan: move the billing service to the new event pipeline",
        subject=plan_text(PLAN_WORDS, seed="tokens"),
        personas=PERSONAS,
        judge=MODEL,
        rounds=rounds,
        seed="bench-tokens",
    )


# --- the naive baseline ------------------------------------------------------------


def task_only(suffix: str) -> str:
    """Our suffix without the turns it quotes: the request's role, points, ledger
    and task, which the naive client sends after its full transcript instead."""
    kept: list[str] = []
    skipping = False
    for line in suffix.splitlines():
        if line.startswith("## "):
            skipping = bool(_QUOTED_HEADING.match(line))
        if not skipping:
            kept.append(line)
    return "\n".join(kept).strip() + "\n"


def transcript(turns: Sequence[Turn]) -> str:
    parts = ["# Transcript so far"]
    for t in turns:
        where = f"round {t.key.round}" if t.key.round else "frame"
        parts += ["", f"## {t.key.slot} — {t.key.phase}, {where}", prompts.fence(t.text)]
    return "\n".join(parts) + "\n\n"


def naive_request(request: ModelRequest, earlier: Sequence[Turn]) -> ModelRequest:
    p = request.prompt
    suffix = transcript(earlier) + task_only(p.suffix)
    prompt = Prompt(p.system, p.prefix, suffix)
    return ModelRequest(request.key, request.models, prompt, request.max_output_tokens)


async def replay_naive(run: Driven, router: ModelRouter) -> list[Turn]:
    """Send the baseline's requests stage by stage; the transcript they carry is
    our run's turns (so both sides debate the very same text)."""
    earlier: list[Turn] = []
    answered: list[Turn] = []
    for stage in run.stages:
        batch = [naive_request(r, earlier) for r in stage.requests]
        got = await asyncio.gather(*(router.complete(r) for r in batch))
        if any(t.status != "ok" for t in got):
            raise RuntimeError("a baseline request failed against the loopback server")
        answered.extend(got)
        earlier.extend(stage.turns)
    return answered


async def ours_and_naive(server: FakeModelServer, spec: DebateSpec) -> tuple[Driven, list[Turn]]:
    async with ModelRouter(router_settings(server.openai_base_url)) as router:
        server.reset()
        ours = await drive(spec, router)
        server.reset()  # neither run may hit the other's cached prefixes
        naive = await replay_naive(ours, router)
    return ours, naive


def per_round(turns: Iterable[Turn]) -> dict[int, Tally]:
    out: dict[int, Tally] = defaultdict(Tally)
    for t in turns:
        if t.key.phase in PERSONA_PHASES:
            out[t.key.round].add([t])
    return dict(sorted(out.items()))


# --- parts -------------------------------------------------------------------------


def part_one() -> None:
    spec = spec_for(3)
    responder = persona_responder(pad_to_words=TURN_WORDS)
    with model_server(responder=responder, latency_s=LATENCY_S) as server:
        ours_run, naive_turns = asyncio.run(ours_and_naive(server, spec))
    ours, naive = Tally(), Tally()
    ours.add(ours_run.turns)
    naive.add(naive_turns)
    persona_words = [word_count(t.text) for t in ours_run.turns if t.key.phase in PERSONA_PHASES]
    rounds = max(t.key.round for t in ours_run.turns)
    print(
        f"Part 1: {rounds}-round critique, 2 personas, plan of "
        f"{word_count(spec.subject):,} words, persona turns of "
        f"{min(persona_words)}–{max(persona_words)} words; {ours.requests} requests each"
    )
    fresh = float(naive.input_tokens)  # the baseline resends everything as fresh input
    rows = [
        _tally_row("ours (stable prefix, latest turns only)", ours),
        _tally_row("baseline, billed as fresh input", naive, billed=fresh),
        _tally_row("baseline, with its own prefix-cache hits", naive),
    ]
    print_table(
        "Input tokens per run (billed-equivalent = uncached + 0.1 × cached)",
        ["layout", "requests", "input", "cached", "uncached", "billed-eq"],
        rows,
    )
    ratio = ours.billed / fresh
    ratio_cached = ours.billed / naive.billed
    print(
        f"{verdict(ratio <= TARGET_RATIO)}  billed-equivalent input ours/baseline = "
        f"{ratio:.2f}× ≤ {TARGET_RATIO}× (baseline resending the transcript as fresh input)"
    )
    print(
        f"info  against the baseline billed with its own cache hits: {ratio_cached:.2f}×; "
        f"raw input tokens {ours.input_tokens / naive.input_tokens:.2f}×"
    )
    _explain_ours(ours_run)


def _explain_ours(run: Driven) -> None:
    """Where our input goes: the shared prefix vs each request's own suffix."""
    rows = []
    for stage in run.stages:
        for req, turn in zip(stage.requests, stage.turns, strict=True):
            p = req.prompt
            rows.append(
                [
                    req.key.id(),
                    f"{_tokens(p.system + p.prefix):,}",
                    f"{_tokens(p.suffix):,}",
                    f"{turn.usage.input_tokens:,}",
                    f"{turn.usage.cached_tokens:,}",
                ]
            )
    print_table(
        "Ours, request by request (tokens as the fake server counts them)",
        ["turn", "system+prefix", "suffix", "input", "cached"],
        rows,
    )


def part_two() -> bool:
    rounds = 5
    spec = spec_for(rounds)
    responder = persona_responder(pad_to_words=TURN_WORDS, never_converge=True)
    with model_server(responder=responder, latency_s=LATENCY_S) as server:
        ours_run, naive_turns = asyncio.run(ours_and_naive(server, spec))
    ours_rounds, naive_rounds = per_round(ours_run.turns), per_round(naive_turns)
    if sorted(ours_rounds) != list(range(1, rounds + 1)):
        raise RuntimeError(f"expected rounds 1..{rounds}, got {sorted(ours_rounds)}")
    rows = []
    ours_total = naive_total = 0
    for r in range(1, rounds + 1):
        o, n = ours_rounds[r], naive_rounds[r]
        ours_total += o.input_tokens
        naive_total += n.input_tokens
        rows.append(
            [
                str(r),
                f"{o.input_tokens:,}",
                f"{o.billed:,.0f}",
                f"{ours_total:,}",
                f"{n.input_tokens:,}",
                f"{n.billed:,.0f}",
                f"{naive_total:,}",
            ]
        )
    print(
        f"\nPart 2: {rounds} rounds, stances always HOLD (no convergence); persona turns only "
        "(issue extraction and synthesis excluded)"
    )
    print_table(
        "Input tokens per round",
        [
            "round",
            "ours",
            "ours billed-eq",
            "ours cumulative",
            "baseline",
            "baseline billed-eq",
            "baseline cumulative",
        ],
        rows,
    )
    first, last = ours_rounds[FLAT_FROM_ROUND].input_tokens, ours_rounds[rounds].input_tokens
    flat = last <= FLAT_TOLERANCE * first
    n_first, n_last = (
        naive_rounds[FLAT_FROM_ROUND].input_tokens,
        naive_rounds[rounds].input_tokens,
    )
    print(
        f"{verdict(flat)}  flat per round: ours round {rounds} = {last:,} ≤ "
        f"{FLAT_TOLERANCE} × round {FLAT_FROM_ROUND} = {FLAT_TOLERANCE * first:,.0f} "
        f"(×{last / first:.2f}; baseline ×{n_last / n_first:.2f})"
    )
    print(
        "      (flat: from round 2 on, a persona's input is the shared prefix plus the "
        "opponent's latest and its own last turn, whatever the round; round 1 quotes "
        "nothing and is smaller)"
    )
    return flat


def _tally_row(name: str, t: Tally, *, billed: float | None = None) -> list[str]:
    return [
        name,
        str(t.requests),
        f"{t.input_tokens:,}",
        f"{t.cached_tokens:,}" if billed is None else "0 (fresh)",
        f"{t.uncached:,}" if billed is None else f"{t.input_tokens:,}",
        f"{(t.billed if billed is None else billed):,.0f}",
    ]


def _tokens(text: str) -> int:
    return len(tokenize(text))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks tokens")
    # Accepted for the runner; the full run already takes about two seconds.
    parser.add_argument("--quick", action="store_true", help="same as a full run (it is short)")
    parser.parse_args(argv)
    part_one()
    part_two()
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
