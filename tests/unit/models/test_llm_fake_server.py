"""The loopback model server enforces what the real APIs enforce (others rely on it)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from testkit.fakes.model_server import FakeModelServer, Fault, tokenize

KEY = "test-key-123"
ANTHROPIC_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer(
        responder=lambda p: "one two three four five six", anthropic_api_key=KEY
    ) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh(server: FakeModelServer) -> None:
    server.reset()
    server.latency_s = 0.0
    server.cache_per_model = False


def messages_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-haiku-4-5",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "hello there"}],
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


@pytest.mark.parametrize("missing", ["model", "max_tokens", "messages"])
def test_anthropic_required_fields(server: FakeModelServer, missing: str) -> None:
    r = httpx.post(
        server.url + "/v1/messages",
        json=messages_body(**{missing: None}),
        headers=ANTHROPIC_HEADERS,
    )
    assert r.status_code == 400
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_anthropic_headers_are_checked(server: FakeModelServer) -> None:
    url = server.url + "/v1/messages"
    no_version = httpx.post(url, json=messages_body(), headers={"x-api-key": KEY})
    wrong_key = httpx.post(
        url, json=messages_body(), headers={**ANTHROPIC_HEADERS, "x-api-key": "nope"}
    )
    assert no_version.status_code == 400
    assert wrong_key.status_code == 401
    assert wrong_key.json()["error"]["type"] == "authentication_error"


def test_anthropic_rejects_empty_text_blocks(server: FakeModelServer) -> None:
    body = messages_body(messages=[{"role": "user", "content": [{"type": "text", "text": ""}]}])
    r = httpx.post(server.url + "/v1/messages", json=body, headers=ANTHROPIC_HEADERS)
    assert r.status_code == 400


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"model": "m", "messages": []},
        {"model": "m"},
        {"model": "m", "messages": [{"role": "robot", "content": "hi"}]},
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0},
    ],
)
def test_openai_bad_requests(server: FakeModelServer, body: dict[str, Any]) -> None:
    r = httpx.post(server.openai_base_url + "/chat/completions", json=body)
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_non_json_body_is_400(server: FakeModelServer) -> None:
    r = httpx.post(server.openai_base_url + "/chat/completions", content=b"{nope")
    assert r.status_code == 400


def test_max_tokens_truncates_like_the_real_apis(server: FakeModelServer) -> None:
    openai = httpx.post(
        server.openai_base_url + "/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
    ).json()
    assert openai["choices"][0]["message"]["content"] == "one two three"
    assert openai["choices"][0]["finish_reason"] == "length"
    assert openai["usage"]["completion_tokens"] == 3
    anthropic = httpx.post(
        server.url + "/v1/messages", json=messages_body(max_tokens=2), headers=ANTHROPIC_HEADERS
    ).json()
    assert anthropic["content"] == [{"type": "text", "text": "one two"}]
    assert anthropic["stop_reason"] == "max_tokens"


def _chat(server: FakeModelServer, text: str, model: str = "m") -> dict[str, Any]:
    r = httpx.post(
        server.openai_base_url + "/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": text}]},
    )
    return dict(r.json()["usage"])


def test_cached_tokens_are_the_longest_shared_prefix(server: FakeModelServer) -> None:
    assert _chat(server, "a b c d e")["prompt_tokens_details"]["cached_tokens"] == 0
    assert _chat(server, "a b c x y z")["prompt_tokens_details"]["cached_tokens"] == 3
    assert _chat(server, "a b c d e f")["prompt_tokens_details"]["cached_tokens"] == 5
    assert _chat(server, "q a b c")["prompt_tokens_details"]["cached_tokens"] == 0
    server.cache_per_model = True
    assert _chat(server, "a b c d e", model="other")["prompt_tokens_details"]["cached_tokens"] == 0
    server.reset()
    server.cache_per_model = False
    assert _chat(server, "a b c d e")["prompt_tokens_details"]["cached_tokens"] == 0


def test_anthropic_caches_only_up_to_the_breakpoint(server: FakeModelServer) -> None:
    def send(prefix: str, suffix: str, mark: bool) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": prefix}
        if mark:
            block["cache_control"] = {"type": "ephemeral"}
        content = [block, {"type": "text", "text": suffix}]
        r = httpx.post(
            server.url + "/v1/messages",
            json=messages_body(messages=[{"role": "user", "content": content}]),
            headers=ANTHROPIC_HEADERS,
        )
        return dict(r.json()["usage"])

    unmarked = send("p1 p2 p3", "s1", mark=False)
    assert unmarked["cache_creation_input_tokens"] == 0
    assert send("p1 p2 p3", "s2", mark=False)["cache_read_input_tokens"] == 0
    first = send("p1 p2 p3", "s1 s2", mark=True)
    assert first == {
        "input_tokens": 2,
        "cache_creation_input_tokens": 3,
        "cache_read_input_tokens": 0,
        "output_tokens": 6,
    }
    second = send("p1 p2 p3", "t1", mark=True)
    assert second["cache_read_input_tokens"] == 3
    assert second["input_tokens"] == 1


async def test_simultaneous_requests_miss_the_cache(server: FakeModelServer) -> None:
    server.latency_s = 0.1
    body = {"model": "m", "messages": [{"role": "user", "content": "same prompt here"}]}
    async with httpx.AsyncClient() as client:
        replies = await asyncio.gather(
            *(
                client.post(server.openai_base_url + "/chat/completions", json=body)
                for _ in range(2)
            )
        )
        later = await client.post(server.openai_base_url + "/chat/completions", json=body)
    cached = [r.json()["usage"]["prompt_tokens_details"]["cached_tokens"] for r in replies]
    assert cached == [0, 0]
    assert later.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 3
    assert server.max_in_flight == 2


def test_faults_are_consumed_in_order_and_per_model(server: FakeModelServer) -> None:
    server.add_faults(Fault.server_error(503, retry_after="2"), Fault.rate_limited("1"))
    server.add_faults(Fault.empty(), model="special")
    url = server.openai_base_url + "/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    first = httpx.post(url, json=body)
    special = httpx.post(url, json={**body, "model": "special"})
    second = httpx.post(url, json=body)
    third = httpx.post(url, json=body)
    assert (first.status_code, first.headers["retry-after"]) == (503, "2")
    assert special.json()["choices"][0]["message"]["content"] == ""
    assert (second.status_code, second.headers["retry-after"]) == (429, "1")
    assert third.status_code == 200
    assert [r.fault for r in server.requests] == ["status", "empty", "status", None]
    assert server.pending_faults == 0


def test_prompt_text_joins_all_parts_in_order(server: FakeModelServer) -> None:
    seen: list[str] = []

    def record(prompt: str) -> str:
        seen.append(prompt)
        return "ok"

    server.responder = record
    try:
        httpx.post(
            server.url + "/v1/messages",
            json=messages_body(
                system=[{"type": "text", "text": "SYS "}],
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "PRE "},
                            {"type": "text", "text": "SUF"},
                        ],
                    }
                ],
            ),
            headers=ANTHROPIC_HEADERS,
        )
    finally:
        server.responder = lambda p: "one two three four five six"
    assert seen == ["SYS PRE SUF"]
    assert server.requests[-1].prompt_text == "SYS PRE SUF"
    assert tokenize("a, b") == ["a", ",", "b"]


def test_stop_releases_a_hung_request() -> None:
    srv = FakeModelServer(responder=lambda p: "x").start()
    srv.add_faults(Fault.hang(60))
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(
                httpx.post(
                    srv.openai_base_url + "/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                    timeout=30,
                )
            )
        except httpx.HTTPError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 10
    while not srv.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    srv.stop()
    caller.join(timeout=20)
    # The hung request ended with the server, not after its 60 s.
    assert not caller.is_alive()
    assert len(outcome) == 1
    result = outcome[0]
    assert isinstance(result, httpx.HTTPError) or (
        isinstance(result, httpx.Response) and result.status_code >= 400
    )


def test_models_listing(server: FakeModelServer) -> None:
    server.models = frozenset({"b", "a"})
    try:
        data = httpx.get(server.openai_base_url + "/models").json()["data"]
    finally:
        server.models = None
    assert [m["id"] for m in data] == ["a", "b"]
