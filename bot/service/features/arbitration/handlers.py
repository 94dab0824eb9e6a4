"""PR false-positive arbitration: `/debate arbitrate` in a review thread, by URL, or `--bots`.

The outcome is a reply in the review thread of the arbitrated comment (the run's
``review_thread`` trigger is the thread's root comment), so every comment of the
run lands there.

``--bots`` and the one-active-run-per-PR rule: runs are keyed by repo and PR
number, so the comments are arbitrated one after another. The first run
starts at once; its trigger carries the remaining comment ids (a *queue*), and
when a run finishes the router (bot/service/worker/routes.py) starts the next, re-checking it first
(deleted, resolved, outdated or already arbitrated meanwhile → skipped). A run
that fails, aborts or is cancelled ends the queue; `/debate arbitrate --bots`
again picks up where it stopped, because comments that already carry a verdict
reply are skipped.

Staleness (``--bots`` skips comments whose lines changed after they were made),
decided from REST data only:

1. GitHub's own mark: a comment whose ``line`` (or ``position``) is null no
   longer applies to the current diff — outdated, stale.
2. A comment made on the PR head (``original_commit_id`` is the head) is fresh.
3. Otherwise, on the right (new-file) side: the commented lines
   ``original_start_line..original_line`` of the file at ``original_commit_id``
   must still appear, verbatim and contiguous, in the file at the head (moved
   lines count as unchanged). If they do not, or the file is gone, stale.
   When the original commit cannot be read (e.g. force-pushed away), GitHub's
   mark (1) decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from bot.core.errors import BotError, ConfigError, GitHubError
from bot.core.logs import get_logger
from bot.engine.types import ArbitrationContext
from bot.github.events import is_bot
from bot.github.gateway import InstallationClient
from bot.github.markers import parse_marker
from bot.github.staleness import read_at, stale_reason
from bot.inputs.parser import Command
from bot.inputs.repo_config import RepoConfig
from bot.run.arbitration import (
    arbitration_config,
    arbitration_context,
    arbitration_subject,
    file_excerpt,
)
from bot.service.worker.context import Origin, load_config
from bot.service.worker.respond import Responder, TriggerExtras
from bot.service.worker.routes import Finished, TriggerTable
from bot.store.rows import RunRow
from bot.store.trigger import CommandFields, QueuedComments

log = get_logger(__name__)

MAX_BOTS_QUEUE = 20  # comments arbitrated per `--bots` command


# --- context -----------------------------------------------------------------


def _login(comment: Mapping[str, Any]) -> tuple[str, bool]:
    user = comment.get("user") or {}
    login = str(user.get("login") or "ghost")
    return login, is_bot(user.get("type"), login)


def _is_ours(comment: Mapping[str, Any], me: str) -> bool:
    """Authored by the app itself (a marker line alone proves nothing: anyone can type one)."""
    return _login(comment)[0] == me


async def build_context(
    gh: InstallationClient, repo: str, comment: Mapping[str, Any], pr: Mapping[str, Any]
) -> ArbitrationContext:
    path = str(comment.get("path") or "")
    line = comment.get("line") or comment.get("original_line")
    head_sha = str((pr.get("head") or {}).get("sha") or "")
    # The base repository serves a PR's head commit even when it comes from a fork.
    text = await read_at(gh, repo, path, head_sha) if path and head_sha else None
    author, is_bot = _login(comment)
    return arbitration_context(
        concern=str(comment.get("body") or ""),
        author=author,
        is_bot=is_bot,
        path=path,
        line=line if isinstance(line, int) else None,
        diff_hunk=str(comment.get("diff_hunk") or ""),
        file_text=text,
        head_sha=head_sha,
        pr_title=str(pr.get("title") or ""),
        pr_body=str(pr.get("body") or ""),
    )


def _command_fields(cmd: Command) -> CommandFields:
    return CommandFields(cmd.rounds, cmd.personas, cmd.models, cmd.judge, cmd.alternating)


def _command_from(fields: CommandFields) -> Command:
    return Command(
        action="arbitrate",
        mode="arbitrate",
        rounds=fields.rounds,
        personas=fields.personas,
        models=fields.models,
        judge=fields.judge,
        alternating=fields.alternating,
    )


async def _arbitrate(
    r: Responder,
    gh: InstallationClient,
    origin: Origin,
    config: RepoConfig,
    cmd: Command,
    comment: Mapping[str, Any],
    pr: Mapping[str, Any],
    *,
    queue: QueuedComments | None = None,
) -> str:
    """Start the run arbitrating ``comment``; its outcome is a reply in its thread."""
    root = int(comment.get("in_reply_to_id") or comment["id"])
    ctx = await build_context(gh, origin.repo, comment, pr)
    subject = arbitration_subject(ctx, origin.issue_number)
    # Personas named on the command keep their seat order: the first argues the concern.
    chosen = config if cmd.personas else arbitration_config(config)
    extras: TriggerExtras = {"arbitrated_comment": int(comment["id"])}
    if queue is not None:
        extras["queue"] = queue
    return await r.start(
        gh,
        origin,
        chosen,
        cmd,
        subject,
        mode="arbitrate",
        review_thread=root,
        arbitration=ctx,
        extras=extras,
        commit=str((pr.get("head") or {}).get("sha") or "") or None,  # the head it judges
    )


# --- entry points ---------------------------------------------------------------


async def arbitrate(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    """`/debate arbitrate`: in a review thread, of the comment that opened the thread
    (its ``in_reply_to_id``); anywhere on a PR, of a named comment or `--bots`."""
    if not origin.review_comment or cmd.review_comment is not None or cmd.bots:
        return await arbitrate_from_conversation(r, gh, origin, config, cmd)
    return await _arbitrate_thread(r, gh, origin, config, cmd)


async def _arbitrate_thread(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    # The thread root is the comment itself when it opens its own thread.
    in_reply_to = origin.thread_root if origin.thread_root != origin.comment_id else None
    if in_reply_to is None:
        await r.reply(
            gh,
            origin,
            f"There is nothing to arbitrate here: this comment opens its own thread. Reply "
            f"`{config.command} arbitrate` inside the thread of the review comment you want "
            f"arbitrated, or name it in the conversation with "
            f"`{config.command} arbitrate <review-comment-url>`.",
        )
        return "done"
    try:
        root = await gh.get_review_comment(origin.repo, in_reply_to)
    except GitHubError as exc:
        if exc.github_status != 404:
            raise
        await r.reply(gh, origin, "The review comment this thread replies to is gone.")
        return "done"
    if _is_ours(root, await gh.bot_login()):
        await r.reply(gh, origin, "That thread was opened by debate-bot: nothing to arbitrate.")
        return "done"
    pr_data = await gh.get_pull(origin.repo, origin.issue_number)
    return await _arbitrate(r, gh, origin, config, cmd, root, pr_data)


async def arbitrate_from_conversation(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    """`/debate arbitrate <review-comment-url>` or `/debate arbitrate --bots`."""
    if not origin.is_pr:
        await r.reply(gh, origin, "Arbitration works on pull requests: this is an issue, not a PR.")
        return "done"
    ref = cmd.review_comment
    if ref is not None:
        if (
            f"{ref.owner}/{ref.repo}".lower() != origin.repo.lower()
            or ref.pr_number != origin.issue_number
        ):
            await r.reply(
                gh,
                origin,
                f"That review comment belongs to {ref.owner}/{ref.repo}#{ref.pr_number}; "
                f"only comments on this pull request (#{origin.issue_number}) can be "
                "arbitrated here.",
            )
            return "done"
        try:
            comment = await gh.get_review_comment(origin.repo, ref.comment_id)
        except GitHubError as exc:
            if exc.github_status != 404:
                raise
            comment = None
        if comment is None or not str(comment.get("pull_request_url") or "").endswith(
            f"/pulls/{origin.issue_number}"
        ):
            await r.reply(
                gh, origin, f"Review comment {ref.comment_id} was not found on this pull request."
            )
            return "done"
        if _is_ours(comment, await gh.bot_login()):
            await r.reply(gh, origin, "That comment is debate-bot's own: nothing to arbitrate.")
            return "done"
        pr = await gh.get_pull(origin.repo, origin.issue_number)
        return await _arbitrate(r, gh, origin, config, cmd, comment, pr)
    if cmd.bots:
        return await _arbitrate_bots(r, gh, origin, config, cmd)
    await r.reply(
        gh,
        origin,
        f"Which comment? Reply `{config.command} arbitrate` in its review thread, name it with "
        f"`{config.command} arbitrate <review-comment-url>`, or use "
        f"`{config.command} arbitrate --bots` for every unresolved review-bot comment.",
    )
    return "done"


# --- --bots -------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    eligible: list[dict[str, Any]]
    stale: list[tuple[dict[str, Any], str]]
    skipped: int  # resolved or already arbitrated


def _arbitrated_roots(comments: list[dict[str, Any]], me: str) -> set[int]:
    """Thread roots that already hold a debate-bot verdict reply (by the app itself)."""
    done: set[int] = set()
    for c in comments:
        if not _is_ours(c, me):
            continue
        first = str(c.get("body") or "").split("\n", 1)[0].strip()
        m = parse_marker(first)
        if m is not None and m.kind == "verdict" and c.get("in_reply_to_id"):
            done.add(int(c["in_reply_to_id"]))
    return done


async def select_bot_comments(
    gh: InstallationClient, repo: str, pr_number: int, head_sha: str
) -> Selection:
    comments = await gh.list_review_comments(repo, pr_number)
    try:
        resolved = await gh.review_thread_states(repo, pr_number)
    except GitHubError as exc:  # without thread states, treat every thread as unresolved
        log.warning("arbitration.thread_states_failed", repo=repo, pr=pr_number, error=exc.code)
        resolved = {}
    me = await gh.bot_login()
    arbitrated = _arbitrated_roots(comments, me)
    files: dict[tuple[str, str], str | None] = {}
    eligible: list[dict[str, Any]] = []
    stale: list[tuple[dict[str, Any], str]] = []
    skipped = 0
    for c in comments:
        _, is_bot = _login(c)
        if c.get("in_reply_to_id") or not is_bot or _is_ours(c, me):
            continue
        if resolved.get(int(c["id"])) or int(c["id"]) in arbitrated:
            skipped += 1
            continue
        reason = await stale_reason(gh, repo, c, head_sha, files)
        if reason is not None:
            stale.append((c, reason))
        else:
            eligible.append(c)
    return Selection(eligible, stale, skipped)


def _link(c: Mapping[str, Any]) -> str:
    where = f"`{c.get('path')}`" + (f" line {c['line']}" if c.get("line") else "")
    url = c.get("html_url")
    author, _ = _login(c)
    label = f"{author} on {where}"
    return f"[{label}]({url})" if url else label


async def _arbitrate_bots(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    pr = await gh.get_pull(origin.repo, origin.issue_number)
    head_sha = str((pr.get("head") or {}).get("sha") or "")
    sel = await select_bot_comments(gh, origin.repo, origin.issue_number, head_sha)
    stale_lines = [f"- {_link(c)} — {why}" for c, why in sel.stale]
    if not sel.eligible:
        text = "No unresolved review-bot comment needs arbitration on this pull request."
        if sel.skipped:
            text += f" ({sel.skipped} resolved or already arbitrated.)"
        if stale_lines:
            text += "\n\nSkipped as stale (their lines changed after the comment):\n"
            text += "\n".join(stale_lines)
        await r.reply(gh, origin, text)
        return "done"
    # Every queued comment is a run of its own: never announce more than the
    # daily quotas let through (at least one, so an exhausted quota gets its reply).
    limit = max(1, min(MAX_BOTS_QUEUE, await r.quota_left(origin, config)))
    chosen = sel.eligible[:limit]
    first, rest = chosen[0], [int(c["id"]) for c in chosen[1:]]
    queue = QueuedComments(
        pending=tuple(rest),
        command=_command_fields(cmd),
        comment_id=origin.comment_id,
        review_comment=origin.review_comment,
        thread_root=origin.thread_root,
        delivery=origin.delivery_id,
    )
    await _arbitrate(r, gh, origin, config, cmd, first, pr, queue=queue if rest else None)
    if await r.started(origin) is None:
        return "done"  # start() has replied (already running, quota, config)
    lines = [
        f"Arbitrating {len(chosen)} review-bot comment(s), one at a time (one debate runs "
        "per pull request at a time); each verdict is posted in its review thread:",
        *[f"{i}. {_link(c)}" for i, c in enumerate(chosen, 1)],
    ]
    if len(sel.eligible) > len(chosen):
        lines.append(
            f"\n{len(sel.eligible) - len(chosen)} more are left for a later "
            f"`{config.command} arbitrate --bots` (at most {limit} now: "
            f"{MAX_BOTS_QUEUE} per command, within the daily quotas)."
        )
    if stale_lines:
        lines += ["", "Skipped as stale (their lines changed after the comment):", *stale_lines]
    await r.reply(gh, origin, "\n".join(lines))
    return "done"


async def continue_bots(r: Responder, gh: InstallationClient, run: RunRow) -> None:
    """Start the next queued comment of a `--bots` command, re-checked first."""
    queue = run.trigger.queue
    if not isinstance(queue, QueuedComments) or not queue.pending:
        return
    pending = list(queue.pending)
    try:
        config = await load_config(gh, run.repo)
    except ConfigError as exc:
        log.warning("arbitration.queue_config", run=run.id, error=exc.code)
        return
    pr = await gh.get_pull(run.repo, run.issue_number)
    if pr.get("state") != "open":
        return
    head_sha = str((pr.get("head") or {}).get("sha") or "")
    sel = await select_bot_comments(gh, run.repo, run.issue_number, head_sha)
    by_id = {int(c["id"]): c for c in sel.eligible}
    while pending:
        cid = pending.pop(0)
        comment = by_id.get(cid)
        if comment is None:
            log.info("arbitration.queue_skip", run=run.id, comment=cid)
            continue
        origin = Origin.of_run(
            run,
            pr,
            f"{queue.delivery or run.id}.{cid}",
            comment_id=queue.comment_id,
            review_comment=queue.review_comment,
            thread_root=queue.thread_root,
        )
        await _arbitrate(
            r,
            gh,
            origin,
            config,
            _command_from(queue.command),
            comment,
            pr,
            queue=replace(queue, pending=tuple(pending)) if pending else None,
        )
        return


async def verdict_actions(done: Finished) -> None:
    """After an arbitration's verdict: resolve the thread on DISMISSED, label the
    PR on CONFIRMED, as the trigger asked. A failure is logged: the run is done."""
    run, outcome = done.run, done.outcome
    if outcome.kind != "arbitration":
        return
    opts = run.trigger.arbitration
    thread_comment = run.trigger.review_thread
    try:
        if outcome.verdict == "DISMISSED" and opts.resolve_on_dismissed and thread_comment:
            await done.gh.resolve_review_thread(run.repo, run.issue_number, thread_comment)
        label = opts.label_on_confirmed
        if outcome.verdict == "CONFIRMED" and label:
            await done.gh.add_labels(run.repo, run.issue_number, [label])
    except BotError as exc:
        log.warning("arbitration.action_failed", run=run.id, error=exc.code)


def register(triggers: TriggerTable) -> None:
    triggers.on_command("arbitrate", arbitrate, in_review_thread=True)
    triggers.on_queued("arbitrate_bots", continue_bots)
    triggers.on_finish(verdict_actions)


__all__ = [
    "arbitrate",
    "arbitrate_from_conversation",
    "build_context",
    "continue_bots",
    "file_excerpt",
    "register",
    "stale_reason",
]
