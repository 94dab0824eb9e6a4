"""Design reviews of repository files: `/debate review <path>`, automatic reviews
of plans a labelled PR changes, and `--open-pr` with the revised plan (opened
by bot/service/features/reviews/revision_pr.py).

Where the plan is read: on a PR, at its head commit (the base repository serves
a fork's head commit too); elsewhere, on the default branch (pinned to its
current commit, which the run then reads too). The plan and its ``@path``
files come from the run's snapshot of that commit (bot/repo). The plan's
frontmatter overrides the repo config for the run.

Automatic reviews and the one-active-run-per-PR rule: a PR may change several
plans, but runs are keyed by repo and PR number, so plans are reviewed one
after another. Each automatic run records in its trigger the plans reviewed so
far with their blob shas (``reviewed``); when it finishes, the router's queue
(bot/service/worker/routes.py) looks at the PR again and starts the next plan whose
current blob has not been reviewed. The same map makes a push (``synchronize``)
re-review only the plans it changed, and a push that lands while a review runs
is picked up when that run finishes. A run that fails, aborts or is cancelled ends the chain; the
next push or labelling picks the remaining plans up. Automatic reviews run
only when the sender (who labelled or pushed) has the repo's minimum
permission, like label-triggered debates.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from bot.core.errors import ConfigError, GitHubError, TransientGitHubError
from bot.core.logs import get_logger
from bot.engine.types import RepoRef
from bot.github.events import PullRequestEvent
from bot.github.gateway import InstallationClient
from bot.inputs.parser import Command
from bot.inputs.plan import Plan, parse_plan
from bot.inputs.repo_config import RepoConfig
from bot.inputs.text import assemble_context, cap_subject, check_ref
from bot.repo.snapshot import Snapshot
from bot.run.spec import Overrides, Subject
from bot.service.features.reviews import triggers as declared
from bot.service.features.reviews.repo_review import (
    file_findings,
    is_repository_scope,
    review_repository,
)
from bot.service.features.reviews.revision_pr import NO_CONTENTS_WRITE as NO_CONTENTS_WRITE
from bot.service.features.reviews.revision_pr import REVISION_PR as REVISION_PR
from bot.service.features.reviews.revision_pr import open_revision_pr
from bot.service.worker.context import Origin, load_config
from bot.service.worker.respond import Responder, TriggerExtras
from bot.service.worker.routes import Finished, TriggerTable
from bot.store.rows import DeliveryRow, RunRow
from bot.store.trigger import QueuedPlans, ReviewedPlan, RevisionTarget

log = get_logger(__name__)
_SHA = re.compile(r"[0-9a-f]{40}")

ReviewStart = Literal["started", "rejected", "refused"]
MAX_PLAN_BYTES = 1024 * 1024
MAX_REFS = 20  # @path files read per plan


# --- globs -----------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _glob_re(pattern: str) -> re.Pattern[str]:
    """gitignore-like globs: ``*`` and ``?`` stay within a path segment, ``**``
    spans segments (``docs/**/*.md`` matches ``docs/a.md`` and ``docs/x/y/a.md``)."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def matches(path: str, patterns: Iterable[str]) -> bool:
    return any(_glob_re(p.strip().lstrip("/")).fullmatch(path) for p in patterns if p.strip())


# --- one review -----------------------------------------------------------------------


class PlanFiles(Protocol):
    """What a plan review reads at its commit (issue 17's port, owned here): the
    run's snapshot (bot/repo) is one, so the plan and its ``@path`` files come
    from the same commit the debaters will read."""

    def size(self, path: str) -> int | None:
        """The file's size at the commit; None when nothing is at ``path``."""
        ...

    async def text(self, path: str) -> str | None:
        """A UTF-8 text file's content; None when missing, binary or not text."""
        ...


async def _read_ref_files(
    files: PlanFiles, plan: Plan, plan_path: str
) -> tuple[dict[str, str | None], list[str]]:
    loaded: dict[str, str | None] = {}
    warnings: list[str] = []
    for raw in plan.refs[:MAX_REFS]:
        try:
            path = check_ref(raw)
        except ConfigError as exc:
            warnings.append(exc.public)
            continue
        if path in loaded or path == plan_path:
            continue
        if files.size(path) is None:
            loaded[path] = None  # reported missing by assemble_context
            continue
        try:
            text = await files.text(path)
        except GitHubError as exc:
            if isinstance(exc, TransientGitHubError):
                raise
            text = None
        if text is None:
            warnings.append(f"`{path}`: not a readable text file; skipped")
        else:
            loaded[path] = text
    if len(plan.refs) > MAX_REFS:
        warnings.append(f"only the first {MAX_REFS} @path references were read")
    return loaded, warnings


async def _files_at(
    r: Responder, gh: InstallationClient, origin: Origin, ref: str
) -> Snapshot | None:
    """The run's snapshot at ``ref`` (a commit, or a branch pinned to its head now);
    None when there is no such commit (an empty repository, a branch gone)."""
    try:
        commit = ref if _SHA.fullmatch(ref) else await gh.branch_sha(origin.repo, ref)
    except GitHubError as exc:
        if isinstance(exc, TransientGitHubError):
            raise
        return None
    at = RepoRef(origin.repo, commit, origin.repo_page(r.svc.settings.github_api_url))
    return await r.svc.repos.snapshot(gh, at)


@dataclass(frozen=True)
class PlanAt:
    """The plan a review reads: ``path`` at ``ref`` (a commit, or a branch pinned
    to its head now), ``where`` as replies say it ("on the default branch
    `main`"), and the branch a revision (`--open-pr`) would go to."""

    path: str
    ref: str
    where: str
    target: RevisionTarget | None = None


@dataclass(frozen=True)
class _ReadPlan:
    """A plan read and parsed at its commit (``snap``): ``text`` as stored."""

    path: str
    text: str
    plan: Plan
    snap: Snapshot


async def review_plan(
    r: Responder,
    gh: InstallationClient,
    origin: Origin,
    config: RepoConfig,
    cmd: Command,
    at: PlanAt,
    *,
    extras: TriggerExtras | None = None,
) -> ReviewStart:
    """Read, validate and queue the review of the plan ``at``; every problem is
    one reply: ``rejected`` (the plan is unusable) or ``refused`` (no run could
    start: already running, quota, configuration)."""
    read = await _read_plan(r, gh, origin, at)
    if read is None:
        return "rejected"
    text, plan = read.text, read.plan
    body_start = len(text.removeprefix("\ufeff")) - len(plan.body)
    review = ReviewedPlan(
        path=read.path,
        ref=at.ref,
        open_pr=cmd.open_pr,
        target=at.target,
        prefix=text.removeprefix("\ufeff")[: max(0, body_start)],
        blob=hashlib.sha256(text.encode()).hexdigest(),
    )
    await r.start(
        gh,
        origin,
        config,
        cmd,
        await _plan_subject(read, config),
        mode="critique",
        overrides=Overrides.of(plan),
        extras={**(extras or {}), "review": review},
        commit=read.snap.commit,  # the commit the plan was read at: the debaters read it too
    )
    started = await r.started(origin) is not None
    return "started" if started else "refused"


async def _read_plan(
    r: Responder, gh: InstallationClient, origin: Origin, at: PlanAt
) -> _ReadPlan | None:
    """The plan at ``at``, read and parsed; None after a reply saying why not."""
    try:
        path = check_ref(at.path)
    except ConfigError as exc:
        await r.reply(gh, origin, exc.public)
        return None
    snap = await _files_at(r, gh, origin, at.ref)
    size = None if snap is None else snap.size(path)
    if snap is None or size is None:
        await r.reply(gh, origin, f"`{path}` was not found {at.where}.")
        return None
    try:
        text = await snap.text(path) if size <= MAX_PLAN_BYTES else ""
    except GitHubError as exc:
        if isinstance(exc, TransientGitHubError):
            raise
        text = None
    if text is None:
        await r.reply(gh, origin, f"`{path}` is not a readable text file {at.where}.")
        return None
    if size > MAX_PLAN_BYTES:
        await r.reply(
            gh,
            origin,
            f"`{path}` is {size / 1024 / 1024:.1f} MiB; plans over 1 MiB are not reviewed. "
            "Keep the plan itself short and reference supporting files with `@path` "
            "(they are condensed to the context budget).",
        )
        return None
    try:
        plan = parse_plan(text, source=path, mode="critique")
    except ConfigError as exc:
        await r.reply(
            gh,
            origin,
            f"**debate-bot** cannot review `{path}`:\n\n```\n{exc.public}\n```",
        )
        return None
    return _ReadPlan(path, text, plan, snap)


async def _plan_subject(read: _ReadPlan, config: RepoConfig) -> Subject:
    """The debate's subject: the plan's body, its ``@path`` files within the
    context budget, and what was skipped, condensed or truncated."""
    plan, path = read.plan, read.path
    loaded, warnings = await _read_ref_files(read.snap, plan, path)
    budget = (
        plan.context_budget_kb
        if "context_budget_kb" in plan.frontmatter_keys
        else config.context_budget_kb
    )
    files, context_warnings = assemble_context(plan.body, loaded, budget)
    warnings += context_warnings
    warnings += [
        f"`{f.path}`: condensed to fit the context budget ({budget} KB)"
        for f in files
        if f.condensed
    ]
    capped, truncated = cap_subject(plan.body)
    if truncated:
        warnings.append("subject truncated: the plan exceeded the subject size limit")
    title = plan.title if plan.title == path else f"{plan.title} ({path})"
    return Subject(title, capped, truncated, files, tuple(warnings))


async def start_review(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    """`/debate review <path> [--open-pr]` on an issue or a PR; a folder or the
    whole repository is reviewed from its brief (bot/service/features/reviews/repo_review.py)."""
    assert cmd.path is not None  # the parser guarantees a path for `review`
    if is_repository_scope(cmd.path):
        return await review_repository(r, gh, origin, config, cmd)
    target: RevisionTarget | None = None
    if origin.is_pr:
        pr = await gh.get_pull(origin.repo, origin.issue_number)
        head = pr.get("head") or {}
        ref = str(head.get("sha") or "")
        where = f"at the head of this pull request (`{ref[:7]}`)"
        head_repo = str((head.get("repo") or {}).get("full_name") or "")
        if head_repo.lower() == origin.repo.lower():
            target = RevisionTarget(str(head.get("ref") or ""), ref)
    else:
        ref = origin.default_branch
        where = f"on the default branch `{ref}`"
        if cmd.open_pr:  # pin the reviewed commit: the revision branches from it
            sha = await gh.branch_sha(origin.repo, ref)
            target = RevisionTarget(ref, sha)
            ref = sha
    await review_plan(r, gh, origin, config, cmd, PlanAt(cmd.path, ref, where, target))
    return "done"


# --- automatic reviews ------------------------------------------------------------


def _changed_plans(files: list[dict[str, Any]], patterns: list[str]) -> dict[str, str]:
    """Plan path → blob sha at the PR head, for files the PR adds or modifies."""
    return {
        str(f["filename"]): str(f.get("sha") or "")
        for f in files
        if f.get("filename")
        and f.get("status") != "removed"
        and matches(str(f["filename"]), patterns)
    }


async def _plans_at_one_head(
    gh: InstallationClient, repo: str, number: int, patterns: list[str], pr: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The PR's changed plans as of the head commit of ``pr`` (the pull as last
    seen), and the pull they belong to.

    The pull and its files are two requests: a push landing between them would
    pair the new files' blob shas with the old head (a review of stale text,
    recorded as current). Read the pull after the files until its head stands still."""
    for _ in range(3):
        plans = _changed_plans(await gh.list_pull_files(repo, number), patterns)
        again = await gh.get_pull(repo, number)
        if (again.get("head") or {}).get("sha") == (pr.get("head") or {}).get("sha"):
            return again, plans
        pr = again
    return pr, plans


async def _next_plan(
    r: Responder,
    gh: InstallationClient,
    origin: Origin,
    config: RepoConfig,
    pending: dict[str, str],
    reviewed: dict[str, str],
    head_sha: str,
) -> bool:
    """Start the first pending plan that yields a run (plans rejected with a reply
    count as reviewed). True when a run was created."""
    base_delivery = origin.delivery_id
    for path, blob in pending.items():
        reviewed = {**reviewed, path: blob}
        step = replace(origin, delivery_id=f"{base_delivery}.{len(reviewed)}")
        result = await review_plan(
            r,
            gh,
            step,
            config,
            Command(action="review", mode="critique", path=path),
            PlanAt(path, head_sha, f"at the head of this pull request (`{head_sha[:7]}`)"),
            extras={"queue": QueuedPlans(delivery=base_delivery), "reviewed": reviewed},
        )
        if result != "rejected":
            # refused (a run is active, or the quota is spent): one reply is enough
            return result == "started"
    return False


async def auto_review(
    r: Responder, gh: InstallationClient, event: PullRequestEvent, row: DeliveryRow
) -> str | None:
    """Design-review the plans a PR with the trigger label changes.

    None: not a design review (no ``design_review.paths``, no matching plan on a
    labelling): the caller goes on as before (a plain debate of the PR)."""
    if event.action != "labeled" and not event.pull_request.labels:
        return "ignored"  # every push to every PR lands here: no label, no config read
    try:
        config = await load_config(gh, event.repository.full_name)
    except ConfigError:
        return None  # the label path replies with the error; pushes stay quiet
    patterns = config.design_review.paths
    if not patterns:
        return None
    pr = event.pull_request
    if event.action == "labeled":
        if event.label is None or event.label.name != config.trigger_label:
            return None
    elif config.trigger_label not in pr.label_names:
        return "ignored"
    repo = event.repository.full_name
    # The delivery says which head it saw; the files must belong to that head.
    seen = {"head": {"sha": pr.head.sha}}
    current, plans = await _plans_at_one_head(gh, repo, pr.number, patterns, seen)
    if not plans:
        return None if event.action == "labeled" else "ignored"
    origin = Origin.of_pull(event, row.delivery_id)
    if not await r.allowed(gh, origin, config, reply=False):
        return "ignored"
    reviewed: dict[str, str] = {}
    if event.action != "labeled":  # a push re-reviews only the plans it changed
        last = await r.svc.db.latest_run(repo, pr.number)
        if last is not None:
            reviewed = dict(last.trigger.reviewed)
            if last.state != "done" and last.trigger.review is not None:
                reviewed.pop(last.trigger.review.path, None)  # not reviewed after all
    pending = {p: b for p, b in plans.items() if reviewed.get(p) != b}
    if not pending:
        return "ignored"
    active = await r.svc.db.active_run(repo, pr.number)
    if active is not None and event.action != "labeled":
        log.info("review.deferred", repo=repo, pr=pr.number, plans=len(pending))
        return "ignored"  # the running run's end looks at the PR again
    head_sha = str((current.get("head") or {}).get("sha") or pr.head.sha)
    await _next_plan(r, gh, origin, config, pending, reviewed, head_sha)
    return "done"


async def continue_auto(r: Responder, gh: InstallationClient, run: RunRow) -> None:
    """After an automatic review: the next plan of the PR not reviewed at its current blob."""
    try:
        config = await load_config(gh, run.repo)
    except ConfigError as exc:
        log.warning("review.queue_config", run=run.id, error=exc.code)
        return
    pr = await gh.get_pull(run.repo, run.issue_number)
    labels = {str(label.get("name")) for label in pr.get("labels") or []}
    if pr.get("state") != "open" or config.trigger_label not in labels:
        return
    pr, plans = await _plans_at_one_head(
        gh, run.repo, run.issue_number, config.design_review.paths, pr
    )
    reviewed = dict(run.trigger.reviewed)
    pending = {p: b for p, b in plans.items() if reviewed.get(p) != b}
    if not pending:
        return
    queue = run.trigger.queue
    origin = Origin.of_run(run, pr, (queue.delivery if queue else "") or run.id)
    head_sha = str((pr.get("head") or {}).get("sha") or "")
    await _next_plan(r, gh, origin, config, pending, reviewed, head_sha)


def register(triggers: TriggerTable) -> None:
    # Before the label trigger of bot/service/features/debates: a labelled PR changing
    # design_review.paths plans is design-reviewed instead of debated.
    triggers.on_event(declared.PULL_CHANGED, auto_review)
    triggers.on_command("review", start_review)
    triggers.on_queued("design_review", continue_auto)
    triggers.on_finish(critique_actions)


async def critique_actions(done: Finished) -> None:
    """After a critique: open the revised plan's PR (`--open-pr`), file the agreed
    findings as issues (`--file-issues`)."""
    review = done.run.trigger.review
    if done.outcome.kind != "critique" or review is None:
        return
    if review.open_pr:
        await open_revision_pr(done.svc, done.gh, done.run, done.publisher)
    if review.file_issues:
        await file_findings(done.gh, done.run, done.outcome.findings, done.publisher)


__all__ = [
    "PlanAt",
    "auto_review",
    "continue_auto",
    "matches",
    "open_revision_pr",
    "register",
    "review_plan",
    "start_review",
]
