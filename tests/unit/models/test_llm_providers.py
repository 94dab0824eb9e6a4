"""Providers against the loopback model server, over real HTTP, in both wire formats."""

from __future__ import annotations

import asyncio
import importlib.util
import secrets
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from bot.core.errors import ModelError
from bot.core.settings import Settings
from bot.engine.types import ModelRequest, Prompt, TurnKey
from bot.models.pricing import estimate_cost
from bot.models.router import ModelRouter
from testkit.fakes.model_server import FakeModelServer, Fault, tokenize

OPENAI_KEY = "sk-test-" + secrets.token_hex(16)
ANTHROPIC_KEY = "sk-ant-test-" + secrets.token_hex(16)

SYSTEM = "You are a careful debater. Follow the rules.\n"
PREFIX = "## Subject\n```\nShould we adopt gRPC for internal services?\n```\n"


def responder(prompt: str) -> str:
    return f"reply to {len(tokenize(prompt))} tokens.\nPOINT 1: HOLD — still open"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer(
        responder=responder, openai_api_key=OPENAI_KEY, anthropic_api_key=ANTHROPIC_KEY
    ) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh(server: FakeModelServer) -> None:
    server.reset()
    server.models = None
    server.latency_s = 0.0


def settings_for(server: FakeModelServer, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "openai_api_key": OPENAI_KEY,
        "openai_base_url": server.openai_base_url,
        "anthropic_api_key": ANTHROPIC_KEY,
        "anthropic_base_url": server.anthropic_base_url,
        "model_timeout_s": 5.0,
        "model_max_retries": 2,
        "model_max_retry_wait_s": 0.02,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


def request(*models: str, suffix: str = "Opening: argue from scale.\n") -> ModelRequest:
    return ModelRequest(
        key=TurnKey(phase="opening", round=1, slot="Atlas"),
        models=models,
        prompt=Prompt(system=SYSTEM, prefix=PREFIX, suffix=suffix),
        max_output_tokens=400,
    )


STABLE_TOKENS = len(tokenize(SYSTEM)) + len(tokenize(PREFIX))


async def test_openai_happy_path_reports_usage_and_cached_prefix(server: FakeModelServer) -> None:
    async with ModelRouter(settings_for(server)) as router:
        first = await router.complete(request("openai/gpt-4.1-mini", suffix="Opening: scale.\n"))
        second = await router.complete(request("openai/gpt-4.1-mini", suffix="Rebuttal: cost.\n"))

    assert first.status == "ok" and first.model == "openai/gpt-4.1-mini"
    total = STABLE_TOKENS + len(tokenize("Opening: scale.\n"))
    assert first.text == f"reply to {total} tokens.\nPOINT 1: HOLD — still open"
    assert first.usage.input_tokens == total
    assert first.usage.cached_tokens == 0
    assert first.usage.output_tokens == len(tokenize(first.text))
    # The second request shares system + prefix, so the prefix cache hits exactly that.
    assert second.usage.cached_tokens == STABLE_TOKENS
    expected = estimate_cost(
        "gpt-4.1-mini",
        input_tokens=second.usage.input_tokens,
        cached_tokens=STABLE_TOKENS,
        output_tokens=second.usage.output_tokens,
    )
    assert second.usage.cost_usd == pytest.approx(expected.usd) and expected.usd > 0

    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert sent.body["model"] == "gpt-4.1-mini"
    assert sent.body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PREFIX + "Opening: scale.\n"},
    ]
    assert sent.body["max_tokens"] == 400  # a compatible server, not api.openai.com


async def test_anthropic_happy_path_caches_the_stable_prefix(server: FakeModelServer) -> None:
    async with ModelRouter(settings_for(server)) as router:
        first = await router.complete(request("anthropic/claude-sonnet-4-5", suffix="One.\n"))
        second = await router.complete(request("anthropic/claude-sonnet-4-5", suffix="Two.\n"))

    assert first.status == "ok" and second.status == "ok"
    total = STABLE_TOKENS + len(tokenize("One.\n"))
    assert first.usage.input_tokens == total  # cache writes count as input
    assert first.usage.cached_tokens == 0
    assert second.usage.cached_tokens == STABLE_TOKENS
    assert second.usage.input_tokens == STABLE_TOKENS + len(tokenize("Two.\n"))
    # Cache writes are dearer than reads: the first call costs more.
    assert first.usage.cost_usd > second.usage.cost_usd > 0

    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == ANTHROPIC_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.body["system"] == [{"type": "text", "text": SYSTEM}]
    assert sent.body["max_tokens"] == 400
    assert sent.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": PREFIX, "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "One.\n"},
            ],
        }
    ]
    assert server.requests[0].usage["cache_creation_input_tokens"] == STABLE_TOKENS
    assert server.requests[1].usage["cache_read_input_tokens"] == STABLE_TOKENS


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-3-5-haiku"])
async def test_429_with_retry_after_then_success(server: FakeModelServer, model: str) -> None:
    # Retry-After 10 ms: within the 0.02 s maximum wait, so honoured and retried.
    server.add_faults(Fault.rate_limited(retry_after="0.01"))
    async with ModelRouter(settings_for(server)) as router:
        turn = await router.complete(request(model))
    assert turn.status == "ok"
    assert [r.status for r in server.requests] == [429, 200]


@pytest.mark.parametrize(
    "fault", [Fault.rate_limited(retry_after="1"), Fault.server_error(503, retry_after="1")]
)
async def test_retry_after_beyond_the_cap_moves_to_the_fallback_at_once(
    server: FakeModelServer, fault: Fault
) -> None:
    # The server asks for 1 s, the cap is 0.02 s (0.5 s for waiting out 429s):
    # retrying early would only earn more refusals, so the next model is tried
    # without another attempt.
    server.add_faults(fault, fault, fault, model="gpt-4o")
    settings = settings_for(server, model_max_retries=2, model_rate_limit_wait_s=0.5)
    async with ModelRouter(settings) as router:
        rescued = await router.complete(request("openai/gpt-4o", "anthropic/claude-sonnet-4-5"))
        alone = await router.complete(request("openai/gpt-4o"))
    assert rescued.status == "ok" and rescued.model == "anthropic/claude-sonnet-4-5"
    assert alone.status == "dropped" and alone.drop_class == "rate_limited"
    # A 429 holds the whole endpoint for its retry-after: the next call to it is
    # dropped without being sent, as it could not wait that long either.
    again = [] if fault.status == 429 else [("gpt-4o", fault.status)]
    assert [(r.model, r.status) for r in server.requests] == [
        ("gpt-4o", fault.status),
        ("claude-sonnet-4-5", 200),
        *again,
    ]


async def test_bad_gzip_body_is_a_provider_error_and_the_fallback_runs(
    server: FakeModelServer,
) -> None:
    server.add_faults(Fault.bad_gzip(), Fault.bad_gzip(), model="gpt-4o")
    async with ModelRouter(settings_for(server, model_max_retries=2)) as router:
        rescued = await router.complete(request("openai/gpt-4o", "anthropic/claude-sonnet-4-5"))
        alone = await router.complete(request("openai/gpt-4o"))
    assert rescued.status == "ok" and rescued.model == "anthropic/claude-sonnet-4-5"
    assert alone.status == "dropped" and alone.drop_class == "provider_error"
    # An undecodable answer is not retried: the same request would get the same body.
    assert [r.model for r in server.requests] == ["gpt-4o", "claude-sonnet-4-5", "gpt-4o"]


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-sonnet-4-5"])
async def test_truncated_answer_is_kept_flagged_and_logged(
    server: FakeModelServer, model: str
) -> None:
    short = ModelRequest(
        key=TurnKey(phase="opening", round=1, slot="Atlas"),
        models=(model,),
        prompt=Prompt(system=SYSTEM, prefix=PREFIX, suffix="Go.\n"),
        max_output_tokens=3,
    )
    async with ModelRouter(settings_for(server)) as router:
        with capture_logs() as logs:
            turn = await router.complete(short)
            full = await router.complete(request(model))
        provider = router._providers[model.split("/")[0]]
        cut = await provider.generate(model.split("/")[1], short.prompt, 3)
        whole = await provider.generate(model.split("/")[1], short.prompt, 400)
    assert turn.status == "ok" and turn.truncated and not full.truncated
    assert turn.text.startswith("reply to ") and len(tokenize(turn.text)) == 3  # cut by the fake
    assert full.status == "ok"
    truncated = [e for e in logs if e["event"] == "model.truncated"]
    assert [(e["model"], e["log_level"]) for e in truncated] == [(model, "warning")]
    assert (cut.truncated, whole.truncated) == (True, False)


@pytest.mark.parametrize(
    ("model", "asked", "sent"),
    [
        ("gpt-4o", 400, 400),
        ("o3-mini", 400, 1600),
        ("o1", 400, 1600),
        ("o4-mini", 1000, 4000),
        ("gpt-5-mini", 10_000, 32_768),  # capped
        ("openai/o3", 400, 1600),  # a router's vendor/model name
        ("gpt-5", 40_000, 40_000),  # never lowered
    ],
)
async def test_reasoning_models_get_output_headroom(
    server: FakeModelServer, model: str, asked: int, sent: int
) -> None:
    async with ModelRouter(settings_for(server)) as router:
        await router._providers["openai"].generate(model, request().prompt, asked)
    (recorded,) = server.requests
    assert recorded.body["max_tokens"] == sent


async def test_retry_after_as_http_date(server: FakeModelServer) -> None:
    server.add_faults(Fault.rate_limited(retry_after="Wed, 21 Oct 2015 07:28:00 GMT"))
    async with ModelRouter(settings_for(server)) as router:
        turn = await router.complete(request("openai/gpt-4o"))
    assert turn.status == "ok"
    assert [r.status for r in server.requests] == [429, 200]


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-sonnet-4-5"])
async def test_5xx_then_success(server: FakeModelServer, model: str) -> None:
    server.add_faults(Fault.server_error(503, retry_after="0"), Fault.server_error(500))
    async with ModelRouter(settings_for(server)) as router:
        turn = await router.complete(request(model))
    assert turn.status == "ok"
    assert [r.status for r in server.requests] == [503, 500, 200]


@pytest.mark.parametrize(
    ("fault", "drop_class"),
    [(Fault.rate_limited(), "rate_limited"), (Fault.server_error(529), "provider_error")],
)
async def test_retries_exhausted_drop_the_turn(
    server: FakeModelServer, fault: Fault, drop_class: str
) -> None:
    server.add_faults(fault, fault, fault, fault)
    async with ModelRouter(settings_for(server, model_max_retries=2)) as router:
        turn = await router.complete(request("anthropic/claude-sonnet-4-5"))
    assert turn.status == "dropped"
    assert turn.drop_class == drop_class
    assert turn.text == ""
    assert len(server.requests) == 3  # one attempt and two retries, no more
    assert server.pending_faults == 1


async def test_timeout_is_retried_then_dropped_as_timeout(server: FakeModelServer) -> None:
    server.add_faults(Fault.hang(30), Fault.hang(30))
    settings = settings_for(server, model_timeout_s=0.3, model_max_retries=1)
    async with ModelRouter(settings) as router:
        turn = await router.complete(request("openai/gpt-4o"))
    assert turn.status == "dropped" and turn.drop_class == "timeout"
    assert [r.fault for r in server.requests] == ["hang", "hang"]


async def test_timeout_then_success(server: FakeModelServer) -> None:
    server.add_faults(Fault.hang(30))
    settings = settings_for(server, model_timeout_s=0.3, model_max_retries=1)
    async with ModelRouter(settings) as router:
        turn = await router.complete(request("anthropic/claude-sonnet-4-5"))
    assert turn.status == "ok"


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-sonnet-4-5"])
@pytest.mark.parametrize(
    "fault",
    [
        Fault.malformed(),
        Fault.empty(),
        Fault.json({}),
        Fault.json({"choices": [], "content": "nope"}),
        Fault.json([1, 2]),
    ],
)
async def test_unusable_bodies_are_not_retried(
    server: FakeModelServer, model: str, fault: Fault
) -> None:
    server.add_faults(fault)
    async with ModelRouter(settings_for(server)) as router:
        turn = await router.complete(request(model))
    assert turn.status == "dropped" and turn.drop_class == "unusable_output"
    assert len(server.requests) == 1


async def test_openai_choice_without_content_is_unusable(server: FakeModelServer) -> None:
    server.add_faults(
        Fault.json({"choices": [{"message": {"role": "assistant", "content": None}}]})
    )
    async with ModelRouter(settings_for(server)) as router:
        turn = await router.complete(request("openai/gpt-4o"))
    assert turn.drop_class == "unusable_output"


async def test_missing_usage_is_estimated(server: FakeModelServer) -> None:
    server.add_faults(Fault.json({"choices": [{"message": {"content": "x" * 400}}]}))
    async with ModelRouter(settings_for(server)) as router:
        turn = await router.complete(request("ollama/llama3.1"))
    assert turn.status == "ok"
    assert turn.usage.output_tokens == 100
    assert turn.usage.input_tokens == len(SYSTEM + PREFIX + "Opening: argue from scale.\n") // 4
    assert turn.usage.cost_usd == 0.0  # no price for a local model


async def test_unknown_model_is_unavailable_and_not_retried(server: FakeModelServer) -> None:
    server.models = frozenset({"gpt-4o"})
    async with ModelRouter(settings_for(server)) as router:
        turn = await router.complete(request("openai/gpt-9"))
    assert turn.status == "dropped" and turn.drop_class == "unavailable"
    assert [r.status for r in server.requests] == [404]


async def test_fallback_answers_when_the_first_model_fails(server: FakeModelServer) -> None:
    server.models = frozenset({"claude-sonnet-4-5", "gpt-4o"})
    server.add_faults(Fault.rate_limited(), Fault.rate_limited(), model="gpt-4o")
    settings = settings_for(server, model_max_retries=1)
    async with ModelRouter(settings) as router:
        missing = await router.complete(request("openai/gpt-9", "anthropic/claude-sonnet-4-5"))
        limited = await router.complete(request("openai/gpt-4o", "anthropic/claude-sonnet-4-5"))
    assert missing.status == "ok" and missing.model == "anthropic/claude-sonnet-4-5"
    assert limited.status == "ok" and limited.model == "anthropic/claude-sonnet-4-5"
    assert [(r.model, r.status) for r in server.requests] == [
        ("gpt-9", 404),
        ("claude-sonnet-4-5", 200),
        ("gpt-4o", 429),
        ("gpt-4o", 429),
        ("claude-sonnet-4-5", 200),
    ]


async def test_all_models_failing_reports_the_last_failure(server: FakeModelServer) -> None:
    server.add_faults(Fault.malformed(), Fault.rate_limited(), Fault.rate_limited())
    async with ModelRouter(settings_for(server, model_max_retries=1)) as router:
        turn = await router.complete(request("openai/gpt-4o", "anthropic/claude-sonnet-4-5"))
    assert turn.status == "dropped"
    assert turn.drop_class == "rate_limited"
    assert turn.model == "anthropic/claude-sonnet-4-5"


async def test_bad_key_is_unavailable_and_never_echoed(server: FakeModelServer) -> None:
    wrong = "sk-wrong-" + secrets.token_hex(16)
    async with ModelRouter(settings_for(server, openai_api_key=wrong)) as router:
        turn = await router.complete(request("openai/gpt-4o"))
        assert turn.drop_class == "unavailable"
        provider = router._providers["openai"]
        with pytest.raises(ModelError) as caught:
            await provider.generate("gpt-4o", request().prompt, 100)
    assert caught.value.drop_class == "unavailable"
    assert "HTTP 401" in str(caught.value)
    assert wrong not in str(caught.value)
    assert len(server.requests) == 2  # 401 is not retried


async def test_anthropic_wrong_key_is_unavailable(server: FakeModelServer) -> None:
    async with ModelRouter(settings_for(server, anthropic_api_key="nope")) as router:
        turn = await router.complete(request("anthropic/claude-sonnet-4-5"))
    assert turn.drop_class == "unavailable"
    assert [r.status for r in server.requests] == [401]


async def test_connection_refused_is_unavailable() -> None:
    with FakeModelServer() as gone:
        url = gone.openai_base_url
    settings = Settings(
        _env_file=None,
        openai_base_url=url,
        model_max_retries=1,
        model_max_retry_wait_s=0.01,
    )
    async with ModelRouter(settings) as router:
        turn = await router.complete(request("ollama/llama3.1"))
    assert turn.status == "dropped" and turn.drop_class == "unavailable"


async def test_keyless_local_server_gets_no_authorization_header(server: FakeModelServer) -> None:
    server.openai_api_key = None
    try:
        settings = settings_for(server, openai_api_key=None)
        async with ModelRouter(settings) as router:
            turn = await router.complete(request("ollama/llama3.1"))
    finally:
        server.openai_api_key = OPENAI_KEY
    assert turn.status == "ok"
    assert "authorization" not in server.requests[0].headers
    assert server.requests[0].body["model"] == "llama3.1"


async def test_concurrency_limit_bounds_in_flight_requests(server: FakeModelServer) -> None:
    server.latency_s = 0.1
    settings = settings_for(server, provider_max_concurrency=3)
    async with ModelRouter(settings) as router:
        turns = await asyncio.gather(*(router.complete(request("openai/gpt-4o")) for _ in range(8)))
    assert all(t.status == "ok" for t in turns)
    assert len(server.requests) == 8
    assert server.max_in_flight == 3


async def test_named_endpoint_has_its_own_limit(server: FakeModelServer) -> None:
    server.latency_s = 0.1
    endpoints = {
        "local": {"kind": "openai", "base_url": server.openai_base_url, "max_concurrency": 2},
    }
    settings = settings_for(server, endpoints=endpoints, openai_api_key=None)
    server.openai_api_key = None
    try:
        async with ModelRouter(settings) as router:
            turns = await asyncio.gather(
                *(router.complete(request("local/qwen2.5")) for _ in range(6))
            )
    finally:
        server.openai_api_key = OPENAI_KEY
    assert all(t.status == "ok" and t.model == "local/qwen2.5" for t in turns)
    assert server.max_in_flight == 2


async def test_anthropic_endpoint_kind_speaks_messages(server: FakeModelServer) -> None:
    endpoints = {
        "claude-proxy": {
            "kind": "anthropic",
            "base_url": server.url + "/v1",  # a trailing /v1 is tolerated
            "api_key": ANTHROPIC_KEY,
        }
    }
    async with ModelRouter(settings_for(server, endpoints=endpoints)) as router:
        turn = await router.complete(request("claude-proxy/claude-haiku-4-5"))
    assert turn.status == "ok"
    assert server.requests[0].path == "/v1/messages"


@pytest.mark.skipif(
    importlib.util.find_spec("bot.engine.rehearsal") is None,
    reason="bot.engine.rehearsal not written yet",
)
async def test_fake_server_and_scripted_provider_agree_on_rehearsal_text() -> None:
    # Both see system + prefix + suffix joined, so their default replies match.
    with FakeModelServer() as plain:
        settings = Settings(_env_file=None, openai_base_url=plain.openai_base_url)
        async with ModelRouter(settings) as router:
            over_http = await router.complete(request("ollama/llama3.1"))
            in_process = await router.complete(request("scripted/llama3.1"))
    assert over_http.status == in_process.status == "ok"
    assert over_http.text.startswith("(scripted rehearsal)")
    assert over_http.text == in_process.text
