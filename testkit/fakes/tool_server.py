"""A loopback model server that calls tools, in the OpenAI and Anthropic wire formats.

``ToolModelServer`` is a ``FakeModelServer`` (same lifecycle, auth, faults,
recorded requests, prefix caching and usage) whose answers come from a
``script``: given what the model sees at a step (``Seen``), it returns the
answer text or the tool calls to make (``Call``; several make one response).

It checks tool histories as the real APIs do and answers 400 otherwise:

- OpenAI chat completions: ``tools`` are ``{"type": "function", "function":
  {...}}``; an assistant's ``tool_calls`` carry ids and string arguments; every
  call is answered by a ``role: tool`` message with its ``tool_call_id`` before
  any other message;
- Anthropic messages: ``tool_use`` ids are answered by ``tool_result`` blocks
  that open the very next user message; a request whose history holds tool
  blocks must define ``tools``; at most 4 ``cache_control`` breakpoints.

Quirks of OpenAI-compatible servers, switched on per server: ``reject_tools``
(HTTP 400 naming tools, as vLLM without a tool parser or llama.cpp without
``--jinja``), ``ignore_tool_choice`` (calls even under ``tool_choice: none``),
``empty_ids`` (calls without ids) and ``object_arguments`` (arguments as a
JSON object, as Ollama sends them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from testkit.fakes.model_server import (
    Api,
    FakeModelServer,
    RecordedRequest,
    _bad,
    _BadRequest,
    _error,
    _model_not_found,
    _status_fault,
    tokenize,
)


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str | dict[str, Any]  # a string is sent as is (it may be malformed JSON)


@dataclass(frozen=True)
class Result:
    call_id: str
    content: str
    is_error: bool = False


@dataclass
class Seen:
    """What the model sees at one step."""

    api: Api
    model: str
    tools: tuple[str, ...]  # the tools offered
    may_call: bool  # tools offered and tool_choice is not "none"
    step: int  # assistant turns with tool calls so far
    results: list[Result] = field(default_factory=list)  # every tool answer so far
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, arguments)
    text: str = ""  # every text part of the request, in order

    def last(self, n: int = 1) -> list[Result]:
        return self.results[-n:]


Script = Callable[[Seen], "str | list[Call]"]


def stop_after(calls: list[list[Call]], answer: str) -> Script:
    """Make ``calls[i]`` at step i, then answer ``answer``."""

    def script(seen: Seen) -> str | list[Call]:
        if seen.may_call and seen.step < len(calls):
            return calls[seen.step]
        return answer

    return script


class ToolModelServer(FakeModelServer):
    def __init__(
        self,
        *,
        script: Script,
        reject_tools: bool = False,
        ignore_tool_choice: bool = False,
        empty_ids: bool = False,
        object_arguments: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.script = script
        self.reject_tools = reject_tools
        self.ignore_tool_choice = ignore_tool_choice
        self.empty_ids = empty_ids
        self.object_arguments = object_arguments

    async def _answer(self, request: Request, api: Api, record: RecordedRequest) -> Response:
        if (refused := await self._read_json(request, api, record)) is not None:
            return refused
        try:
            self._check_auth(api, request)
            body = record.body
            if not isinstance(body, dict) or not isinstance(body.get("model"), str):
                raise _bad("model: Field required")
            if self.reject_tools and "tools" in body:
                raise _bad(f"'tools' is not supported for model {body['model']}")
            seen, parts = _read_openai(body) if api == "openai" else _read_anthropic(body)
            if self.models is not None and seen.model not in self.models:
                raise _model_not_found(api, seen.model)
        except _BadRequest as exc:
            return _error(api, exc.status, exc.kind, exc.message, exc.code)
        record.model = seen.model
        seen.text = "".join(text for text, _ in parts)
        record.prompt_text = seen.text
        tokens = [t for text, _ in parts for t in tokenize(text)]
        scope, fault, shared, serial = self._arrive(api, seen.model, tokens, record)
        if not await self._pause(request, self.latency_s):
            return Response(status_code=499)
        if fault is not None and fault.kind == "status":
            headers = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
            return _status_fault(api, fault.status, headers)

        answer = self.script(seen)
        calls = answer if isinstance(answer, list) else []
        text = answer if isinstance(answer, str) else ""
        if calls and not (seen.may_call or (self.ignore_tool_choice and seen.tools)):
            calls, text = [], "(the model wanted more tools) final answer"
        out_tokens = len(tokenize(text)) + sum(
            len(tokenize(json.dumps(c.arguments))) for c in calls
        )
        if api == "openai":
            record.usage = self._openai_usage(scope, tokens, shared, out_tokens)
            return JSONResponse(self._openai_message(serial, seen.model, text, calls, record.usage))
        marks = _breakpoints(parts)
        record.usage = self._anthropic_usage(scope, tokens, marks, shared, out_tokens)
        return JSONResponse(self._anthropic_message(serial, seen.model, text, calls, record.usage))

    def _id(self, prefix: str, serial: int, i: int) -> str:
        return "" if self.empty_ids else f"{prefix}{serial}_{i}"

    def _args(self, call: Call) -> Any:
        if self.object_arguments and isinstance(call.arguments, dict):
            return call.arguments
        return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)

    def _openai_message(
        self, serial: int, model: str, text: str, calls: list[Call], usage: dict[str, Any]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": self._id("call_", serial, i),
                    "type": "function",
                    "function": {"name": c.name, "arguments": self._args(c)},
                }
                for i, c in enumerate(calls)
            ]
        return {
            "id": f"chatcmpl-tools{serial}",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": usage,
        }

    def _anthropic_message(
        self, serial: int, model: str, text: str, calls: list[Call], usage: dict[str, Any]
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for i, c in enumerate(calls):
            given = c.arguments
            if isinstance(given, str):
                try:
                    given = json.loads(given)
                except ValueError:
                    given = {"raw": given}  # the real API always sends an object
            content.append(
                {
                    "type": "tool_use",
                    "id": self._id("toolu_", serial, i),
                    "name": c.name,
                    "input": given,
                }
            )
        return {
            "id": f"msg_tools{serial}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }


# -- reading requests ------------------------------------------------------------


def _tool_names(body: dict[str, Any], api: Api) -> tuple[str, ...]:
    tools = body.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list) or not tools:
        raise _bad("tools: must be a non-empty array")
    names = []
    for i, t in enumerate(tools):
        if api == "openai":
            fn = t.get("function") if isinstance(t, dict) and t.get("type") == "function" else None
            if not isinstance(fn, dict) or not isinstance(fn.get("parameters"), dict):
                raise _bad(f"tools[{i}]: a function with parameters is required")
            name = fn.get("name")
        else:
            if not isinstance(t, dict) or not isinstance(t.get("input_schema"), dict):
                raise _bad(f"tools.{i}.input_schema: Field required")
            name = t.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(f"tools[{i}].name: Field required")
        names.append(name)
    return tuple(names)


def _read_openai(body: dict[str, Any]) -> tuple[Seen, list[tuple[str, bool]]]:
    tools = _tool_names(body, "openai")
    choice = body.get("tool_choice", "auto")
    if choice not in ("auto", "none", "required"):
        raise _bad("tool_choice: must be auto, none or required")
    if choice != "auto" and not tools:
        raise _bad("tool_choice is only allowed when tools are specified")
    seen = Seen("openai", body["model"], tools, bool(tools) and choice != "none", 0)
    parts: list[tuple[str, bool]] = []
    if tools:
        parts.append((json.dumps(body["tools"], sort_keys=True), False))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty array")
    waiting: dict[str, str] = {}  # call id -> tool name, not answered yet
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid not in waiting:
                raise _bad(
                    f"messages[{i}]: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'"
                )
            del waiting[cid]
            content = m.get("content")
            if not isinstance(content, str):
                raise _bad(f"messages[{i}].content: must be a string")
            seen.results.append(Result(cid, content))
            parts.append((content, False))
            continue
        if waiting:
            raise _bad(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {', '.join(sorted(waiting))}"
            )
        if role not in ("system", "developer", "user", "assistant"):
            raise _bad(f"messages[{i}]: unknown role {role!r}")
        content = m.get("content")
        if isinstance(content, str):
            parts.append((content, False))
        elif content is not None or role != "assistant":
            raise _bad(f"messages[{i}].content: must be a string")
        for j, c in enumerate(m.get("tool_calls") or []):
            fn = c.get("function") if isinstance(c, dict) else None
            cid = c.get("id") if isinstance(c, dict) else None
            if not isinstance(cid, str) or not cid or not isinstance(fn, dict):
                raise _bad(f"messages[{i}].tool_calls[{j}].id: Field required")
            if not isinstance(fn.get("arguments"), str):
                raise _bad(f"messages[{i}].tool_calls[{j}].function.arguments: must be a string")
            waiting[cid] = fn.get("name", "")
            seen.calls.append((cid, fn.get("name", ""), fn["arguments"]))
            parts.append((fn["arguments"], False))
        if m.get("tool_calls"):
            seen.step += 1
    if waiting:
        raise _bad(f"tool calls without answers: {', '.join(sorted(waiting))}")
    return seen, parts


def _read_anthropic(body: dict[str, Any]) -> tuple[Seen, list[tuple[str, bool]]]:
    if not isinstance(body.get("max_tokens"), int):
        raise _bad("max_tokens: Field required")
    tools = _tool_names(body, "anthropic")
    choice = body.get("tool_choice", {"type": "auto"})
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind not in ("auto", "any", "tool", "none"):
        raise _bad("tool_choice.type: must be auto, any, tool or none")
    seen = Seen("anthropic", body["model"], tools, bool(tools) and kind != "none", 0)
    parts: list[tuple[str, bool]] = []
    if tools:
        parts.append((json.dumps(body["tools"], sort_keys=True), False))
    system = body.get("system")
    if isinstance(system, str):
        parts.append((system, False))
    elif isinstance(system, list):
        parts += [_block(b, "system", seen) for b in system]
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: Field required")
    pending: list[str] = []  # tool_use ids the next user message must answer first
    has_tool_blocks = False
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            raise _bad(f"messages.{i}.role: must be user or assistant")
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not content:
            raise _bad(f"messages.{i}: all messages must have non-empty content")
        if pending:
            answered: list[str] = []
            for b in content:
                if not (isinstance(b, dict) and b.get("type") == "tool_result"):
                    break
                answered.append(str(b.get("tool_use_id")))
            if role != "user" or sorted(answered) != sorted(pending):
                raise _bad(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(pending)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
            pending = []
        for j, b in enumerate(content):
            kind_b = b.get("type") if isinstance(b, dict) else None
            if kind_b == "tool_use":
                if role != "assistant" or not isinstance(b.get("input"), dict) or not b.get("id"):
                    raise _bad(f"messages.{i}.content.{j}: invalid tool_use block")
                pending.append(b["id"])
                seen.calls.append((b["id"], b.get("name", ""), json.dumps(b["input"])))
                has_tool_blocks = True
            elif kind_b == "tool_result":
                if role != "user" or not any(b.get("tool_use_id") == c[0] for c in seen.calls):
                    raise _bad(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        "`tool_result` blocks"
                    )
                has_tool_blocks = True
            parts.append(_block(b, f"messages.{i}.content.{j}", seen))
        if role == "assistant" and pending:
            seen.step += 1
    if pending:
        raise _bad("the last message holds tool_use blocks without results")
    if has_tool_blocks and not tools:
        raise _bad("Requests which include `tool_use` or `tool_result` blocks must define tools.")
    if sum(1 for _, cached in parts if cached) > 4:
        raise _bad("A maximum of 4 blocks with cache_control may be provided.")
    return seen, parts


def _breakpoints(parts: list[tuple[str, bool]]) -> list[int]:
    """Token counts up to the end of each block marked ``cache_control``."""
    marks, count = [], 0
    for text, cached in parts:
        count += len(tokenize(text))
        if cached:
            marks.append(count)
    return marks


def _block(b: Any, where: str, seen: Seen) -> tuple[str, bool]:
    """A content block's text (for tokens and caching) and whether it is a breakpoint."""
    if not isinstance(b, dict):
        raise _bad(f"{where}: must be an object")
    cache = b.get("cache_control")
    if cache is not None and (not isinstance(cache, dict) or cache.get("type") != "ephemeral"):
        raise _bad(f"{where}.cache_control: invalid")
    kind = b.get("type")
    if kind == "text":
        text = b.get("text")
        if not isinstance(text, str) or not text:
            raise _bad(f"{where}: text content blocks must be non-empty")
        return text, cache is not None
    if kind == "tool_use":
        return json.dumps(b.get("input"), sort_keys=True), cache is not None
    if kind == "tool_result":
        content = b.get("content", "")
        if isinstance(content, list):
            content = "".join(x.get("text", "") for x in content if isinstance(x, dict))
        if not isinstance(content, str):
            raise _bad(f"{where}.content: must be a string or text blocks")
        seen.results.append(Result(str(b.get("tool_use_id")), content, bool(b.get("is_error"))))
        return content, cache is not None
    raise _bad(f"{where}: unsupported block type {kind!r}")
