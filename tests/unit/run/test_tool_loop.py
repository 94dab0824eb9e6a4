"""The per-turn tool loop over real HTTP, against tool-calling fake servers in
both wire formats and with the quirks of OpenAI-compatible servers."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.engine.types import ModelRequest, Prompt, ToolBudget, TurnKey
from bot.models.router import ModelRouter
from bot.run.tool_loop import ToolLoop, attach_evidence
from bot.store import NewRun, RunStore
from bot.store.rows import StoredStep
from testkit.fakes.memory_repo import MemoryReader, run_tool
from testkit.fakes.model_server import Fault
from testkit.fakes.tool_server import Call, Seen, ToolModelServer, stop_after

OPENAI_KEY = "sk-test-" + secrets.token_hex(8)
ANTHROPIC_KEY = "sk-ant-test-" + secrets.token_hex(8)

FILES = {
    "app/views.py": (
        "import os\n\n\ndef view(user):\n    assert user is not None\n    return user.name\n"
    ),
    "app/models.py": "class User:\n    name: str\n",
    "tests/test_views.py": "def test_view_none():\n    pass\n",
    "README.md": "# Demo\n\nRun it.\n",
}
ANSWER = (
    'POSITION: safe.\nSee `app/views.py:L5` "assert user is not None".\nPOINT 1: HOLD — checked'
)
BUDGET = ToolBudget(
    tools=("list_files", "read_file", "search_code"), max_calls=10, max_bytes=48_000, max_steps=6
)
PROVIDERS = {"openai": "openai/gpt-test", "anthropic": "anthropic/claude-test"}


def request(ref: str, budget: ToolBudget | None = BUDGET, slot: str = "Atlas") -> ModelRequest:
    return ModelRequest(
        key=TurnKey("opening", 1, slot),
        models=(ref,),
        prompt=Prompt(system="You debate.\n", prefix="# Subject\n" + "word " * 200, suffix="Go.\n"),
        max_output_tokens=300,
        tools=budget,
    )


def settings_for(server: ToolModelServer) -> Settings:
    return Settings(
        _env_file=None,
        openai_api_key=OPENAI_KEY,
        openai_base_url=server.openai_base_url,
        anthropic_api_key=ANTHROPIC_KEY,
        anthropic_base_url=server.anthropic_base_url,
        model_timeout_s=5.0,
        model_max_retries=1,
        model_max_retry_wait_s=0.01,
    )


@pytest.fixture
def make() -> Iterator[Any]:
    servers: list[ToolModelServer] = []

    def start(script: Any, **quirks: Any) -> ToolModelServer:
        srv = ToolModelServer(
            script=script, openai_api_key=OPENAI_KEY, anthropic_api_key=ANTHROPIC_KEY, **quirks
        )
        servers.append(srv.start())
        return srv

    yield start
    for s in servers:
        s.stop()


async def complete(
    server: ToolModelServer,
    req: ModelRequest,
    *,
    reader: MemoryReader | None = None,
    store: RunStore | None = None,
    run_id: str = "run-1",
    loop: ToolLoop | None = None,
    metrics: Metrics | None = None,
) -> tuple[Any, ToolLoop]:
    async with ModelRouter(settings_for(server)) as router:
        loop = loop or ToolLoop(
            routes=router,
            plain=router.complete,
            reader=reader or MemoryReader(dict(FILES)),
            run_tool=run_tool,
            caps=None,
            run_id=run_id,
            steps=store,
            metrics=metrics,
        )
        loop.routes = router
        loop.plain = router.complete
        return await loop.complete(req), loop


TWO_CALLS = [Call("list_files", {"path": "app"}), Call("read_file", {"path": "app/views.py"})]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_several_calls_in_one_response_answered_together(make: Any, api: str) -> None:
    server = make(stop_after([TWO_CALLS], ANSWER))
    turn, _ = asyncio.run(complete(server, request(PROVIDERS[api])))
    assert turn.status == "ok" and turn.text == ANSWER
    ev = turn.evidence
    assert ev is not None and ev.tool_calls == 2 and ev.files_read == ("app/views.py",)
    assert ev.steps == 2 and ev.bytes_read > 0
    (check,) = ev.citations
    assert check.status == "verified"
    assert check.url == (
        "https://github.com/octo/repo/blob/0123456789abcdef0123456789abcdef01234567/app/views.py#L5"
    )
    first, second = server.requests
    assert first.status == second.status == 200
    if api == "openai":
        tool_msgs = [m for m in second.body["messages"] if m["role"] == "tool"]
        assert len(tool_msgs) == 2 and "views.py" in tool_msgs[0]["content"]
        assert second.body["tool_choice"] == "auto"
        # The prompt's messages are unchanged from one step to the next (prefix caches hit).
        assert second.body["messages"][:2] == first.body["messages"][:2]
        assert second.usage["prompt_tokens_details"]["cached_tokens"] > 200
    else:
        results = second.body["messages"][2]["content"]
        assert [b["type"] for b in results] == ["tool_result", "tool_result"]
        assert results[-1]["cache_control"] == {"type": "ephemeral"}
        assert second.body["messages"][0] == first.body["messages"][0]
        assert second.usage["cache_read_input_tokens"] > 200
    assert turn.usage.input_tokens == sum(
        r.usage.get("prompt_tokens", 0)
        + r.usage.get("input_tokens", 0)
        + r.usage.get("cache_read_input_tokens", 0)
        + r.usage.get("cache_creation_input_tokens", 0)
        for r in server.requests
    )


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_refusals_are_text_the_model_sees(make: Any, api: str) -> None:
    bad = [
        Call("read_file", '{"path": "app/views.py"'),  # not JSON
        Call("delete_everything", {"path": ""}),  # unknown tool
        Call("read_file", {"path": "../../etc/passwd"}),
        Call("read_file", {"path": "app"}),  # a folder
        Call("read_file", {}),  # a missing field
    ]
    seen_results: list[Any] = []

    def script(seen: Seen) -> str | list[Call]:
        if seen.step == 0:
            return bad
        seen_results.extend(seen.results)
        return "POSITION: nothing to read.\nPOINT 1: HOLD — no evidence"

    server = make(script)
    turn, _ = asyncio.run(complete(server, request(PROVIDERS[api])))
    assert turn.status == "ok"
    texts = [r.content for r in seen_results]
    assert len(texts) == 5
    if api == "anthropic":
        # The Anthropic fake echoes a malformed input as {"raw": ...}: a missing path.
        assert "path" in texts[0]
        assert all(r.is_error for r in seen_results)
    else:
        assert "not JSON" in texts[0]
    assert "unknown tool" in texts[1]
    assert "inside the repository" in texts[2]
    assert "folder" in texts[3]
    assert "required" in texts[4]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_model_that_never_stops_is_asked_to_answer_without_tools(make: Any, api: str) -> None:
    def script(seen: Seen) -> str | list[Call]:
        if seen.may_call:
            return [Call("search_code", {"pattern": "user"})]
        return "POSITION: done.\nPOINT 1: HOLD — read enough"

    server = make(script)
    budget = ToolBudget(BUDGET.tools, max_calls=10, max_bytes=48_000, max_steps=4)
    turn, _ = asyncio.run(complete(server, request(PROVIDERS[api], budget)))
    assert turn.status == "ok" and turn.text.startswith("POSITION: done.")
    assert len(server.requests) == 4
    last = server.requests[-1].body
    assert "tools" in last  # a history with tool blocks keeps its tools defined
    assert last["tool_choice"] == ("none" if api == "openai" else {"type": "none"})
    assert turn.evidence is not None and turn.evidence.tool_calls == 3


def test_calls_past_the_budget_are_refused_and_bytes_are_cut(make: Any) -> None:
    many = [Call("read_file", {"path": p}) for p in FILES]
    got: list[Any] = []

    def script(seen: Seen) -> str | list[Call]:
        if seen.step == 0:
            return many
        got.extend(seen.results)
        return "POSITION: ok.\nPOINT 1: HOLD — fine"

    server = make(script)
    budget = ToolBudget(BUDGET.tools, max_calls=2, max_bytes=60, max_steps=4)
    turn, _ = asyncio.run(complete(server, request(PROVIDERS["openai"], budget)))
    assert turn.status == "ok"
    assert len(got) == 4
    assert "[cut: this turn's tool budget of 60 bytes is used up]" in got[0].content
    assert "budget (2 calls) is used up" in got[2].content and "used up" in got[3].content
    # The budget is spent, so the next step is the last, without tools.
    assert server.requests[-1].body["tool_choice"] == "none"


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_server_that_rejects_tools_debates_from_the_prompt(make: Any, api: str) -> None:
    server = make(stop_after([TWO_CALLS], ANSWER), reject_tools=True)
    turn, loop = asyncio.run(complete(server, request(PROVIDERS[api])))
    assert turn.status == "ok" and turn.text == ANSWER
    assert turn.evidence is not None and turn.evidence.static_reason
    assert turn.evidence.citations[0].status == "verified"  # still checked
    assert [r.status for r in server.requests] == [400, 200]
    assert "tools" not in server.requests[1].body
    # The next turn of the same model goes straight to the prompt-alone answer.
    server.reset()
    turn2, _ = asyncio.run(complete(server, request(PROVIDERS[api], slot="Forge"), loop=loop))
    assert turn2.status == "ok" and [r.status for r in server.requests] == [200]


def test_empty_call_ids_get_our_own(make: Any) -> None:
    server = make(stop_after([TWO_CALLS], ANSWER), empty_ids=True)
    turn, _ = asyncio.run(complete(server, request(PROVIDERS["openai"])))
    assert turn.status == "ok"
    second = server.requests[1].body["messages"]
    ids = [c["id"] for c in second[2]["tool_calls"]]
    assert ids == ["call_s0_0", "call_s0_1"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == ids


def test_object_arguments_as_ollama_sends_them(make: Any) -> None:
    server = make(stop_after([TWO_CALLS], ANSWER), object_arguments=True)
    turn, _ = asyncio.run(complete(server, request(PROVIDERS["openai"])))
    assert turn.status == "ok" and turn.evidence is not None
    assert turn.evidence.files_read == ("app/views.py",)


def test_a_server_that_ignores_tool_choice_ends_by_dropping_tools(make: Any) -> None:
    def script(seen: Seen) -> str | list[Call]:
        if seen.tools:  # calls whenever tools are offered, tool_choice or not
            return [Call("list_files", {"path": ""})]
        return "POSITION: done.\nPOINT 1: HOLD — enough"

    server = make(script, ignore_tool_choice=True)
    budget = ToolBudget(BUDGET.tools, max_calls=10, max_bytes=48_000, max_steps=3)
    turn, _ = asyncio.run(complete(server, request(PROVIDERS["openai"], budget)))
    assert turn.status == "ok" and turn.text.startswith("POSITION: done.")
    bodies = [r.body for r in server.requests]
    assert bodies[2]["tool_choice"] == "none"  # ignored: it called again
    assert "tools" not in bodies[3]  # so the history went as text, no tools
    assert not any(m["role"] == "tool" for m in bodies[3]["messages"])
    assert "list_files" in bodies[3]["messages"][-1]["content"]


def test_fallback_model_runs_the_loop_when_the_first_is_unknown(make: Any) -> None:
    server = make(stop_after([TWO_CALLS], ANSWER))
    server.models = frozenset({"claude-test"})
    req = ModelRequest(
        key=TurnKey("opening", 1, "Atlas"),
        models=("openai/gpt-missing", "anthropic/claude-test"),
        prompt=request("x").prompt,
        max_output_tokens=300,
        tools=BUDGET,
    )
    turn, _ = asyncio.run(complete(server, req))
    assert turn.status == "ok" and turn.model == "anthropic/claude-test"


def test_all_models_failing_drops_the_turn(make: Any) -> None:
    server = make(stop_after([], ANSWER))
    server.add_faults(Fault.server_error(400))
    turn, _ = asyncio.run(complete(server, request(PROVIDERS["openai"])))
    assert turn.status == "dropped" and turn.drop_class == "provider_error"


def test_a_request_without_tools_takes_the_plain_path(make: Any) -> None:
    server = make(stop_after([TWO_CALLS], ANSWER))
    turn, _ = asyncio.run(complete(server, request(PROVIDERS["anthropic"], None)))
    assert turn.status == "ok" and turn.evidence is None
    assert "tools" not in server.requests[0].body


def test_metrics_count_tools_and_citations(make: Any) -> None:
    server = make(stop_after([TWO_CALLS], ANSWER))
    metrics = Metrics()
    asyncio.run(complete(server, request(PROVIDERS["openai"]), metrics=metrics))
    text = metrics.render().decode()
    assert 'debate_bot_tool_calls_total{result="ok",tool="read_file"} 1.0' in text
    assert 'debate_bot_citations_total{status="verified"} 1.0' in text


# -- durable steps -------------------------------------------------------------------


def test_a_turn_killed_mid_loop_resumes_without_paying_a_step_twice(
    make: Any, store: RunStore
) -> None:
    run = store.create_run(NewRun(repo="octo/repo", issue_number=1, spec=_spec_json()))
    steps = [
        [Call("search_code", {"pattern": "None"})],
        [Call("read_file", {"path": "app/views.py"})],
    ]
    server = make(stop_after(steps, ANSWER))
    reader = MemoryReader(dict(FILES))
    req = request(PROVIDERS["anthropic"])

    async def killed() -> None:
        server.latency_s = 0.3
        task = asyncio.create_task(complete(server, req, reader=reader, store=store, run_id=run.id))
        for _ in range(500):  # until the third step (the answer) is in flight
            if len(server.requests) >= 3:
                break
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(killed())
    stored = store.load_steps(run.id, req.key.id())
    assert [s.n for s in stored] == [0, 1] and not any(s.final for s in stored)
    assert reader.reads == ["search_code", "read_file"]

    server.reset()
    server.latency_s = 0.0
    turn, _ = asyncio.run(complete(server, req, reader=reader, store=store, run_id=run.id))
    assert turn.status == "ok" and turn.text == ANSWER
    assert len(server.requests) == 1  # only the unfinished step is paid again
    assert reader.reads == ["search_code", "read_file"]  # tool answers replayed as stored
    body = server.requests[0].body
    assert [b["type"] for b in body["messages"][-1]["content"]] == ["tool_result"]
    assert turn.evidence is not None and turn.evidence.tool_calls == 2

    # Killed after the last step was stored but before the turn was: nothing is paid.
    server.reset()
    again, _ = asyncio.run(complete(server, req, reader=reader, store=store, run_id=run.id))
    assert again.text == ANSWER and server.requests == []
    assert again.usage == turn.usage

    evidence = store.load_evidence(run.id)
    assert evidence[req.key.id()] == turn.evidence
    bare = [type(turn)(key=turn.key, text=turn.text, model=turn.model)]
    assert attach_evidence(bare, evidence)[0].evidence == turn.evidence


def test_save_step_twice_is_a_no_op(store: RunStore) -> None:
    run = store.create_run(NewRun(repo="octo/repo", issue_number=2, spec=_spec_json()))
    from bot.engine.types import Exchange, Usage

    step = StoredStep(0, "openai/x", Exchange("", (), ()), Usage(input_tokens=5))
    store.save_step(run.id, "t0:opening:1:A", step)
    store.save_step(run.id, "t0:opening:1:A", step)
    assert store.load_steps(run.id, "t0:opening:1:A") == [step]


def _spec_json() -> str:
    from bot.engine.types import DebateSpec
    from bot.store.codec import spec_to_json

    return spec_to_json(DebateSpec(mode="debate", title="t", subject="s", judge="openai/x"))


def test_tool_arguments_reach_the_tool_verbatim(make: Any) -> None:
    args = '{"path": "app/views.py", "start_line": 4, "end_line": 5}'
    got: list[str] = []

    def script(seen: Seen) -> str | list[Call]:
        if seen.step == 0:
            return [Call("read_file", args)]
        got.extend(r.content for r in seen.results)
        return ANSWER

    server = make(script)
    asyncio.run(complete(server, request(PROVIDERS["openai"])))
    assert got == ["4: def view(user):\n5:     assert user is not None"]
    sent = server.requests[1].body["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == json.loads(args)


def test_anthropic_proxy_that_ignores_tool_choice_gets_the_steps_as_text(make: Any) -> None:
    def script(seen: Seen) -> str | list[Call]:
        if seen.tools:
            return [Call("list_files", {"path": ""})]
        return "POSITION: done.\nPOINT 1: HOLD — enough"

    server = make(script, ignore_tool_choice=True)
    budget = ToolBudget(BUDGET.tools, max_calls=10, max_bytes=48_000, max_steps=2)
    turn, _ = asyncio.run(complete(server, request(PROVIDERS["anthropic"], budget)))
    assert turn.status == "ok" and turn.text.startswith("POSITION: done.")
    last = server.requests[-1].body
    assert "tools" not in last and len(last["messages"]) == 1
    assert "You called list_files" in last["messages"][0]["content"][-1]["text"]


def test_the_scripted_reader_reads_before_it_answers() -> None:
    """Offline (no server): ``scripted/reader`` lists, reads, then cites what it read."""
    settings = Settings(_env_file=None)
    req = ModelRequest(
        key=TurnKey("opening", 1, "Atlas"),
        models=("scripted/reader",),
        prompt=Prompt("", "", "## Your task\nOPENING round.\n\nTASK: opening\nPOINTS: 1\n"),
        max_output_tokens=300,
        tools=BUDGET,
    )

    async def go() -> Any:
        async with ModelRouter(settings) as router:
            reader = MemoryReader(dict(FILES))
            loop = ToolLoop(router, router.complete, reader, run_tool, None, "run-1")
            return await loop.complete(req), reader

    turn, reader = asyncio.run(go())
    assert reader.reads == ["list_files", "read_file"]
    assert turn.evidence is not None and turn.evidence.files_read == ("README.md",)
    (check,) = turn.evidence.citations
    assert check.status == "verified" and check.url.endswith("README.md?plain=1#L1")


def test_history_is_trimmed_by_whole_steps(make: Any) -> None:
    """A verbose model's old steps are left out whole: each tool_result still
    follows its tool_use, so the Anthropic fake accepts every request."""

    def script(seen: Seen) -> str | list[Call]:
        if seen.may_call and seen.step < 3:
            return [Call("list_files", {"path": "app", "why": "x" * 1500})]
        return "POSITION: done.\nPOINT 1: HOLD — enough"

    server = make(script)
    budget = ToolBudget(BUDGET.tools, max_calls=10, max_bytes=1000, max_steps=6)
    turn, _ = asyncio.run(complete(server, request(PROVIDERS["anthropic"], budget)))
    assert turn.status == "ok"
    assert all(r.status == 200 for r in server.requests)
    last = server.requests[-1].body["messages"]
    assert len(last) == 3  # the prompt and the latest step only
    assert "earlier tool steps of this turn were left out" in json.dumps(last[-1])


@pytest.mark.parametrize(
    ("message", "blames_tools"),
    [
        ("openai/m: HTTP 400: 'tools' is not supported for model m", True),
        ("x/m: HTTP 500: tools param requires --jinja flag", True),  # llama.cpp
        ('x/m: HTTP 400: "auto" tool choice requires --enable-auto-tool-choice', True),  # vLLM
        ("openai/m: HTTP 400: context length exceeded", False),
        ("openai/m: HTTP 401: bad key for tools", False),
        ("openai/m: no answer within 5s", False),
    ],
)
def test_which_refusals_blame_the_tools(message: str, blames_tools: bool) -> None:
    from bot.core.errors import ModelError
    from bot.models.base import names_tools

    assert names_tools(ModelError(message)) is blames_tools
