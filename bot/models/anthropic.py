"""Anthropic Messages API, with prompt caching of the run's stable prefix."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx

from bot.core.errors import ModelError
from bot.engine.tools import definitions
from bot.engine.types import Prompt, Usage
from bot.models.base import (
    Completion,
    Conversation,
    Exchange,
    ToolCall,
    ToolStep,
    add_usage,
    approx_tokens,
    call_id,
    history_as_text,
)
from bot.models.fair import CallInfo
from bot.models.http import HttpProvider, count
from bot.models.retry import RetryPolicy

ANTHROPIC_VERSION = "2023-06-01"


def messages_url(base_url: str) -> str:
    # ANTHROPIC_BASE_URL is the host root by convention; tolerate a trailing /v1.
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/v1/messages"


def request_body(model: str, prompt: Prompt, max_output_tokens: int) -> dict[str, Any]:
    """The Messages request: the cache breakpoint closes the stable part (system + prefix).

    Anthropic rejects empty text blocks, so empty parts are left out; with no
    prefix, the breakpoint moves to the system block.
    """
    ephemeral = {"type": "ephemeral"}
    system: list[dict[str, Any]] = (
        [{"type": "text", "text": prompt.system}] if prompt.system else []
    )
    content: list[dict[str, Any]] = []
    if prompt.prefix:
        content.append({"type": "text", "text": prompt.prefix, "cache_control": ephemeral})
    elif system:
        system[-1]["cache_control"] = ephemeral
    if prompt.suffix or not content:
        # A message needs at least one non-empty block.
        content.append({"type": "text", "text": prompt.suffix or "."})
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_output_tokens,
        "messages": [{"role": "user", "content": content}],
    }
    if system:
        body["system"] = system
    return body


class AnthropicProvider(HttpProvider):
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        client: httpx.AsyncClient,
        policy: RetryPolicy,
        max_concurrency: int,
        name: str = "anthropic",
    ) -> None:
        super().__init__(
            url=messages_url(base_url),
            api_key=api_key,
            client=client,
            policy=policy,
            max_concurrency=max_concurrency,
            name=name,
        )

    async def generate(
        self,
        model: str,
        prompt: Prompt,
        max_output_tokens: int,
        *,
        call_info: CallInfo | None = None,
    ) -> Completion:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        body = request_body(model, prompt, max_output_tokens)
        data, latency_ms, label = await self._post(model, body, headers, call_info)
        text = self._text(data, label)
        return Completion(
            text=text,
            usage=self._usage(data, model, prompt, text, latency_ms),
            truncated=data.get("stop_reason") == "max_tokens",
        )

    @staticmethod
    def _text(data: dict[str, Any], label: str) -> str:
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise ModelError(f"{label}: response has no content", drop_class="unusable_output")
        text = "".join(
            b["text"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
        if not text.strip():
            raise ModelError(f"{label}: response has no text content", drop_class="unusable_output")
        return text.strip()

    @staticmethod
    def _usage(
        data: dict[str, Any], model: str, prompt: Prompt, text: str, latency_ms: int
    ) -> Usage:
        raw = data.get("usage")
        if isinstance(raw, dict):
            fresh = count(raw.get("input_tokens"))
            read = count(raw.get("cache_read_input_tokens"))
            written = count(raw.get("cache_creation_input_tokens"))
            output = count(raw.get("output_tokens"))
        else:
            # Compatible proxies may omit usage; estimate rather than report zero.
            fresh = approx_tokens(prompt.system + prompt.prefix + prompt.suffix)
            read = written = 0
            output = approx_tokens(text)
        total_input = fresh + read + written  # Anthropic reports the three parts separately
        # Tokens only: the router prices every call by the deployment's book.
        return Usage(
            input_tokens=total_input,
            output_tokens=output,
            cached_tokens=read,
            latency_ms=latency_ms,
            cache_write_tokens=written,
        )

    # -- tool calling --------------------------------------------------------

    async def step(
        self,
        model: str,
        conversation: Conversation,
        max_output_tokens: int,
        *,
        call_info: CallInfo | None = None,
    ) -> ToolStep:
        """One step of a tool loop in Messages form: ``tools``, ``tool_use`` blocks
        answered by ``tool_result`` blocks in the very next user message."""
        return await self._step(model, conversation, max_output_tokens, call_info, as_text=False)

    async def _step(
        self,
        model: str,
        conversation: Conversation,
        max_output_tokens: int,
        call_info: CallInfo | None,
        *,
        as_text: bool,
    ) -> ToolStep:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        body = tool_request_body(model, conversation, max_output_tokens, as_text=as_text)
        data, latency_ms, label = await self._post_step(model, body, headers, call_info)
        text, calls = _tool_answer(data, label, len(conversation.history))
        usage = self._usage(data, model, conversation.as_prompt(), text, latency_ms)
        truncated = data.get("stop_reason") == "max_tokens"
        if conversation.final and calls and not as_text:
            # A proxy that ignored tool_choice "none": again, the steps as text, no tools.
            again = await self._step(
                model, conversation, max_output_tokens, call_info, as_text=True
            )
            return replace(again, usage=add_usage(usage, again.usage))
        if conversation.final:
            calls = ()
        if not calls and not text:
            raise ModelError(
                f"{label}: response has no text and no tool use", drop_class="unusable_output"
            )
        return ToolStep(text=text, calls=calls, usage=usage, truncated=truncated)


def tool_request_body(
    model: str, conv: Conversation, max_output_tokens: int, *, as_text: bool = False
) -> dict[str, Any]:
    """The Messages request of one step. The prompt keeps its cache breakpoint; the
    last blocks of this step and of the step before get one each, so each step
    reads the steps before it from the cache (4 breakpoints at most; this uses 3)."""
    body = request_body(model, conv.prompt, max_output_tokens)
    first: list[dict[str, Any]] = body["messages"][0]["content"]
    if as_text:
        if conv.history or conv.note:
            first.append({"type": "text", "text": history_as_text(conv.history, conv.note)})
        return body
    messages: list[dict[str, Any]] = body["messages"]
    for ex in conv.history:
        messages.append({"role": "assistant", "content": _assistant_blocks(ex)})
        results: list[dict[str, Any]] = [
            {
                "type": "tool_result",
                "tool_use_id": r.call_id,
                "content": r.content or "(empty)",
                **({"is_error": True} if r.is_error else {}),
            }
            for r in ex.results
        ]
        messages.append({"role": "user", "content": results})
    if conv.note:
        if conv.history:
            # After the tool_result blocks: they must open the message.
            messages[-1]["content"].append({"type": "text", "text": conv.note})
        else:
            first.append({"type": "text", "text": conv.note})
    # Breakpoints at the end of this step and of the step before: the next step
    # reads this one from the cache, and this one reads the one before.
    for back in (1, 3)[: len(conv.history)]:
        messages[-back]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    if conv.tools:
        body["tools"] = [
            {"name": name, "description": text, "input_schema": schema}
            for name, text, schema in definitions(conv.tools)
        ]
        body["tool_choice"] = {"type": "none" if conv.final else "auto"}
    return body


def _assistant_blocks(ex: Exchange) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if ex.text.strip():
        blocks.append({"type": "text", "text": ex.text})
    for c in ex.calls:
        try:
            given = json.loads(c.arguments)
        except ValueError:
            given = None
        # tool_use input must be an object; a malformed one is sent back as text.
        args = given if isinstance(given, dict) else {"arguments": c.arguments}
        blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": args})
    return blocks


def _tool_answer(data: dict[str, Any], label: str, step: int) -> tuple[str, tuple[ToolCall, ...]]:
    blocks = data.get("content")
    if not isinstance(blocks, list):
        raise ModelError(f"{label}: response has no content", drop_class="unusable_output")
    texts: list[str] = []
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for i, b in enumerate(blocks):
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif b.get("type") == "tool_use" and isinstance(b.get("name"), str):
            cid = b.get("id")
            if not isinstance(cid, str) or not cid or cid in seen:
                cid = call_id(step, i)
            seen.add(cid)
            given = b.get("input")
            arguments = (
                given if isinstance(given, str) else json.dumps(given if given is not None else {})
            )
            calls.append(ToolCall(id=cid, name=b["name"], arguments=arguments))
    return "".join(texts).strip(), tuple(calls)
