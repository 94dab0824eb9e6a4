"""The tool loop over a lazy snapshot (content loaded on demand, as the GitHub
reader past the archive size and the local checkout reader hold it): a citation
to a file no tool read is checked against the file, not against nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from bot.core.errors import GitHubError
from bot.engine.types import ModelRequest, Prompt, ToolBudget, Turn, TurnKey
from bot.models.router import ModelRouter
from bot.repo.snapshot import Entry, Limits, Snapshot
from bot.repo.tools import ToolCaps, run_tool
from bot.run.tool_loop import MAX_CITED_LOADS, ToolLoop
from testkit.fakes.tool_server import Call, ToolModelServer, stop_after
from testkit.harness.tool_models import settings_for, tool_server

COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = {
    "app/views.py": b"def view(user):\n    return limits.check(user)\n",
    "app/limits.py": b"MAX_RETRIES = 3\n\n\ndef check(user):\n    return user is not None\n",
}
BUDGET = ToolBudget(
    tools=("list_files", "read_file", "search_code"), max_calls=5, max_bytes=20_000, max_steps=4
)
# Reads views.py only, then cites limits.py (seen in the prompt's excerpt, say).
ANSWER = 'POSITION: bounded.\nSee `app/limits.py:L1` "MAX_RETRIES = 3".\nPOINT 1: HOLD — set'


class Lazy:
    """A loader that counts what it was asked for (each would be a GitHub request)."""

    def __init__(self, files: dict[str, bytes], down: frozenset[str] = frozenset()) -> None:
        self.files = files
        self.asked: list[str] = []
        self.down = down  # paths whose load meets GitHub down

    async def __call__(self, e: Entry) -> bytes | None:
        self.asked.append(e.path)
        if e.path in self.down:
            raise GitHubError("GitHub is down")
        return self.files.get(e.path)


def lazy_snapshot(loader: Lazy, files: dict[str, bytes]) -> Snapshot:
    return Snapshot(
        repo="acme/widgets",
        commit=COMMIT,
        html_url="https://github.com/acme/widgets",
        entries=[Entry(p, "file", len(d)) for p, d in files.items()],
        limits=Limits(),
        loader=loader,
        remote=True,
    )


@pytest.fixture
def server() -> Iterator[ToolModelServer]:
    with tool_server(stop_after([[Call("read_file", {"path": "app/views.py"})]], ANSWER)) as srv:
        yield srv


async def run_turn(server: ToolModelServer, snap: Snapshot) -> Turn:
    async with ModelRouter(settings_for(server)) as router:
        loop = ToolLoop(
            routes=router,
            plain=router.complete,
            reader=snap,
            run_tool=run_tool,
            caps=ToolCaps(),
            run_id="run-lazy",
        )
        request = ModelRequest(
            key=TurnKey("opening", 1, "Atlas"),
            models=("openai/gpt-test",),
            prompt=Prompt(system="You debate.\n", prefix="# Subject\n", suffix="Go.\n"),
            max_output_tokens=200,
            tools=BUDGET,
        )
        return await loop.complete(request)


def test_a_cited_file_no_tool_read_is_loaded_and_verified(server: ToolModelServer) -> None:
    loader = Lazy(FILES)
    snap = lazy_snapshot(loader, FILES)
    turn = asyncio.run(run_turn(server, snap))
    assert turn.status == "ok"
    ev = turn.evidence
    assert ev is not None and ev.files_read == ("app/views.py",)
    (check,) = ev.citations
    assert check.status == "verified", check.reason
    assert check.url == f"https://github.com/acme/widgets/blob/{COMMIT}/app/limits.py#L1"
    # The cited file was loaded for the check, once; nothing else was.
    assert loader.asked == ["app/views.py", "app/limits.py"]


def test_a_cited_file_that_cannot_be_loaded_stays_unverified(server: ToolModelServer) -> None:
    # GitHub goes down after the read: the check says so, the turn is not lost.
    loader = Lazy(FILES, down=frozenset({"app/limits.py"}))
    turn = asyncio.run(run_turn(server, lazy_snapshot(loader, FILES)))
    assert turn.status == "ok" and turn.evidence is not None
    assert loader.asked == ["app/views.py", "app/limits.py"]
    (check,) = turn.evidence.citations
    assert check.status == "unverified"
    assert check.reason == "no such file at the pinned commit"


def test_citation_loads_are_bounded() -> None:
    files = {f"m/f{i}.py": b"x = 1\n" for i in range(MAX_CITED_LOADS + 5)}
    loader = Lazy(files)
    snap = lazy_snapshot(loader, files)
    text = " ".join(f'`m/f{i}.py:L1` "x = 1"' for i in range(MAX_CITED_LOADS + 5))
    loop = ToolLoop(
        routes=None,  # type: ignore[arg-type]
        plain=None,  # type: ignore[arg-type]
        reader=snap,
        run_tool=run_tool,
        caps=ToolCaps(),
        run_id="r",
    )
    asyncio.run(loop._load_cited(text))
    assert loader.asked == [f"m/f{i}.py" for i in range(MAX_CITED_LOADS)]
