"""`debate-bot eval` with `tools=on`: an arbitration case's files are the
repository the debaters read, through the service's tool loop, over real HTTP
against the tool-calling fake server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.eval.cases import Loaded, load_cases
from bot.cli.eval.configs import parse_config
from bot.cli.eval.debate import debate_case
from bot.cli.eval.material import case_spec
from bot.cli.eval.reader import case_reader
from bot.engine import rehearsal
from bot.engine.citations import checks_of
from bot.engine.types import Outcome, Turn
from bot.models.router import ModelRouter
from testkit.fakes.tool_server import Call, Seen, ToolModelServer
from testkit.harness.tool_models import settings_for, tool_server

CASES = """\
- id: retry-1
  kind: arbitrate
  comment: "MAX_RETRIES is never set, so this loop can spin forever."
  path: src/handler.py
  line: 2
  diff_hunk: "@@ -1,1 +1,2 @@\\n+for _ in range(MAX_RETRIES):"
  files:
    src/handler.py: "from limits import MAX_RETRIES\\nfor _ in range(MAX_RETRIES):\\n    pass\\n"
    src/limits.py: "MAX_RETRIES = 3\\n"
    ../outside.py: "never part of the tree\\n"
  expected: dismissed
- id: q-7
  kind: question
  question: "Which sorting algorithm is stable?"
  choices: [quicksort, mergesort, heapsort]
  expected: mergesort
"""
CITE = '\nEvidence: `src/limits.py:L1` "MAX_RETRIES = 3".\n'


def script(seen: Seen) -> str | list[Call]:
    """Every turn offered tools reads limits.py first, then answers citing it."""
    if seen.may_call and seen.step == 0:
        return [Call("read_file", {"path": "src/limits.py"})]
    answer = rehearsal.reply(seen.text)
    return answer + CITE if seen.tools else answer


@pytest.fixture
def server() -> Iterator[ToolModelServer]:
    with tool_server(script) as srv:
        yield srv


@pytest.fixture
def cases(tmp_path: Path) -> list[Loaded]:
    path = tmp_path / "cases.yml"
    path.write_text(CASES)
    return load_cases([path])


class Hooks:
    def __init__(self) -> None:
        self.turns: list[Turn] = []

    def turn(self, turn: Turn) -> None:
        self.turns.append(turn)

    def proceed(self) -> bool:
        return True


def debate(server: ToolModelServer, loaded: Loaded, spec_text: str) -> tuple[list[Turn], Outcome]:
    settings = settings_for(server)
    (config,) = parse_config(f"d={spec_text}")

    async def go() -> tuple[list[Turn], Outcome]:
        async with ModelRouter(settings) as router:
            spec = case_spec(
                loaded, config, settings=settings, available=router.available_providers()
            )
            return await debate_case(
                spec, [], router=router, hooks=Hooks(), reader=case_reader(loaded)
            )

    return asyncio.run(go())


def test_an_arbitration_case_with_tools_reads_its_files(
    server: ToolModelServer, cases: list[Loaded]
) -> None:
    turns, outcome = debate(server, cases[0], "debate:openai/gpt-test;rounds=1;tools=on")
    with_tools = [r for r in server.requests if "tools" in r.body]
    assert with_tools, "no request offered tools"
    # The read reached the case's file through the service's read_file.
    tool_answers = [
        m["content"] for r in with_tools for m in r.body["messages"] if m.get("role") == "tool"
    ]
    assert any("1: MAX_RETRIES = 3" in a for a in tool_answers)
    checks = checks_of(turns)
    assert checks and all(c.status == "verified" for c in checks)
    assert all(c.url == "" for c in checks)  # no page to link an eval case to
    evidence = [t.evidence for t in turns if t.evidence is not None]
    assert evidence and all(e.files_read == ("src/limits.py",) for e in evidence)
    assert outcome.kind == "arbitration" and outcome.verdict is not None
    assert "3 verified, 0 repaired, 0 unverified" in outcome.body  # the audit counts them


def test_tools_off_and_question_cases_debate_from_the_prompt(
    server: ToolModelServer, cases: list[Loaded]
) -> None:
    turns, _ = debate(server, cases[0], "debate:openai/gpt-test;rounds=1;tools=off")
    assert not any("tools" in r.body for r in server.requests)
    assert all(t.evidence is None for t in turns)
    server.reset()
    # A question has no files: it debates without tools even under tools=on.
    debate(server, cases[1], "debate:openai/gpt-test;rounds=1;tools=on")
    assert server.requests and not any("tools" in r.body for r in server.requests)


def test_the_case_reader_holds_the_cases_files_and_nothing_outside(cases: list[Loaded]) -> None:
    snap = case_reader(cases[0])
    assert snap is not None and snap.complete
    assert snap.file_lines("src/limits.py") == ["MAX_RETRIES = 3"]
    assert snap.file_lines("../outside.py") is None
    assert sorted(p for p, _, kind in snap.listing() if kind == "file") == [
        "src/handler.py",
        "src/limits.py",
    ]
    # The same files, the same commit (a resumed eval reads the same tree).
    again = case_reader(cases[0])
    assert again is not None and again.commit == snap.commit and len(snap.commit) == 40
    assert case_reader(cases[1]) is None
