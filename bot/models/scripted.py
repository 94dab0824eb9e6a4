"""A provider that answers without any network, for tests and offline rehearsal.

Model references ``scripted/<anything>`` land here. Replies come from
``bot.engine.rehearsal.reply`` (deterministic, and marked "(scripted rehearsal)"
so they are never mistaken for a real model's) unless a responder is injected.

A model named ``fail-<drop class>`` (e.g. ``scripted/fail-timeout``) always fails
with that class, so drop, fallback and quorum paths can be rehearsed offline.

Tool loops (``step``): a model named ``reader…`` (e.g. ``scripted/reader``) reads
before it answers, deterministically: it lists the repository root, reads the
first 20 lines of the first file listed, then answers with its reply and an
``EVIDENCE:`` line citing that file's first non-blank line, quoted. Any other
scripted model never calls a tool (a model that ignores the tools it is offered).
``scripted/oracle:<p>`` is the eval's test model (bot/models/oracle.py): it answers
from the ``AnswerBook`` the provider was built with.
"""

from __future__ import annotations

import importlib
import json
import re
import time
from collections.abc import Callable
from typing import cast

from bot.core.errors import ModelError
from bot.engine.types import Prompt, Usage
from bot.models.base import (
    DROP_CLASSES,
    Completion,
    Conversation,
    ToolCall,
    ToolStep,
    approx_tokens,
    call_id,
)
from bot.models.fair import CallInfo
from bot.models.oracle import PREFIX as ORACLE_PREFIX
from bot.models.oracle import AnswerBook, oracle_completion

ReplyScript = Callable[[str], str]  # prompt text -> reply text

FAIL_PREFIX = "fail-"
READER_PREFIX = "reader"
_NUMBERED = re.compile(r"^\s*(\d+)\s*[:|\t]\s?(.*)$")


def rehearsal_responder() -> ReplyScript:
    # Imported on first use: the engine's rehearsal module must not be needed
    # by anything that only routes real models.
    module = importlib.import_module("bot.engine.rehearsal")
    return cast(ReplyScript, module.reply)


class ScriptedProvider:
    def __init__(
        self, responder: ReplyScript | None = None, *, answer_book: AnswerBook | None = None
    ) -> None:
        self._responder = responder
        self._answer_book = answer_book  # the eval's, for the oracle

    async def generate(
        self,
        model: str,
        prompt: Prompt,
        max_output_tokens: int,
        *,
        call_info: CallInfo | None = None,
    ) -> Completion:
        if model.startswith(FAIL_PREFIX):
            drop_class = model[len(FAIL_PREFIX) :]
            if drop_class in DROP_CLASSES:
                raise ModelError(f"scripted/{model}: scripted failure", drop_class=drop_class)
        if model.startswith(ORACLE_PREFIX):
            answered = oracle_completion(model, prompt, self._answer_book)
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

    async def step(
        self,
        model: str,
        conversation: Conversation,
        max_output_tokens: int,
        *,
        call_info: CallInfo | None = None,
    ) -> ToolStep:
        history = conversation.history
        reading = model.startswith(READER_PREFIX) and conversation.tools and not conversation.final
        if reading and not history:
            return _calls(ToolCall(call_id(0, 0), "list_files", json.dumps({"path": ""})))
        if reading and len(history) == 1 and history[0].results:
            listed = history[0].results[0]
            files = (
                []
                if listed.is_error
                else [
                    line.strip()
                    for line in listed.content.splitlines()
                    if line.strip() and not line.strip().endswith("/") and " " not in line.strip()
                ]
            )
            if files:
                args = {"path": files[0], "start_line": 1, "end_line": 20}
                return _calls(ToolCall(call_id(1, 0), "read_file", json.dumps(args)))
        done = await self.generate(model, conversation.prompt, max_output_tokens)
        return ToolStep(text=_with_evidence(done.text, conversation), calls=(), usage=done.usage)


def _calls(*calls: ToolCall) -> ToolStep:
    return ToolStep(text="", calls=calls, usage=Usage(input_tokens=0, output_tokens=8))


def _with_evidence(text: str, conversation: Conversation) -> str:
    """``text`` with an EVIDENCE line after its first line, citing the first
    non-blank line the model read, quoted (nothing when it read nothing)."""
    for ex in conversation.history:
        for call, result in zip(ex.calls, ex.results, strict=False):
            if call.name != "read_file" or result.is_error:
                continue
            path = json.loads(call.arguments).get("path", "")
            for line in result.content.splitlines():
                m = _NUMBERED.match(line)
                if m and len(m.group(2).strip()) >= 3 and '"' not in m.group(2):
                    cite = f'EVIDENCE: `{path}:L{m.group(1)}` "{m.group(2).strip()}"'
                    head, _, rest = text.partition("\n")
                    return f"{head}\n{cite}\n{rest}" if rest else f"{head}\n{cite}"
    return text
