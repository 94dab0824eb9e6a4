"""Shared pieces of the engine benchmarks: a router on the loopback fake model
server, a small driving loop, deterministic plan text and padded responders.

The loop is the worker's loop (``bot.run.execute``, as
``bot.service.worker.driver.RunDriver`` drives it) without the store and GitHub: the
hooks only time each batch and keep its turns. Each batch is one sequential
stage of the run.
"""

from __future__ import annotations

import multiprocessing
import random
import re
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from pydantic import SecretStr

from bot.core.settings import Settings
from bot.engine.rehearsal import reply as rehearsal_reply
from bot.engine.types import Batch, DebateSpec, ModelRequest, Outcome, PersonaSpec, Turn
from bot.models.router import ModelRouter
from bot.run.execute import Completer, execute
from testkit.fakes.model_server import FakeModelServer

ReplyScript = Callable[[str], str]

MODEL = "openai/gpt-4.1-mini"
PERSONA_PHASES = frozenset({"opening", "rebuttal", "counter"})
CACHE_READ_PRICE = 0.1  # cached input is billed at a tenth of fresh input (cache reads)

PERSONAS = (
    PersonaSpec(
        "Compass",
        "What is cuttable: scope, sequencing and the critical path.",
        MODEL,
    ),
    PersonaSpec(
        "Forge",
        "The ambition: ship the whole plan, defend its reasons and its timeline.",
        MODEL,
    ),
)


def router_settings(openai_base_url: str) -> Settings:
    """Settings that send ``openai/…`` references to the fake server and nowhere else."""
    return Settings(
        _env_file=None,
        openai_api_key=SecretStr("sk-bench-loopback"),
        openai_base_url=openai_base_url,
        model_max_retries=0,
        provider_max_concurrency=8,
    )


def _tcp_server(address: tuple[str, int], **_: Any) -> socket.socket:
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets whose
    # proto says TCP. ``socket.create_server`` leaves proto 0, and then uvicorn's
    # separate header and body writes meet Nagle plus the client's delayed ACK:
    # ~40 ms added to every response, which would swamp what is measured here.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(128)
    return sock


@contextmanager
def model_server(**kwargs: Any) -> Iterator[FakeModelServer]:
    """The loopback fake model server, listening on a socket with TCP_NODELAY."""
    server = FakeModelServer(**kwargs)
    with mock.patch("testkit.fakes.model_server.socket.create_server", _tcp_server):
        server.start()
    try:
        yield server
    finally:
        server.stop()


def _serve_in_child(
    urls: Any, stop: Any, latency_s: float, pad_to_words: int | None, never_converge: bool
) -> None:
    responder = persona_responder(pad_to_words=pad_to_words, never_converge=never_converge)
    with model_server(responder=responder, latency_s=latency_s) as server:
        urls.put(server.openai_base_url)
        stop.wait()


@contextmanager
def model_server_process(
    *, latency_s: float, pad_to_words: int | None = None, never_converge: bool = False
) -> Iterator[str]:
    """The fake model server in its own process; yields its OpenAI base URL.

    For timings: in-process, the server's request handling (parsing, tokenizing,
    the scripted reply) would compete with the bot's loop for the GIL, and the
    bot's overhead would be overstated. A real model server is elsewhere too.
    """
    with served_in_child(_serve_in_child, latency_s, pad_to_words, never_converge) as url:
        yield url


@contextmanager
def served_in_child(serve: Callable[..., None], *args: Any) -> Iterator[str]:
    """``serve(urls, stop, *args)`` in a spawned process: it puts its server's URL
    on ``urls`` and serves until ``stop`` is set. Yields that URL."""
    ctx = multiprocessing.get_context("spawn")
    urls, stop = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=serve, args=(urls, stop, *args), daemon=True)
    child.start()
    try:
        yield str(urls.get(timeout=60))
    finally:
        stop.set()
        child.join(timeout=15)
        if child.is_alive():
            child.terminate()
            child.join()


# --- driving a run ---------------------------------------------------------------


@dataclass
class Stage:
    requests: tuple[ModelRequest, ...]
    turns: list[Turn]
    elapsed_s: float


@dataclass
class Driven:
    outcome: Outcome
    turns: list[Turn] = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)
    elapsed_s: float = 0.0


@dataclass
class _Timed:
    """Hooks that time each batch and refuse a dropped turn."""

    stages: list[Stage] = field(default_factory=list)
    _open: tuple[Batch, list[Turn], float] | None = None

    def _close(self) -> None:
        if self._open is not None:
            batch, got, t0 = self._open
            self.stages.append(Stage(batch.requests, got, time.perf_counter() - t0))
            self._open = None

    async def before_step(self) -> None:
        self._close()

    async def on_turn(self, turn: Turn) -> None:
        if turn.status != "ok":
            # A dropped turn changes the run's shape: the figures would be meaningless.
            raise RuntimeError(
                f"model call failed against the loopback server: {turn.key.id()} "
                f"({turn.drop_class})"
            )
        if self._open is not None:
            self._open[1].append(turn)

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        if isinstance(step, Batch):
            self._open = (step, [], time.perf_counter())


async def drive(spec: DebateSpec, router: ModelRouter, models: Completer | None = None) -> Driven:
    """Run ``spec`` to its outcome as the worker does (minus persistence and posting);
    ``models`` completes the requests (a tool loop around ``router``), else ``router``."""
    hooks = _Timed()
    started = time.perf_counter()
    outcome = await execute(spec, (), models=models or router, hooks=hooks)
    elapsed = time.perf_counter() - started
    turns = [t for stage in hooks.stages for t in stage.turns]
    return Driven(outcome, turns, hooks.stages, elapsed)


# --- subject text ----------------------------------------------------------------

_VOCAB = (
    "service",
    "migration",
    "rollout",
    "schema",
    "owner",
    "budget",
    "risk",
    "metric",
    "latency",
    "cache",
    "queue",
    "worker",
    "tenant",
    "quota",
    "release",
    "flag",
    "canary",
    "rollback",
    "index",
    "backfill",
    "audit",
    "review",
    "deadline",
    "vendor",
    "contract",
    "staging",
    "replica",
    "shard",
    "partition",
    "failover",
    "alert",
    "dashboard",
    "runbook",
    "incident",
    "capacity",
    "forecast",
    "traffic",
    "region",
    "storage",
    "export",
    "import",
    "pipeline",
    "batch",
    "stream",
    "consumer",
    "producer",
    "retention",
    "compliance",
    "encryption",
    "token",
    "session",
    "gateway",
    "client",
    "partner",
    "support",
    "documentation",
    "training",
    "handover",
    "estimate",
    "milestone",
    "dependency",
    "team",
    "sprint",
    "quarter",
)
_GLUE = (
    "the",
    "a",
    "of",
    "to",
    "and",
    "for",
    "with",
    "on",
    "by",
    "before",
    "after",
    "while",
    "when",
    "each",
    "every",
    "our",
    "this",
    "that",
)


def sentence(rng: random.Random, words: int) -> str:
    out = []
    for i in range(words):
        out.append(rng.choice(_GLUE) if i % 3 == 1 else rng.choice(_VOCAB))
    text = " ".join(out)
    return text[0].upper() + text[1:] + "."


def paragraph(rng: random.Random, words: int) -> str:
    parts, left = [], words
    while left > 0:
        n = min(left, rng.randint(9, 16))
        parts.append(sentence(rng, n))
        left -= n
    return " ".join(parts)


def plan_text(words: int, *, seed: str = "plan") -> str:
    """A deterministic markdown plan of about ``words`` words, in ``## `` sections
    (the rehearsal judge extracts one issue per section heading, three at most)."""
    rng = random.Random(seed)
    sections = ("Scope", "Milestones and timeline", "Rollout and rollback", "Staffing and risks")
    per_section = max(20, words // len(sections))
    body = ["# Plan: move the billing service to the new event pipeline", ""]
    for title in sections:
        body += [f"## {title}", ""]
        left = per_section
        while left > 0:
            n = min(left, 90)
            body += [paragraph(rng, n), ""]
            left -= n
    return "\n".join(body).rstrip() + "\n"


def word_count(text: str) -> int:
    return len(text.split())


# --- responders ------------------------------------------------------------------

_TASK = re.compile(r"^TASK: (\S+)$", re.M)
_PERSONA = re.compile(r"^PERSONA: (.+)$", re.M)
_ROUND = re.compile(r"^ROUND: (\d+)", re.M)
_STANCE = re.compile(r"^(POINT \d+:\s*)(AGREE|HOLD|CONCEDE)\b.*$", re.M)


def _task_fields(prompt: str) -> tuple[str, str, str]:
    """(task, persona, round) from the prompt's trailer: its last ``KEY: value`` lines."""
    tail = prompt[-600:]

    def last(rx: re.Pattern[str]) -> str:
        found = rx.findall(tail)
        return str(found[-1]) if found else ""

    return last(_TASK), last(_PERSONA), last(_ROUND)


def persona_responder(
    *, pad_to_words: int | None = None, never_converge: bool = False
) -> ReplyScript:
    """The rehearsal script, optionally padded and made stubborn.

    ``pad_to_words``: persona turns get deterministic filler paragraphs, inserted
    before the stance block, up to about that many words (the protocol lines —
    POSITION and the stance block — stay as the script wrote them).
    ``never_converge``: every stance becomes HOLD, so every configured round runs.
    """

    def respond(prompt: str) -> str:
        text = rehearsal_reply(prompt)
        task, persona, rnd = _task_fields(prompt)
        if task not in PERSONA_PHASES:
            return text
        if never_converge:
            text = _STANCE.sub(lambda m: f"{m.group(1)}HOLD — still contested", text)
        if pad_to_words is not None:
            text = _pad(text, pad_to_words, seed=f"{persona}:{task}:{rnd}")
        return text

    return respond


def _pad(text: str, target_words: int, *, seed: str) -> str:
    missing = target_words - word_count(text)
    if missing <= 0:
        return text
    at = _STANCE.search(text)
    head, tail = (text[: at.start()], text[at.start() :]) if at else (text, "")
    rng = random.Random(seed)
    filler = []
    while missing > 0:
        n = min(missing, 80)
        filler.append(paragraph(rng, n))
        missing -= n
    return head.rstrip("\n") + "\n\n" + "\n\n".join(filler) + "\n\n" + tail


# --- reporting -------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def billed_equivalent(input_tokens: int, cached_tokens: int) -> float:
    """Input billed at fresh prices: uncached + 0.1 × cached (the cache-read price)."""
    return (input_tokens - cached_tokens) + CACHE_READ_PRICE * cached_tokens
