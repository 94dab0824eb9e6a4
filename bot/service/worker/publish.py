"""Posting the bot's comments: sanitize, split, and upsert by marker.

A comment is found again by its marker line: first through the store (no GitHub
call), and — only for a resumed run, where a crash may have fallen between
posting a comment and recording it — by one listing of the thread. A create
that fails unclearly (5xx, dropped connection) is checked the same way before it
is tried again. So a re-render after a crash edits the comment instead of
duplicating it, and the happy path makes no list call.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

import anyio

from bot.core.errors import GitHubError
from bot.github.gateway import InstallationClient
from bot.github.markers import parse_marker, split_body
from bot.store import CommentRecord, RunStore
from bot.store.aio import AsyncStore

CREATE_ATTEMPTS = 3
MarkerKind = Literal["round", "verdict", "status", "aborted", "proposal-link"]


@dataclass(frozen=True)
class Thread:
    """Where a run's comments go: an issue/PR conversation, or a PR review thread."""

    repo: str
    issue_number: int
    review_comment_id: int | None = None  # reply in this review thread instead

    @property
    def kind(self) -> Literal["issue", "review"]:
        return "review" if self.review_comment_id is not None else "issue"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Publisher:
    gh: InstallationClient
    store: RunStore | None  # None: a one-off reply outside any run, never edited later
    run_id: str
    thread: Thread
    resumed: bool = False  # a previous attempt may have posted without recording
    _listed: dict[str, int] | None = field(default=None, init=False)
    _db: AsyncStore | None = field(default=None, init=False)
    _recorded: dict[str, CommentRecord] | None = field(default=None, init=False)
    _loading: anyio.Lock = field(default_factory=anyio.Lock, init=False)

    def __post_init__(self) -> None:
        self._db = AsyncStore(self.store) if self.store is not None else None

    async def _existing_by_listing(self, marker_line: str, *, fresh: bool = False) -> int | None:
        """One listing of the thread per resumed run: the bot's own comments by marker.
        Comments by anyone else are never adopted, whatever marker they carry."""
        if self._listed is None or fresh:
            t = self.thread
            if t.review_comment_id is not None:
                items = await self.gh.list_review_comments(t.repo, t.issue_number)
            else:
                items = await self.gh.list_comments(t.repo, t.issue_number)
            me = await self.gh.bot_login()
            listed: dict[str, int] = {}
            for c in items:
                body = str(c.get("body") or "")
                first = body.split("\n", 1)[0].strip()
                if (c.get("user") or {}).get("login") == me and parse_marker(first) is not None:
                    listed.setdefault(first, int(c["id"]))
            self._listed = listed
        return self._listed.get(marker_line)

    async def _record(self, db: AsyncStore, marker_line: str) -> CommentRecord | None:
        """What the store holds for ``marker_line``. The run's records are read
        once: one driver holds the run (its lease) and posts every comment of it
        through this publisher, which keeps its copy whole from then on."""
        async with self._loading:
            if self._recorded is None:
                self._recorded = await db.run_comments(self.run_id)
        return self._recorded.get(marker_line)

    async def upsert(self, kind: MarkerKind, body: str, *, round: int | None = None) -> int:
        """Post or edit the comment(s) for ``kind``; returns the first comment's id."""
        parts = split_body(kind, self.run_id, body, round=round)  # sanitizes
        first_id = 0
        for part in parts:
            marker_line = part.split("\n", 1)[0].strip()
            digest = _sha(part)
            if self._db is None:  # a one-off reply: found again only by listing
                existing = await self._existing_by_listing(marker_line) if self.resumed else None
                if existing is None:
                    existing = await self._create(part)
                else:
                    await self._update(existing, part)
                first_id = first_id or existing
                continue
            record = await self._record(self._db, marker_line)
            comment_id = record.comment_id if record is not None else None
            if record is not None and record.body_sha256 == digest:
                first_id = first_id or record.comment_id
                continue
            if comment_id is None and self.resumed:
                comment_id = await self._existing_by_listing(marker_line)
            if comment_id is None:
                comment_id = await self._create(part)
            else:
                await self._update(comment_id, part)
            await self._db.record_comment(
                self.run_id,
                marker_line,
                comment_id,
                self.thread.kind,
                digest,
            )
            assert self._recorded is not None  # read by _record above
            self._recorded[marker_line] = CommentRecord(comment_id, self.thread.kind, digest)
            first_id = first_id or comment_id
        return first_id

    async def _create(self, body: str) -> int:
        """Create a comment exactly once, even when GitHub fails unclearly (5xx, a
        dropped connection) after it may already have created it."""
        marker_line = body.split("\n", 1)[0].strip()
        for attempt in range(CREATE_ATTEMPTS):
            try:
                return await self._create_once(body)
            except GitHubError as exc:
                if exc.github_status is not None and exc.github_status < 500:
                    raise
                found = await self._existing_by_listing(marker_line, fresh=True)
                if found is not None:
                    return found
                if attempt == CREATE_ATTEMPTS - 1:
                    raise
                await anyio.sleep(2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _create_once(self, body: str) -> int:
        t = self.thread
        if t.review_comment_id is not None:
            return await self.gh.reply_review_comment(
                t.repo, t.issue_number, t.review_comment_id, body
            )
        return await self.gh.create_comment(t.repo, t.issue_number, body)

    async def _update(self, comment_id: int, body: str) -> None:
        if self.thread.review_comment_id is not None:
            await self.gh.update_review_comment(self.thread.repo, comment_id, body)
        else:
            await self.gh.update_comment(self.thread.repo, comment_id, body)


def filed_marker(key: str) -> str:
    """Hidden at the end of an issue the bot files, so the issue can be found again."""
    return f"<!-- debate-bot:filed key={key} -->"


async def file_issue_once(
    gh: InstallationClient,
    repo: str,
    title: str,
    body: str,
    *,
    key: str,
    labels: tuple[str, ...] = (),
    resumed: bool = False,
) -> int:
    """File an issue exactly once per ``key``: a resumed attempt, or a create that
    failed unclearly (5xx, dropped connection), first looks for the one it may
    already have filed. ``title`` and ``body`` must be sanitized already."""
    marker = filed_marker(key)
    body = f"{body}\n\n{marker}"
    if resumed and (found := await gh.find_own_issue(repo, marker)) is not None:
        return found
    for attempt in range(CREATE_ATTEMPTS):
        try:
            return await gh.create_issue(repo, title, body, labels=labels)
        except GitHubError as exc:
            if exc.github_status is not None and exc.github_status < 500:
                raise
            if (found := await gh.find_own_issue(repo, marker)) is not None:
                return found
            if attempt == CREATE_ATTEMPTS - 1:
                raise
            await anyio.sleep(2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover
