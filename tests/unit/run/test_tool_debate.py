"""A whole arbitration with tools: the engine, the router and the tool loop against
the tool-calling fake server, personas on both providers, steps in a real store.

The right answer sits in a file outside the diff (``app/names.py``): the
personas read it, cite it, and the verdict rests on a verified citation.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from dataclasses import replace

import pytest

from bot.core.settings import Settings
from bot.engine.protocol import next_step
from bot.engine.types import Outcome, Turn
from bot.models.router import ModelRouter
from bot.run.tool_loop import ToolLoop, attach_evidence
from bot.store import NewRun, RunStore
from bot.store.codec import spec_to_json
from testkit.fakes.memory_repo import MemoryReader, run_tool
from testkit.fakes.tool_server import Call, Seen, ToolModelServer
from testkit.harness.engine import spec_for

KEY = "sk-" + secrets.token_hex(8)
FILES = {
    "app/views.py": (
        "from app.names import normalize\n\n\ndef view(user):\n    return normalize(user.name)\n"
    ),
    "app/names.py": (
        'def normalize(name):\n    if name is None:\n        return ""\n    return name.strip()\n'
    ),
}
GOOD = '`app/names.py:L2` "if name is None:"'
BAD = '`app/names.py:L30` "if name == None:"'


def script_citing(cite: str):
    def script(seen: Seen) -> str | list[Call]:
        if seen.may_call and seen.step == 0:
            return [
                Call("search_code", {"pattern": "def normalize"}),
                Call("read_file", {"path": "app/names.py"}),
            ]
        if "TASK: synthesis" in seen.text:
            return f"VERDICT: DISMISSED\nCONCLUSION: normalize() guards None.\nEVIDENCE: {cite}"
        if "PERSONA: Sentry" in seen.text:
            return f"POSITION: withdrawn, see {cite}\nPOINT 1: CONCEDE — it is guarded"
        return f"POSITION: guarded at {cite}\nPOINT 1: HOLD — it is guarded"

    return script


@pytest.fixture
def server_for() -> Iterator[object]:
    started: list[ToolModelServer] = []

    def start(cite: str) -> ToolModelServer:
        srv = ToolModelServer(script=script_citing(cite), openai_api_key=KEY, anthropic_api_key=KEY)
        started.append(srv.start())
        return srv

    yield start
    for s in started:
        s.stop()


async def drive(server: ToolModelServer, store: RunStore, run_id: str, spec, turns: list[Turn]):
    settings = Settings(
        _env_file=None,
        openai_api_key=KEY,
        openai_base_url=server.openai_base_url,
        anthropic_api_key=KEY,
        anthropic_base_url=server.anthropic_base_url,
        model_timeout_s=5.0,
    )
    async with ModelRouter(settings) as router:
        loop = ToolLoop(
            router, router.complete, MemoryReader(dict(FILES)), run_tool, None, run_id, store
        )
        while True:
            step = next_step(spec, turns)
            if isinstance(step, Outcome):
                return step
            turns.extend(await asyncio.gather(*(loop.complete(r) for r in step.requests)))


def arbitration_spec():
    return spec_for(
        "arbitrate",
        rounds=2,
        tools=True,
        judge="openai/gpt-judge",
        default_models=("openai/gpt-a", "anthropic/claude-b"),
    )


def test_an_arbitration_reads_outside_the_diff_and_cites_it(server_for, store: RunStore) -> None:
    server = server_for(GOOD)
    spec = arbitration_spec()
    run = store.create_run(
        NewRun(repo="octo/repo", issue_number=5, spec=spec_to_json(spec), is_pr=True)
    )
    turns: list[Turn] = []
    outcome = asyncio.run(drive(server, store, run.id, spec, turns))
    assert outcome.verdict == "DISMISSED", outcome.body
    sha = MemoryReader({}).commit
    assert f"[app/names.py:L2](https://github.com/octo/repo/blob/{sha}/app/names.py#L2)" in (
        outcome.body
    )
    assert "citations 5 verified, 0 repaired, 0 unverified" in outcome.body
    assert "10 tool call(s), 1 file(s) read" in outcome.body
    apis = {r.api for r in server.requests}
    assert apis == {"openai", "anthropic"}
    # Every turn's evidence is in the store: a resumed run renders the same outcome.
    bare = [replace(t, evidence=None) for t in turns]
    again = next_step(spec, attach_evidence(bare, store.load_evidence(run.id)))
    assert isinstance(again, Outcome) and again.body == outcome.body


def test_a_verdict_on_unverifiable_citations_is_escalated(server_for, store: RunStore) -> None:
    server = server_for(BAD)
    spec = arbitration_spec()
    run = store.create_run(
        NewRun(repo="octo/repo", issue_number=6, spec=spec_to_json(spec), is_pr=True)
    )
    outcome = asyncio.run(drive(server, store, run.id, spec, []))
    assert outcome.verdict == "ESCALATED"
    assert "without a verified citation" in outcome.body
    assert "app/names.py:L30` (unverified)" in outcome.body
    assert "case rested on citations that could not be verified" in outcome.body
