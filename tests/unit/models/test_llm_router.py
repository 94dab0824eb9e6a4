"""Model reference resolution, availability and the scripted provider (no network)."""

from __future__ import annotations

import importlib.util

import httpx
import pytest

from bot.core.errors import ConfigError, ModelError
from bot.core.settings import Settings
from bot.engine.prompts import TASK_HEADER
from bot.engine.types import ModelRequest, Prompt, TurnKey
from bot.models.oracle import AnswerBook, Labelled
from bot.models.router import ModelRouter
from bot.models.scripted import ScriptedProvider


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


PROMPT = Prompt(system="SYS|", prefix="PREFIX|", suffix="SUFFIX")


def req(*models: str) -> ModelRequest:
    return ModelRequest(
        key=TurnKey(phase="rebuttal", round=2, slot="Forge"),
        models=models,
        prompt=PROMPT,
        max_output_tokens=200,
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, {"scripted"}),
        ({"openai_api_key": "k1"}, {"scripted", "openai"}),
        # A local OpenAI-compatible server needs no key; ollama/ refs go there.
        ({"openai_base_url": "http://127.0.0.1:11434/v1"}, {"scripted", "openai", "ollama"}),
        ({"openai_base_url": "https://api.openai.com/v1/"}, {"scripted"}),
        ({"anthropic_api_key": "k2"}, {"scripted", "anthropic"}),
        (
            {"endpoints": {"lab": {"base_url": "http://127.0.0.1:9/v1"}}},
            {"scripted", "lab"},
        ),
    ],
)
async def test_available_providers(values: dict[str, object], expected: set[str]) -> None:
    async with ModelRouter(settings(**values)) as router:
        assert router.available_providers() == frozenset(expected)


async def test_resolve_known_references() -> None:
    endpoints = {"lab": {"kind": "anthropic", "base_url": "http://127.0.0.1:9"}}
    async with ModelRouter(settings(endpoints=endpoints)) as router:
        assert router.resolve("openai/gpt-4.1-mini") == ("openai", "gpt-4.1-mini")
        assert router.resolve("anthropic/claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
        assert router.resolve("ollama/llama3.1") == ("ollama", "llama3.1")
        assert router.resolve("lab/claude-haiku-4-5") == ("lab", "claude-haiku-4-5")
        assert router.resolve("scripted/anything") == ("scripted", "anything")
        # OpenRouter-style model names keep their own slash.
        assert router.resolve("openai/meta-llama/llama-3-70b") == (
            "openai",
            "meta-llama/llama-3-70b",
        )


@pytest.mark.parametrize("ref", ["gpt-4o", "openai/", "/gpt-4o", "", "mistral/large", "lab2/x"])
async def test_resolve_rejects_bad_references(ref: str) -> None:
    async with ModelRouter(settings()) as router:
        with pytest.raises(ConfigError) as caught:
            router.resolve(ref)
    assert "provider" in str(caught.value)


async def test_endpoint_names_with_a_slash_are_refused() -> None:
    with pytest.raises(ConfigError):
        ModelRouter(settings(endpoints={"a/b": {"base_url": "http://127.0.0.1:9"}}))


async def test_unconfigured_provider_is_dropped_without_a_call() -> None:
    # No key and the default base URL: nothing is sent anywhere.
    async with ModelRouter(settings()) as router:
        turn = await router.complete(req("anthropic/claude-sonnet-4-5", "openai/gpt-4o"))
    assert turn.status == "dropped"
    assert turn.drop_class == "unavailable"
    assert turn.text == ""
    assert turn.key == TurnKey(phase="rebuttal", round=2, slot="Forge")


async def test_bad_reference_falls_through_to_the_next_model() -> None:
    seen: list[str] = []

    def responder(prompt: str) -> str:
        seen.append(prompt)
        return "(scripted rehearsal) fine"

    async with ModelRouter(settings(), scripted_responder=responder) as router:
        turn = await router.complete(req("nosuch/model", "scripted/judge"))
    assert turn.status == "ok"
    assert turn.model == "scripted/judge"
    assert turn.text == "(scripted rehearsal) fine"
    assert seen == ["SYS|PREFIX|SUFFIX"]


async def test_scripted_failures_carry_their_class_and_fallbacks_run() -> None:
    async with ModelRouter(settings(), scripted_responder=lambda p: "ok") as router:
        dropped = await router.complete(req("scripted/fail-timeout", "scripted/fail-rate_limited"))
        rescued = await router.complete(req("scripted/fail-provider_error", "scripted/b"))
    assert dropped.status == "dropped" and dropped.drop_class == "rate_limited"
    assert dropped.model == "scripted/fail-rate_limited"
    assert rescued.status == "ok" and rescued.model == "scripted/b"


async def test_scripted_provider_usage_is_approximate_tokens() -> None:
    text = "(scripted rehearsal)" + " word" * 40
    provider = ScriptedProvider(responder=lambda prompt: "\n" + text + "\n")
    completion = await provider.generate("x", PROMPT, 100)
    assert completion.text == text  # stripped, as the HTTP providers strip
    assert completion.usage.input_tokens == len("SYS|PREFIX|SUFFIX") // 4
    assert completion.usage.output_tokens == len(text) // 4
    assert completion.usage.cost_usd == 0.0


async def test_scripted_empty_reply_is_unusable() -> None:
    provider = ScriptedProvider(responder=lambda prompt: "  \n")
    with pytest.raises(ModelError) as caught:
        await provider.generate("x", PROMPT, 100)
    assert caught.value.drop_class == "unusable_output"


async def test_scripted_unknown_fail_class_is_an_ordinary_model_name() -> None:
    provider = ScriptedProvider(responder=lambda prompt: "fine")
    completion = await provider.generate("fail-because", PROMPT, 100)
    assert completion.text == "fine"


@pytest.mark.skipif(
    importlib.util.find_spec("bot.engine.rehearsal") is None,
    reason="bot.engine.rehearsal not written yet",
)
async def test_scripted_defaults_to_the_rehearsal_replies() -> None:
    completion = await ScriptedProvider().generate("judge", PROMPT, 100)
    assert completion.text.startswith("(scripted rehearsal)")
    again = await ScriptedProvider().generate("judge", PROMPT, 100)
    assert again.text == completion.text  # deterministic


async def test_the_oracle_answers_from_the_book_its_router_was_built_with() -> None:
    book = AnswerBook()
    book.add(PROMPT.prefix, Labelled("c-1", "question", "42"))
    answer = Prompt(PROMPT.system, PROMPT.prefix, f"\n{TASK_HEADER}\nTASK: answer\n")
    request = ModelRequest(
        key=TurnKey(phase="synthesis", round=0, slot="S"),
        models=("scripted/oracle:1",),
        prompt=answer,
        max_output_tokens=200,
    )
    async with ModelRouter(settings(), answer_book=book) as router:
        turn = await router.complete(request)
    async with ModelRouter(settings()) as router:
        bookless = await router.complete(request)
    assert turn.status == "ok" and "ANSWER: 42" in turn.text
    assert bookless.status == "dropped" and bookless.drop_class == "unusable_output"


async def test_an_httpx_error_from_a_provider_never_escapes() -> None:
    def responder(prompt: str) -> str:
        raise httpx.DecodingError("bad gzip")

    async with ModelRouter(settings(), scripted_responder=responder) as router:
        turn = await router.complete(req("scripted/a", "scripted/fail-timeout"))
        alone = await router.complete(req("scripted/a"))
    assert turn.status == "dropped" and turn.drop_class == "timeout"  # the fallback ran
    assert alone.status == "dropped" and alone.drop_class == "provider_error"


@pytest.mark.parametrize(
    "values",
    [
        {"openai_base_url": "localhost:11434/v1"},
        {"openai_base_url": "http://[::1"},
        {"anthropic_base_url": "api.anthropic.com"},
        {"endpoints": {"lab": {"base_url": "ftp://127.0.0.1:9/v1"}}},
    ],
)
async def test_unusable_base_urls_are_a_config_error(values: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        ModelRouter(settings(**values))
    assert "http://" in str(caught.value)
