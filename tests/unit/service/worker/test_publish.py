"""Publisher: upsert by marker, across a crash between posting and recording."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.core.settings import Settings
from bot.engine.types import DebateSpec
from bot.github.gateway import GitHubGateway
from bot.github.markers import MAX_BODY
from bot.service.worker.publish import Publisher, Thread
from bot.store import NewRun, RunStore
from testkit.fakes.github_server import FakeGitHub
from testkit.harness.service import APP_ID, INSTALLATION, REPO


@pytest.fixture
def world(tmp_path: Path, app_keys: tuple[str, str]):
    private, public = app_keys
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as github:
        github.add_repo(REPO, installation_id=INSTALLATION)
        number = github.add_issue(REPO, title="t", body="b")
        settings = Settings(
            app_id=APP_ID,
            private_key=SecretStr(private),
            github_api_url=github.api_url,
            github_write_interval_s=0,
        )
        store = RunStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
        store.migrate()
        for i, run_id in enumerate(("run1", "run2", "run3")):
            spec = DebateSpec(mode="debate", title="t", subject="s")
            store.create_run(NewRun(repo=REPO, issue_number=100 + i, spec=spec, run_id=run_id))
        yield github, settings, store, number
        store.dispose()


async def test_rerender_edits_instead_of_duplicating(world) -> None:
    github, settings, store, number = world
    async with GitHubGateway(settings) as gateway:
        gh = await gateway.installation(INSTALLATION)
        pub = Publisher(gh, store, "run1", Thread(REPO, number))
        first = await pub.upsert("round", "Round one, first render", round=1)
        assert await pub.upsert("round", "Round one, first render", round=1) == first
        writes = github.count("PATCH") + github.count("POST")
        await pub.upsert("round", "Round one, edited", round=1)
        assert github.count("PATCH") == 1
        assert github.count("PATCH") + github.count("POST") == writes + 1
    bodies = [c["body"] for c in github.comments(REPO, number)]
    assert len(bodies) == 1 and bodies[0].endswith("Round one, edited")


async def test_a_run_s_comment_records_are_read_once_then_kept(world, monkeypatch) -> None:
    """Every comment the bot posts was looked up first; the publisher of a run
    reads the run's records once and keeps them current itself, so a debate's
    round digests cost one store read, not one each."""
    github, settings, store, number = world
    reads: list[str] = []
    for name in ("run_comments", "comment_id"):
        real = getattr(store, name)

        def counted(*args: object, _real=real, _name=name) -> object:
            reads.append(_name)
            return _real(*args)

        monkeypatch.setattr(store, name, counted)
    async with GitHubGateway(settings) as gateway:
        gh = await gateway.installation(INSTALLATION)
        pub = Publisher(gh, store, "run1", Thread(REPO, number))
        existing = github.add_comment(REPO, number, "placeholder", user="debate-bot[bot]")
        store.record_comment(
            "run1", "<!-- debate-bot:round run=run1 round=1 -->", existing, "issue", "0"
        )
        first = await pub.upsert("round", "Round one", round=1)  # recorded before: edited
        second = await pub.upsert("round", "Round two", round=2)  # new: created
        assert await pub.upsert("round", "Round two", round=2) == second  # unchanged: no write
        await pub.upsert("round", "Round two, edited", round=2)  # edited, from its own record
    assert first == existing and second != existing
    assert reads == ["run_comments"]
    created = github.count("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments")
    assert (created, github.count("PATCH")) == (1, 2)
    bodies = [c["body"].split("\n", 1)[1] for c in github.comments(REPO, number)]
    assert bodies == ["Round one", "Round two, edited"]


async def test_resumed_run_finds_comment_posted_but_not_recorded(world) -> None:
    github, settings, store, number = world
    marker = "<!-- debate-bot:verdict run=run2 -->"
    # A previous worker posted the verdict and died before recording it.
    github.add_comment(REPO, number, f"{marker}\nold verdict", user="debate-bot[bot]")
    async with GitHubGateway(settings) as gateway:
        gh = await gateway.installation(INSTALLATION)
        pub = Publisher(gh, store, "run2", Thread(REPO, number), resumed=True)
        await pub.upsert("verdict", "new verdict")
    comments = github.comments(REPO, number)
    assert len(comments) == 1 and comments[0]["body"] == f"{marker}\nnew verdict"
    assert store.comment_id("run2", marker) is not None


async def test_long_bodies_split_into_marked_parts_under_the_limit(world) -> None:
    github, settings, store, number = world
    body = "\n\n".join(f"paragraph {i} " + "x" * 900 for i in range(150))
    async with GitHubGateway(settings) as gateway:
        gh = await gateway.installation(INSTALLATION)
        await Publisher(gh, store, "run3", Thread(REPO, number)).upsert("round", body, round=2)
    comments = github.comments(REPO, number)
    assert len(comments) >= 3
    assert all(len(c["body"]) <= MAX_BODY for c in comments)
    firsts = [c["body"].split("\n", 1)[0] for c in comments]
    assert firsts[0] == "<!-- debate-bot:round run=run3 round=2 -->"
    assert firsts[1] == "<!-- debate-bot:round run=run3 round=2 part=2 -->"


async def test_resumed_run_never_adopts_a_forged_marker_comment(world) -> None:
    github, settings, store, number = world
    marker = "<!-- debate-bot:verdict run=run3 -->"
    forged = github.add_comment(REPO, number, f"{marker}\nI won", user="mallory")
    async with GitHubGateway(settings) as gateway:
        gh = await gateway.installation(INSTALLATION)
        await Publisher(gh, store, "run3", Thread(REPO, number), resumed=True).upsert(
            "verdict", "the real verdict"
        )
    comments = {c["id"]: c for c in github.comments(REPO, number)}
    assert comments[forged]["body"] == f"{marker}\nI won"  # untouched
    [ours] = [c for c in comments.values() if c["user"] == "debate-bot[bot]"]
    assert ours["body"] == f"{marker}\nthe real verdict"


async def test_a_create_lost_behind_a_502_is_found_not_repeated(world) -> None:
    github, settings, store, number = world
    github.inject_faults(
        script=["lost502"],
        applies_to=lambda method, route: method == "POST" and route.endswith("/comments"),
    )
    async with GitHubGateway(settings) as gateway:
        gh = await gateway.installation(INSTALLATION)
        await Publisher(gh, store, "run1", Thread(REPO, number)).upsert("verdict", "once")
    comments = github.comments(REPO, number)
    assert [c["body"] for c in comments] == ["<!-- debate-bot:verdict run=run1 -->\nonce"]
    assert store.comment_id("run1", "<!-- debate-bot:verdict run=run1 -->") is not None
