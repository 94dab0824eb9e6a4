"""A loopback model server speaking the OpenAI and Anthropic wire formats.

``FakeModelServer`` runs a Starlette app under uvicorn in a background thread on
127.0.0.1 (a free port) and serves:

- ``POST /v1/chat/completions`` — OpenAI chat completions (``Authorization: Bearer``)
- ``POST /v1/messages`` — Anthropic messages (``x-api-key``, ``anthropic-version``)
- ``GET /v1/models`` — the configured model list (OpenAI format)

It checks auth and required fields as the real APIs do, answers with
``responder(prompt_text)`` after ``latency_s`` (an ``asyncio.sleep``, so
concurrent requests overlap), and reports usage as providers do. Tokens are
words and punctuation (``TOKEN_RE``); prompt text is every text part in order,
joined without separators (system, then the messages).

Prefix caching, as providers do it: a request's cached input tokens are the
longest token prefix it shares with an earlier request that *completed* before it
arrived (simultaneous requests miss, as on real APIs). OpenAI-style: any prefix.
Anthropic-style: only up to the last ``cache_control`` breakpoint, reported as
``cache_read_input_tokens`` on a hit and ``cache_creation_input_tokens`` on a miss.

Faults (``Fault``) are queued with ``add_faults`` and consumed one per request
that passed auth and validation: a status with optional ``Retry-After``, a hang
(a slow answer that gives up as soon as the client disconnects), a malformed JSON
body, empty content, or raw bytes and headers (e.g. a bad gzip body).
``max_in_flight`` counts concurrent requests server-side.

A provider's rate limit (``rate_limit=RateLimit(...)``): requests and tokens a
minute, 429 with ``retry-after`` beyond them, and the limits in every answer's
headers (OpenAI ``x-ratelimit-*``, Anthropic ``anthropic-ratelimit-*``), each
API limited on its own; ``limiters[api]`` counts what it admitted and refused,
and ``set_limit`` changes the limit of a running server (a tier change).

    with FakeModelServer(latency_s=0.05, openai_api_key="k") as server:
        ...  # OPENAI_BASE_URL=server.openai_base_url, ANTHROPIC_BASE_URL=server.url
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Literal, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from testkit.fakes import serving

Api = Literal["openai", "anthropic"]
ReplyScript = Callable[[str], str]

TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """The server's deterministic tokenizer: words and single punctuation marks."""
    return TOKEN_RE.findall(text)


def _truncate(text: str, max_tokens: int) -> tuple[str, bool]:
    spans = [m.end() for m in TOKEN_RE.finditer(text)]
    if len(spans) <= max_tokens:
        return text, False
    return text[: spans[max_tokens - 1]] if max_tokens > 0 else "", True


def default_reply_script() -> ReplyScript:
    """``bot.engine.rehearsal.reply`` if it exists, else an echo of the prompt's tail."""
    try:
        module = importlib.import_module("bot.engine.rehearsal")
        reply: ReplyScript = module.reply
        return reply
    except (ImportError, AttributeError):
        return lambda prompt: "(echo) " + prompt[-200:]


@dataclass(frozen=True)
class Fault:
    kind: Literal["status", "hang", "malformed", "empty", "json", "raw"]
    status: int = 500
    retry_after: str | None = None
    seconds: float = 0.0
    payload: Any = None  # the body of a "json" fault
    content: bytes = b""  # the body of a "raw" fault, sent as is
    headers: tuple[tuple[str, str], ...] = ()  # the headers of a "raw" fault

    @classmethod
    def rate_limited(cls, retry_after: str | None = "0") -> Fault:
        return cls("status", status=429, retry_after=retry_after)

    @classmethod
    def server_error(cls, status: int = 500, retry_after: str | None = None) -> Fault:
        return cls("status", status=status, retry_after=retry_after)

    @classmethod
    def hang(cls, seconds: float = 30.0) -> Fault:
        """Answer only after ``seconds`` (past the client's timeout, in practice)."""
        return cls("hang", seconds=seconds)

    @classmethod
    def malformed(cls) -> Fault:
        return cls("malformed", status=200)

    @classmethod
    def empty(cls) -> Fault:
        """A well-formed answer whose text is empty."""
        return cls("empty", status=200)

    @classmethod
    def json(cls, payload: Any, status: int = 200) -> Fault:
        """Answer exactly ``payload`` (e.g. ``{}``: valid JSON, no choices)."""
        return cls("json", status=status, payload=payload)

    @classmethod
    def raw(
        cls, content: bytes, headers: Iterable[tuple[str, str]] = (), status: int = 200
    ) -> Fault:
        """Answer exactly these bytes and headers (e.g. a body a proxy mangled)."""
        return cls("raw", status=status, content=content, headers=tuple(headers))

    @classmethod
    def bad_gzip(cls) -> Fault:
        """A JSON answer labelled ``Content-Encoding: gzip`` whose body is not gzip."""
        return cls.raw(
            b"this is not gzip",
            [("content-type", "application/json"), ("content-encoding", "gzip")],
        )


@dataclass
class RecordedRequest:
    api: Api
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or None if the body was not JSON
    model: str | None = None
    prompt_text: str = ""
    status: int = 0
    fault: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    received: float = field(default_factory=time.monotonic)  # arrival, for ordering checks


class PrefixCache:
    """Which token prefixes have been seen, as hashes of every prefix (O(n) per request)."""

    def __init__(self) -> None:
        self._seen: set[int] = set()

    @staticmethod
    def _hashes(scope: object, tokens: list[str]) -> list[int]:
        h = hash(("prefix-cache", scope))
        out = []
        for token in tokens:
            h = hash((h, token))
            out.append(h)
        return out

    def shared_prefix(self, scope: object, tokens: list[str]) -> int:
        n = 0
        for h in self._hashes(scope, tokens):
            if h not in self._seen:
                break
            n += 1
        return n

    def add(self, scope: object, tokens: list[str]) -> None:
        self._seen.update(self._hashes(scope, tokens))

    def clear(self) -> None:
        self._seen.clear()


class _BadRequest(Exception):
    def __init__(self, status: int, kind: str, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.code = status, kind, message, code


@dataclass
class _Parsed:
    model: str
    parts: list[tuple[str, bool]]  # (text, has cache_control) in prompt order
    max_tokens: int | None

    @property
    def prompt_text(self) -> str:
        return "".join(text for text, _ in self.parts)


class FakeModelServer:
    def __init__(
        self,
        *,
        responder: ReplyScript | None = None,
        latency_s: float = 0.0,
        openai_api_key: str | None = None,
        anthropic_api_key: str | None = None,
        models: Iterable[str] | None = None,
        cache_per_model: bool = False,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self.responder = responder
        # One limit per API, as each vendor limits its own accounts.
        self.limiters: dict[Api, RateLimiter] = (
            {api: RateLimiter(rate_limit) for api in ("openai", "anthropic")}
            if rate_limit is not None
            else {}
        )
        self.latency_s = latency_s
        self.openai_api_key = openai_api_key  # None: no auth (as Ollama)
        self.anthropic_api_key = anthropic_api_key
        self.models = frozenset(models) if models is not None else None  # None: any model
        self.cache_per_model = cache_per_model
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._faults: deque[Fault] = deque()
        self._model_faults: dict[str, deque[Fault]] = {}
        self._cache = PrefixCache()
        self._in_flight = 0
        self._max_in_flight = 0
        self._counter = 0
        self._stopping = threading.Event()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port = 0
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/models", self._list_models, methods=["GET"]),
            ]
        )

    # -- lifecycle ---------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError("FakeModelServer already started")
        self._stopping.clear()
        running = serving.serve_in_thread(self.app, "fake-model-server")
        self._server, self._thread, self._socket = running.server, running.thread, running.sock
        self.port = running.port
        return self

    def stop(self) -> None:
        if self._thread is None or self._server is None:
            return
        self._stopping.set()  # releases hung and sleeping requests
        self._server.should_exit = True
        self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._thread = self._server = self._socket = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- test controls -----------------------------------------------------

    def add_faults(self, *faults: Fault, model: str | None = None) -> None:
        """Queue faults, consumed one per request (for ``model`` only, if given)."""
        with self._lock:
            if model is None:
                self._faults.extend(faults)
            else:
                self._model_faults.setdefault(model, deque()).extend(faults)

    def reset(self) -> None:
        """Forget requests, cached prefixes, queued faults and the in-flight maximum."""
        with self._lock:
            self._requests.clear()
            self._faults.clear()
            self._model_faults.clear()
            self._cache.clear()
            self._max_in_flight = self._in_flight

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    @property
    def pending_faults(self) -> int:
        with self._lock:
            return len(self._faults) + sum(len(q) for q in self._model_faults.values())

    # -- handlers ----------------------------------------------------------

    async def _list_models(self, request: Request) -> Response:
        data = [{"id": m, "object": "model", "owned_by": "fake"} for m in sorted(self.models or ())]
        return JSONResponse({"object": "list", "data": data})

    async def _openai(self, request: Request) -> Response:
        return await self._serve(request, "openai")

    async def _anthropic(self, request: Request) -> Response:
        return await self._serve(request, "anthropic")

    async def _serve(self, request: Request, api: Api) -> Response:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        record = RecordedRequest(
            api=api, path=request.url.path, headers=dict(request.headers), body=None
        )
        with self._lock:
            self._requests.append(record)
        try:
            response = await self._answer(request, api, record)
            record.status = response.status_code
            return response
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _answer(self, request: Request, api: Api, record: RecordedRequest) -> Response:
        if (refused := await self._read_json(request, api, record)) is not None:
            return refused
        try:
            self._check_auth(api, request)
            parsed = (
                _parse_openai(record.body) if api == "openai" else _parse_anthropic(record.body)
            )
            record.model = parsed.model
            record.prompt_text = parsed.prompt_text
            if self.models is not None and parsed.model not in self.models:
                raise _model_not_found(api, parsed.model)
        except _BadRequest as exc:
            return _error(api, exc.status, exc.kind, exc.message, exc.code)

        tokens = [t for text, _ in parsed.parts for t in tokenize(text)]
        scope, fault, shared, serial = self._arrive(api, parsed.model, tokens, record)
        limit_headers: dict[str, str] = {}
        limiter = self.limiters.get(api)
        if limiter is not None:
            limit_headers, refusal = limiter.admit(api, len(tokens))
            if refusal is not None:
                record.fault = "rate_limit"
                response = _status_fault(api, 429, {**limit_headers, **refusal})
                return response

        delay = self.latency_s + (fault.seconds if fault and fault.kind == "hang" else 0.0)
        if not await self._pause(request, delay):
            return Response(status_code=499)  # the client left; nobody reads this
        if fault is not None and fault.kind == "status":
            headers = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
            return _status_fault(api, fault.status, headers)
        if fault is not None and fault.kind == "malformed":
            return Response(b'{"id": "x", "choices": [{"mess', media_type="application/json")
        if fault is not None and fault.kind == "json":
            return JSONResponse(fault.payload, status_code=fault.status)
        if fault is not None and fault.kind == "raw":
            return Response(fault.content, status_code=fault.status, headers=dict(fault.headers))

        text = "" if fault is not None and fault.kind == "empty" else self._respond(parsed)
        text, cut = _truncate(text, parsed.max_tokens or 1_000_000)
        output_tokens = len(tokenize(text))
        if limiter is not None:
            limiter.charge_output(output_tokens)
        if api == "openai":
            record.usage = self._openai_usage(scope, tokens, shared, output_tokens)
            return JSONResponse(
                headers=limit_headers,
                content={
                    "id": f"chatcmpl-fake{serial}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": parsed.model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "length" if cut else "stop",
                        }
                    ],
                    "usage": record.usage,
                },
            )
        boundary = _breakpoint(parsed.parts)
        marks = [boundary] if boundary else []
        record.usage = self._anthropic_usage(scope, tokens, marks, shared, output_tokens)
        return JSONResponse(
            headers=limit_headers,
            content={
                "id": f"msg_fake{serial}",
                "type": "message",
                "role": "assistant",
                "model": parsed.model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens" if cut else "end_turn",
                "stop_sequence": None,
                "usage": record.usage,
            },
        )

    # -- what every answer of this server (and its subclasses) shares ---------------

    async def _read_json(
        self, request: Request, api: Api, record: RecordedRequest
    ) -> Response | None:
        """The body into ``record``; a 400 to send back when it is not JSON."""
        try:
            record.body = json.loads(await request.body())
        except ValueError:
            return _error(api, 400, "invalid_request_error", "the body is not valid JSON")
        return None

    def _arrive(
        self, api: Api, model: str, tokens: list[str], record: RecordedRequest
    ) -> tuple[object, Fault | None, int, int]:
        """A parsed request's turn: its cache scope, the fault it meets, the tokens
        of its prompt already cached, its serial number."""
        scope = (api, model if self.cache_per_model else None)
        with self._lock:
            fault = self._next_fault(model)
            shared = self._cache.shared_prefix(scope, tokens)
            self._counter += 1
            serial = self._counter
        record.fault = fault.kind if fault else None
        return scope, fault, shared, serial

    def _openai_usage(
        self, scope: object, tokens: list[str], shared: int, output_tokens: int
    ) -> dict[str, Any]:
        """OpenAI's usage block: the whole prompt is offered to the automatic cache."""
        self._commit(scope, tokens)
        return {
            "prompt_tokens": len(tokens),
            "completion_tokens": output_tokens,
            "total_tokens": len(tokens) + output_tokens,
            "prompt_tokens_details": {"cached_tokens": shared},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }

    def _anthropic_usage(
        self, scope: object, tokens: list[str], marks: list[int], shared: int, output_tokens: int
    ) -> dict[str, Any]:
        """Anthropic's: the longest cached prefix ending at one of the request's
        breakpoints (``marks``, in tokens) is read, the rest up to the last written."""
        boundary = marks[-1] if marks else 0
        read = max((b for b in marks if b <= shared), default=0)
        written = boundary - read
        self._commit(scope, tokens[:boundary])
        return {
            "input_tokens": len(tokens) - read - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": output_tokens,
        }

    def _check_auth(self, api: Api, request: Request) -> None:
        if api == "openai":
            if self.openai_api_key is None:
                return
            given = request.headers.get("authorization", "")
            if given != f"Bearer {self.openai_api_key}":
                # Deliberately echoes the key unmasked, so clients' redaction is tested.
                shown = given.removeprefix("Bearer ") or "(none)"
                raise _BadRequest(
                    401,
                    "invalid_request_error",
                    f"Incorrect API key provided: {shown}.",
                    "invalid_api_key",
                )
            return
        if not request.headers.get("anthropic-version"):
            raise _BadRequest(400, "invalid_request_error", "anthropic-version: header is required")
        if self.anthropic_api_key is not None and (
            request.headers.get("x-api-key") != self.anthropic_api_key
        ):
            raise _BadRequest(401, "authentication_error", "invalid x-api-key")

    def _next_fault(self, model: str) -> Fault | None:
        queue = self._model_faults.get(model)
        if queue:
            return queue.popleft()
        return self._faults.popleft() if self._faults else None

    def _respond(self, parsed: _Parsed) -> str:
        if self.responder is None:
            self.responder = default_reply_script()
        return self.responder(parsed.prompt_text)

    def _commit(self, scope: object, tokens: list[str]) -> None:
        with self._lock:
            self._cache.add(scope, tokens)

    async def _pause(self, request: Request, seconds: float) -> bool:
        """Sleep ``seconds``; False as soon as the client disconnects or the server stops.

        The disconnect is awaited, not polled: hundreds of requests pausing at once
        (the load benchmarks) must not keep the server's one core busy asking."""

        async def disconnected() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        watch = asyncio.ensure_future(disconnected())
        deadline = time.monotonic() + seconds
        try:
            while not self._stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return True
                # The stop flag is a thread's: looked at a few times a second.
                await asyncio.wait({watch}, timeout=min(remaining, 0.25))
                if watch.done():
                    return False
            return False
        finally:
            watch.cancel()


# -- provider rate limits ----------------------------------------------------


@dataclass(frozen=True)
class RateLimit:
    """Requests and tokens a minute, as providers limit accounts. Each is a token
    bucket refilled continuously at the per-minute rate; ``burst_s`` is how many
    seconds of it the bucket holds (60: a whole minute, as OpenAI describes its
    limits; less: a limit enforced over shorter periods, as providers may)."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_s: float = 60.0


class _Bucket:
    def __init__(self, per_minute: float, burst_s: float) -> None:
        self.limit = per_minute
        self.rate = per_minute / 60.0
        self.capacity = self.rate * burst_s
        self.level = self.capacity
        self.at = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait_for(self, amount: float) -> float:
        need = min(amount, self.capacity) - self.level
        return max(0.0, need / self.rate)

    def reset_s(self) -> float:
        """Seconds until full again."""
        return max(0.0, (self.capacity - self.level) / self.rate)


def _openai_duration(seconds: float) -> str:
    """OpenAI's spelling of a reset time: ``20ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.3g}s" if minutes else f"{rest:.3g}s"


class RateLimiter:
    """The provider's limiter: admits a request if its input tokens fit (output is
    counted when it is produced, and may take the bucket below zero), answers 429
    with ``retry-after`` otherwise, and states the limits in every answer's
    headers in each API's spelling. Counts what it refused."""

    def __init__(self, limit: RateLimit) -> None:
        self._lock = threading.Lock()
        self.config = limit
        self.requests: _Bucket | None = None
        self.tokens: _Bucket | None = None
        self.set_limit(limit)
        self.admitted = 0
        self.refused = 0
        self.tokens_charged = 0

    def admit(self, api: Api, input_tokens: int) -> tuple[dict[str, str], dict[str, str] | None]:
        """(rate-limit headers, the refusal's retry headers or None if admitted)."""
        with self._lock:
            now = time.monotonic()
            wait = 0.0
            for bucket, amount in ((self.requests, 1), (self.tokens, input_tokens)):
                if bucket is not None:
                    bucket.refill(now)
                    wait = max(wait, bucket.wait_for(amount))
            if wait > 0:
                self.refused += 1
                retry = {"retry-after": str(max(1, math.ceil(wait)))}
                if api == "openai":
                    retry["retry-after-ms"] = str(math.ceil(wait * 1000))
                return self._headers(api), retry
            if self.requests is not None:
                self.requests.level -= 1
            if self.tokens is not None:
                self.tokens.level -= input_tokens
            self.admitted += 1
            self.tokens_charged += input_tokens
            return self._headers(api), None

    def set_limit(self, limit: RateLimit) -> None:
        """New limits from now on (full buckets); the counts are kept."""
        with self._lock:
            self.config = limit
            self.requests = (
                _Bucket(limit.requests_per_minute, limit.burst_s)
                if limit.requests_per_minute
                else None
            )
            self.tokens = (
                _Bucket(limit.tokens_per_minute, limit.burst_s) if limit.tokens_per_minute else None
            )

    def charge_output(self, output_tokens: int) -> None:
        with self._lock:
            self.tokens_charged += output_tokens
            if self.tokens is not None:
                self.tokens.refill(time.monotonic())
                self.tokens.level -= output_tokens

    def _headers(self, api: Api) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is None:
                continue
            remaining = str(max(0, math.floor(bucket.level)))
            if api == "openai":
                headers[f"x-ratelimit-limit-{name}"] = str(round(bucket.limit))
                headers[f"x-ratelimit-remaining-{name}"] = remaining
                headers[f"x-ratelimit-reset-{name}"] = _openai_duration(bucket.reset_s())
            else:
                reset = datetime.now(UTC) + timedelta(seconds=bucket.reset_s())
                prefix = f"anthropic-ratelimit-{name}-"
                headers[prefix + "limit"] = str(round(bucket.limit))
                headers[prefix + "remaining"] = remaining
                headers[prefix + "reset"] = reset.isoformat(timespec="seconds").replace(
                    "+00:00", "Z"
                )
        return headers


# -- wire formats ------------------------------------------------------------


def _error(api: Api, status: int, kind: str, message: str, code: str | None = None) -> JSONResponse:
    if api == "openai":
        body: dict[str, Any] = {
            "error": {"message": message, "type": kind, "param": None, "code": code}
        }
    else:
        body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status)


def _status_fault(api: Api, status: int, headers: dict[str, str]) -> JSONResponse:
    if status == 429:
        kind, message = (
            ("requests", "Rate limit reached.")
            if api == "openai"
            else ("rate_limit_error", "Rate limited.")
        )
    elif status == 529:
        kind, message = "overloaded_error", "Overloaded"
    elif status >= 500:
        kind, message = ("server_error" if api == "openai" else "api_error"), "Internal error."
    else:
        kind, message = "invalid_request_error", f"Injected status {status}."
    response = _error(api, status, kind, message)
    response.headers.update(headers)
    return response


def _model_not_found(api: Api, model: str) -> _BadRequest:
    if api == "openai":
        return _BadRequest(
            404,
            "invalid_request_error",
            f"The model `{model}` does not exist or you do not have access to it.",
            "model_not_found",
        )
    return _BadRequest(404, "not_found_error", f"model: {model}")


def _bad(message: str) -> _BadRequest:
    return _BadRequest(400, "invalid_request_error", message)


def _positive_int(body: dict[str, Any], key: str, *, required: bool) -> int | None:
    value = body.get(key)
    if value is None:
        if required:
            raise _bad(f"{key}: Field required")
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _bad(f"{key}: must be a positive integer")
    return value


def _text_parts(content: Any, where: str, *, allow_cache_control: bool) -> list[tuple[str, bool]]:
    if isinstance(content, str):
        return [(content, False)]
    if not isinstance(content, list):
        raise _bad(f"{where}: content must be a string or a list of blocks")
    parts = []
    for i, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise _bad(f"{where}.{i}: only text blocks are supported by this fake")
        text = block.get("text")
        if not isinstance(text, str):
            raise _bad(f"{where}.{i}.text: Field required")
        if allow_cache_control and not text:
            raise _bad(f"{where}.{i}: text content blocks must be non-empty")
        cache = block.get("cache_control")
        if cache is not None and (
            not allow_cache_control
            or not isinstance(cache, dict)
            or cache.get("type") != "ephemeral"
        ):
            raise _bad(f"{where}.{i}.cache_control: invalid")
        parts.append((text, cache is not None))
    return parts


def _parse_openai(body: Any) -> _Parsed:
    if not isinstance(body, dict):
        raise _bad("the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty array")
    parts: list[tuple[str, bool]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
        ):
            raise _bad(f"messages[{i}]: a role of system, developer, user or assistant is required")
        parts += _text_parts(message.get("content"), f"messages[{i}]", allow_cache_control=False)
    max_tokens = _positive_int(body, "max_completion_tokens", required=False)
    if max_tokens is None:
        max_tokens = _positive_int(body, "max_tokens", required=False)
    return _Parsed(model=model, parts=parts, max_tokens=max_tokens)


def _parse_anthropic(body: Any) -> _Parsed:
    if not isinstance(body, dict):
        raise _bad("the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model: Field required")
    max_tokens = _positive_int(body, "max_tokens", required=True)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: Field required")
    parts: list[tuple[str, bool]] = []
    system = body.get("system")
    if system is not None:
        parts += _text_parts(system, "system", allow_cache_control=True)
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise _bad(f"messages.{i}.role: must be user or assistant")
        content = message.get("content")
        if content == "" or content == []:
            raise _bad(f"messages.{i}: all messages must have non-empty content")
        parts += _text_parts(content, f"messages.{i}.content", allow_cache_control=True)
    if sum(1 for _, cached in parts if cached) > 4:
        raise _bad("A maximum of 4 blocks with cache_control may be provided.")
    return _Parsed(model=model, parts=parts, max_tokens=max_tokens)


def _breakpoint(parts: list[tuple[str, bool]]) -> int:
    """Tokens up to the end of the last block marked ``cache_control`` (0: none)."""
    boundary = count = 0
    for text, cached in parts:
        count += len(tokenize(text))
        if cached:
            boundary = count
    return boundary
