"""The model gateway: the only model endpoint an agent CLI can reach
(docs/agents-operators.md, "The gateway").

One per agent turn, in the worker's process, on a unix socket that the turn's
sandbox reaches through its forwarder. It speaks what the CLI speaks
(``wire.py``) and forwards to the configured provider with the real key; the
CLI holds only the turn's token. Every call:

1. is checked: the turn's token, a model call it knows, the turn's call budget
   (counted here: a CLI's own ``--max-turns`` has been overrun) and the run's
   money cap (refused once reached);
2. is answered from the turn's stored calls when a re-run of the turn repeats
   it (same order, same request hash): a turn re-run after a crash pays only
   for what is new;
3. otherwise passes the endpoint's capacity gate in the run's fair share, goes
   upstream streamed, is relayed to the CLI as it arrives, priced from the
   upstream's own usage by the price book (the CLI's cost figures are never
   read), and stored before the CLI sees its end.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Protocol

import httpx
from aiohttp import web

from bot.core.fair import Share
from bot.core.logs import get_logger
from bot.engine.types import Usage
from bot.models.agents.wire import Call, classify, request_hash, usage_of
from bot.models.base import add_usage
from bot.models.fair import CallInfo
from bot.models.gate import EndpointGate

log = get_logger(__name__)

# Request headers a CLI sends that the provider needs; everything else (its key
# above all) stays behind.
FORWARDED: Final = frozenset(
    {
        "anthropic-version",
        "anthropic-beta",
        "content-type",
        "accept",
        "openai-beta",
        "x-goog-api-client",
    }
)
MAX_BODY: Final = 32 * 1024 * 1024
# Upstream answers that end the turn: later calls are refused here at once (the
# CLIs' own retries would otherwise go on for minutes).
STOPPING: Final = frozenset({401, 403, 429})


@dataclass(frozen=True)
class Upstream:
    """Where a protocol's calls go, and how its key is sent."""

    provider: str  # the price book's provider: anthropic, openai, gemini
    base_url: str  # e.g. https://api.anthropic.com (no /v1)
    key: str
    gate: EndpointGate | None = None

    def auth_headers(self) -> dict[str, str]:
        if self.provider == "anthropic":
            return {"x-api-key": self.key}
        if self.provider == "gemini":
            return {"x-goog-api-key": self.key}
        return {"authorization": f"Bearer {self.key}"}


@dataclass(frozen=True)
class GatewayCall:
    """One call as stored: replayed to a re-run that repeats it."""

    n: int
    request_hash: str
    model: str  # provider/model, as priced
    status: int
    content_type: str
    body: str
    usage: Usage


class CallLog(Protocol):
    async def load(self) -> list[GatewayCall]: ...

    async def save(self, call: GatewayCall) -> None: ...


Charge = Callable[[str, Usage], Usage]


@dataclass
class Purse:
    """A run's money as its agent turns see it: the cap (None: none) and what the
    run has spent, its agent calls counted the moment each is priced."""

    cap_usd: float | None
    spent_usd: float = 0.0

    @property
    def empty(self) -> bool:
        return self.cap_usd is not None and self.spent_usd >= self.cap_usd


@dataclass
class TurnAccount:
    """What one agent turn may do and has done at the gateway."""

    token: str
    max_calls: int
    purse: Purse = field(default_factory=lambda: Purse(None))
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    replayed: int = 0
    models: list[str] = field(default_factory=list)
    refused: str | None = None  # the drop class the gateway's refusal means
    upstream_status: int | None = None  # the last upstream failure (401, 429, 5xx)
    model_seconds: float = 0.0  # summed upstream time of the calls made
    first_call_at: float | None = None  # time.monotonic() of the CLI's first call

    def note_model(self, model: str) -> None:
        if model not in self.models:
            self.models.append(model)


class Gateway:
    """One turn's gateway on ``socket_path``; ``async with`` serves it."""

    def __init__(
        self,
        *,
        socket_path: Path,
        upstream: Upstream,
        account: TurnAccount,
        client: httpx.AsyncClient,
        charge: Charge,
        log_calls: CallLog | None,
        share: Share | None,
        default_model: str = "",
    ) -> None:
        self.socket_path = socket_path
        self.upstream = upstream
        self.account = account
        self.client = client
        self.charge = charge
        self.log_calls = log_calls
        self.share = share
        self.default_model = default_model
        self._stored: dict[str, list[GatewayCall]] = {}  # by request hash, in call order
        self._seen: dict[str, int] = {}  # how often each hash was asked this time
        self._next_n = 0
        self._runner: web.AppRunner | None = None
        self.last_activity = time.monotonic()  # liveness: calls and answers relayed

    async def __aenter__(self) -> Gateway:
        if self.log_calls is not None:
            stored = sorted(await self.log_calls.load(), key=lambda c: c.n)
            for call in stored:
                self._stored.setdefault(call.request_hash, []).append(call)
            self._next_n = stored[-1].n + 1 if stored else 0
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        try:
            site = web.UnixSite(self._runner, str(self.socket_path))
            await site.start()
            self.socket_path.chmod(0o666)  # the sandbox's user (65534) connects to it
        except BaseException:
            await self._runner.cleanup()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- one request -------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.last_activity = time.monotonic()
        if self.account.first_call_at is None:
            self.account.first_call_at = self.last_activity
        if request.method != "POST":
            return _error(404, "not_found", "the gateway serves model calls only")
        if not self._authorized(request):
            return _error(401, "authentication_error", "this turn's token is required")
        try:  # aiohttp has undone any content-encoding already
            body = json.loads(await request.read())
        except ValueError:
            return _error(400, "invalid_request_error", "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "invalid_request_error", "the body is not a JSON object")
        call = classify(request.path, body)
        if call is None:
            return _error(404, "not_found", f"no model endpoint at {request.path}")
        if call.kind == "count":
            return await self._forward(request, call, body, counted=False)
        return await self._generate(request, call, body)

    def _authorized(self, request: web.Request) -> bool:
        h = request.headers
        given = (
            h.get("x-api-key")
            or h.get("x-goog-api-key")
            or request.query.get("key")
            or h.get("authorization", "").removeprefix("Bearer ").strip()
        )
        return bool(given) and hmac.compare_digest(given, self.account.token)

    def _replayed(self, digest: str) -> GatewayCall | None:
        """The stored answer to this request's k-th asking this turn, if a run
        before asked it k times (order-free: a CLI's parallel calls may come
        in another order)."""
        k = self._seen.get(digest, 0)
        self._seen[digest] = k + 1
        stored = self._stored.get(digest, [])
        return stored[k] if k < len(stored) else None

    async def _generate(
        self, request: web.Request, call: Call, body: dict[str, Any]
    ) -> web.StreamResponse:
        account = self.account
        digest = request_hash(request.path, body)
        stored = self._replayed(digest)
        if stored is not None:
            account.replayed += 1
            account.calls += 1
            account.usage = add_usage(account.usage, stored.usage)
            account.note_model(stored.model)
            return web.Response(
                status=stored.status, body=stored.body.encode(), content_type=None,
                headers={"content-type": stored.content_type},
            )  # fmt: skip
        if account.upstream_status in STOPPING:  # the key or the quota failed: over
            return _error(account.upstream_status, "api_error", "the upstream refused this turn")
        if account.calls >= account.max_calls:
            account.refused = account.refused or "agent_protocol"
            return _error(429, "rate_limit_error", "this turn's calls are used up; answer now")
        if account.purse.empty:
            account.refused = "agent_budget"
            return _error(429, "rate_limit_error", "the run's budget is spent; answer now")
        priced = f"{self.upstream.provider}/{call.model or self.default_model}"
        unpriced = self.charge(priced, Usage()).price_basis == "unknown"
        if account.purse.cap_usd is not None and unpriced:
            # A model with no price would spend a capped run's money uncounted.
            account.refused = "agent_budget"
            return _error(403, "permission_error", f"{priced} has no price here; use another model")
        account.calls += 1
        n = self._next_n
        self._next_n += 1
        return await self._forward(request, call, body, counted=True, n=n, digest=digest)

    async def _forward(
        self,
        request: web.Request,
        call: Call,
        body: dict[str, Any],
        *,
        counted: bool,
        n: int = 0,
        digest: str = "",
    ) -> web.StreamResponse:
        model = call.model or self.default_model
        priced = f"{self.upstream.provider}/{model}"
        url = self.upstream.base_url.rstrip("/") + request.path
        if request.query_string:
            query = "&".join(p for p in request.query_string.split("&") if not p.startswith("key="))
            url += f"?{query}" if query else ""
        headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
        headers.update(self.upstream.auth_headers())
        headers["accept-encoding"] = "identity"  # relayed and read as it comes
        payload = json.dumps(body).encode()
        gate = self.upstream.gate
        started = time.monotonic()
        relay = _Relay(request)
        chunks: list[bytes] = []
        status = 502
        call_info = CallInfo.of(self.share, len(payload) // 4, 4096)
        ticket = await gate.enter(call_info) if gate is not None else None
        upstream_headers: httpx.Headers | None = None
        try:
            async with self.client.stream(
                "POST", url, content=payload, headers=headers, timeout=600
            ) as answer:
                status, upstream_headers = answer.status_code, answer.headers
                await relay.start(status, answer.headers.get("content-type"))
                # Relayed as it comes, but for the last chunk: the CLI sees the
                # answer's end only once it is stored (a crash between the two
                # would otherwise pay for it again). A CLI gone mid-answer (its
                # turn killed) stops the relay, not the reading: it is paid for.
                async for chunk in answer.aiter_raw():
                    self.last_activity = time.monotonic()
                    if chunks:
                        await relay.write(chunks[-1])
                    chunks.append(chunk)
        except httpx.HTTPError as exc:
            log.warning("agent.upstream_failed", error=type(exc).__name__, model=priced)
            status = 502 if not chunks else status
        finally:
            if ticket is not None and gate is not None:
                gate.leave(ticket, status, upstream_headers)
        elapsed = time.monotonic() - started
        data = b"".join(chunks)
        if counted:
            await self._account(call, priced, status, data, elapsed, relay, n, digest)
        return await relay.end(chunks[-1] if chunks else b"", status)

    async def _account(
        self, call: Call, priced: str, status: int, data: bytes, elapsed: float,
        relay: _Relay, n: int, digest: str,
    ) -> None:  # fmt: skip
        """Price what came back, whatever the CLI saw of it; store a whole answer."""
        account = self.account
        account.model_seconds += elapsed
        account.note_model(priced)
        if status >= 400:
            account.upstream_status = status
            return
        usage = replace(self.charge(priced, usage_of(call, data)), latency_ms=int(elapsed * 1000))
        account.usage = add_usage(account.usage, usage)
        account.purse.spent_usd += usage.cost_usd
        if self.log_calls is not None and status == 200:
            stored = GatewayCall(
                n, digest, priced, status, relay.content_type, data.decode(errors="replace"), usage
            )
            await self.log_calls.save(stored)


class _Relay:
    """The answer to the CLI: started once, written while the CLI listens."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.out: web.StreamResponse | None = None
        self.content_type = "application/json"
        self.gone = False

    async def start(self, status: int, content_type: str | None) -> None:
        self.content_type = content_type or "application/json"
        out = web.StreamResponse(status=status)
        out.content_type = self.content_type.split(";")[0]
        out.headers["content-type"] = self.content_type
        out.headers["cache-control"] = "no-cache"
        if status in STOPPING:
            out.headers["x-should-retry"] = "false"
        self.out = out
        try:
            await out.prepare(self.request)
        except (ConnectionError, RuntimeError):
            self.gone = True

    async def write(self, chunk: bytes) -> None:
        if self.gone or self.out is None:
            return
        try:
            await self.out.write(chunk)
        except (ConnectionError, RuntimeError):
            self.gone = True

    async def end(self, last: bytes, status: int) -> web.StreamResponse:
        if self.out is None:
            return _error(502, "api_error", "the upstream could not be reached")
        await self.write(last)
        if not self.gone:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.out.write_eof()
        return self.out


def _error(status: int, kind: str, message: str) -> web.Response:
    """An error body each CLI reads as its provider's (type + message); the
    Anthropic SDK's ``x-should-retry`` keeps a CLI from retrying a refusal."""
    error: dict[str, object] = {"type": kind, "message": message, "code": status}
    if status == 429:  # Gemini CLI stops on a daily quota, retries anything else
        error["status"] = "RESOURCE_EXHAUSTED"
        error["details"] = [{
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel"}],
        }]  # fmt: skip
    doc = {"type": "error", "error": error}
    return web.json_response(doc, status=status, headers={"x-should-retry": "false"})
