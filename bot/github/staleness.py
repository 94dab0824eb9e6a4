"""Arbitration staleness as pure rules: is a review comment still about the lines
it was made on? The rules are bot/service/features/arbitration/handlers.py's module docstring;
``stale_reason`` there reads the two file versions these functions compare."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.core.errors import GitHubError, TransientGitHubError
from bot.github.gateway import InstallationClient

OUTDATED = "outdated: GitHub no longer shows it on the current diff"


@dataclass(frozen=True)
class Span:
    """The right-side lines a comment was made on, to look for at the PR head."""

    path: str
    original: str  # the commit the comment was made on
    start: int
    end: int

    def lines(self, before: str) -> list[str]:
        """The commented lines of the file as it was at ``original``."""
        return before.splitlines()[self.start - 1 : self.end]


def commented_span(comment: Mapping[str, Any], head_sha: str) -> Span | str | None:
    """Rules 1 and 2, from the comment alone: a reason it is stale (str), fresh
    (None), or the Span whose lines rule 3 compares."""
    if comment.get("line") is None or ("position" in comment and comment["position"] is None):
        return OUTDATED
    if (comment.get("side") or "RIGHT") != "RIGHT":
        return None
    original = str(comment.get("original_commit_id") or comment.get("commit_id") or "")
    if not original or original == head_sha:
        return None
    path = str(comment.get("path") or "")
    end = comment.get("original_line") or comment.get("line")
    start = comment.get("original_start_line") or comment.get("start_line") or end
    if not isinstance(end, int) or not isinstance(start, int) or not path:
        return None
    return Span(path, original, start, end)


def span_reason(span: Span, before: str, after: str | None) -> str | None:
    """Rule 3: stale unless the commented lines of ``before`` still appear, verbatim
    and contiguous, in ``after`` (None: the file is gone at the head)."""
    block = span.lines(before)
    if not block:
        return None
    if after is None:
        return f"`{span.path}` no longer exists at the PR head"
    if "\n" + "\n".join(block) + "\n" in "\n" + "\n".join(after.splitlines()) + "\n":
        return None
    lines = f"line {span.end}" if span.start == span.end else f"lines {span.start}–{span.end}"
    return f"{lines} changed after the comment was made (on {span.original[:7]})"


async def read_at(gh: InstallationClient, repo: str, path: str, ref: str) -> str | None:
    """A text file at ``ref`` or None (missing, a directory, not UTF-8)."""
    try:
        return await gh.read_file(repo, path, ref)
    except GitHubError as exc:
        if isinstance(exc, TransientGitHubError):
            raise  # transient: let the delivery or run fail visibly rather than guess
        return None


async def stale_reason(
    gh: InstallationClient,
    repo: str,
    comment: Mapping[str, Any],
    head_sha: str,
    files: dict[tuple[str, str], str | None],
) -> str | None:
    """Why the comment is stale (see the module docstring), or None when it is not."""
    span = commented_span(comment, head_sha)
    if not isinstance(span, Span):
        return span

    async def read(ref: str) -> str | None:
        if (ref, span.path) not in files:
            files[(ref, span.path)] = await read_at(gh, repo, span.path, ref)
        return files[(ref, span.path)]

    before = await read(span.original)
    if before is None or not span.lines(before):
        return None
    return span_reason(span, before, await read(head_sha))
