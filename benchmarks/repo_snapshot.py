"""Repository snapshots: GitHub requests per grounded run, bytes held, and peak
memory of many runs on one commit.

A "grounded run" is what a debate's personas do with the repository tools:
list the root and two folders, read ``reads`` distinct files (several of them
twice, as personas do), and run two searches. It is played against the fake
GitHub over loopback HTTP through the real gateway, three ways side by side:

- ``archive``: the default reader (git tree + one tarball, followed 302);
- ``lazy``: the same reader past its archive size (git tree + one blob per
  distinct file read; a search reads the folder it names);
- ``contents``: what reading through the contents API would cost (one request
  per read and per listing, as the brief and reviews read today).

Targets (issue 18): API requests per grounded run ≤ 3 + distinct files read
lazily, 0 list calls after the tree; 50 runs at once on one 50 MB repository
hold the snapshot once (peak memory of 50 shared runs ≈ one snapshot, not 50).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import tracemalloc
from collections.abc import Awaitable, Callable

import anyio
from pydantic import SecretStr

from benchmarks.common import print_table
from bot.core.errors import GitHubError
from bot.core.settings import Settings
from bot.engine.types import RepoRef
from bot.github.gateway import GitHubGateway, InstallationClient
from bot.repo.cache import SnapshotCache
from bot.repo.github import GitHubReader, ReaderLimits
from bot.repo.snapshot import Snapshot
from bot.repo.tools import ToolCaps, run_tool
from testkit.fakes.github_server import FakeGitHub
from testkit.harness.service import APP_ID, INSTALLATION, rsa_keypair

REPO = "acme/monorepo"
FOLDERS = ("api", "core", "web", "docs")
MB = 1024 * 1024


def seed(fake: FakeGitHub, total_bytes: int, files: int) -> str:
    """``files`` source files of ~equal size summing to ``total_bytes``; the commit."""
    size = max(64, total_bytes // files)
    line = "def handler_{n}(request):  # retries stay bounded by MAX_RETRIES\n"
    tree: dict[str, bytes] = {}
    for i in range(files):
        body = "".join(line.format(n=i * 1000 + j) for j in range(size // len(line) + 1))
        tree[f"{FOLDERS[i % len(FOLDERS)]}/m{i:05}.py"] = body[:size].encode()
    with fake._lock:  # one commit of every file (put_file commits one at a time)
        return fake._commit(fake._repo(REPO), "main", tree)


async def grounded_run(snap: Snapshot, reads: int) -> int:
    """The tool calls of one grounded run; the bytes its answers carried."""
    caps = ToolCaps()
    calls: list[tuple[str, dict[str, object]]] = [
        ("list_files", {"path": ""}),
        ("list_files", {"path": "api"}),
    ]
    calls += [("list_files", {"path": "core"})]
    for i in range(reads):
        path = f"{FOLDERS[i % len(FOLDERS)]}/m{i:05}.py"
        calls.append(("read_file", {"path": path, "start_line": 1, "end_line": 40}))
        if i % 2 == 0:  # read again further down: no new request
            calls.append(("read_file", {"path": path, "start_line": 41}))
    calls += [("search_code", {"pattern": r"handler_1\d\b", "path": "core"})]
    calls += [("search_code", {"pattern": "MAX_RETRIES", "path": "docs"})]
    sent = 0
    for name, args in calls:
        answer = await run_tool(snap, name, json.dumps(args), caps)
        sent += answer.bytes_read
    return sent


async def contents_run(gh: InstallationClient, commit: str, reads: int) -> None:
    """The same run through the contents API: a request per listing and read."""
    await gh.get_tree(REPO, commit)  # the root listing
    for folder in ("api", "core"):  # a folder's listing: a contents request answering a list
        with contextlib.suppress(GitHubError):
            await gh.read_file(REPO, folder, commit)
    for i in range(reads):
        path = f"{FOLDERS[i % len(FOLDERS)]}/m{i:05}.py"
        await gh.read_file(REPO, path, commit)
        if i % 2 == 0:
            await gh.read_file(REPO, path, commit)


def api_requests(
    fake: FakeGitHub, folders: tuple[str, ...] = ("api", "core")
) -> tuple[int, int, int]:
    """(API requests, list calls beyond the one tree, codeload downloads) since the
    reset; the installation-token request aside (once per hour, not per run)."""
    codeload = sum(1 for r in fake.requests if r.path.startswith("/_codeload/"))
    api = [
        r
        for r in fake.requests
        if not r.path.startswith("/_codeload/") and "access_tokens" not in r.route
    ]
    trees = sum(1 for r in api if r.route.endswith("/git/trees/{tree_sha}"))
    listings = sum(1 for r in api if r.path.rsplit("/", 1)[-1] in folders)
    return len(api), max(0, trees - 1) + listings, codeload


async def with_client(
    fake: FakeGitHub, private: str, body: Callable[[InstallationClient], Awaitable[None]]
) -> None:
    settings = Settings(
        _env_file=None,
        app_id=APP_ID,
        private_key=SecretStr(private),
        github_api_url=fake.api_url,
        github_write_interval_s=0.0,
    )
    async with GitHubGateway(settings) as gw:
        await body(await gw.installation(INSTALLATION))


def requests_table(fake: FakeGitHub, private: str, commit: str, reads: int) -> None:
    rows = []
    ref = RepoRef(REPO, commit, "https://github.com/" + REPO)
    for mode, archive_max in (("archive", 1 << 40), ("lazy", 0)):
        fake.reset_requests()
        held: list[Snapshot] = []

        async def body(
            gh: InstallationClient, archive_max: int = archive_max, held: list[Snapshot] = held
        ) -> None:
            reader = GitHubReader(
                SnapshotCache(1 << 40), ReaderLimits(archive_max_bytes=archive_max)
            )
            snap = await reader.snapshot(gh, ref)
            await grounded_run(snap, reads)
            held.append(snap)

        anyio.run(with_client, fake, private, body)
        api, lists, codeload = api_requests(fake)
        lazy = held[0].requests
        rows.append(
            [
                mode,
                str(api),
                str(lists),
                str(codeload),
                str(lazy),
                str(3 + lazy),
                f"{held[0].nbytes / MB:.1f}",
            ]
        )
    fake.reset_requests()
    anyio.run(with_client, fake, private, lambda gh: contents_run(gh, commit, reads))
    api, lists, _ = api_requests(fake)
    rows.append(["contents API (per read)", str(api), str(lists), "0", "-", "-", "0.0"])
    print_table(
        f"GitHub requests per grounded run ({reads} files read, 3 listings, 2 searches)",
        [
            "reader",
            "API requests",
            "list calls",
            "codeload",
            "lazy loads",
            "target ≤",
            "snapshot MB",
        ],
        rows,
    )
    archive, contents = int(rows[0][1]), int(rows[2][1])
    print(f"API requests, archive reader / contents API: {archive / contents:.3f}×")


def memory_table(fake: FakeGitHub, private: str, commit: str, runs: int, unshared: int) -> None:
    ref = RepoRef(REPO, commit, "https://github.com/" + REPO)
    rows = []
    for label, n, shared in (("shared cache", runs, True), ("a snapshot per run", unshared, False)):
        gc.collect()
        tracemalloc.start()

        async def body(
            gh: InstallationClient, n: int = n, shared: bool = shared, label: str = label
        ) -> None:
            common = GitHubReader(SnapshotCache(1 << 40))
            held: list[Snapshot] = []

            async def run() -> None:
                reader = common if shared else GitHubReader(SnapshotCache(1 << 40))
                snap = await reader.snapshot(gh, ref)
                await grounded_run(snap, 4)
                held.append(snap)

            async with anyio.create_task_group() as tg:
                for _ in range(n):
                    tg.start_soon(run)
            rows.append(
                [label, str(n), str(len({id(s) for s in held})), f"{held[0].nbytes / MB:.1f}"]
            )

        anyio.run(with_client, fake, private, body)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rows[-1].append(f"{peak / MB:.1f}")
        rows[-1].append(f"{peak / MB / n:.1f}")
    per_shared = float(rows[0][5])
    per_unshared = float(rows[1][5])
    print_table(
        "Peak memory of concurrent grounded runs on one commit (tracemalloc)",
        ["snapshots", "runs", "snapshots built", "snapshot MB", "peak MB", "peak MB per run"],
        rows,
    )
    print(f"per-run memory, shared / unshared: {per_shared / max(per_unshared, 1e-9):.3f}×")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks repo_snapshot")
    parser.add_argument("--quick", action="store_true", help="a 5 MB repository, 10 runs")
    parser.add_argument("--mb", type=int, default=50, help="repository size")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--reads", type=int, default=12, help="distinct files read per run")
    args = parser.parse_args(argv)
    if args.quick:
        args.mb, args.files, args.runs = 5, 400, 10
    private, public = rsa_keypair()
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        commit = seed(fake, args.mb * MB, args.files)
        requests_table(fake, private, commit, args.reads)
        memory_table(fake, private, commit, args.runs, unshared=3)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
