"""`/debate` on issues and PRs: the debate itself, a filed topic, the label
trigger, and the status, cancel, decide and help commands."""

from __future__ import annotations

from dataclasses import replace

from bot.core.errors import ConfigError, GitHubError
from bot.engine.protocol import next_step
from bot.engine.types import Decision, Outcome
from bot.github.events import (
    IssueCommentEvent,
    IssuesEvent,
    PullRequestEvent,
    PullRequestReviewCommentEvent,
)
from bot.github.gateway import InstallationClient
from bot.github.sanitize import sanitize
from bot.inputs.parser import Command, usage_text
from bot.inputs.repo_config import RepoConfig
from bot.service.features.debates import triggers as declared
from bot.service.worker.context import Origin
from bot.service.worker.publish import file_issue_once
from bot.service.worker.respond import Responder, subject_of
from bot.service.worker.routes import TriggerTable
from bot.store.rows import DeliveryRow


def register(triggers: TriggerTable) -> None:
    triggers.on_comment(declared.ISSUE_COMMENT, _issue_comment_origin)
    triggers.on_comment(declared.REVIEW_COMMENT, _review_comment_origin)
    triggers.on_event(declared.ISSUE_LABELED, _issue_labeled)
    triggers.on_event(declared.PULL_LABELED, _pull_labeled)
    triggers.on_command("debate", debate)
    triggers.on_command("help", help_, in_review_thread=True)
    triggers.on_command("status", status, in_review_thread=True)
    triggers.on_command("cancel", cancel, in_review_thread=True)
    triggers.on_command("decide", decide)


# -- triggers -----------------------------------------------------------------------


def _issue_comment_origin(event: IssueCommentEvent, row: DeliveryRow) -> Origin:
    return Origin.of_issue(
        event, row.delivery_id, comment_id=event.comment.id, retried=row.attempts > 1
    )


def _review_comment_origin(event: PullRequestReviewCommentEvent, row: DeliveryRow) -> Origin:
    comment = event.comment
    return Origin.of_pull(
        event,
        row.delivery_id,
        comment_id=comment.id,
        review_comment=True,
        thread_root=comment.in_reply_to_id or comment.id,
    )


async def _issue_labeled(
    r: Responder, gh: InstallationClient, event: IssuesEvent, row: DeliveryRow
) -> str:
    origin = Origin.of_issue(event, row.delivery_id)
    return await _labeled(r, gh, origin, event.label.name if event.label else "")


async def _pull_labeled(
    r: Responder, gh: InstallationClient, event: PullRequestEvent, row: DeliveryRow
) -> str:
    origin = Origin.of_pull(event, row.delivery_id)
    return await _labeled(r, gh, origin, event.label.name if event.label else "")


async def _labeled(r: Responder, gh: InstallationClient, origin: Origin, label: str) -> str:
    config = await r.config_or_reply(gh, origin, addressed=label == RepoConfig().trigger_label)
    if config is None:
        return "done"
    if label != config.trigger_label:
        return "ignored"
    if not await r.allowed(gh, origin, config, reply=False):
        return "ignored"
    return await r.start(gh, origin, config, Command(action="debate"), r.issue_subject(origin))


# -- commands -----------------------------------------------------------------------


async def debate(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    if cmd.issue_ref is not None:
        subject = await r.issue_ref_subject(gh, origin, cmd.issue_ref)
        if subject is None:
            return "done"
        return await r.start(gh, origin, config, cmd, subject)
    if cmd.topic:
        return await _file_topic(r, gh, origin, config, cmd)
    return await r.start(gh, origin, config, cmd, r.issue_subject(origin, cmd.context))


async def _file_topic(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    """A free-form topic becomes its own issue, debated there, linked both ways."""
    title = sanitize(cmd.topic.strip().splitlines()[0])[:200]
    subject = subject_of(title, cmd.subject)
    try:  # refuse before filing anything, or a bad config leaves an orphan issue
        await r.seat(r.make_spec(config, cmd, subject, run_id="check")[1])
    except ConfigError as exc:
        await r.reply(gh, origin, exc.public)
        return "done"
    if not await r.quota_ok(gh, origin, config):
        return "done"
    body = sanitize(
        f"{cmd.subject}\n\n---\nDebate requested by `{origin.sender}` in #{origin.issue_number}."
    )
    try:
        number = await file_issue_once(
            gh,
            origin.repo,
            title,
            body,
            key=f"d-{origin.delivery_id}",
            labels=(config.trigger_label,),
            resumed=origin.retried,  # a second pass must not file twice
        )
    except GitHubError:
        await r.reply(gh, origin, "GitHub refused to file the new issue; please try again.")
        return "done"
    new_origin = replace(
        origin, issue_number=number, is_pr=False, title=title, body=body, labels=()
    )
    return await r.start(gh, new_origin, config, cmd, subject, link_from=origin)


async def help_(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    await r.reply(gh, origin, usage_text(config.command))
    return "done"


async def status(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    db = r.svc.db
    run = await db.active_run(origin.repo, origin.issue_number) or await db.latest_run(
        origin.repo, origin.issue_number
    )
    spend = await r.spend_line(origin, config, gh.installation_id)
    if run is None:
        await r.reply(gh, origin, f"No debate has run on this issue yet.\n\n{spend}")
        return "done"
    turns = await db.load_turns(run.id)
    await r.reply(
        gh,
        origin,
        f"Run `{run.id}` ({run.mode}) is **{run.state}**: {len(turns)} model turns so far, "
        f"${run.cost_usd:.4f}.\n\n{spend}",
    )
    return "done"


async def cancel(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    db = r.svc.db
    run = await db.active_run(origin.repo, origin.issue_number)
    if run is None:
        await r.reply(gh, origin, "No debate is running on this issue.")
        return "done"
    await db.request_cancel(run.id)
    await r.react(gh, origin, "+1")
    r.svc.wake()
    return "done"


async def decide(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    db = r.svc.db
    run = await db.active_run(origin.repo, origin.issue_number)
    point, choice = cmd.decide_point, cmd.decide_choice
    if run is None or run.mode != "proposal" or point is None or choice is None:
        await r.reply(gh, origin, "There is no proposal waiting for a decision here.")
        return "done"
    if run.state != "waiting":
        await r.reply(gh, origin, "The panel is still working; answer when it asks for a decision.")
        return "done"
    spec = run.debate_spec()
    waiting = next_step(spec, await db.load_turns(run.id))
    pending = waiting.pending_points if isinstance(waiting, Outcome) else ()
    if point not in pending:
        listed = ", ".join(str(p) for p in pending) or "none"
        await r.reply(gh, origin, f"Point {point} is not open. Open points: {listed}.")
        return "done"
    decisions = tuple(d for d in spec.decisions if d.point != point)
    spec = replace(spec, decisions=(*decisions, Decision(point, choice, origin.sender)))
    if not await db.requeue(run.id, spec):  # another decision got there first
        await r.reply(gh, origin, "That decision crossed another one; please repeat it.")
        return "done"
    await r.react(gh, origin, "+1")
    r.svc.wake()
    return "done"
