"""OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp, OpenRouter, LiteLLM)."""

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
        # Models whose server answered tool_choice "none" with calls anyway (some
        # compatible servers ignore it): their loops end by dropping the tools.
        self._ignores_tool_choice: set[str] = set()

    async def generate(
        self,
        model: str,
        prompt: Prompt,
        max_output_tokens: int,
        *,
        call_info: CallInfo | None = None,
    ) -> Completion:
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
        data, latency_ms, label = await self._post(model, body, headers, call_info)
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
        # Tokens only: the router prices every call by the deployment's book.
        return Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached,
            latency_ms=latency_ms,
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
        """One step of a tool loop in chat-completions form: ``tools`` with
        ``tool_calls`` answered by ``role: tool`` messages, several calls of one
        response answered together."""
        as_text = conversation.final and model in self._ignores_tool_choice
        body = self._tool_body(model, conversation, max_output_tokens, as_text=as_text)
        headers = {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        data, latency_ms, label = await self._post_step(model, body, headers, call_info)
        text, calls, truncated = _tool_answer(data, label, len(conversation.history))
        usage = self._usage(data, model, conversation.as_prompt(), text, latency_ms)
        if conversation.final and calls and not as_text:
            # tool_choice "none" ignored: ask again without tools, the steps as text.
            self._ignores_tool_choice.add(model)
            again = await self.step(model, conversation, max_output_tokens, call_info=call_info)
            return replace(again, usage=add_usage(usage, again.usage))
        if conversation.final:
            calls = ()
        if not calls and not text:
            why = " (the token limit was reached first)" if truncated else ""
            raise ModelError(
                f"{label}: response has no text and no tool calls{why}",
                drop_class="unusable_output",
            )
        return ToolStep(text=text, calls=calls, usage=usage, truncated=truncated)

    def _tool_body(
        self, model: str, conv: Conversation, max_output_tokens: int, *, as_text: bool
    ) -> dict[str, Any]:
        prompt = conv.prompt
        messages: list[dict[str, Any]] = []
        if prompt.system:
            messages.append({"role": "system", "content": prompt.system})
        messages.append({"role": "user", "content": prompt.prefix + prompt.suffix})
        if as_text:
            if conv.history or conv.note:
                messages.append(
                    {"role": "user", "content": history_as_text(conv.history, conv.note)}
                )
        else:
            for ex in conv.history:
                messages.append(
                    {
                        "role": "assistant",
                        "content": ex.text or None,
                        "tool_calls": [
                            {
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments},
                            }
                            for c in ex.calls
                        ],
                    }
                )
                messages += [
                    {"role": "tool", "tool_call_id": r.call_id, "content": r.content}
                    for r in ex.results
                ]
            if conv.note:
                messages.append({"role": "user", "content": conv.note})
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            self._max_tokens_field: output_token_limit(model, max_output_tokens),
        }
        if conv.tools and not as_text:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": name, "description": text, "parameters": schema},
                }
                for name, text, schema in definitions(conv.tools)
            ]
            body["tool_choice"] = "none" if conv.final else "auto"
        return body


def _tool_answer(
    data: dict[str, Any], label: str, step: int
) -> tuple[str, tuple[ToolCall, ...], bool]:
    """(text, calls, truncated) of a chat-completions answer; calls without an id
    (or with a repeated one) get ours, arguments sent as an object become JSON text."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError(f"{label}: response has no choices", drop_class="unusable_output")
    message = choices[0].get("message")
    truncated = choices[0].get("finish_reason") == "length"
    text = (_message_text(message) or "").strip()
    raw = message.get("tool_calls") if isinstance(message, dict) else None
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for i, item in enumerate(raw if isinstance(raw, list) else []):
        fn = item.get("function") if isinstance(item, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        args = fn.get("arguments")
        arguments = args if isinstance(args, str) else json.dumps(args if args is not None else {})
        cid = item.get("id")
        if not isinstance(cid, str) or not cid or cid in seen:
            cid = call_id(step, i)
        seen.add(cid)
        calls.append(ToolCall(id=cid, name=fn["name"], arguments=arguments))
    return text, tuple(calls), truncated
