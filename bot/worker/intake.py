"""Turning a stored delivery into work: who asked, what, and is it allowed.

Runs in the worker, never in the webhook route, so the route answers in
milliseconds. Every reply here is a short fixed sentence or the parser's usage
text: never an exception's text.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.app.metrics import Metrics
from bot.commands.parser import Command, UsageError, parse_command, usage_text
from bot.commands.plan import cap_subject, choose_mode
from bot.config import RepoConfig, Settings, load_repo_config
from bot.debate.protocol import next_step
from bot.debate.types import ArbitrationContext, DebateSpec, Decision, Mode, Outcome
from bot.errors import BotError, ConfigError, GitHubError
from bot.github.events import (
    IssueCommentEvent,
    IssuesEvent,
    PullRequestEvent,
    PullRequestReviewCommentEvent,
    parse_event,
)
from bot.github.gateway import GitHubGateway, InstallationClient
from bot.github.sanitize import sanitize
from bot.llm.router import ModelRouter
from bot.logs import get_logger
from bot.store import RunStore
from bot.store.rows import ActiveRunExists, DeliveryRow, RunRow
from bot.worker.publish import Publisher, Thread, file_issue_once
from bot.worker.specs import Overrides, Subject, build_spec

log = get_logger(__name__)

PERMISSION_RANK = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}
CONFIG_PATH = ".github/debate.yml"


@dataclass
class Services:
    settings: Settings
    store: RunStore
    gateway: GitHubGateway
    router: ModelRouter
    metrics: Metrics
    wake: Any = field(default=lambda: None)


@dataclass(frozen=True)
class Origin:
    """Where a trigger came from and where replies go."""

    repo: str
    default_branch: str
    issue_number: int
    is_pr: bool
    sender: str
    title: str
    body: str
    comment_id: int | None = None  # the command comment (issue comment or review comment)
    review_comment: bool = False  # comment_id is a PR review comment
    # The root of the review thread replies go to (GitHub refuses replies to replies).
    thread_root: int | None = None
    delivery_id: str = ""
    labels: tuple[str, ...] = ()  # the issue's labels when the trigger fired
    retried: bool = False  # this delivery was processed before (crash, redelivery)

    def thread(self) -> Thread:
        return Thread(self.repo, self.issue_number)

    @classmethod
    def of_issue(
        cls, event: IssueCommentEvent | IssuesEvent, delivery_id: str, **extra: Any
    ) -> Origin:
        return cls(
            repo=event.repository.full_name,
            default_branch=event.repository.default_branch,
            issue_number=event.issue.number,
            is_pr=event.issue.pull_request is not None,
            sender=event.sender.login,
            title=event.issue.title,
            body=event.issue.body,
            delivery_id=delivery_id,
            labels=tuple(event.issue.label_names),
            **extra,
        )

    @classmethod
    def of_pull(
        cls,
        event: PullRequestEvent | PullRequestReviewCommentEvent,
        delivery_id: str,
        **extra: Any,
    ) -> Origin:
        pr = event.pull_request
        return cls(
            repo=event.repository.full_name,
            default_branch=event.repository.default_branch,
            issue_number=pr.number,
            is_pr=True,
            sender=event.sender.login,
            title=pr.title,
            body=pr.body,
            delivery_id=delivery_id,
            labels=tuple(pr.label_names),
            **extra,
        )

    @classmethod
    def of_run(cls, run: RunRow, pull: dict[str, Any], delivery_id: str, **extra: Any) -> Origin:
        """A follow-up started by a finished run (queued arbitrations, plan reviews)."""
        return cls(
            repo=run.repo,
            default_branch=str(run.trigger.get("default_branch") or "main"),
            issue_number=run.issue_number,
            is_pr=True,
            sender=str(run.trigger.get("sender") or ""),
            title=str(pull.get("title") or ""),
            body=str(pull.get("body") or ""),
            delivery_id=delivery_id,
            **extra,
        )


async def load_config(gh: InstallationClient, repo: str) -> RepoConfig:
    """`.github/debate.yml` on the default branch, else the org's `.github` repo."""
    text = await gh.read_file(repo, CONFIG_PATH)
    source = f"{repo}/{CONFIG_PATH}"
    if text is None:
        org_repo = f"{repo.split('/')[0]}/.github"
        text = await gh.read_file(org_repo, CONFIG_PATH)
        source = f"{org_repo}/{CONFIG_PATH}"
    return load_repo_config(text, source=source)


def addressed_by_default(body: str) -> bool:
    """Whether a comment starts with the default command word."""
    first = body.lstrip().split(maxsplit=1)
    return bool(first) and first[0] == RepoConfig().command


class Intake:
    def __init__(self, svc: Services) -> None:
        self.svc = svc

    async def handle(self, row: DeliveryRow) -> str:
        """Process one delivery; returns the delivery's final state."""
        event = parse_event(row.event, row.payload.encode())
        if event is None or row.installation_id is None:
            return "ignored"
        if event.sender is not None and event.sender.type == "Bot":
            return "ignored"
        gh = await self.svc.gateway.installation(row.installation_id)
        if isinstance(event, IssueCommentEvent) and event.action == "created":
            origin = Origin.of_issue(
                event, row.delivery_id, comment_id=event.comment.id, retried=row.attempts > 1
            )
            return await self._command(gh, origin, event.comment.body, row)
        if isinstance(event, IssuesEvent) and event.action == "labeled":
            origin = Origin.of_issue(event, row.delivery_id)
            return await self._label(gh, origin, event.label.name if event.label else "", row)
        if isinstance(event, PullRequestEvent) and event.action in ("opened", "synchronize"):
            from bot.worker.reviews import auto_review

            return await auto_review(self, gh, event, row) or "ignored"
        if isinstance(event, PullRequestEvent) and event.action == "labeled":
            from bot.worker.reviews import auto_review

            # A PR changing design_review.paths plans is design-reviewed instead of debated.
            if (state := await auto_review(self, gh, event, row)) is not None:
                return state
            origin = Origin.of_pull(event, row.delivery_id)
            return await self._label(gh, origin, event.label.name if event.label else "", row)
        if isinstance(event, PullRequestReviewCommentEvent) and event.action == "created":
            from bot.worker.arbitration import handle_review_comment

            return await handle_review_comment(self, gh, event, row)
        return "ignored"

    # -- triggers ---------------------------------------------------------------

    async def config_or_reply(
        self, gh: InstallationClient, origin: Origin, *, addressed: bool = True
    ) -> RepoConfig | None:
        """The repo config, or None after telling the user it is broken.

        Only a trigger ``addressed`` to the bot under the defaults (`/debate`,
        the `debate` label) from a user with the default permission hears about a
        broken file: any other slash comment stays silent, or a broken config
        would let anyone make the bot post."""
        try:
            return await load_config(gh, origin.repo)
        except ConfigError as exc:
            if addressed and await self.allowed(gh, origin, RepoConfig(), reply=False):
                await self.reply(
                    gh,
                    origin,
                    f"**debate-bot** cannot read its configuration.\n\n```\n{exc.public}\n```",
                )
            return None

    async def _label(
        self, gh: InstallationClient, origin: Origin, label: str, row: DeliveryRow
    ) -> str:
        config = await self.config_or_reply(
            gh, origin, addressed=label == RepoConfig().trigger_label
        )
        if config is None:
            return "done"
        if label != config.trigger_label:
            return "ignored"
        if not await self.allowed(gh, origin, config, reply=False):
            return "ignored"
        cmd = Command(action="debate")
        subject = self.issue_subject(origin)
        return await self.start(gh, origin, config, cmd, subject)

    async def _command(
        self, gh: InstallationClient, origin: Origin, body: str, row: DeliveryRow
    ) -> str:
        if not body.lstrip().startswith("/"):
            return "ignored"
        got = await self.read_command(gh, origin, body)
        if isinstance(got, str):
            return got
        config, cmd = got
        return await self.dispatch(gh, origin, config, cmd)

    async def read_command(
        self, gh: InstallationClient, origin: Origin, body: str
    ) -> tuple[RepoConfig, Command] | str:
        """The repo config and the command of an allowed user; or, when there is
        nothing more to do (not a command, or answered with a config, usage or
        permission reply), the delivery's final state."""
        config = await self.config_or_reply(gh, origin, addressed=addressed_by_default(body))
        if config is None:
            return "done"
        try:
            cmd = parse_command(body, command=config.command)
        except UsageError as exc:
            if not await self.allowed(gh, origin, config, reply=False):
                return "ignored"
            await self.react(gh, origin, "confused")
            await self.reply(gh, origin, f"{exc.public}\n\n{usage_text(config.command)}")
            return "done"
        if cmd is None:
            return "ignored"
        if not await self.allowed(gh, origin, config, reply=True):
            return "done"
        return config, cmd

    async def dispatch(
        self, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
    ) -> str:
        if cmd.action == "help":
            await self.reply(gh, origin, usage_text(config.command))
            return "done"
        if cmd.action == "status":
            return await self._status(gh, origin)
        if cmd.action == "cancel":
            return await self._cancel(gh, origin)
        if cmd.action == "decide":
            return await self._decide(gh, origin, cmd)
        if cmd.action == "review":
            from bot.worker.reviews import start_review

            return await start_review(self, gh, origin, config, cmd)
        if cmd.action == "arbitrate":
            from bot.worker.arbitration import arbitrate_from_conversation

            return await arbitrate_from_conversation(self, gh, origin, config, cmd)
        return await self._debate(gh, origin, config, cmd)

    async def _debate(
        self, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
    ) -> str:
        if cmd.issue_ref is not None:
            try:
                issue: dict[str, Any] | None = await gh.get_issue(origin.repo, cmd.issue_ref)
            except GitHubError as exc:
                if exc.status != 404:
                    raise
                issue = None
            if issue is None:
                await self.reply(
                    gh, origin, f"Issue #{cmd.issue_ref} was not found in this repository."
                )
                return "done"
            text = f"{issue.get('title') or ''}\n\n{issue.get('body') or ''}".strip()
            capped, truncated = cap_subject(text)
            subject = Subject(
                f"#{cmd.issue_ref}: {issue.get('title') or ''}",
                capped,
                truncated,
                warnings=("subject truncated",) if truncated else (),
            )
            return await self.start(gh, origin, config, cmd, subject)
        if cmd.topic:
            return await self._file_topic(gh, origin, config, cmd)
        return await self.start(gh, origin, config, cmd, self.issue_subject(origin, cmd.context))

    async def _file_topic(
        self, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
    ) -> str:
        """A free-form topic becomes its own issue, debated there, linked both ways."""
        capped, truncated = cap_subject(cmd.subject)
        title = sanitize(cmd.topic.strip().splitlines()[0])[:200]
        subject = Subject(
            title, capped, truncated, warnings=("subject truncated",) if truncated else ()
        )
        try:  # refuse before filing anything, or a bad config leaves an orphan issue
            self.make_spec(config, cmd, subject, run_id="check")
        except ConfigError as exc:
            await self.reply(gh, origin, exc.public)
            return "done"
        if not await self.quota_ok(gh, origin, config):
            return "done"
        body = sanitize(
            f"{cmd.subject}\n\n---\n"
            f"Debate requested by `{origin.sender}` in #{origin.issue_number}."
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
            await self.reply(gh, origin, "GitHub refused to file the new issue; please try again.")
            return "done"
        new_origin = replace(
            origin, issue_number=number, is_pr=False, title=title, body=body, labels=()
        )
        return await self.start(gh, new_origin, config, cmd, subject, link_from=origin)

    # -- helpers shared by the triggers -----------------------------------------

    def issue_subject(self, origin: Origin, extra: str = "") -> Subject:
        text = "\n\n".join(p for p in (origin.title, origin.body, extra) if p).strip()
        capped, truncated = cap_subject(text)
        return Subject(
            origin.title, capped, truncated, warnings=("subject truncated",) if truncated else ()
        )

    async def allowed(
        self, gh: InstallationClient, origin: Origin, config: RepoConfig, *, reply: bool
    ) -> bool:
        perm = await gh.permission(origin.repo, origin.sender)
        if PERMISSION_RANK.get(perm, 0) >= PERMISSION_RANK[config.min_permission]:
            return True
        log.info("intake.denied", repo=origin.repo, sender=origin.sender, permission=perm)
        if reply:
            await self.reply(
                gh,
                origin,
                f"Only users with `{config.min_permission}` access "
                "or higher can start debates here.",
            )
        return False

    def quota_left(self, origin: Origin, config: RepoConfig) -> int:
        """Runs this user may still start here today (repo and user quotas)."""
        since = datetime.now(UTC) - timedelta(days=1)
        store = self.svc.store
        repo_left = config.quotas.per_repo_per_day - store.count_runs_since(origin.repo, since)
        user_left = config.quotas.per_user_per_day - store.count_runs_since(
            origin.repo, since, requested_by=origin.sender
        )
        return max(0, min(repo_left, user_left))

    async def quota_ok(self, gh: InstallationClient, origin: Origin, config: RepoConfig) -> bool:
        since = datetime.now(UTC) - timedelta(days=1)
        store = self.svc.store
        if store.count_runs_since(origin.repo, since) >= config.quotas.per_repo_per_day:
            await self.reply(gh, origin, "This repository has reached its daily debate quota.")
            return False
        if (
            store.count_runs_since(origin.repo, since, requested_by=origin.sender)
            >= config.quotas.per_user_per_day
        ):
            await self.reply(gh, origin, "You have reached your daily debate quota here.")
            return False
        return True

    async def start(
        self,
        gh: InstallationClient,
        origin: Origin,
        config: RepoConfig,
        cmd: Command,
        subject: Subject,
        *,
        mode: Mode | None = None,
        link_from: Origin | None = None,
        review_thread: int | None = None,
        overrides: Overrides | None = None,
        arbitration: ArbitrationContext | None = None,
        extra_trigger: dict[str, Any] | None = None,
    ) -> str:
        """Create a queued run (one active run per issue), acknowledge, wake a worker."""
        if link_from is None and not await self.quota_ok(gh, origin, config):
            return "done"
        active = self.svc.store.active_run(origin.repo, origin.issue_number)
        if active is not None:
            await self.already_running(gh, origin, active)
            return "done"
        run_id = uuid.uuid4().hex[:12]
        try:
            chosen, spec = self.make_spec(
                config,
                cmd,
                subject,
                run_id=run_id,
                mode=mode,
                overrides=overrides,
                arbitration=arbitration,
            )
        except ConfigError as exc:
            await self.reply(gh, origin, exc.public)
            return "done"
        trigger = {
            "comment_id": origin.comment_id,
            "review_comment": origin.review_comment,
            "review_thread": review_thread,
            "sender": origin.sender,
            "delivery": origin.delivery_id,
            "default_branch": origin.default_branch,
            "running_label": config.running_label,
            "arbitration": config.arbitration.model_dump(),
            "link_from": link_from.issue_number if link_from else None,
            "labels": list(origin.labels),
            **(extra_trigger or {}),
        }
        try:
            run = self.svc.store.create_run(
                repo=origin.repo,
                issue_number=origin.issue_number,
                spec=spec,
                mode=chosen,
                installation_id=None if gh is None else gh.installation_id,
                is_pr=origin.is_pr,
                trigger=trigger,
                requested_by=origin.sender,
                run_id=run_id,
            )
        except ActiveRunExists as exc:
            await self.already_running(gh, origin, exc.run)
            return "done"
        log.info("run.queued", run=run.id, repo=origin.repo, issue=origin.issue_number, mode=chosen)
        await self.acknowledge(gh, origin, run, config, link_from)
        self.svc.wake()
        return "done"

    def make_spec(
        self,
        config: RepoConfig,
        cmd: Command,
        subject: Subject,
        *,
        run_id: str,
        mode: Mode | None = None,
        overrides: Overrides | None = None,
        arbitration: ArbitrationContext | None = None,
    ) -> tuple[Mode, DebateSpec]:
        chosen: Mode = mode or cmd.mode or config.mode or choose_mode(subject.text)
        spec = build_spec(
            command=cmd,
            config=config,
            settings=self.svc.settings,
            mode=chosen,
            subject=subject,
            available_providers=self.svc.router.available_providers(),
            run_id=run_id,
            arbitration=arbitration,
            overrides=overrides,
        )
        return chosen, spec

    async def acknowledge(
        self,
        gh: InstallationClient,
        origin: Origin,
        run: RunRow,
        config: RepoConfig,
        link_from: Origin | None,
    ) -> None:
        target = link_from or origin
        await self.react(gh, target, "eyes")
        if config.running_label:
            await gh.add_labels(origin.repo, origin.issue_number, ["debate:running"])
        if link_from is not None:  # a one-off reply: the run's own markers live on the new issue
            await self.reply(gh, link_from, f"Debating this in #{origin.issue_number}.")

    async def already_running(self, gh: InstallationClient, origin: Origin, active: RunRow) -> None:
        where = f"#{active.issue_number}"
        await self.reply(
            gh,
            origin,
            f"A debate is already running here ({where}, run `{active.id}`, "
            f"{active.state}). Use `/debate status` or `/debate cancel`.",
        )

    async def react(self, gh: InstallationClient, origin: Origin, content: str) -> None:
        try:
            if origin.comment_id is None:
                await gh.add_issue_reaction(origin.repo, origin.issue_number, content)
            else:
                await gh.add_reaction(
                    origin.repo, origin.comment_id, content, review_comment=origin.review_comment
                )
        except BotError as exc:  # a reaction is a courtesy; never fail the work over it
            log.warning("reaction.failed", error=exc.code)

    async def reply(self, gh: InstallationClient, origin: Origin, text: str) -> None:
        """A one-off reply not tied to a run (its marker names the delivery)."""
        key = f"d-{origin.delivery_id or uuid.uuid4().hex[:12]}"
        thread = origin.thread()
        if origin.review_comment and origin.comment_id is not None:
            root = origin.thread_root or origin.comment_id
            thread = Thread(origin.repo, origin.issue_number, review_comment_id=root)
        await Publisher(gh, None, key, thread).upsert("status", text)

    async def _status(self, gh: InstallationClient, origin: Origin) -> str:
        run = self.svc.store.active_run(
            origin.repo, origin.issue_number
        ) or self.svc.store.latest_run(origin.repo, origin.issue_number)
        if run is None:
            await self.reply(gh, origin, "No debate has run on this issue yet.")
            return "done"
        turns = self.svc.store.load_turns(run.id)
        await self.reply(
            gh,
            origin,
            f"Run `{run.id}` ({run.mode}) is **{run.state}**: {len(turns)} model turns so far.",
        )
        return "done"

    async def _cancel(self, gh: InstallationClient, origin: Origin) -> str:
        run = self.svc.store.active_run(origin.repo, origin.issue_number)
        if run is None:
            await self.reply(gh, origin, "No debate is running on this issue.")
            return "done"
        self.svc.store.request_cancel(run.id)
        await self.react(gh, origin, "+1")
        self.svc.wake()
        return "done"

    async def _decide(self, gh: InstallationClient, origin: Origin, cmd: Command) -> str:
        store = self.svc.store
        run = store.active_run(origin.repo, origin.issue_number)
        point, choice = cmd.decide_point, cmd.decide_choice
        if run is None or run.mode != "proposal" or point is None or choice is None:
            await self.reply(gh, origin, "There is no proposal waiting for a decision here.")
            return "done"
        if run.state != "waiting":
            await self.reply(
                gh, origin, "The panel is still working; answer when it asks for a decision."
            )
            return "done"
        spec = run.debate_spec()
        waiting = next_step(spec, store.load_turns(run.id))
        pending = waiting.pending_points if isinstance(waiting, Outcome) else ()
        if point not in pending:
            listed = ", ".join(str(p) for p in pending) or "none"
            await self.reply(gh, origin, f"Point {point} is not open. Open points: {listed}.")
            return "done"
        decisions = tuple(d for d in spec.decisions if d.point != point)
        spec = replace(spec, decisions=(*decisions, Decision(point, choice, origin.sender)))
        if not store.requeue(run.id, spec):  # another decision got there first
            await self.reply(gh, origin, "That decision crossed another one; please repeat it.")
            return "done"
        await self.react(gh, origin, "+1")
        self.svc.wake()
        return "done"


__all__ = ["Intake", "Origin", "Services", "load_config"]
