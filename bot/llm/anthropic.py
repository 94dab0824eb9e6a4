"""Anthropic Messages API, with prompt caching of the run's stable prefix."""

from __future__ import annotations

from typing import Any

import httpx

from bot.debate.types import Prompt, Usage
from bot.errors import ModelError
from bot.llm.base import Completion, approx_tokens
from bot.llm.http import HttpProvider, count
from bot.llm.pricing import estimate_cost
from bot.llm.retry import RetryPolicy

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

    async def generate(self, model: str, prompt: Prompt, max_output_tokens: int) -> Completion:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        body = request_body(model, prompt, max_output_tokens)
        data, latency_ms, label = await self._post(model, body, headers)
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
        cost = estimate_cost(
            model,
            input_tokens=total_input,
            cached_tokens=read,
            output_tokens=output,
            cache_write_tokens=written,
        )
        return Usage(
            input_tokens=total_input,
            output_tokens=output,
            cached_tokens=read,
            latency_ms=latency_ms,
            cost_usd=cost.usd,
            cache_write_tokens=written,
        )
