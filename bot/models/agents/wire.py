"""What the agent CLIs speak, read by the gateway (pure: bytes in, facts out).

Three protocols: Anthropic Messages (Claude Code), OpenAI Responses (Codex) and
Gemini ``generateContent`` (Gemini CLI), each streamed (server-sent events) or
not. For every call the gateway needs: which protocol and upstream path, the
model named (priced under the upstream provider), a hash of the request that is
stable across a re-run of the same turn (volatile ids left out), and the usage
the upstream reported in its answer.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from bot.engine.types import Usage

Protocol = Literal["anthropic", "openai", "gemini"]
Kind = Literal["generate", "count", "probe"]
_GEMINI = re.compile(
    r"^/v1(?:beta|alpha)?/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$"
)
# Fields that differ between two runs of the same turn (session ids, cache
# keys, user ids): left out of the request's hash.
_VOLATILE: Final = frozenset(
    {"metadata", "prompt_cache_key", "user", "safety_identifier", "client_metadata", "store"}
)


@dataclass(frozen=True)
class Call:
    protocol: Protocol
    kind: Kind
    model: str
    stream: bool


def classify(path: str, body: dict[str, Any]) -> Call | None:
    """The call a request path (no query) and JSON body make; None: not a model call."""
    model = str(body.get("model") or "")
    if path == "/v1/messages":
        return Call("anthropic", "generate", model, bool(body.get("stream")))
    if path == "/v1/messages/count_tokens":
        return Call("anthropic", "count", model, False)
    if path == "/v1/responses":
        return Call("openai", "generate", model, bool(body.get("stream")))
    found = _GEMINI.match(path)
    if found is not None:
        method = found.group(2)
        kind: Kind = "count" if method == "countTokens" else "generate"
        return Call("gemini", kind, found.group(1), method == "streamGenerateContent")
    return None


def request_hash(path: str, body: dict[str, Any]) -> str:
    """The request without its volatile fields, canonical JSON, hashed."""
    kept = {k: v for k, v in body.items() if k not in _VOLATILE}
    items = kept.get("input")
    if isinstance(items, list):
        kept["input"] = [_steady(item) for item in items]
    canonical = json.dumps([path, kept], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


# Codex's shell output carries a fresh chunk id and the command's wall time.
_SHELL_NOISE = re.compile(r"^(?:Chunk ID|Wall time): .*$\n?", re.MULTILINE)


def _steady(item: object) -> object:
    """A Responses input item as a re-run would send it again: Codex numbers its
    messages afresh each run, and its shell output names how long it took."""
    if not isinstance(item, dict):
        return item
    kept = {k: v for k, v in item.items() if k != "id"}
    if kept.get("type") == "function_call_output" and isinstance(kept.get("output"), str):
        kept["output"] = _SHELL_NOISE.sub("", kept["output"])
    return kept


def sse_events(data: bytes) -> Iterator[dict[str, Any]]:
    """The JSON ``data:`` payloads of a server-sent event stream."""
    for block in re.split(rb"\r?\n\r?\n", data):
        payload = b"\n".join(
            line[5:].lstrip() for line in block.splitlines() if line.startswith(b"data:")
        )
        if not payload or payload == b"[DONE]":
            continue
        try:
            event = json.loads(payload)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


def _json(data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(call: Call, answer: bytes) -> Usage:
    """The tokens the upstream reported for one answer (streamed or not)."""
    events = list(sse_events(answer)) if call.stream else [_json(answer)]
    if call.protocol == "anthropic":
        return _anthropic_usage(events)
    if call.protocol == "openai":
        return _openai_usage(events)
    return _gemini_usage(events)


def _anthropic_usage(events: list[dict[str, Any]]) -> Usage:
    fresh = cache_read = cache_write = output = 0
    for event in events:
        usage = event.get("usage")
        message = event.get("message")
        if isinstance(message, dict):  # message_start
            usage = message.get("usage")
        if event.get("type") is None and isinstance(event.get("usage"), dict):
            usage = event["usage"]  # a whole (non-streamed) message
        if not isinstance(usage, dict):
            continue
        fresh = max(fresh, _int(usage.get("input_tokens")))
        cache_read = max(cache_read, _int(usage.get("cache_read_input_tokens")))
        cache_write = max(cache_write, _int(usage.get("cache_creation_input_tokens")))
        output = max(output, _int(usage.get("output_tokens")))
    return Usage(
        input_tokens=fresh + cache_read + cache_write,
        output_tokens=output,
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _openai_usage(events: list[dict[str, Any]]) -> Usage:
    for event in events:
        response = event.get("response") if "response" in event else event
        usage = response.get("usage") if isinstance(response, dict) else None
        if isinstance(usage, dict) and usage:
            details = usage.get("input_tokens_details")
            cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
            return Usage(
                input_tokens=_int(usage.get("input_tokens")),
                output_tokens=_int(usage.get("output_tokens")),
                cached_tokens=cached,
            )
    return Usage()


def _gemini_usage(events: list[dict[str, Any]]) -> Usage:
    found: dict[str, Any] = {}
    for event in events:  # each chunk repeats the running totals; the last holds all
        meta = event.get("usageMetadata")
        if isinstance(meta, dict):
            found = meta
    output = _int(found.get("candidatesTokenCount")) + _int(found.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=_int(found.get("promptTokenCount")),
        output_tokens=output,
        cached_tokens=_int(found.get("cachedContentTokenCount")),
    )
