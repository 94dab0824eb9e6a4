"""Estimate accuracy: a run's estimated cost beside its real spend, per mode.

For each of the four modes (debate, critique, arbitrate, proposal) the same
spec is estimated (``bot.llm.estimate.estimate_run``, as admission does before
a run starts) and then driven through the real engine and router against the
loopback fake model server, which reports usage (cached input included) as
providers do; the real spend is what the router priced from those reports.

The fake "model" writes every answer that has a word limit ("Write at most N
words": persona turns and the synthesis) to ``--fill`` of it with generated
prose (``benchmarks._support_models.paragraph``, not the estimator's filler);
judge and vote answers are the rehearsal script as is.

Two estimates are shown: as deployed (tokens counted as four characters, about
what providers' tokenizers give for English) and with the fake server's own
tokenizer (a word or a punctuation mark a token, which counts this generated
prose at about 0.6 of that). The target is judged on the second: the same
tokenizer on both sides, so the figure measures the plan walk, the answer-length
assumption and the cache model rather than two ways of counting. A last row runs
the debate with a model that never concedes (every round runs): the case an
estimate built on the plan's expected convergence cannot see, bounded by the
run's cost cap (the admitted budget) instead.

Target (issue 20): the estimate within ±30 % of the real spend for the four modes.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
from dataclasses import replace

from benchmarks._support_models import (
    MODEL,
    PERSONAS,
    drive,
    model_server,
    paragraph,
    plan_text,
    router_settings,
)
from benchmarks.common import print_table
from bot.debate.rehearsal import reply
from bot.debate.types import ArbitrationContext, DebateSpec, Mode
from bot.llm.estimate import estimate_run
from bot.llm.pricing import PriceBook
from bot.llm.router import ModelRouter
from bot.llm.scripted import ReplyScript as Responder
from testkit.fakes.model_server import tokenize

_LIMIT = re.compile(r"Write at most (\d+) words")
_STANCE = re.compile(r"^POINT \d+:", re.M)
TARGET = 0.30
LATENCY_S = 0.01
MODES: tuple[Mode, ...] = ("debate", "critique", "arbitrate", "proposal")


def spec_for(mode: Mode, words: int) -> DebateSpec:
    subject = plan_text(words, seed=f"estimate-{mode}")
    arbitration = None
    if mode == "arbitrate":
        arbitration = ArbitrationContext(
            concern="MAX_RETRIES is never set, so this loop can spin forever.",
            concern_author="review-bot[bot]",
            concern_author_is_bot=True,
            path="src/app/handler.py",
            diff_hunk="@@ -10,6 +10,9 @@\n+for attempt in range(MAX_RETRIES):\n+    send()",
            file_excerpt=subject[:3000],
            pr_title="Retry sends",
            pr_body="Retries failed sends.",
        )
    return DebateSpec(
        mode=mode,
        title=f"Estimate accuracy: {mode}",
        subject=subject,
        personas=PERSONAS,
        judge=MODEL,
        rounds=3,
        arbitration=arbitration,
        seed=f"estimate-{mode}",
    )


def fake_model(fill: float, stubborn: bool) -> Responder:
    """The rehearsal script, written out to ``fill`` of each word limit with
    generated prose after its first two lines (before any stance block)."""

    def respond(prompt: str) -> str:
        text = reply(prompt)
        if stubborn:
            text = text.replace("AGREE", "HOLD").replace("CONCEDE", "HOLD")
        limit = _LIMIT.search(prompt)
        missing = int(int(limit[1]) * fill) - len(text.split()) if limit else 0
        if missing <= 0:
            return text
        rng = random.Random(prompt[-200:])
        prose = "\n\n".join(paragraph(rng, min(80, missing - i)) for i in range(0, missing, 80))
        head, _, rest = text.partition("\n")
        second, _, tail = rest.partition("\n")
        return f"{head}\n{second}\n\n{prose}\n\n{tail}"

    return respond


def fake_tokens(text: str) -> int:
    return len(tokenize(text))


async def measure(spec: DebateSpec, *, fill: float, stubborn: bool) -> tuple[float, int, int, int]:
    with model_server(
        latency_s=LATENCY_S,
        openai_api_key="sk-bench-loopback",
        responder=fake_model(fill, stubborn),
    ) as server:
        async with ModelRouter(router_settings(server.openai_base_url)) as router:
            driven = await drive(spec, router)
    turns = driven.turns
    return (
        sum(t.usage.cost_usd for t in turns),
        len(turns),
        sum(t.usage.input_tokens for t in turns),
        sum(t.usage.output_tokens for t in turns),
    )


def row(label: str, spec: DebateSpec, fill: float, stubborn: bool) -> tuple[list[str], bool]:
    prices = PriceBook()  # the router's, with no price file
    deployed = estimate_run(spec, prices)
    est = estimate_run(spec, prices, count=fake_tokens)
    real, calls, inp, out = asyncio.run(measure(spec, fill=fill, stubborn=stubborn))
    ratio = est.usd / real if real else float("inf")
    ok = abs(ratio - 1) <= TARGET
    return [
        label,
        f"{len(est.calls)} / {calls}",
        f"{est.input_tokens:,} / {inp:,}",
        f"{est.output_tokens:,} / {out:,}",
        f"${real:.5f}",
        f"${est.usd:.5f}",
        f"{ratio:.2f}",
        f"${deployed.usd:.5f} ({deployed.usd / real:.2f})",
        "yes" if ok else "no",
    ], ok


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks estimate_accuracy")
    parser.add_argument("--quick", action="store_true", help="a smaller subject")
    parser.add_argument(
        "--fill", type=float, default=0.75, help="share of its word limit the fake writes"
    )
    args = parser.parse_args(argv)
    words = 400 if args.quick else 1500
    rows: list[list[str]] = []
    hits = 0
    for mode in MODES:
        cells, ok = row(mode, spec_for(mode, words), args.fill, stubborn=False)
        rows.append(cells)
        hits += ok
    stubborn, _ = row(
        "debate, never converges (not a target)",
        replace(spec_for("debate", words), rounds=5),
        args.fill,
        stubborn=True,
    )
    rows.append(stubborn)
    print_table(
        f"Estimate vs real spend on the fake servers ({words}-word subject, {MODEL}, "
        f"answers at {args.fill:.0%} of their word limit)",
        [
            "run",
            "calls est / real",
            "input est / real",
            "output est / real",
            "real spend",
            "estimate",
            "ratio",
            "estimate as deployed (ratio)",
            "±30 %",
        ],
        rows,
    )
    print(f"{hits} of {len(MODES)} modes within ±{TARGET:.0%} (target: all).")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
