"""A loopback model provider for the coding-agent CLIs: scripted to read a file, then answer.

``FakeAgentUpstream`` runs a Starlette app under uvicorn in a background thread on
127.0.0.1 (a free port) and speaks the streaming wire formats the real CLIs call:

- ``POST /v1/messages`` (any query, e.g. ``?beta=true``) — Anthropic Messages, SSE when
  ``"stream": true`` (Claude Code); ``POST /v1/messages/count_tokens``.
- ``POST /v1/responses`` — OpenAI Responses, SSE (Codex with a ``model_providers`` entry).
  A ``content-encoding: zstd`` body is decoded with ``zstandard`` when that module is
  importable, else refused with 415; gzip always works.
- ``POST /{v1beta,v1,v1alpha}/models/{model}:generateContent`` and
  ``:streamGenerateContent`` (``?alt=sse``), ``:countTokens``, ``GET .../models`` —
  Gemini (Gemini CLI with ``GOOGLE_GEMINI_BASE_URL``).

Every conversation follows an ``AgentScript``: while the request holds fewer tool results
(after its latest user prompt) than the script has files, the answer is a call of the
CLI's own file-reading tool, picked from the tools the request advertises (Claude
``Read {file_path}``, Codex ``exec_command {cmd: "cat …"}``, Gemini ``read_file
{file_path}``); then a final text made from ``AgentScript.answer``, which quotes the tool
results, so a test can prove the agent read the file. The stage comes from the request
body, never from a counter, so concurrent conversations do not disturb each other.
``script`` may be a function of the request (``Exchange``) to give each conversation
its own script (``scripted``: by a key in its prompt). A request that offers no such tool
gets ``no_tool_answer``; a structured-output request (Gemini CLI's model router, sent
before the turn when no ``-m`` is given) gets the smallest instance of its JSON schema.

Faults (``Fault``): a status (401, 429 with ``retry-after``, 5xx), a stall before any
byte, or a stall after the first events of a stream (a stall ends when the client goes
or the server stops). ``add_faults`` queues faults consumed one per model request that
passed auth (optionally of one API); ``set_fault`` applies one to every request until
cleared. The CLIs retry statuses on their own: Claude Code retries even 401 up to 10
times with backoff unless ``CLAUDE_CODE_MAX_RETRIES=0``; Codex 5 times unless the
provider's ``request_max_retries=0``; Gemini CLI gives up on 401 at once.

Usage is fixed per response (``Usage``). Every request, including ones to unknown paths,
is recorded (``requests``) with its headers (auth values included) and parsed body. With
``api_key`` set, requests must carry it as the real APIs take it (Anthropic: ``x-api-key``
or bearer; OpenAI: bearer; Gemini: ``x-goog-api-key``, bearer or ``?key=``), else 401.

    with FakeAgentUpstream(script=AgentScript(files=("marker.txt",)), api_key="k") as up:
        ...  # ANTHROPIC_BASE_URL=up.anthropic_base_url, codex base_url=up.openai_base_url,
        ...  # GOOGLE_GEMINI_BASE_URL=up.gemini_base_url
"""

from __future__ import annotations

import asyncio
import gzip
import importlib
import json
import re
import shlex
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType, TracebackType
from typing import Any, Literal, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from testkit.fakes import serving

Api = Literal["anthropic", "openai", "gemini", "other"]

_zstd: ModuleType | None
try:
    _zstd = importlib.import_module("zstandard")
except ImportError:  # pragma: no cover - depends on the environment
    _zstd = None

ZSTD_SUPPORTED = _zstd is not None

_WORKDIR_RE = re.compile(r"(?:Primary working directory|Working directory): *([^\n\\<]+)")
_CWD_RE = re.compile(r"<cwd>([^<]+)</cwd>")
_GEMINI_DIR_RE = re.compile(r"Workspace Directories:\**\s*-\s*(/[^\n]+)")
_READ_LINE_RE = re.compile(r"^ *\d+(?:→|\t)", re.MULTILINE)
_REMINDER_RE = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


# -- the script ---------------------------------------------------------------


@dataclass(frozen=True)
class AgentScript:
    """What one conversation turn does: read ``files`` in order through the CLI's own
    tool, then answer ``answer`` formatted with ``content`` (the tool results, cleaned of
    line numbers and chunk headers, joined by " | "), ``output`` (the raw tool results),
    ``file`` (the first file as given) and ``path`` (its absolute path, when known).

    A relative file is resolved against ``workspace`` when given, else against the
    directory the request states (Claude's "Primary working directory", Codex's
    ``<cwd>``, Gemini's workspace line); Codex's shell runs in that directory anyway."""

    files: tuple[str, ...] = ("marker.txt",)
    answer: str = "The marker is {content}. See {file}:L1"
    # Shell commands run first, through the CLI's shell tool (Codex's
    # ``exec_command``); a CLI without one skips them.
    shell: tuple[str, ...] = ()
    workspace: str | None = None
    no_tool_answer: str = "OK"  # requests that offer no file-reading tool (side queries)


@dataclass(frozen=True)
class Usage:
    """Sent as is in every answer: Anthropic ``input_tokens`` / ``cache_read_input_tokens``
    / ``output_tokens`` (there, input excludes the cached part), OpenAI ``input_tokens`` /
    ``input_tokens_details.cached_tokens`` / ``output_tokens``, Gemini
    ``promptTokenCount`` / ``cachedContentTokenCount`` / ``candidatesTokenCount``."""

    input_tokens: int = 120
    output_tokens: int = 12
    cached_tokens: int = 0


@dataclass(frozen=True)
class Fault:
    kind: Literal["status", "stall", "stall_mid_stream", "none"]
    status: int = 500
    retry_after: str | None = None

    @classmethod
    def none(cls) -> Fault:
        """An ordinary answer: a place in the queue (the second call stalls, say)."""
        return cls("none")

    @classmethod
    def unauthorized(cls) -> Fault:
        return cls("status", status=401)

    @classmethod
    def rate_limited(cls, retry_after: str | None = "1") -> Fault:
        return cls("status", status=429, retry_after=retry_after)

    @classmethod
    def server_error(cls, status: int = 500, retry_after: str | None = None) -> Fault:
        return cls("status", status=status, retry_after=retry_after)

    @classmethod
    def stall(cls) -> Fault:
        """Never answer: no status line, until the client gives up or the server stops."""
        return cls("stall")

    @classmethod
    def stall_mid_stream(cls) -> Fault:
        """Send the status and the first events of the stream, then nothing more."""
        return cls("stall_mid_stream")


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str


@dataclass(frozen=True)
class Reply:
    text: str = ""
    tool_call: ToolCall | None = None


@dataclass
class Exchange:
    """A request reduced to what the script needs, in any of the three formats."""

    api: Api
    model: str
    prompt: str  # the latest user prompt's text
    tool_results: list[str]  # tool results after the latest user prompt, in order
    tools: dict[str, Any]  # advertised tool name -> its parameter schema
    workspace: str | None  # the working directory the request states
    stream: bool
    json_schema: Any = None  # the schema of a structured-output request (a side query)


@dataclass
class RecordedRequest:
    api: Api
    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-cased names, values as sent (auth included)
    body: Any  # parsed JSON, or None
    status: int = 0
    exchange: Exchange | None = None
    reply: Reply | None = None
    fault: str | None = None
    received: float = field(default_factory=time.monotonic)

    @property
    def auth(self) -> str | None:
        """The credential as sent: x-api-key, x-goog-api-key, or the bearer token."""
        for name in ("x-api-key", "x-goog-api-key"):
            if name in self.headers:
                return self.headers[name]
        bearer = self.headers.get("authorization", "")
        return bearer.removeprefix("Bearer ").strip() if bearer else None


ScriptSource = AgentScript | Callable[[Exchange], AgentScript]


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


# -- the server ---------------------------------------------------------------


class FakeAgentUpstream:
    def __init__(
        self,
        *,
        script: ScriptSource | None = None,
        api_key: str | None = None,
        usage: Usage | None = None,
    ) -> None:
        self.script: ScriptSource = script if script is not None else AgentScript()
        self.api_key = api_key  # None: no auth check
        self.usage = usage if usage is not None else Usage()
        self.latency_s = 0.0  # before each answer: a model's time to answer
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._faults: deque[tuple[Api | None, Fault]] = deque()
        self._sticky: Fault | None = None
        self._stopping = threading.Event()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port = 0
        gemini = "/{version:str}/models/{target:str}"
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._anthropic_count, methods=["POST"]),
                Route("/v1/responses", self._openai, methods=["POST"]),
                Route(gemini, self._gemini, methods=["POST", "GET"]),
                Route("/{version:str}/models", self._gemini_models, methods=["GET"]),
                Route("/{rest:path}", self._other, methods=["GET", "POST", "HEAD", "PUT"]),
            ]
        )

    # -- lifecycle ---------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_base_url(self) -> str:  # ANTHROPIC_BASE_URL
        return self.url

    @property
    def openai_base_url(self) -> str:  # codex model_providers.<id>.base_url
        return self.url + "/v1"

    @property
    def gemini_base_url(self) -> str:  # GOOGLE_GEMINI_BASE_URL
        return self.url

    def start(self) -> str:
        """Start serving in a background thread; the base URL (``url``)."""
        if self._thread is not None:
            raise RuntimeError("FakeAgentUpstream already started")
        self._stopping.clear()
        running = serving.serve_in_thread(self.app, "fake-agent-upstream")
        self._server, self._thread, self._socket = running.server, running.thread, running.sock
        self.port = running.port
        return self.url

    def stop(self) -> None:
        if self._thread is None or self._server is None:
            return
        self._stopping.set()  # releases stalled requests
        self._server.should_exit = True
        self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._thread = self._server = self._socket = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- test controls -----------------------------------------------------

    def add_faults(self, *faults: Fault, api: Api | None = None) -> None:
        """Queue faults, consumed one per model request that passed auth, of ``api`` only
        when given (Gemini CLI's router makes a side request before the turn's first)."""
        with self._lock:
            self._faults.extend((api, fault) for fault in faults)

    def set_fault(self, fault: Fault | None) -> None:
        """Apply ``fault`` to every request (after the queued ones) until set to None."""
        with self._lock:
            self._sticky = fault

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._faults.clear()
            self._sticky = None

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, api: Api) -> list[RecordedRequest]:
        return [r for r in self.requests if r.api == api]

    def wait_for_requests(
        self, count: int, *, api: Api | None = None, timeout: float = 10.0
    ) -> list[RecordedRequest]:
        """The recorded requests (of ``api``, if given) once there are ``count`` of them
        (e.g. before killing a CLI whose request stalls); TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.requests if api is None else self.requests_for(api)
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(found)} of {count} requests after {timeout} s")
            time.sleep(0.01)

    @property
    def pending_faults(self) -> int:  # queued, not yet consumed
        with self._lock:
            return len(self._faults)

    # -- handlers ----------------------------------------------------------

    async def _record(self, request: Request, api: Api) -> RecordedRequest:
        record = RecordedRequest(
            api=api,
            method=request.method,
            path=request.url.path,
            query=request.url.query,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=None,
        )
        with self._lock:
            self._requests.append(record)
        return record

    async def _read_json(self, request: Request) -> Any:
        raw = await request.body()
        encoding = request.headers.get("content-encoding", "").strip().lower()
        if encoding == "zstd":
            if _zstd is None:
                raise _Refused(415, "content-encoding zstd is not supported here")
            raw = _zstd.ZstdDecompressor().decompressobj().decompress(raw)
        elif encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding not in ("", "identity"):
            raise _Refused(415, f"content-encoding {encoding} is not supported")
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise _Refused(400, f"body is not JSON: {exc}") from exc

    def _check_auth(self, api: Api, request: Request) -> None:
        if self.api_key is None:
            return
        headers = request.headers
        bearer = headers.get("authorization", "")
        offered = (
            {bearer.removeprefix("Bearer ").strip()} if bearer.startswith("Bearer ") else set()
        )
        if api == "anthropic":
            offered.add(headers.get("x-api-key", ""))
        elif api == "gemini":
            offered.add(headers.get("x-goog-api-key", ""))
            offered.add(request.query_params.get("key", ""))
        if self.api_key not in offered:
            raise _Refused(401, "invalid api key")

    def _next_fault(self, api: Api) -> Fault | None:
        with self._lock:
            for i, (only, fault) in enumerate(self._faults):
                if only is None or only == api:
                    del self._faults[i]
                    return fault
            return self._sticky

    async def _stall(self, request: Request | None = None) -> None:
        """Wait until the server stops or, given the request, its client disconnects.
        (In a stream, the client's disconnect cancels the task: no request needed.)"""

        async def disconnected() -> None:
            if request is None:
                await asyncio.Event().wait()
            else:
                while (await request.receive())["type"] != "http.disconnect":
                    pass

        watch = asyncio.ensure_future(disconnected())
        try:
            while not self._stopping.is_set() and not watch.done():
                await asyncio.wait({watch}, timeout=0.05)
        finally:
            watch.cancel()

    def _script_for(self, exchange: Exchange) -> AgentScript:
        return self.script(exchange) if callable(self.script) else self.script

    async def _serve(
        self,
        request: Request,
        api: Api,
        parse: Callable[[Any, Request], Exchange],
        render: Callable[[Exchange, Reply, Usage, bool], Response],
    ) -> Response:
        record = await self._record(request, api)
        try:
            self._check_auth(api, request)
            record.body = await self._read_json(request)
            if not isinstance(record.body, dict):
                raise _Refused(400, "body must be a JSON object")
            exchange = parse(record.body, request)
        except _Refused as exc:
            record.status = exc.status
            return _error(api, exc.status, exc.message)
        record.exchange = exchange
        fault = self._next_fault(api)
        if fault is not None and fault.kind == "none":
            fault = None
        if fault is not None:
            record.fault = fault.kind if fault.kind != "status" else f"status {fault.status}"
            if fault.kind == "status":
                record.status = fault.status
                message = f"injected status {fault.status}"
                return _error(api, fault.status, message, fault.retry_after)
            if fault.kind == "stall" or not exchange.stream:
                await self._stall(request)
                record.status = 503
                return _error(api, 503, "server stopping")
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        reply = _decide(exchange, self._script_for(exchange))
        record.reply = reply
        record.status = 200
        rendered = render(exchange, reply, self.usage, fault is not None)
        if isinstance(rendered, StreamingResponse) and fault is not None:
            rendered.body_iterator = self._then_stall(rendered.body_iterator)
        return rendered

    async def _then_stall(self, events: AsyncIterable[Any]) -> AsyncIterator[Any]:
        async for event in events:  # the renderer already cut the stream short
            yield event
        await self._stall()

    async def _anthropic(self, request: Request) -> Response:
        return await self._serve(request, "anthropic", _parse_anthropic, _render_anthropic)

    async def _openai(self, request: Request) -> Response:
        return await self._serve(request, "openai", _parse_openai, _render_openai)

    async def _gemini(self, request: Request) -> Response:
        target = request.path_params["target"]
        model, _, method = target.partition(":")
        if request.method == "GET" and not method:
            record = await self._record(request, "gemini")
            try:
                self._check_auth("gemini", request)
            except _Refused as exc:
                record.status = exc.status
                return _error("gemini", exc.status, exc.message)
            record.status = 200
            return JSONResponse(_gemini_model(model))
        if method == "countTokens":
            record = await self._record(request, "gemini")
            try:
                self._check_auth("gemini", request)
                record.body = await self._read_json(request)
            except _Refused as exc:
                record.status = exc.status
                return _error("gemini", exc.status, exc.message)
            record.status = 200
            return JSONResponse({"totalTokens": self.usage.input_tokens})
        if method not in ("generateContent", "streamGenerateContent"):
            record = await self._record(request, "gemini")
            record.status = 404
            return _error("gemini", 404, f"method {method!r} is not served by this fake")

        def parse(body: Any, req: Request) -> Exchange:
            return _parse_gemini(body, model, method == "streamGenerateContent")

        return await self._serve(request, "gemini", parse, _render_gemini)

    async def _gemini_models(self, request: Request) -> Response:
        record = await self._record(request, "gemini")
        try:
            self._check_auth("gemini", request)
        except _Refused as exc:
            record.status = exc.status
            return _error("gemini", exc.status, exc.message)
        record.status = 200
        return JSONResponse({"models": [_gemini_model("gemini-2.5-flash")]})

    async def _anthropic_count(self, request: Request) -> Response:
        record = await self._record(request, "anthropic")
        try:
            self._check_auth("anthropic", request)
            record.body = await self._read_json(request)
        except _Refused as exc:
            record.status = exc.status
            return _error("anthropic", exc.status, exc.message)
        record.status = 200
        return JSONResponse({"input_tokens": self.usage.input_tokens})

    async def _other(self, request: Request) -> Response:
        record = await self._record(request, "other")
        record.status = 404
        return JSONResponse({"error": "not found"}, status_code=404)


# -- the script's decision ----------------------------------------------------


def _decide(exchange: Exchange, script: AgentScript) -> Reply:
    if exchange.json_schema is not None:  # e.g. Gemini CLI's model router: a valid instance
        return Reply(text=json.dumps(_instance(exchange.json_schema)))
    workspace = script.workspace or exchange.workspace
    done = len(exchange.tool_results)
    shell = script.shell if _shell_call(exchange, "true") is not None else ()
    if done < len(shell):
        call = _shell_call(exchange, shell[done])
        assert call is not None
        return Reply(tool_call=call)
    done -= len(shell)
    if done < len(script.files):
        call = _read_call(exchange, script.files[done], workspace)
        if call is not None:
            return Reply(tool_call=call)
        if done == 0 and not shell:
            return Reply(text=script.no_tool_answer)
    first = script.files[0] if script.files else ""
    path = _absolute(first, workspace) if first else ""
    text = script.answer.format(
        content=" | ".join(_clean(r) for r in exchange.tool_results),
        output="\n".join(exchange.tool_results),
        file=first,
        path=path,
    )
    return Reply(text=text)


def _shell_call(exchange: Exchange, command: str) -> ToolCall | None:
    """``command`` through the CLI's shell tool, None when it offers none."""
    call_id = "call_" + uuid.uuid4().hex[:24]
    if "exec_command" in exchange.tools:
        return ToolCall("exec_command", {"cmd": command}, call_id)
    if "shell_command" in exchange.tools:
        return ToolCall("shell_command", {"command": command}, call_id)
    if "shell" in exchange.tools:
        return ToolCall("shell", {"command": ["bash", "-lc", command]}, call_id)
    return None


def _instance(schema: Any) -> Any:
    """The smallest value a JSON schema (or a Gemini ``Schema``, types in capitals) allows."""
    if not isinstance(schema, dict):
        return {}
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = (kind[0] if kind else "object") if isinstance(kind, list) else kind
    kind = str(kind or ("object" if "properties" in schema else "string")).lower()
    if kind == "object":
        props = _properties(schema)
        keys = schema.get("required") or list(props)
        return {key: _instance(props.get(key)) for key in keys}
    if kind == "array":
        return [_instance(schema.get("items"))] * int(schema.get("minItems") or 0)
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return ""


def _absolute(file: str, workspace: str | None) -> str:
    if file.startswith("/") or not workspace:
        return file
    return workspace.rstrip("/") + "/" + file


def _read_call(exchange: Exchange, file: str, workspace: str | None) -> ToolCall | None:
    tools = exchange.tools
    path = _absolute(file, workspace)
    call_id = ("toolu_" if exchange.api == "anthropic" else "call_") + uuid.uuid4().hex[:24]
    if "Read" in tools:  # Claude Code
        return ToolCall("Read", {"file_path": path}, call_id)
    if "exec_command" in tools:  # Codex (unified exec)
        return ToolCall("exec_command", {"cmd": f"cat {shlex.quote(file)}"}, call_id)
    if "shell_command" in tools:  # Codex, older shell tool
        return ToolCall("shell_command", {"command": f"cat {shlex.quote(file)}"}, call_id)
    if "shell" in tools:  # Codex, argv shell tool
        return ToolCall("shell", {"command": ["cat", file]}, call_id)
    if "read_file" in tools:  # Gemini CLI
        props = _properties(tools["read_file"])
        key = next((k for k in ("file_path", "absolute_path", "path") if k in props), "file_path")
        return ToolCall("read_file", {key: path}, call_id)
    return None


def _properties(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        props: dict[str, Any] = schema["properties"]
        return props
    return {}


def _clean(result: str) -> str:
    """A tool result without Codex's chunk header, Claude's line numbers and reminders."""
    text = _REMINDER_RE.sub("", result)
    if "\nOutput:\n" in text:
        text = text.split("\nOutput:\n", 1)[1]
    text = _READ_LINE_RE.sub("", text)
    return text.strip()


def _text_of(content: Any) -> str:
    """Every text in an Anthropic/OpenAI content value (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif "content" in part:
                    parts.append(_text_of(part["content"]))
        return "\n".join(parts)
    if isinstance(content, dict):
        return _text_of([content])
    return ""


def _search(pattern: re.Pattern[str], *texts: str) -> str | None:
    for text in texts:
        match = pattern.search(text)
        if match:
            return match.group(1).strip()
    return None


# -- Anthropic Messages --------------------------------------------------------


def _parse_anthropic(body: Any, request: Request) -> Exchange:
    messages = body.get("messages")
    if not isinstance(body.get("model"), str) or not isinstance(messages, list):
        raise _Refused(400, "model and messages are required")
    last_prompt, prompt = -1, ""
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if message.get("role") != "user":
            continue
        blocks = content if isinstance(content, list) else [content]
        if not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            last_prompt, prompt = i, _text_of(content)
    results = [
        _text_of(block.get("content"))
        for message in messages[last_prompt + 1 :]
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    tools = {
        t["name"]: t.get("input_schema")
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    }
    system = _text_of(body.get("system"))
    texts = [system] + [_text_of(m.get("content")) for m in messages if isinstance(m, dict)]
    return Exchange(
        api="anthropic",
        model=body["model"],
        prompt=prompt,
        tool_results=results,
        tools=tools,
        workspace=_search(_WORKDIR_RE, *texts),
        stream=bool(body.get("stream")),
    )


def _anthropic_usage(usage: Usage, output: bool) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_tokens,
        "output_tokens": usage.output_tokens if output else 1,
    }


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    if reply.tool_call is not None:
        call = reply.tool_call
        return [
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments}
        ]
    return [{"type": "text", "text": reply.text}]


def _render_anthropic(exchange: Exchange, reply: Reply, usage: Usage, cut: bool) -> Response:
    msg_id = "msg_" + uuid.uuid4().hex[:24]
    stop_reason = "tool_use" if reply.tool_call is not None else "end_turn"
    blocks = _anthropic_blocks(reply)
    if not exchange.stream:
        return JSONResponse(
            {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": exchange.model,
                "content": blocks,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": _anthropic_usage(usage, True),
            },
            headers={"request-id": "req_" + msg_id[4:]},
        )

    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    async def events() -> AsyncIterator[str]:
        message: dict[str, Any] = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": exchange.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": _anthropic_usage(usage, False),
        }
        yield event("message_start", {"message": message})
        yield event("ping", {})
        if cut:
            return
        block = blocks[0]
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield event("content_block_start", {"index": 0, "content_block": start})
        yield event("content_block_delta", {"index": 0, "delta": delta})
        yield event("content_block_stop", {"index": 0})
        yield event(
            "message_delta",
            {
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage.output_tokens},
            },
        )
        yield event("message_stop", {})

    return _sse(events(), {"request-id": "req_" + msg_id[4:]})


# -- OpenAI Responses ------------------------------------------------------------


def _parse_openai(body: Any, request: Request) -> Exchange:
    items = body.get("input")
    if not isinstance(body.get("model"), str):
        raise _Refused(400, "model is required")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list):
        raise _Refused(400, "input must be a string or a list")
    last_prompt, prompt = -1, ""
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("role") == "user":
            last_prompt, prompt = i, _text_of(item.get("content"))
    results = [
        _text_of(item.get("output"))
        for item in items[last_prompt + 1 :]
        if isinstance(item, dict)
        and item.get("type") in ("function_call_output", "custom_tool_call_output")
    ]
    tools = {
        t["name"]: t.get("parameters")
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    }
    texts = [_text_of(i.get("content")) for i in items if isinstance(i, dict)]
    return Exchange(
        api="openai",
        model=body["model"],
        prompt=prompt,
        tool_results=results,
        tools=tools,
        workspace=_search(_CWD_RE, *texts, _text_of(body.get("instructions"))),
        stream=bool(body.get("stream")),
    )


def _render_openai(exchange: Exchange, reply: Reply, usage: Usage, cut: bool) -> Response:
    resp_id = "resp_" + uuid.uuid4().hex
    item_id = ("fc_" if reply.tool_call is not None else "msg_") + uuid.uuid4().hex
    if reply.tool_call is not None:
        call = reply.tool_call
        item: dict[str, Any] = {
            "id": item_id,
            "type": "function_call",
            "status": "completed",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": json.dumps(call.arguments),
        }
    else:
        part = {"type": "output_text", "text": reply.text, "annotations": []}
        item = {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }

    def response(status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": resp_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": exchange.model,
            "output": output,
            "usage": None,
        }
        if status == "completed":
            body["usage"] = {
                "input_tokens": usage.input_tokens,
                "input_tokens_details": {"cached_tokens": usage.cached_tokens},
                "output_tokens": usage.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.input_tokens + usage.output_tokens,
            }
        return body

    if not exchange.stream:
        return JSONResponse(response("completed", [item]))

    seq = 0

    def event(kind: str, data: dict[str, Any]) -> str:
        nonlocal seq
        seq += 1
        payload = {"type": kind, "sequence_number": seq - 1, **data}
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n"

    async def events() -> AsyncIterator[str]:
        yield event("response.created", {"response": response("in_progress", [])})
        yield event("response.in_progress", {"response": response("in_progress", [])})
        if cut:
            return
        where = {"item_id": item_id, "output_index": 0}
        if item["type"] == "function_call":
            added = {**item, "status": "in_progress", "arguments": ""}
            yield event("response.output_item.added", {"output_index": 0, "item": added})
            args = item["arguments"]
            yield event("response.function_call_arguments.delta", {**where, "delta": args})
            yield event("response.function_call_arguments.done", {**where, "arguments": args})
        else:
            added = {**item, "status": "in_progress", "content": []}
            yield event("response.output_item.added", {"output_index": 0, "item": added})
            where = {**where, "content_index": 0}
            empty = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", {**where, "part": empty})
            text = reply.text
            yield event("response.output_text.delta", {**where, "delta": text, "logprobs": []})
            yield event("response.output_text.done", {**where, "text": text, "logprobs": []})
            yield event("response.content_part.done", {**where, "part": item["content"][0]})
        yield event("response.output_item.done", {"output_index": 0, "item": item})
        yield event("response.completed", {"response": response("completed", [item])})

    return _sse(events(), {"x-request-id": "req_" + uuid.uuid4().hex})


# -- Gemini generateContent -----------------------------------------------------------


def _gemini_model(model: str) -> dict[str, Any]:
    return {
        "name": f"models/{model}",
        "displayName": model,
        "inputTokenLimit": 1_048_576,
        "outputTokenLimit": 65_536,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
    }


def _parse_gemini(body: Any, model: str, stream: bool) -> Exchange:
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise _Refused(400, "contents is required")
    last_prompt, prompt = -1, ""
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or content.get("role", "user") != "user":
            continue
        parts = content.get("parts") or []
        if not any(isinstance(p, dict) and "functionResponse" in p for p in parts):
            last_prompt, prompt = i, _text_of(parts)
    results = []
    for content in contents[last_prompt + 1 :]:
        for part in content.get("parts") or [] if isinstance(content, dict) else []:
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                response = part["functionResponse"].get("response")
                if isinstance(response, dict) and len(response) == 1:
                    (value,) = response.values()
                    results.append(value if isinstance(value, str) else json.dumps(value))
                else:
                    results.append(json.dumps(response))
    tools: dict[str, Any] = {}
    for tool in body.get("tools") or []:
        for decl in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                tools[decl["name"]] = decl.get("parametersJsonSchema") or decl.get("parameters")
    texts = [_text_of(body.get("systemInstruction", {}).get("parts"))] + [
        _text_of(c.get("parts")) for c in contents if isinstance(c, dict)
    ]
    return Exchange(
        api="gemini",
        model=model,
        prompt=prompt,
        tool_results=results,
        tools=tools,
        workspace=_search(_GEMINI_DIR_RE, *texts),
        stream=stream,
        json_schema=_gemini_schema(body.get("generationConfig")),
    )


def _gemini_schema(config: Any) -> Any:
    if not isinstance(config, dict) or config.get("responseMimeType") != "application/json":
        return None
    return config.get("responseJsonSchema") or config.get("responseSchema") or {}


def _render_gemini(exchange: Exchange, reply: Reply, usage: Usage, cut: bool) -> Response:
    if reply.tool_call is not None:
        call = reply.tool_call
        part: dict[str, Any] = {
            "functionCall": {"id": call.call_id, "name": call.name, "args": call.arguments}
        }
    else:
        part = {"text": reply.text}
    chunk = {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": usage.input_tokens,
            "candidatesTokenCount": usage.output_tokens,
            "cachedContentTokenCount": usage.cached_tokens,
            "totalTokenCount": usage.input_tokens + usage.output_tokens,
        },
        "modelVersion": exchange.model,
        "responseId": uuid.uuid4().hex[:22],
    }
    if not exchange.stream:
        return JSONResponse(chunk)

    async def events() -> AsyncIterator[str]:
        if cut:
            first = {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}}]}
            yield f"data: {json.dumps(first)}\r\n\r\n"
            return
        yield f"data: {json.dumps(chunk)}\r\n\r\n"

    return _sse(events(), {})


# -- shared wire helpers -----------------------------------------------------------


def _sse(events: AsyncIterator[str], headers: dict[str, str]) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", **headers},
    )


_ANTHROPIC_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_GEMINI_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}


def _error(api: Api, status: int, message: str, retry_after: str | None = None) -> JSONResponse:
    """The API's error body; ``retry_after`` (seconds) also as Gemini's ``RetryInfo``."""
    body: dict[str, Any]
    if api == "anthropic":
        kind = _ANTHROPIC_KINDS.get(status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": message}}
    elif api == "gemini":
        state = _GEMINI_STATUSES.get(status, "INTERNAL")
        body = {"error": {"code": status, "message": message, "status": state}}
        if retry_after is not None:
            info = {"@type": "type.googleapis.com/google.rpc.RetryInfo"}
            body["error"]["details"] = [{**info, "retryDelay": f"{retry_after}s"}]
    else:
        kind = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status, "server_error")
        err_type = "invalid_request_error" if status < 500 else "server_error"
        body = {"error": {"message": message, "type": err_type, "param": None, "code": kind}}
    headers = {"retry-after": retry_after} if retry_after is not None else None
    return JSONResponse(body, status_code=status, headers=headers)


def scripted(
    by_prompt: Iterable[tuple[str, AgentScript]], default: AgentScript | None = None
) -> Callable[[Exchange], AgentScript]:
    """A ``script`` that picks, per request, the first script whose key is in the latest
    user prompt (e.g. a per-test token), else ``default``."""
    table = list(by_prompt)
    fallback = default if default is not None else AgentScript()

    def pick(exchange: Exchange) -> AgentScript:
        return next((s for key, s in table if key in exchange.prompt), fallback)

    return pick
