"""Model references → providers, with fallbacks; the worker's one entry point to models.

A reference is ``provider/model``: ``openai/gpt-4.1-mini``,
``anthropic/claude-sonnet-4-5``, ``ollama/llama3.1`` (OpenAI-compatible, at
OPENAI_BASE_URL), ``scripted/<anything>``, or ``<named endpoint>/<model>`` for an
endpoint from the server settings (a named endpoint shadows a built-in name).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import replace
from types import TracebackType
from typing import Self, cast

import anyio
import httpx
from pydantic import SecretStr

from bot.core.errors import ConfigError, ModelError
from bot.core.fair import Share
from bot.core.logs import get_logger
from bot.core.settings import Endpoint, Settings
from bot.core.transport import AiohttpTransport, LeanAsyncClient
from bot.engine.agents import is_agent, parse_agent
from bot.engine.types import DropClass, ModelRequest, Turn, Usage
from bot.models.agents.gateway import Upstream
from bot.models.agents.host import AgentHost
from bot.models.anthropic import AnthropicProvider
from bot.models.base import Provider, Route, ToolProvider, drop_class_of, prompt_tokens
from bot.models.fair import CallInfo
from bot.models.gate import EndpointGate, SharedLimits
from bot.models.http import HttpProvider
from bot.models.openai import OpenAIProvider
from bot.models.oracle import AnswerBook
from bot.models.pricing import load_price_book
from bot.models.retry import RetryPolicy
from bot.models.scripted import ReplyScript, ScriptedProvider

log = get_logger(__name__)

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
# Served by whatever OpenAI-compatible server OPENAI_BASE_URL points at.
OPENAI_COMPATIBLE_ALIASES = ("ollama",)


class ModelRouter:
    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        scripted_responder: ReplyScript | None = None,
        shared_limits: SharedLimits | None = None,
        answer_book: AnswerBook | None = None,
    ) -> None:
        """``answer_book``: the eval's labelled cases, for ``scripted/oracle:<p>``
        (bot/models/oracle.py); without one the oracle answers nothing."""
        _check_settings(settings)
        policy = RetryPolicy.from_settings(settings)
        # Every call is priced here, by the deployment's book, whatever the provider.
        self.prices = replace(
            load_price_book(settings.prices_file, settings.unknown_price),
            agent_models={
                "claude-code": settings.agent_claude_code_model,
                "codex": settings.agent_codex_model,
                "gemini": settings.agent_gemini_model,
            },
        )
        # One client for every provider; timeouts are per request. The providers'
        # gates bound the calls in flight, not the connection pool (unbounded).
        # A provider's gate (bot/models/gate.py) is held per HTTP attempt, not across
        # backoff waits; `provider_concurrency` sets its ceiling by name.
        limits = _provider_limits(settings)
        self._client = LeanAsyncClient(
            transport=transport or AiohttpTransport(), timeout=policy.timeout_s
        )
        self._providers: dict[str, Provider] = {
            "scripted": ScriptedProvider(scripted_responder, answer_book=answer_book)
        }
        self._available = frozenset(
            {"scripted"}
            | self._builtin_providers(settings, policy, limits)
            | self._named_endpoints(settings, policy, limits)
        )
        self._configure_gates(settings, limits, policy, shared_limits)
        # Resolved now: a typo'd model limit would silently limit nothing.
        self._model_limits = {
            "/".join(self.resolve(ref)): n for ref, n in settings.model_concurrency.items()
        }
        # One limiter per limited model, made on first use (inside the event loop).
        self._model_limiters: dict[str, anyio.CapacityLimiter] = {}
        # Agent seats (`agent:<cli>`): checked when a spec names one, not at start.
        self.agents = AgentHost.from_settings(settings)
        self._agent_upstreams = {
            "anthropic": (settings.anthropic_base_url, _secret(settings.anthropic_api_key) or ""),
            "openai": (
                _without_v1(settings.openai_base_url), _secret(settings.openai_api_key) or ""
            ),
            "gemini": (settings.gemini_base_url, _secret(settings.gemini_api_key) or ""),
        }

    def _builtin_providers(
        self, settings: Settings, policy: RetryPolicy, limits: dict[str, int]
    ) -> set[str]:
        """OpenAI (and the OpenAI-compatible aliases) and Anthropic; the names of
        those this deployment can reach."""
        available: set[str] = set()
        openai_key = _secret(settings.openai_api_key)
        openai = OpenAIProvider(
            base_url=settings.openai_base_url,
            api_key=openai_key,
            client=self._client,
            policy=policy,
            max_concurrency=limits["openai"],
        )
        self._providers["openai"] = openai
        for alias in OPENAI_COMPATIBLE_ALIASES:
            self._providers[alias] = openai
        local_server = settings.openai_base_url.rstrip("/") != DEFAULT_OPENAI_BASE_URL.rstrip("/")
        if openai_key or local_server:  # Ollama and friends need no key
            available.add("openai")
        if local_server:
            available.update(OPENAI_COMPATIBLE_ALIASES)
        anthropic_key = _secret(settings.anthropic_api_key)
        self._providers["anthropic"] = AnthropicProvider(
            base_url=settings.anthropic_base_url,
            api_key=anthropic_key,
            client=self._client,
            policy=policy,
            max_concurrency=limits["anthropic"],
        )
        if anthropic_key:
            available.add("anthropic")
        return available

    def _named_endpoints(
        self, settings: Settings, policy: RetryPolicy, limits: dict[str, int]
    ) -> set[str]:
        for name, endpoint in settings.endpoints.items():
            endpoint = endpoint.model_copy(update={"max_concurrency": limits[name]})
            self._providers[name] = self._endpoint_provider(name, endpoint, policy)
        return set(settings.endpoints)

    def _configure_gates(
        self,
        settings: Settings,
        limits: dict[str, int],
        policy: RetryPolicy,
        shared: SharedLimits | None,
    ) -> None:
        """One gate per HTTP endpoint (the aliases share OpenAI's), with the
        settings' ceilings; shared across processes under ``<name> <base URL>``."""
        for name in settings.model_rate_limits:
            if name not in self._providers:
                known = ", ".join(sorted(self._providers))
                raise ConfigError(
                    f"model_rate_limits names unknown provider {name!r} (known: {known})"
                )
        urls = {"openai": settings.openai_base_url, "anthropic": settings.anthropic_base_url}
        urls.update({name: e.base_url for name, e in settings.endpoints.items()})
        for name, url in urls.items():
            provider = self._providers[name]
            if not isinstance(provider, HttpProvider):
                continue
            ceiling = settings.model_rate_limits.get(name)
            provider.gate = EndpointGate(
                name,
                key=f"{name} {url.rstrip('/')}",
                ceiling=limits[name],
                initial=settings.provider_initial_concurrency,
                requests_per_minute=ceiling.requests_per_minute if ceiling else None,
                tokens_per_minute=ceiling.tokens_per_minute if ceiling else None,
                max_hold_s=max(1.0, policy.max_wait_s),
                shared=shared,
            )

    def gate(self, provider: str) -> EndpointGate | None:
        """The gate of a provider name (None: not an HTTP endpoint)."""
        found = self._providers.get(provider)
        return found.gate if isinstance(found, HttpProvider) else None

    def _endpoint_provider(self, name: str, endpoint: Endpoint, policy: RetryPolicy) -> Provider:
        key = _secret(endpoint.api_key)
        if endpoint.kind == "anthropic":
            return AnthropicProvider(
                base_url=endpoint.base_url,
                api_key=key,
                client=self._client,
                policy=policy,
                max_concurrency=endpoint.max_concurrency,
                name=name,
            )
        return OpenAIProvider(
            base_url=endpoint.base_url,
            api_key=key,
            client=self._client,
            policy=policy,
            max_concurrency=endpoint.max_concurrency,
            name=name,
        )

    def available_providers(self) -> frozenset[str]:
        """Providers that have credentials or an endpoint (``scripted`` always)."""
        return self._available

    def provider(self, name: str) -> Provider:
        """The provider ``resolve`` named, for a direct probe (`debate-bot doctor`)."""
        return self._providers[name]

    @property
    def client(self) -> httpx.AsyncClient:
        """The one HTTP client of every model call (the agents' gateway forwards on it)."""
        return self._client

    def agent_upstreams(self) -> dict[str, Upstream]:
        """Where agent CLIs' calls go, per provider, with its key and its gate."""
        return {
            name: Upstream(name, base, key, self.gate(name))
            for name, (base, key) in self._agent_upstreams.items()
        }

    def seatable(self, refs: Iterable[str]) -> frozenset[str]:
        """The agent providers (``agent:<cli>``) among ``refs``, each proven able to
        run here; AgentUnavailable (a ConfigError: its message is public) names
        the first that cannot: an agent seat is refused, never moved."""
        agents = [r for r in refs if is_agent(r)]
        self.agents.check(agents)
        return frozenset(parse_agent(r).provider for r in agents)

    def resolve(self, model_ref: str) -> tuple[str, str]:
        """``provider/model`` → (provider, model name); ConfigError if it names no provider."""
        if is_agent(model_ref):
            agent = parse_agent(model_ref)
            return agent.provider, self.agents.model_of(agent)
        provider, sep, name = model_ref.strip().partition("/")
        if not sep or not provider or not name:
            raise ConfigError(
                f"model reference {model_ref!r} must look like provider/model "
                "(e.g. openai/gpt-4.1-mini)"
            )
        if provider not in self._providers:
            known = ", ".join(sorted(self._providers))
            raise ConfigError(
                f"unknown model provider {provider!r} in {model_ref!r} (known: {known})"
            )
        return provider, name

    def route(self, ref: str) -> Route | None:
        """``ref``'s provider, model, slot and pricing for the tool loop
        (bot/run/tool_loop.py), which makes its own calls (each with its
        ``CallInfo``, as ``complete`` does, so its steps wait their fair turn at
        the same gate); None when ``complete`` would skip ``ref`` too."""
        try:
            provider_name, model = self.resolve(ref)
        except ConfigError:
            return None
        if provider_name not in self._available:
            return None
        provider = cast(ToolProvider, self._providers[provider_name])
        full = f"{provider_name}/{model}"
        return Route(
            ref,
            model,
            provider,
            lambda: self._model_slot(full),
            charge=lambda usage: self.prices.charge(full, usage),
        )

    async def complete(self, request: ModelRequest, share: Share | None = None) -> Turn:
        """Try ``request.models`` in order; an ok Turn from the first that answers,
        else a dropped Turn with the last failure's class. Never raises for model failures.

        ``share`` says whose call it is (installation, run), for the fair turns
        waiting calls get at a busy endpoint (bot/models/fair.py)."""
        call_info = CallInfo.of(share, prompt_tokens(request.prompt), request.max_output_tokens)
        started = time.monotonic()
        last_class: DropClass = "unavailable"
        for ref in request.models:
            answered = await self._try(ref, request, call_info)
            if isinstance(answered, Turn):
                return answered
            last_class = answered
        return Turn(
            key=request.key,
            text="",
            model=request.models[-1] if request.models else "",
            usage=Usage(latency_ms=int((time.monotonic() - started) * 1000)),
            status="dropped",
            drop_class=last_class,
        )

    async def _try(self, ref: str, request: ModelRequest, call_info: CallInfo) -> Turn | DropClass:
        """One model of the request's list: its turn, or why it could not answer
        (a bad fallback must not sink the persona while another may work)."""
        try:
            provider_name, model = self.resolve(ref)
        except ConfigError as exc:
            log.warning("model reference unusable", slot=request.key.slot, error=str(exc))
            return "unavailable"
        if provider_name not in self._available:
            log.warning("model provider not configured", model=ref, slot=request.key.slot)
            return "unavailable"
        try:
            async with self._model_slot(f"{provider_name}/{model}"):
                completion = await self._providers[provider_name].generate(
                    model, request.prompt, request.max_output_tokens, call_info=call_info
                )
        except ModelError as exc:
            drop = drop_class_of(exc.drop_class)
            log.warning("model call failed", model=ref, slot=request.key.slot,
                        drop_class=drop, error=str(exc))  # fmt: skip
            return drop
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            # Providers map httpx errors themselves; this keeps the promise above
            # if one slips through, so the fallbacks still run.
            log.warning("model call failed", model=ref, slot=request.key.slot,
                        drop_class="provider_error", error=type(exc).__name__)  # fmt: skip
            return "provider_error"
        if completion.truncated:
            # Kept: a cut-off answer usually still carries its points. Logged so
            # a too-small output budget shows up.
            log.warning(
                "model.truncated",
                model=ref,
                slot=request.key.slot,
                max_output_tokens=request.max_output_tokens,
                output_tokens=completion.usage.output_tokens,
            )
        return Turn(
            key=request.key,
            text=completion.text,
            model=ref,
            usage=self.prices.charge(f"{provider_name}/{model}", completion.usage),
            truncated=completion.truncated,
        )

    def _model_slot(self, ref: str) -> contextlib.AbstractAsyncContextManager[object]:
        """The model's limiter, or nothing for a model without its own limit."""
        total = self._model_limits.get(ref)
        if total is None:
            return contextlib.nullcontext()
        limiter = self._model_limiters.get(ref)
        if limiter is None:
            limiter = self._model_limiters[ref] = anyio.CapacityLimiter(total)
        return limiter

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _provider_limits(settings: Settings) -> dict[str, int]:
    """The ceiling on calls in flight per provider (built-ins and named endpoints)."""
    limit = max(1, settings.provider_max_concurrency)
    limits = {"openai": limit, "anthropic": limit}
    limits.update({name: e.max_concurrency for name, e in settings.endpoints.items()})
    limits.update(settings.provider_concurrency)
    return limits


def _check_settings(settings: Settings) -> None:
    """Endpoint names and base URLs no request could use: refused at start."""
    for name in settings.endpoints:
        if not name or "/" in name:
            raise ConfigError(f"endpoint name {name!r} must be non-empty and contain no '/'")
    _check_base_url("OPENAI_BASE_URL", settings.openai_base_url)
    _check_base_url("ANTHROPIC_BASE_URL", settings.anthropic_base_url)
    for name, endpoint in settings.endpoints.items():
        _check_base_url(f"endpoint {name!r} base_url", endpoint.base_url)


def _check_base_url(setting: str, url: str) -> None:
    """Refuse a base URL no request could use, at startup rather than on every call."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigError(
            f"{setting} {url!r} is not a usable URL; it needs http:// or https:// and a host "
            "(e.g. http://localhost:11434/v1)"
        )


def _without_v1(url: str) -> str:
    """OpenAI's base URL names /v1; the CLIs put /v1 in their paths themselves."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() or None if value is not None else None


