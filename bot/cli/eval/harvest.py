"""Arbitration cases from a repository's own history (`debate-bot eval harvest`).

For every pull request merged in the window, each review comment that opens a
thread and was written by a review bot is labelled by what happened next:

- ``CONFIRMED``: a later commit of the PR changed the commented lines (the
  same test as `--bots` staleness in bot/service/features/arbitration/handlers.py: the lines at
  the comment's commit no longer appear, verbatim and contiguous, at the PR's
  last head, or GitHub marks the comment outdated);
- ``DISMISSED``: the lines are unchanged at the last head and the thread was
  resolved, or a maintainer (owner, member, collaborator) answered in it;
- anything else is ambiguous: left out and counted by reason.

Labels are a heuristic (``label_source: heuristic``): a bot's concern fixed in
passing, or dismissed by a maintainer who was wrong, is mislabelled, so a
person should read them before trusting a report built on them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.cli.eval.cases import MAX_FILE_BYTES
from bot.core.errors import GitHubError, TransientGitHubError
from bot.github.events import is_bot
from bot.github.gateway import InstallationClient
from bot.github.staleness import stale_reason

MAINTAINERS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
PR_BODY_MAX = 4000


@dataclass
class Harvest:
    cases: list[dict[str, Any]] = field(default_factory=list)
    pulls: int = 0  # merged pull requests read
    considered: int = 0  # bot comments opening a thread
    ambiguous: Counter[str] = field(default_factory=Counter)  # reason → count

    def count(self, label: str) -> int:
        return sum(1 for c in self.cases if c["expected"] == label)


def _is_bot(user: Mapping[str, Any] | None) -> bool:
    user = user or {}
    return is_bot(user.get("type"), user.get("login"))


def _by_bot(comment: Mapping[str, Any], bots: frozenset[str] | None) -> bool:
    user = comment.get("user") or {}
    login = str(user.get("login") or "")
    if bots is not None:
        return login.lower() in bots or login.lower().removesuffix("[bot]") in bots
    return _is_bot(user)


def _maintainer_answer(replies: Sequence[Mapping[str, Any]]) -> str | None:
    for r in replies:
        if not _is_bot(r.get("user")) and r.get("author_association") in MAINTAINERS:
            return str((r.get("user") or {}).get("login") or "a maintainer")
    return None


def case_id(repo: str, number: int, comment_id: int) -> str:
    return re.sub(r"[^A-Za-z0-9._/-]", "-", f"{repo}/pr{number}/c{comment_id}")


async def harvest(
    gh: InstallationClient,
    repo: str,
    pulls: list[dict[str, Any]],
    *,
    bots: frozenset[str] | None,
    license_id: str,
) -> Harvest:
    out = Harvest(pulls=len(pulls))
    files: dict[tuple[str, str], str | None] = {}
    for pr in pulls:
        number = int(pr["number"])
        comments = await gh.list_review_comments(repo, number)
        roots = [c for c in comments if not c.get("in_reply_to_id") and _by_bot(c, bots)]
        if not roots:
            continue
        replies: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for c in comments:
            if c.get("in_reply_to_id"):
                replies[int(c["in_reply_to_id"])].append(c)
        resolved = await gh.review_thread_states(repo, number)
        head = str((pr.get("head") or {}).get("sha") or "")
        for c in roots:
            out.considered += 1
            label, why, text = await _label(gh, repo, c, head, files, resolved, replies)
            if label is None or text is None:
                out.ambiguous[why] += 1
                continue
            out.cases.append(_case(repo, pr, c, label, why, text, license_id))
    return out


async def _label(
    gh: InstallationClient,
    repo: str,
    c: dict[str, Any],
    head: str,
    files: dict[tuple[str, str], str | None],
    resolved: Mapping[int, bool],
    replies: Mapping[int, list[dict[str, Any]]],
) -> tuple[str | None, str, str | None]:
    """(label or None, why, the file at the comment's commit)."""
    if (c.get("side") or "RIGHT") != "RIGHT":
        return None, "on the removed side of the diff", None
    path = str(c.get("path") or "")
    original = str(c.get("original_commit_id") or c.get("commit_id") or "")
    end = c.get("original_line") or c.get("line")
    start = c.get("original_start_line") or c.get("start_line") or end
    if not path or not original or not isinstance(end, int) or not isinstance(start, int):
        return None, "not on lines of a file", None
    if (original, path) not in files:
        try:
            files[(original, path)] = await gh.read_file(repo, path, original)
        except GitHubError as exc:
            if isinstance(exc, TransientGitHubError):
                raise
            files[(original, path)] = None  # a directory, a binary: not a case
    before = files[(original, path)]
    if before is None or not before.splitlines()[start - 1 : end]:
        return None, "the commented file cannot be read at the comment's commit", None
    if len(before.encode()) > MAX_FILE_BYTES:
        return None, "the commented file is too large for a case", None
    changed = await stale_reason(gh, repo, c, head, files)
    if changed is not None:
        return "CONFIRMED", f"a later commit changed the commented lines ({changed})", before
    if resolved.get(int(c["id"])):
        return "DISMISSED", "the thread was resolved with the lines unchanged", before
    who = _maintainer_answer(replies.get(int(c["id"]), []))
    if who is not None:
        return "DISMISSED", f"answered by maintainer {who} with the lines unchanged", before
    return None, "lines unchanged, thread neither resolved nor answered by a maintainer", None


def _case(
    repo: str,
    pr: Mapping[str, Any],
    c: Mapping[str, Any],
    label: str,
    why: str,
    text: str,
    license_id: str,
) -> dict[str, Any]:
    path = str(c["path"])
    line = c.get("original_line") or c.get("line")
    return {
        "id": case_id(repo, int(pr["number"]), int(c["id"])),
        "kind": "arbitrate",
        "comment": str(c.get("body") or ""),
        "path": path,
        "line": line,
        "diff_hunk": str(c.get("diff_hunk") or ""),
        "files": {path: text},
        "author": str((c.get("user") or {}).get("login") or "review-bot"),
        "author_is_bot": True,
        "pr_title": str(pr.get("title") or ""),
        "pr_body": str(pr.get("body") or "")[:PR_BODY_MAX],
        "expected": label,
        "label_source": "heuristic",
        "source": {
            "url": str(c.get("html_url") or ""),
            "commit": str(c.get("original_commit_id") or c.get("commit_id") or ""),
            "license": license_id,
        },
        "note": why,
    }
