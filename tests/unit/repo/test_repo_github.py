"""The GitHub reader over real loopback HTTP against the fake GitHub: the
pinned commit, the archive and its redirect (GHES too), lazy blobs, empty
repositories, symlinks and submodules, crafted archives."""

from __future__ import annotations

import io
import json
import tarfile

import anyio
import pytest
from pydantic import SecretStr

from bot.core.settings import Settings
from bot.engine.types import RepoRef
from bot.github.gateway import GitHubGateway
from bot.repo.cache import SnapshotCache
from bot.repo.github import GitHubReader, ReaderLimits
from bot.repo.snapshot import Limits, Snapshot
from bot.repo.tools import ToolAnswer, ToolCaps, run_tool
from testkit.fakes.github_server import FakeGitHub
from testkit.harness.service import APP_ID, INSTALLATION, rsa_keypair

REPO = "acme/widgets"
TREE = "/repos/{owner}/{repo}/git/trees/{tree_sha}"
TARBALL = "/repos/{owner}/{repo}/tarball/{ref}"
BLOB = "/repos/{owner}/{repo}/git/blobs/{file_sha}"
CONTENTS = "/repos/{owner}/{repo}/contents/{path}"


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return rsa_keypair()


@pytest.fixture(params=["", "/api/v3"], ids=["github.com", "ghes"])
def fake(request: pytest.FixtureRequest, keys: tuple[str, str]):
    with FakeGitHub(app_id=APP_ID, public_key_pem=keys[1], api_prefix=request.param) as gh:
        gh.add_repo(REPO, installation_id=INSTALLATION)
        gh.put_file(REPO, "src/limits.py", "MAX_RETRIES = 3\n")
        gh.put_file(REPO, "src/handler.py", "from limits import MAX_RETRIES\n")
        gh.put_file(REPO, "README.md", "# Widgets\n")
        gh.add_pull(REPO, title="Retry", head_ref="feature")
        # The PR head differs from the default branch in one file and adds another.
        gh.put_file(REPO, "src/limits.py", "MAX_RETRIES = 5  # head\n", ref="feature")
        gh.put_file(REPO, "src/new.py", "NEW = True\n", ref="feature")
        yield gh


def settings(fake: FakeGitHub, private: str) -> Settings:
    return Settings(
        _env_file=None,
        app_id=APP_ID,
        private_key=SecretStr(private),
        github_api_url=fake.api_url,
        github_write_interval_s=0.0,
    )


def snapshot_of(
    fake: FakeGitHub, keys: tuple[str, str], commit: str, limits: ReaderLimits | None = None
) -> tuple[Snapshot, SnapshotCache]:
    cache = SnapshotCache(max_bytes=1 << 30)
    reader = GitHubReader(cache, limits)

    async def go() -> Snapshot:
        async with GitHubGateway(settings(fake, keys[0])) as gw:
            gh = await gw.installation(INSTALLATION)
            return await reader.snapshot(gh, RepoRef(REPO, commit, "https://github.com/" + REPO))

    return anyio.run(go), cache


def tool(snap: Snapshot, name: str, **args: object) -> str:
    answer = anyio.run(lambda: run_tool(snap, name, json.dumps(args), ToolCaps()))
    assert not answer.is_error, answer.text
    return answer.text


def refused(snap: Snapshot, path: str) -> ToolAnswer:
    return anyio.run(lambda: run_tool(snap, "read_file", json.dumps({"path": path}), ToolCaps()))


def test_the_archive_serves_the_pinned_head_in_two_requests(fake, keys) -> None:
    head = fake.head_sha(REPO, 1)
    fake.reset_requests()
    snap, _ = snapshot_of(fake, keys, head)
    # A push after the pin changes nothing the run reads.
    fake.put_file(REPO, "src/limits.py", "MAX_RETRIES = 99\n", ref="feature")
    assert tool(snap, "read_file", path="src/limits.py") == "1: MAX_RETRIES = 5  # head"
    assert "src/new.py" in tool(snap, "list_files", path="src").splitlines()
    assert tool(snap, "search_code", pattern="MAX_RETRIES") == (
        "src/handler.py:1: from limits import MAX_RETRIES\nsrc/limits.py:1: MAX_RETRIES = 5  # head"
    )
    assert fake.count("GET", TREE) == 1 and fake.count("GET", TARBALL) == 1
    assert fake.count("GET", BLOB) == 0 and fake.count("GET", CONTENTS) == 0
    codeload = [r for r in fake.requests if r.path.startswith("/_codeload/")]
    assert len(codeload) == 1 and codeload[0].status == 200  # the 302 was followed
    assert snap.complete and snap.commit == head


def test_the_default_branch_is_read_at_its_own_commit(fake, keys) -> None:
    main = fake.branches(REPO)["main"]
    snap, _ = snapshot_of(fake, keys, main)
    assert tool(snap, "read_file", path="src/limits.py") == "1: MAX_RETRIES = 3"
    assert "src/new.py" not in tool(snap, "list_files", path="src")


def test_past_the_archive_size_files_are_read_lazily_once(fake, keys) -> None:
    head = fake.head_sha(REPO, 1)
    fake.reset_requests()
    snap, _ = snapshot_of(fake, keys, head, ReaderLimits(archive_max_bytes=10))
    assert not snap.complete and fake.count("GET", TARBALL) == 0
    for _ in range(3):
        assert tool(snap, "read_file", path="src/limits.py") == "1: MAX_RETRIES = 5  # head"
    tool(snap, "list_files", path="")
    assert fake.count("GET", BLOB) == 1 and fake.count("GET", TREE) == 1  # 0 list calls
    # A search reads the folder's files it lacks, once.
    assert "src/handler.py:1:" in tool(snap, "search_code", pattern="MAX_RETRIES", path="src")
    assert fake.count("GET", BLOB) == 3 and snap.requests == 3
    assert snap.file_lines("src/new.py") == ["NEW = True"]


def test_a_lazy_search_over_too_much_is_refused_with_advice(fake, keys) -> None:
    limits = ReaderLimits(snapshot=Limits(search_fetch_files=1), archive_max_bytes=10)
    snap, _ = snapshot_of(fake, keys, fake.head_sha(REPO, 1), limits)
    answer = anyio.run(lambda: run_tool(snap, "search_code", '{"pattern": "x"}', ToolCaps()))
    assert answer.is_error and "give `path` a folder with at most 1 files" in answer.text


def test_an_archive_past_its_byte_bound_falls_back_to_lazy_reads(fake, keys) -> None:
    head = fake.head_sha(REPO, 1)
    fake.archives[(REPO, head)] = b"\x1f\x8b" + b"x" * 4096  # larger than the tree says
    snap, _ = snapshot_of(fake, keys, head, ReaderLimits(archive_max_bytes=200))
    assert not snap.complete
    assert tool(snap, "read_file", path="README.md") == "1: # Widgets"


def test_an_empty_repository_is_an_empty_snapshot(fake, keys) -> None:
    fake.add_repo("acme/empty", installation_id=INSTALLATION)
    root = fake.branches("acme/empty")["main"]

    async def go() -> Snapshot:
        async with GitHubGateway(settings(fake, keys[0])) as gw:
            gh = await gw.installation(INSTALLATION)
            return await GitHubReader(SnapshotCache(1 << 20)).snapshot(
                gh, RepoRef("acme/empty", root, "")
            )

    snap = anyio.run(go)
    assert fake.count("GET", TREE, status=409) == 1
    assert tool(snap, "list_files", path="") == "(the repository is empty)"
    answer = anyio.run(lambda: run_tool(snap, "read_file", '{"path": "a.py"}', ToolCaps()))
    assert answer.is_error and "does not exist" in answer.text


def test_symlinks_and_submodules_from_the_tree_and_the_archive(fake, keys) -> None:
    fake.put_file(REPO, "docs/limits", "../src/limits.py")
    fake.set_mode(REPO, "docs/limits", "120000")
    fake.put_file(REPO, "escape", "../../../etc/passwd")
    fake.set_mode(REPO, "escape", "120000")
    fake.put_file(REPO, "loop", "loop")
    fake.set_mode(REPO, "loop", "120000")
    fake.put_file(REPO, "ext/lib", "c" * 40)
    fake.set_mode(REPO, "ext/lib", "160000")
    main = fake.branches(REPO)["main"]
    for limits in (None, ReaderLimits(archive_max_bytes=1)):  # archive, then lazy blobs
        snap, _ = snapshot_of(fake, keys, main, limits)
        assert tool(snap, "read_file", path="docs/limits") == "1: MAX_RETRIES = 3"
        for path, says in (("escape", "outside"), ("loop", "loop"), ("ext/lib", "submodule")):
            answer = refused(snap, path)
            assert answer.is_error and says in answer.text, answer.text
        assert "ext/lib (submodule, not readable)" in tool(snap, "list_files", path="ext")


def test_a_crafted_archive_cannot_escape_or_add_files(fake, keys) -> None:
    head = fake.head_sha(REPO, 1)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in (
            ("top/README.md", b"# from the archive\n"),
            ("top/../../etc/cron.d/x", b"evil\n"),
            ("/abs/path", b"evil\n"),
            ("top/injected.py", b"evil\n"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    fake.archives[(REPO, head)] = out.getvalue()
    snap, _ = snapshot_of(fake, keys, head)
    assert tool(snap, "read_file", path="README.md") == "1: # from the archive"
    assert "injected.py" not in tool(snap, "list_files", path="")
    assert not snap.complete  # files the archive lacked are read lazily
    assert tool(snap, "read_file", path="src/new.py") == "1: NEW = True"


def test_an_archive_slower_than_the_timeout_leaves_lazy_reads(fake, keys) -> None:
    head = fake.head_sha(REPO, 1)
    snap, _ = snapshot_of(fake, keys, head, ReaderLimits(timeout_s=1e-6))
    assert not snap.complete  # the download was cut at once; nothing half-kept breaks reads
    assert tool(snap, "read_file", path="src/limits.py") == "1: MAX_RETRIES = 5  # head"


def test_runs_reading_one_file_at_once_pay_one_request(fake, keys) -> None:
    snap, _ = snapshot_of(fake, keys, fake.head_sha(REPO, 1), ReaderLimits(archive_max_bytes=1))
    fake.reset_requests()

    async def five_at_once() -> list[str]:
        answers: list[str] = []

        async def read() -> None:
            answer = await run_tool(snap, "read_file", '{"path": "src/limits.py"}', ToolCaps())
            answers.append(answer.text)

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(read)
        return answers

    assert anyio.run(five_at_once) == ["1: MAX_RETRIES = 5  # head"] * 5
    assert fake.count("GET", BLOB) == 1


def test_past_a_truncated_tree_paths_are_asked_for_one_by_one(fake, keys) -> None:
    """A 200,000-file monorepo: GitHub cuts the tree at 100,000 entries (here 2)."""
    fake.tree_limit = 2
    head = fake.head_sha(REPO, 1)
    snap, _ = snapshot_of(fake, keys, head)
    assert snap.truncated and not snap.complete
    fake.reset_requests()
    assert tool(snap, "read_file", path="src/new.py") == "1: NEW = True"
    assert "src/limits.py" in tool(snap, "list_files", path="src").splitlines()
    answer = refused(snap, "src/nothing.py")
    assert answer.is_error and "does not exist" in answer.text
    refused(snap, "src/nothing.py")  # asked once, not twice
    assert fake.count("GET", CONTENTS) == 2 and fake.count("GET", TARBALL) == 0
    assert "more files than this listing holds" in tool(snap, "list_files", path="")
