"""A provider that answers without any network, for tests and offline rehearsal.

Model references ``scripted/<anything>`` land here. Replies come from
``bot.debate.rehearsal.reply`` (deterministic, and marked "(scripted rehearsal)"
so they are never mistaken for a real model's) unless a responder is injected.

A model named ``fail-<drop class>`` (e.g. ``scripted/fail-timeout``) always fails
with that class, so drop, fallback and quorum paths can be rehearsed offline.
``scripted/oracle:<p>`` is the eval's test model (bot/llm/oracle.py).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import cast

from bot.debate.types import Prompt, Usage
from bot.errors import ModelError
from bot.llm.base import DROP_CLASSES, Completion, approx_tokens
from bot.llm.oracle import PREFIX as ORACLE_PREFIX
from bot.llm.oracle import oracle_completion

Responder = Callable[[str], str]

FAIL_PREFIX = "fail-"


def rehearsal_responder() -> Responder:
    # Imported on first use: the engine's rehearsal module must not be needed
    # by anything that only routes real models.
    module = importlib.import_module("bot.debate.rehearsal")
    return cast(Responder, module.reply)


class ScriptedProvider:
    def __init__(self, responder: Responder | None = None) -> None:
        self._responder = responder

    async def generate(self, model: str, prompt: Prompt, max_output_tokens: int) -> Completion:
        if model.startswith(FAIL_PREFIX):
            drop_class = model[len(FAIL_PREFIX) :]
            if drop_class in DROP_CLASSES:
                raise ModelError(f"scripted/{model}: scripted failure", drop_class=drop_class)
        if model.startswith(ORACLE_PREFIX):
            answered = oracle_completion(model, prompt)
            if answered is not None:
                return answered
        if self._responder is None:
            self._responder = rehearsal_responder()
        started = time.monotonic()
        prompt_text = prompt.system + prompt.prefix + prompt.suffix
        # Stripped like the HTTP providers' text, so both paths give identical turns.
        text = self._responder(prompt_text).strip()
        if not text:
            raise ModelError(f"scripted/{model}: empty reply", drop_class="unusable_output")
        return Completion(
            text=text,
            usage=Usage(
                input_tokens=approx_tokens(prompt_text),
                output_tokens=approx_tokens(text),
                latency_ms=int((time.monotonic() - started) * 1000),
            ),
        )
