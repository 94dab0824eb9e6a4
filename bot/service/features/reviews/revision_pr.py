"""`--open-pr`: the pull request with the revised plan a design review proposed.

Opened once per run (a resumed run finds the one it opened), from a branch cut
at the commit the plan was reviewed at (``RevisionTarget``). Every way this can
fail ends in a clear status comment, never a failed run.
"""

from __future__ import annotations

import hashlib

from bot.core.errors import GitHubError
from bot.core.logs import get_logger
from bot.engine.revision import changed_lines, revised_plan, strip_marks
from bot.engine.types import DebateSpec
from bot.github.gateway import InstallationClient
from bot.github.sanitize import redact_secrets, sanitize
from bot.service.worker.context import Services
from bot.service.worker.publish import Publisher
from bot.store.rows import RunRow
from bot.store.trigger import RevisionTarget

log = get_logger(__name__)

REVISION_PR = "revision-pr"  # store key of the opened pull request
NO_CONTENTS_WRITE = "resource not accessible by integration"


def _branch(run: RunRow) -> str:
    return f"debate-bot/revise-{run.id}"


def _pr_body(run: RunRow, path: str, plan: str) -> str:
    changes = changed_lines(plan)
    lines = [
        f"The design review of `{path}` in #{run.issue_number} (run `{run.id}`) proposed "
        "this revision. The critique report with the reasons is in that thread.",
    ]
    if changes:
        lines += ["", "Lines the review marked `[CHANGED]`:", *[f"- {c}" for c in changes[:50]]]
    return "\n".join(lines)


def _why_not(spec: DebateSpec, target: RevisionTarget | None, plan: str | None) -> str | None:
    """Why no pull request can be opened with ``plan``; None when one can."""
    if not target:
        return "the plan lives on a fork, where debate-bot cannot push a branch"
    if spec.subject_truncated:
        return "the plan was too long and was truncated for the review"
    if plan is None:
        return "the synthesis gave no revised plan"
    if len(strip_marks(plan).split()) < len(spec.subject.split()) // 2:
        # A reply cut off by the output limit reads like a much shorter plan:
        # never commit it over the whole file.
        return "the revised plan is less than half as long as the original (a cut-off reply?)"
    return None


async def _push_revision(
    gh: InstallationClient, run: RunRow, target: RevisionTarget, path: str, content: str, plan: str
) -> int:
    """The branch, its commit of ``content`` at ``path``, and the pull request's number."""
    branch = _branch(run)
    try:
        await gh.create_branch(run.repo, branch, target.from_sha)
    except GitHubError as exc:
        if exc.github_status != 422 or "already exists" not in str(exc).lower():
            raise  # 422 "Reference already exists": a resumed run made it before
    await gh.put_file(
        run.repo, path, branch, content, f"Revise {path} after debate-bot's design review"
    )
    return await gh.create_pull(
        run.repo,
        f"Revise {path} (design review)"[:256],
        branch,
        target.base,
        sanitize(_pr_body(run, path, plan)),
    )


def _refused_text(path: str, exc: GitHubError) -> str:
    """The status comment when GitHub refused the branch, commit or pull request."""
    if exc.github_status == 403 and NO_CONTENTS_WRITE in str(exc).lower():
        return (
            f"**No pull request was opened for `{path}`:** this installation of debate-bot "
            "lacks the **Contents: write** permission on this repository (GitHub answered "
            "“Resource not accessible by integration”). A repository admin can grant it in "
            "the app's installation settings; the revised plan is in the critique above."
        )
    return (
        f"**No pull request was opened for `{path}`:** GitHub refused the branch, "
        f"commit or pull request (`{exc.code}`, HTTP {exc.github_status or 'error'}). "
        "The revised plan is in the critique above."
    )


async def open_revision_pr(
    svc: Services, gh: InstallationClient, run: RunRow, publisher: Publisher
) -> None:
    """Open a pull request with the revised plan (once per run, even when resumed).

    Every way this can fail ends in a clear status comment, never a failed run."""
    review = run.trigger.review
    if review is None or not review.open_pr:
        return
    if await svc.db.comment_id(run.id, REVISION_PR) is not None:
        return
    path, target = review.path, review.target
    spec = run.debate_spec()
    plan = revised_plan(spec, await svc.db.load_turns(run.id))
    problem = _why_not(spec, target, plan)
    if problem is not None or target is None or plan is None:
        await publisher.upsert("status", f"No pull request was opened for `{path}`: {problem}.")
        return
    content = review.prefix + redact_secrets(strip_marks(plan)).rstrip() + "\n"
    if hashlib.sha256(content.encode()).hexdigest() == review.blob:
        await publisher.upsert(
            "status", f"No pull request was opened for `{path}`: the revision changes nothing."
        )
        return
    try:
        number = await _push_revision(gh, run, target, path, content, plan)
    except GitHubError as exc:
        log.warning("review.open_pr_failed", run=run.id, status=exc.github_status, error=exc.code)
        await publisher.upsert("status", _refused_text(path, exc))
        return
    await svc.db.record_comment(
        run.id,
        REVISION_PR,
        number,
        "issue",
        hashlib.sha256(content.encode()).hexdigest(),
    )
    await publisher.upsert(
        "status", f"Opened #{number} with the revised plan of `{path}` (branch `{_branch(run)}`)."
    )
