"""Design reviews of the whole repository or of one folder (`/debate review [<folder>/]`),
and filing their findings as issues (`--file-issues`).

Part of the design-review feature (bot/service/features/reviews/handlers.py dispatches here). The
repository is read at one commit through the run's snapshot (bot/repo: a git
tree and one archive, or lazy blob reads of the at most ``MAX_FILES`` files
bot/brief chooses); the brief is the debate's subject and the run is a
critique of kind ``repository``.
"""

from __future__ import annotations

import hashlib
import re

import anyio

from bot.core.errors import ConfigError, GitHubError, TransientGitHubError
from bot.core.logs import get_logger
from bot.engine.types import Finding, RepoRef
from bot.github.gateway import InstallationClient
from bot.github.sanitize import sanitize
from bot.github.session import is_empty_repository
from bot.inputs.parser import Command
from bot.inputs.repo_config import RepoConfig
from bot.inputs.text import cap_subject
from bot.repo.brief import Brief, build_brief, nothing_to_review, plan_fetches
from bot.repo.brief.source import RepoFiles, tree_of
from bot.run.spec import Subject
from bot.service.worker.context import Origin
from bot.service.worker.publish import Publisher, file_issue_once
from bot.service.worker.respond import Responder, TriggerExtras
from bot.store.rows import RunRow
from bot.store.trigger import ReviewedPlan

log = get_logger(__name__)

MAX_FINDING_ISSUES = 10
FINDING_LABEL = "debate:finding"


def is_repository_scope(path: str) -> bool:
    """`""` is the whole repository, `x/` a folder; anything else is a plan file."""
    return path == "" or path.endswith("/")


async def review_repository(
    r: Responder,
    gh: InstallationClient,
    origin: Origin,
    config: RepoConfig,
    cmd: Command,
    *,
    folders: tuple[str, ...] = (),
    previous_run: str | None = None,
) -> str:
    """``folders`` (a scheduled review's scope): the repository seen through those
    folders and its top-level files; ``previous_run``: the review to compare with."""
    scope = (cmd.path or "").rstrip("/")
    if origin.is_pr:
        pr = await gh.get_pull(origin.repo, origin.issue_number)
        sha = str((pr.get("head") or {}).get("sha") or "")
        label = sha[:7]
    else:  # pinned: the tree and every file come from the same commit
        label = origin.default_branch
        try:
            sha = await gh.branch_sha(origin.repo, origin.default_branch)
        except GitHubError as exc:
            if not is_empty_repository(exc):
                raise
            # Nothing pushed yet, so no branch to pin (409 "Git Repository is
            # empty."): nothing to review, and no retry changes that.
            await r.reply(gh, origin, nothing_to_review(label).public)
            return "done"
    # The snapshot the run's debaters will read too (one fetch for both).
    ref = RepoRef(origin.repo, sha, origin.repo_page(r.svc.settings.github_api_url))
    files = await r.svc.repos.snapshot(gh, ref)
    entries, truncated = tree_of(files), files.truncated
    if folders:
        entries = tuple(e for e in entries if "/" not in e.path or _under(e.path, folders))
    try:
        paths = plan_fetches(entries, scope, ref=label)
    except ConfigError as exc:  # an empty repository, a folder not at that commit
        await r.reply(gh, origin, exc.public)
        return "done"
    contents = await _read_all(files, paths)
    brief = build_brief(
        entries,
        scope,
        contents,
        budget_kb=config.context_budget_kb,
        truncated=truncated,
        ref=label,
        repo=origin.repo,
    )
    review = ReviewedPlan(path=cmd.path or "", ref=sha, file_issues=cmd.file_issues)
    subject = brief_subject(brief)
    extras: TriggerExtras = {"review": review}
    if previous_run is not None:
        extras["previous_review"] = previous_run
    return await r.start(
        gh, origin, config, cmd, subject, mode="critique", extras=extras, commit=sha or None
    )


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f + "/") for f in folders)


def brief_subject(brief: Brief) -> Subject:
    text, truncated = cap_subject(brief.subject_text())
    warnings = (*brief.audit_warnings(), *(("subject truncated",) if truncated else ()))
    return Subject(brief.title, text, truncated, brief.files, warnings, kind="repository")


async def _read_all(files: RepoFiles, paths: list[str]) -> dict[str, str | None]:
    """The chosen files' text, read side by side (lazy snapshots: one request each)."""
    contents: dict[str, str | None] = {}

    async def read(path: str) -> None:
        try:
            contents[path] = await files.text(path)
        except GitHubError as exc:
            if isinstance(exc, TransientGitHubError):
                raise
            contents[path] = None  # not readable: listed as left out

    async with anyio.create_task_group() as tg:
        for path in paths:
            tg.start_soon(read, path)
    return contents


# --- --file-issues ----------------------------------------------------------------


def finding_key(repo: str, finding: Finding) -> str:
    """The same finding in a later review gets the same key, so it is filed once."""
    words = re.sub(r"[^a-z0-9]+", " ", finding.title.lower()).split()
    return (
        "finding-" + hashlib.sha256(f"{repo.lower()}|{' '.join(words)}".encode()).hexdigest()[:16]
    )


async def file_findings(
    gh: InstallationClient, run: RunRow, findings: tuple[Finding, ...], publisher: Publisher
) -> None:
    """One issue per agreed finding (at most ``MAX_FINDING_ISSUES``), linked both
    ways; a finding filed by an earlier review is linked, not filed again."""
    lines: list[str] = []
    for finding in findings[:MAX_FINDING_ISSUES]:
        files = ", ".join(f"`{f}`" for f in finding.files)
        body = sanitize(
            f"**{finding.severity}** finding of the design review in #{run.issue_number} "
            f"(run `{run.id}`).\n\n{finding.text}" + (f"\n\nFiles: {files}" if files else "")
        )
        title = sanitize(f"[{finding.severity}] {finding.title}")[:200]
        try:
            number = await file_issue_once(
                gh,
                run.repo,
                title,
                body,
                key=finding_key(run.repo, finding),
                labels=(FINDING_LABEL,),
                resumed=True,  # looked up first: never twice across runs or attempts
            )
        except GitHubError as exc:
            if isinstance(exc, TransientGitHubError):
                raise
            log.warning("review.finding_not_filed", run=run.id, error=exc.code)
            lines.append(f"- not filed ({exc.code}): {finding.title}")
            continue
        lines.append(f"- #{number} ({finding.severity}): {finding.title}")
    if len(findings) > MAX_FINDING_ISSUES:
        lines.append(f"- {len(findings) - MAX_FINDING_ISSUES} more findings are in the report only")
    if lines:
        await publisher.upsert("status", "Findings filed as issues:\n\n" + "\n".join(lines))
