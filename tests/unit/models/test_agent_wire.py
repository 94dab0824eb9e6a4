"""What the gateway reads of the CLIs' protocols (bot/models/agents/wire.py)."""

from __future__ import annotations

import json

import pytest

from bot.models.agents.wire import Call, classify, request_hash, usage_of


def _sse(*events: dict[str, object]) -> bytes:
    return b"".join(
        f"event: {e.get('type', 'x')}\ndata: {json.dumps(e)}\n\n".encode() for e in events
    )


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/v1/messages", {"model": "m", "stream": True}, Call("anthropic", "generate", "m", True)),
        ("/v1/messages/count_tokens", {"model": "m"}, Call("anthropic", "count", "m", False)),
        ("/v1/responses", {"model": "gpt-5", "stream": True},
         Call("openai", "generate", "gpt-5", True)),
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", {},
         Call("gemini", "generate", "gemini-2.5-pro", True)),
        ("/v1beta/models/gemini-2.5-pro:generateContent", {},
         Call("gemini", "generate", "gemini-2.5-pro", False)),
        ("/v1beta/models/g:countTokens", {}, Call("gemini", "count", "g", False)),
        ("/v1/files", {}, None),
        ("/api/hello", {}, None),
    ],
)  # fmt: skip
def test_classify(path: str, body: dict[str, object], expected: Call | None) -> None:
    assert classify(path, body) == expected


def test_the_hash_ignores_session_ids_and_cache_keys_only() -> None:
    a = {"model": "m", "input": [1], "prompt_cache_key": "s1", "metadata": {"user_id": "u1"}}
    b = {"model": "m", "input": [1], "prompt_cache_key": "s2", "metadata": {"user_id": "u2"}}
    assert request_hash("/v1/responses", a) == request_hash("/v1/responses", b)
    assert request_hash("/v1/responses", a) != request_hash("/v1/responses", {**a, "input": [2]})
    assert request_hash("/v1/responses", a) != request_hash("/v1/messages", a)


def test_anthropic_stream_usage_counts_cache_reads_and_writes() -> None:
    stream = _sse(
        {"type": "message_start", "message": {"usage": {
            "input_tokens": 10, "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 50, "output_tokens": 1}}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "message_delta", "usage": {"output_tokens": 42}},
        {"type": "message_stop"},
    )  # fmt: skip
    usage = usage_of(Call("anthropic", "generate", "m", True), stream)
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_write_tokens) == (160, 100, 50)
    assert usage.output_tokens == 42


def test_anthropic_whole_message_usage() -> None:
    body = json.dumps({"id": "x", "usage": {"input_tokens": 7, "output_tokens": 3}}).encode()
    usage = usage_of(Call("anthropic", "generate", "m", False), body)
    assert (usage.input_tokens, usage.output_tokens) == (7, 3)


def test_openai_responses_usage_from_the_completed_event() -> None:
    stream = _sse(
        {"type": "response.created", "response": {"usage": None}},
        {"type": "response.completed", "response": {"usage": {
            "input_tokens": 300, "output_tokens": 20,
            "input_tokens_details": {"cached_tokens": 256}}}},
    )  # fmt: skip
    usage = usage_of(Call("openai", "generate", "gpt-5", True), stream)
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens) == (300, 256, 20)


def test_gemini_usage_is_the_last_chunks_running_total() -> None:
    stream = _sse(
        {"usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 1}},
        {"usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 9,
                           "thoughtsTokenCount": 4, "cachedContentTokenCount": 32}},
    )  # fmt: skip
    usage = usage_of(Call("gemini", "generate", "g", True), stream)
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (50, 13, 32)


def test_a_broken_answer_reads_as_no_usage() -> None:
    assert usage_of(Call("openai", "generate", "m", True), b"data: {nope\n\n").input_tokens == 0
    assert usage_of(Call("anthropic", "generate", "m", False), b"<html>").output_tokens == 0


def test_the_hash_ignores_codexs_fresh_message_ids() -> None:
    a = {"model": "m", "input": [{"id": "msg_1", "role": "user", "content": "hi"}]}
    b = {"model": "m", "input": [{"id": "msg_2", "role": "user", "content": "hi"}]}
    c = {"model": "m", "input": [{"id": "msg_1", "role": "user", "content": "ho"}]}
    assert request_hash("/v1/responses", a) == request_hash("/v1/responses", b)
    assert request_hash("/v1/responses", a) != request_hash("/v1/responses", c)


def test_the_hash_ignores_the_timing_in_codexs_shell_output() -> None:
    def body(took: str, chunk: str, out: str = "x") -> dict[str, object]:
        output = f"Chunk ID: {chunk}\nWall time: {took} seconds\nProcess exited with code 0\n{out}"
        return {"input": [{"type": "function_call_output", "call_id": "c1", "output": output}]}

    same = request_hash("/v1/responses", body("0.0011", "ab12"))
    assert same == request_hash("/v1/responses", body("0.0020", "cd34"))
    assert same != request_hash("/v1/responses", body("0.0011", "ab12", out="y"))
