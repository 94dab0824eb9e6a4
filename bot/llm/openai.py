"""OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp, OpenRouter, LiteLLM)."""

from __future__ import annotations

from typing import Any

import httpx

from bot.debate.types import Prompt, Usage
from bot.errors import ModelError
from bot.llm.base import Completion, approx_tokens
from bot.llm.http import HttpProvider, count
from bot.llm.pricing import estimate_cost
from bot.llm.retry import RetryPolicy

# OpenAI reasoning models spend hidden reasoning tokens out of max_completion_tokens;
# a budget sized for the visible answer alone can be used up before any text.
REASONING_MODEL_PREFIXES = ("o1", "o3", "o4", "gpt-5")
REASONING_HEADROOM = 4
REASONING_MAX_OUTPUT_TOKENS = 32_768


def output_token_limit(model: str, max_output_tokens: int) -> int:
    """The token limit to send: ``max_output_tokens``, with headroom for reasoning models
    (matched on the last path segment, so ``openai/o3-mini`` via a router counts)."""
    name = model.rsplit("/", 1)[-1].lower()
    if not name.startswith(REASONING_MODEL_PREFIXES):
        return max_output_tokens
    boosted = min(max_output_tokens * REASONING_HEADROOM, REASONING_MAX_OUTPUT_TOKENS)
    return max(max_output_tokens, boosted)


def _message_text(message: object) -> str | None:
    """``content`` as a string; some servers send a list of text parts."""
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        return "".join(parts)
    return None


class OpenAIProvider(HttpProvider):
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        client: httpx.AsyncClient,
        policy: RetryPolicy,
        max_concurrency: int,
        name: str = "openai",
    ) -> None:
        super().__init__(
            url=base_url.rstrip("/") + "/chat/completions",
            api_key=api_key,
            client=client,
            policy=policy,
            max_concurrency=max_concurrency,
            name=name,
        )
        # OpenAI's own API wants max_completion_tokens (reasoning models refuse
        # max_tokens); compatible servers widely understand only max_tokens.
        host = httpx.URL(base_url).host
        self._max_tokens_field = (
            "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        )

    async def generate(self, model: str, prompt: Prompt, max_output_tokens: int) -> Completion:
        messages: list[dict[str, str]] = []
        if prompt.system:
            messages.append({"role": "system", "content": prompt.system})
        # Prefix first: identical bytes across a run's requests, so prefix caches hit.
        messages.append({"role": "user", "content": prompt.prefix + prompt.suffix})
        body = {
            "model": model,
            "messages": messages,
            self._max_tokens_field: output_token_limit(model, max_output_tokens),
        }
        headers = {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        data, latency_ms, label = await self._post(model, body, headers)
        text, truncated = self._text(data, label)
        return Completion(
            text=text,
            usage=self._usage(data, model, prompt, text, latency_ms),
            truncated=truncated,
        )

    @staticmethod
    def _text(data: dict[str, Any], label: str) -> tuple[str, bool]:
        """(the answer's text, whether it stopped at the token limit)."""
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelError(f"{label}: response has no choices", drop_class="unusable_output")
        truncated = choices[0].get("finish_reason") == "length"
        text = _message_text(choices[0].get("message"))
        if text is None or not text.strip():
            why = " (the token limit was reached first)" if truncated else ""
            raise ModelError(
                f"{label}: response has no text content{why}", drop_class="unusable_output"
            )
        return text.strip(), truncated

    @staticmethod
    def _usage(
        data: dict[str, Any], model: str, prompt: Prompt, text: str, latency_ms: int
    ) -> Usage:
        raw = data.get("usage")
        if isinstance(raw, dict) and "prompt_tokens" in raw:
            input_tokens = count(raw.get("prompt_tokens"))
            output_tokens = count(raw.get("completion_tokens"))
            details = raw.get("prompt_tokens_details")
            cached = count(details.get("cached_tokens")) if isinstance(details, dict) else 0
            # DeepSeek's spelling of the same figure.
            cached = cached or count(raw.get("prompt_cache_hit_tokens"))
        else:
            # Some local servers omit usage; estimate rather than report zero.
            input_tokens = approx_tokens(prompt.system + prompt.prefix + prompt.suffix)
            output_tokens = approx_tokens(text)
            cached = 0
        cached = min(cached, input_tokens)
        cost = estimate_cost(
            model, input_tokens=input_tokens, cached_tokens=cached, output_tokens=output_tokens
        )
        return Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached,
            latency_ms=latency_ms,
            cost_usd=cost.usd,
        )
