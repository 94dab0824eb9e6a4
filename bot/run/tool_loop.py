"""A turn that reads the repository: the per-turn tool loop, as a completer.

``ToolLoop.complete(request) -> Turn`` fits the runner's one model seam
(``models.complete``). A request without tools goes to the plain completer
(``ModelRouter.complete``); one with tools (``ModelRequest.tools``, set by the
engine, bot/engine/tools.py) runs the loop:

1. the model gets the prompt and the tools in its provider's wire format;
2. the calls it makes (several in one response are answered together) run
   against the pinned snapshot (``run_tool``); a refusal is text the model
   sees, never a failed turn;
3. each finished step is stored (``StepLog``) before the next begins, so a run
   killed mid-turn resumes from the steps it has: nothing paid twice, the tool
   answers replayed as stored;
4. once the turn's budget (calls, bytes, steps) is spent, the model is asked to
   answer without tools;
5. the answer's citations are checked against the pinned commit and the
   turn's ``Evidence`` (counts, citations) is stored with its last step.

A server that refuses tools (an HTTP 400 naming them, no tool support) answers
from the prompt alone, with what it read so far as text: the persona debates
as it did before tools, it is never dropped. Model fallbacks, drop classes and
the concurrency slots are the router's (``ModelRouter.route``); each step is
priced by the router's book and waits its turn at the endpoint's gate under the
run's ``share``, as a plain call does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

import anyio

from bot.core.aio import store_call
from bot.core.errors import BotError, ModelError, ToolsUnsupported
from bot.core.fair import Share
from bot.core.logs import get_logger
from bot.core.metrics import Metrics
from bot.engine.citations import check_citations, parse_citations
from bot.engine.types import (
    DropClass,
    Evidence,
    Exchange,
    ModelRequest,
    ToolBudget,
    ToolCall,
    ToolResult,
    Turn,
    Usage,
)
from bot.models.base import (
    Conversation,
    Route,
    ToolStep,
    add_usage,
    drop_class_of,
    prompt_tokens,
    trim_history,
)
from bot.models.fair import CallInfo
from bot.store.rows import StoredStep

log = get_logger(__name__)

BUDGET_NOTE: Final = (
    "Your tool budget for this turn is used up. Answer now, without tools, from what "
    "you have read; cite it as path:L12 with the line quoted."
)
OVER_CALLS: Final = (
    "Refused: this turn's tool-call budget ({n} calls) is used up; answer without tools."
)
CUT: Final = "\n[cut: this turn's tool budget of {n} bytes is used up]"
TRIMMED: Final = "({n} earlier tool steps of this turn were left out to fit.)"
HISTORY_FACTOR: Final = 2  # the steps sent back: at most twice the turn's byte budget
# Files a turn's citations may load for their check (a lazy snapshot: one request
# each): a turn rarely cites more than a handful; past this, the rest are checked
# against what is held already.
MAX_CITED_LOADS: Final = 20


# --- what the loop needs (bot/repo provides the snapshot side) -------------------


class Reader(Protocol):
    """The repository at the run's pinned commit."""

    @property
    def commit(self) -> str: ...

    @property
    def html_url(self) -> str: ...

    def file_lines(self, path: str) -> list[str] | None: ...

    async def ensure(self, paths: Iterable[str]) -> None:
        """Load the named files a lazy reader does not hold yet (best effort), so
        ``file_lines`` sees them."""
        ...


class ToolAnswer(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def is_error(self) -> bool: ...

    @property
    def bytes_read(self) -> int: ...

    @property
    def path(self) -> str | None: ...


# run_tool(reader, name, arguments, caps): refusals come back as is_error text.
RunTool = Callable[[Any, str, str, Any], Awaitable[ToolAnswer]]


class Routes(Protocol):
    def route(self, ref: str) -> Route | None: ...


class StepLog(Protocol):
    """``RunStore``'s ``StepQueries`` (bot/store/steps.py); synchronous."""

    def save_step(self, run_id: str, turn_id: str, step: StoredStep) -> None: ...

    def load_steps(self, run_id: str, turn_id: str) -> list[StoredStep]: ...


@dataclass
class _State:
    """What a turn's loop has done so far (rebuilt from stored steps on resume)."""

    history: list[Exchange] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    bytes_returned: int = 0
    bytes_read: int = 0
    files: list[str] = field(default_factory=list)

    def add(self, step: StoredStep) -> None:
        self.history.append(step.exchange)
        self.calls += sum(1 for r in step.exchange.results if not _over_budget(r))
        self.bytes_returned += sum(len(r.content.encode()) for r in step.exchange.results)
        self.bytes_read += step.bytes_read
        self.files += [f for f in step.files if f not in self.files]

    def spent(self, budget: ToolBudget) -> bool:
        return (
            self.calls >= budget.max_calls
            or self.bytes_returned >= budget.max_bytes
            or len(self.history) >= budget.max_steps - 1
        )


def _over_budget(result: ToolResult) -> bool:
    return result.is_error and result.content.startswith("Refused: this turn's tool-call budget")


@dataclass
class ToolLoop:
    routes: Routes
    plain: Callable[[ModelRequest], Awaitable[Turn]]  # requests without tools
    reader: Reader
    run_tool: RunTool
    caps: Any  # per-call caps, passed through to run_tool
    run_id: str
    steps: StepLog | None = None
    metrics: Metrics | None = None
    # Model references whose server refused tools: later turns skip straight to
    # the prompt-alone answer instead of paying a refused request each time.
    no_tools: set[str] = field(default_factory=set)
    # Whose calls these are (the run's installation and start): each step waits
    # its fair turn at the endpoint's gate as the run's plain calls do
    # (bot/models/fair.py); None outside a run (a local run: calls that start now).
    share: Share | None = None

    async def complete(self, request: ModelRequest) -> Turn:
        if request.tools is None:
            return await self.plain(request)
        turn_id = request.key.id()
        stored = await self._load(turn_id)
        started = time.monotonic()
        last_class: DropClass = "unavailable"
        for ref in request.models:
            route = self.routes.route(ref)
            if route is None:
                log.warning("model reference unusable", model=ref, slot=request.key.slot)
                continue
            prior = [s for s in stored if s.model == ref]
            first_n = max((s.n for s in stored), default=-1) + 1
            try:
                return await self._turn(request, route, prior, first_n)
            except ModelError as exc:
                last_class = drop_class(exc)
                log.warning(
                    "model call failed",
                    model=ref,
                    slot=request.key.slot,
                    drop_class=last_class,
                    error=str(exc),
                )
                stored = await self._load(turn_id)  # the steps this model finished stay
        return Turn(
            key=request.key,
            text="",
            model=request.models[-1] if request.models else "",
            usage=Usage(latency_ms=int((time.monotonic() - started) * 1000)),
            status="dropped",
            drop_class=last_class,
        )

    # -- one model's loop --------------------------------------------------------

    async def _turn(
        self, request: ModelRequest, route: Route, prior: Sequence[StoredStep], first_n: int
    ) -> Turn:
        budget = request.tools
        assert budget is not None
        state = _State()
        for s in prior:
            if s.final:
                return self._as_turn(request, route.ref, s, replace(state, usage=_sum(prior)))
            state.add(s)
        state.usage = _sum(prior)
        n = first_n
        while True:
            if route.ref in self.no_tools:
                return await self._static(request, route, state, n, "the server refused tools")
            try:
                step = await self._ask(request, route, state)
            except ToolsUnsupported as exc:
                log.warning("model refused tools", model=route.ref, error=str(exc))
                self.no_tools.add(route.ref)
                continue
            step = replace(step, usage=route.charge(step.usage))
            state.usage = add_usage(state.usage, step.usage)
            if not step.calls:
                done = StoredStep(
                    n,
                    route.ref,
                    Exchange(step.text, (), ()),
                    step.usage,
                    step.truncated,
                    final=True,
                )
                return await self._finish(request, done, state, "")
            results, read, files = await self._answer(step.calls, budget, state)
            saved = StoredStep(
                n,
                route.ref,
                Exchange(step.text, step.calls, results),
                step.usage,
                step.truncated,
                bytes_read=read,
                files=files,
            )
            await self._save(request, saved)
            state.add(saved)
            n += 1

    async def _ask(self, request: ModelRequest, route: Route, state: _State) -> ToolStep:
        """One step of the loop: the conversation so far, with the tools offered
        until the turn's budget is spent (then asked to answer without them)."""
        budget = request.tools
        assert budget is not None
        final = state.spent(budget)
        # The byte budget bounds the answers; this bounds what a verbose model
        # wrote beside its calls (rarely reached: the prefix cache stays intact).
        history, dropped = trim_history(tuple(state.history), HISTORY_FACTOR * budget.max_bytes)
        notes = [TRIMMED.format(n=dropped)] if dropped else []
        conversation = Conversation(
            prompt=request.prompt,
            history=history,
            tools=budget.tools,
            final=final,
            note=" ".join([*notes, BUDGET_NOTE] if final else notes),
        )
        call_info = CallInfo.of(
            self.share, prompt_tokens(conversation.as_prompt()), request.max_output_tokens
        )
        async with route.slot():
            return await route.provider.step(
                route.model, conversation, request.max_output_tokens, call_info=call_info
            )

    async def _static(
        self, request: ModelRequest, route: Route, state: _State, n: int, why: str
    ) -> Turn:
        """The answer from the prompt alone (plus, as text, whatever was read before
        the server refused tools)."""
        prompt = request.prompt
        if state.history:
            prompt = Conversation(prompt, tuple(state.history), note=BUDGET_NOTE).as_prompt()
        call_info = CallInfo.of(self.share, prompt_tokens(prompt), request.max_output_tokens)
        async with route.slot():
            done = await route.provider.generate(
                route.model, prompt, request.max_output_tokens, call_info=call_info
            )
        done = replace(done, usage=route.charge(done.usage))
        state.usage = add_usage(state.usage, done.usage)
        if self.metrics is not None:
            self.metrics.tool_static_turns.inc()
        step = StoredStep(
            n, route.ref, Exchange(done.text, (), ()), done.usage, done.truncated, final=True
        )
        return await self._finish(request, step, state, why)

    async def _answer(
        self, calls: Sequence[ToolCall], budget: ToolBudget, state: _State
    ) -> tuple[tuple[ToolResult, ...], int, tuple[str, ...]]:
        """The calls of one response, answered together; past the call budget,
        refused; past the byte budget, cut."""
        room = max(0, budget.max_calls - state.calls)
        run = calls[:room]
        answers = await asyncio.gather(*(self._run(c) for c in run))
        results: list[ToolResult] = []
        used = state.bytes_returned
        read = 0
        files: list[str] = []
        for call, answer in zip(run, answers, strict=True):
            text = answer.text
            encoded = text.encode()
            left = max(0, budget.max_bytes - used)
            if len(encoded) > left:
                text = encoded[:left].decode(errors="ignore") + CUT.format(n=budget.max_bytes)
            used += len(text.encode())
            read += answer.bytes_read
            if answer.path and not answer.is_error and call.name == "read_file":
                files.append(answer.path)
            results.append(ToolResult(call.id, call.name, text, answer.is_error))
            self._count(call.name, "refused" if answer.is_error else "ok")
        for call in calls[room:]:
            results.append(
                ToolResult(call.id, call.name, OVER_CALLS.format(n=budget.max_calls), True)
            )
            self._count(call.name, "over_budget")
        if self.metrics is not None:
            self.metrics.tool_bytes.inc(read)
        return tuple(results), read, tuple(dict.fromkeys(files))

    async def _run(self, call: ToolCall) -> ToolAnswer:
        try:
            return await self.run_tool(self.reader, call.name, call.arguments, self.caps)
        except BotError as exc:
            # A read that failed (GitHub down mid-turn): the model hears it and goes on.
            log.warning("tool failed", tool=call.name, error=str(exc))
            return _Failed(f"The tool could not read the repository just now ({exc.public})")

    def _count(self, tool: str, result: str) -> None:
        if self.metrics is not None:
            self.metrics.tool_calls.labels(tool=tool[:40], result=result).inc()

    # -- the end of a turn ---------------------------------------------------------

    async def _finish(
        self, request: ModelRequest, step: StoredStep, state: _State, static_reason: str
    ) -> Turn:
        text = step.exchange.text
        await self._load_cited(text)
        checks = await anyio.to_thread.run_sync(
            lambda: check_citations(
                text, self.reader.file_lines, html_url=self.reader.html_url, sha=self.reader.commit
            )
        )
        evidence = Evidence(
            tool_calls=state.calls,
            files_read=tuple(state.files),
            bytes_read=state.bytes_read,
            steps=len(state.history) + 1,
            citations=checks,
            static_reason=static_reason,
        )
        step = replace(step, evidence=evidence)
        await self._save(request, step)
        if self.metrics is not None:
            self.metrics.tool_files.inc(len(state.files))
            for c in checks:
                self.metrics.citations.labels(status=c.status).inc()
        return self._as_turn(request, step.model, step, state)

    async def _load_cited(self, text: str) -> None:
        """Bring the cited files in first: on a lazy snapshot a file the model cites
        without having read it through a tool (it saw it in the prompt's excerpt, or
        a search hit) is not held yet, and would check as missing."""
        paths = list(dict.fromkeys(c.path for c in parse_citations(text)))[:MAX_CITED_LOADS]
        if not paths:
            return
        try:
            await self.reader.ensure(paths)
        except BotError as exc:  # GitHub down: what is held is checked, the rest fails
            log.warning("cited files not loaded", error=str(exc), files=len(paths))

    @staticmethod
    def _as_turn(request: ModelRequest, ref: str, step: StoredStep, state: _State) -> Turn:
        if not step.exchange.text.strip():
            raise ModelError(f"{ref}: the turn ended without text", drop_class="unusable_output")
        return Turn(
            key=request.key,
            text=step.exchange.text,
            model=ref,
            usage=state.usage,
            truncated=step.truncated,
            evidence=step.evidence,
        )

    # -- the step log ---------------------------------------------------------------

    async def _load(self, turn_id: str) -> list[StoredStep]:
        if self.steps is None:
            return []
        return await store_call(self.steps, self.steps.load_steps, self.run_id, turn_id)

    async def _save(self, request: ModelRequest, step: StoredStep) -> None:
        if self.steps is not None:
            await store_call(self.steps, self.steps.save_step, self.run_id, request.key.id(), step)


@dataclass(frozen=True)
class _Failed:
    text: str
    is_error: bool = True
    bytes_read: int = 0
    path: str | None = None


def drop_class(exc: ModelError) -> DropClass:
    return drop_class_of(exc.drop_class)


def _sum(steps: Sequence[StoredStep]) -> Usage:
    total = Usage()
    for s in steps:
        total = add_usage(total, s.usage)
    return total


def attach_evidence(turns: Sequence[Turn], evidence: dict[str, Evidence]) -> list[Turn]:
    """Stored turns with their evidence (``RunStore.load_evidence``) put back: the
    ``turns`` rows do not carry it, and the engine reads it from the turns."""
    return [
        replace(t, evidence=evidence[t.key.id()])
        if t.evidence is None and t.key.id() in evidence
        else t
        for t in turns
    ]
