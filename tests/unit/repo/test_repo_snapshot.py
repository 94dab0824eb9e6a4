"""Snapshots' bounds: hostile tarballs, the shared cache, the local reader."""

from __future__ import annotations

import ast
import asyncio
import io
import json
import os
import secrets
import shutil
import subprocess
import tarfile
from pathlib import Path

import anyio
import pytest

from bot.engine.types import DebateSpec, RepoRef
from bot.repo.archive import unpack_into
from bot.repo.brief.source import tree_of
from bot.repo.cache import SnapshotCache
from bot.repo.github import html_url
from bot.repo.local import checkout_at, head_commit, open_checkout
from bot.repo.snapshot import Entry, Limits, Snapshot
from bot.repo.tools import ToolCaps, run_tool
from bot.store.codec import spec_from_json, spec_to_json
from testkit.harness.repo import COMMIT, HTML_URL, archived

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def empty_snapshot(paths: list[str], limits: Limits | None = None) -> Snapshot:
    return Snapshot(
        repo="acme/widgets",
        commit=COMMIT,
        html_url=HTML_URL,
        entries=[Entry(p, "file", 10) for p in paths],
        limits=limits or Limits(),
    )


def tar_gz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


def test_hostile_tar_members_never_enter_the_snapshot() -> None:
    snap = empty_snapshot(["ok.txt", "etc/passwd", "x/../../evil", "hard", "dev"])
    archive = tar_gz(
        [
            (member("acme-widgets-0123456/", tarfile.DIRTYPE), None),
            (member("acme-widgets-0123456/ok.txt"), b"fine\n"),
            (member("acme-widgets-0123456/../../evil"), b"escape\n"),
            (member("acme-widgets-0123456/x/../../evil"), b"escape\n"),
            (member("/etc/passwd"), b"root\n"),
            (member("acme-widgets-0123456//etc/passwd"), b"root\n"),
            (member("other-top/ok.txt"), b"not ours\n"),
            (member("acme-widgets-0123456/hard", tarfile.LNKTYPE, "ok.txt"), None),
            (member("acme-widgets-0123456/dev", tarfile.CHRTYPE), None),
            (member("acme-widgets-0123456/not-in-tree.txt"), b"added\n"),
        ]
    )
    done = unpack_into(snap, archive, max_unpacked=1 << 20)
    assert done.files == 1 and done.skipped >= 7
    assert snap.held("ok.txt") == b"fine\n"
    assert snap.held("etc/passwd") is None and snap.held("hard") is None
    assert snap.entry("not-in-tree.txt") is None  # the tree is the index, not the archive


def test_a_gzip_bomb_stops_at_the_unpacked_bound() -> None:
    snap = empty_snapshot(["big.txt"])
    archive = tar_gz([(member("top/big.txt"), b"\n" * (20 << 20))])
    assert len(archive) < 100_000  # 20 MB of newlines compress to ~20 kB
    done = unpack_into(snap, archive, max_unpacked=1 << 20)
    assert not done.complete and snap.held("big.txt") is None


def test_a_corrupt_or_cut_archive_keeps_what_was_read() -> None:
    snap = empty_snapshot(["a.txt", "b.txt"])
    noise = secrets.token_hex(50_000).encode()  # incompressible: the cut falls inside it
    archive = tar_gz([(member("top/a.txt"), b"a\n"), (member("top/b.txt"), noise)])
    done = unpack_into(snap, archive[: len(archive) // 2], max_unpacked=1 << 20)
    assert not done.complete and snap.held("a.txt") == b"a\n"
    assert not unpack_into(empty_snapshot([]), b"not gzip at all", max_unpacked=1 << 20).complete


def test_the_snapshot_stops_keeping_at_its_size() -> None:
    snap = empty_snapshot(["a", "b", "c"], Limits(max_bytes=25))
    archive = tar_gz([(member(f"top/{p}"), b"z" * 10) for p in "abc"])
    done = unpack_into(snap, archive, max_unpacked=1 << 20)
    assert not done.complete and done.files == 2 and snap.nbytes - snap.index_bytes == 20


# -- the cache -------------------------------------------------------------------


def test_runs_on_one_commit_share_one_fetch_and_eviction_goes_by_size() -> None:
    cache = SnapshotCache(max_bytes=10_000)
    builds: list[str] = []

    def builder(name: str, size: int):
        async def build() -> Snapshot:
            builds.append(name)
            await anyio.sleep(0.01)  # runs arrive while the fetch is in flight
            snap = empty_snapshot([])
            snap.keep("blob", b"x" * size)
            return snap

        return build

    async def scenario() -> list[Snapshot]:
        got: list[Snapshot] = []

        async def run() -> None:
            got.append(await cache.get(("acme/widgets", "a"), builder("a", 4000)))

        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(run)
        await cache.get(("acme/widgets", "b"), builder("b", 4000))
        assert ("acme/widgets", "a") in cache and ("acme/widgets", "b") in cache
        await cache.get(("acme/widgets", "c"), builder("c", 4000))  # over 10 kB: a goes
        return got

    got = anyio.run(scenario)
    assert builds == ["a", "b", "c"] and cache.builds == 3
    assert len({id(s) for s in got}) == 1  # fifty runs, one snapshot
    assert ("acme/widgets", "a") not in cache and ("acme/widgets", "c") in cache
    assert cache.held_bytes <= 10_000


def test_a_failed_fetch_reaches_every_waiter_and_is_not_remembered() -> None:
    cache = SnapshotCache(max_bytes=1 << 20)
    calls = 0

    async def failing() -> Snapshot:
        nonlocal calls
        calls += 1
        await anyio.sleep(0.01)
        raise RuntimeError("GitHub down")

    async def scenario() -> int:
        failures = 0

        async def run() -> None:
            nonlocal failures
            try:
                await cache.get(("r", "c"), failing)
            except RuntimeError:
                failures += 1

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(run)
        with pytest.raises(RuntimeError):
            await cache.get(("r", "c"), failing)
        return failures

    assert anyio.run(scenario) == 5 and calls == 2


def test_a_cancelled_fetch_is_taken_over_by_a_waiting_run() -> None:
    cache = SnapshotCache(max_bytes=1 << 20)

    async def slow() -> Snapshot:
        await anyio.sleep(10)
        raise AssertionError("unreachable")

    async def quick() -> Snapshot:
        return empty_snapshot(["x"])

    async def scenario() -> Snapshot:
        async with anyio.create_task_group() as tg:
            first = anyio.CancelScope()

            async def cancelled_run() -> None:
                with first:
                    await cache.get(("r", "c"), slow)

            tg.start_soon(cancelled_run)
            await anyio.sleep(0.01)
            result: list[Snapshot] = []

            async def waiting_run() -> None:
                result.append(await cache.get(("r", "c"), quick))

            tg.start_soon(waiting_run)
            await anyio.sleep(0.01)
            first.cancel()
        return result[0]

    assert anyio.run(scenario).entry("x") is not None


# -- the local reader ------------------------------------------------------------


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("TOKEN = load()\n")
    (root / ".gitignore").write_text("secret.txt\n")
    (root / "secret.txt").write_text("IGNORED-SECRET\n")
    (root / ".env").write_text("API_KEY=UNTRACKED-SECRET\n")
    (root / "notes.md").write_text("UNTRACKED-NOTE\n")
    os.symlink(".env", root / "env_link")
    os.symlink("secret.txt", root / "secret_link")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    git(root, "add", "src/app.py", ".gitignore", "env_link", "secret_link")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "one")
    return root


def tool(snap: Snapshot, name: str, args: str) -> tuple[str, bool]:
    answer = anyio.run(lambda: run_tool(snap, name, args, ToolCaps()))
    return answer.text, answer.is_error


@needs_git
def test_the_local_reader_never_reads_an_ignored_or_untracked_file(checkout: Path) -> None:
    snap = open_checkout(checkout)
    listing, _ = tool(snap, "list_files", '{"path": ""}')
    # The tracked symlinks are listed with their targets (tracked text); nothing else.
    assert listing.splitlines() == [
        ".gitignore",
        "env_link -> .env",
        "secret_link -> secret.txt",
        "src/",
    ]
    for path in (".env", "secret.txt", "notes.md", "env_link", "secret_link"):
        text, error = tool(snap, "read_file", f'{{"path": "{path}"}}')
        assert error and "SECRET" not in text, path
    for pattern in ("SECRET", "API_KEY", "UNTRACKED"):
        text, error = tool(snap, "search_code", f'{{"pattern": "{pattern}"}}')
        assert not error and text.startswith("no match"), text
    text, _ = tool(snap, "read_file", '{"path": "src/app.py"}')
    assert text == "1: TOKEN = load()"
    assert snap.commit == head_commit(checkout) and len(snap.commit) == 40


@needs_git
def test_action_mode_reads_the_checkout_only_at_the_pinned_commit(checkout: Path) -> None:
    head = head_commit(checkout)
    assert head is not None
    snap = checkout_at(
        checkout, repo="acme/shop", commit=head, html_url="https://github.com/acme/shop"
    )
    assert snap is not None and snap.html_url == "https://github.com/acme/shop"
    assert checkout_at(checkout, repo="acme/shop", commit="f" * 40, html_url="") is None


def test_outside_git_the_walk_skips_dot_files_and_keys(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "core.go").write_text("package lib\n")
    (tmp_path / ".env").write_text("A=SECRET\n")
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("SECRET\n")
    for name in ("id_rsa", "id_ed25519.pub", "server.pem", "tls.key", "prod.env"):
        (tmp_path / "lib" / name).write_text("SECRET\n")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "x.js").write_text("SECRET\n")
    snap = open_checkout(tmp_path)
    assert [e.path for e in snap.files_under("")] == ["lib/core.go"]
    text, error = tool(snap, "search_code", '{"pattern": "SECRET"}')
    assert not error and text.startswith("no match")
    assert "not a git checkout" in snap.notes[0]


def test_bot_repo_imports_no_llm_worker_or_store() -> None:
    banned = ("bot.models", "bot.service.worker", "bot.store")
    for path in Path("bot/repo").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert not name.startswith(banned), f"{path} imports {name}"


def test_the_pinned_commit_is_stored_with_the_spec_and_old_specs_still_load() -> None:
    ref = RepoRef("acme/widgets", COMMIT, HTML_URL)
    spec = DebateSpec(mode="debate", title="t", subject="s", repo_ref=ref)
    assert spec_from_json(spec_to_json(spec)).repo_ref == ref
    old = json.loads(spec_to_json(DebateSpec(mode="debate", title="t", subject="s")))
    del old["repo_ref"]  # written before the field existed
    assert spec_from_json(json.dumps(old)).repo_ref is None
    assert html_url("https://api.github.com", "acme/widgets") == HTML_URL
    assert html_url("https://ghe.example.com/api/v3/", "acme/w") == "https://ghe.example.com/acme/w"


def test_the_brief_reads_through_the_snapshot_port() -> None:
    snap = archived(
        {"docs/a.md": b"# A\n", "latin.txt": "caf\u00e9".encode("latin-1"), "bin": b"\x00\x01"}
    )
    entries = tree_of(snap)
    assert [(e.path, e.kind) for e in entries] == [
        ("bin", "blob"),
        ("docs", "tree"),
        ("docs/a.md", "blob"),
        ("latin.txt", "blob"),
    ]
    texts = anyio.run(lambda: _texts(snap, ["docs/a.md", "latin.txt", "bin", "gone"]))
    assert texts == ["# A\n", None, None, None]


async def _texts(snap: Snapshot, paths: list[str]) -> list[str | None]:
    return [await snap.text(p) for p in paths]


def test_ensuring_cited_files_loads_known_paths_and_asks_nothing_about_others() -> None:
    """A citation to a made-up path must not spend the probes that every run on
    the commit shares (a truncated index asks the source about unknown paths)."""
    asked: list[str] = []
    loaded: list[str] = []

    async def probe(path: str) -> tuple[list[Entry], list[str]]:
        asked.append(path)
        return [], []

    async def loader(entry: Entry) -> bytes:
        loaded.append(entry.path)
        return b"line one\nline two\n"

    snap = Snapshot(
        repo="acme/widgets",
        commit=COMMIT,
        html_url=HTML_URL,
        entries=[Entry("src/app.py", "file", 18)],
        limits=Limits(),
        loader=loader,
        probe=probe,
        truncated=True,
    )
    asyncio.run(snap.ensure(["src/app.py", "src/made_up.py", "nowhere/x.py"]))
    assert loaded == ["src/app.py"] and asked == []
    assert snap.file_lines("src/app.py") == ["line one", "line two"]
