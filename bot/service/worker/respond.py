"""How the worker answers a trigger: replies, reactions, permission, quotas, starting a run.

Every reply here is a short fixed sentence or the parser's usage text: never an
exception's text. The feature modules (debates, reviews, arbitration) reach
GitHub and the store through these helpers for everything they share.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

import anyio

from bot.core.aio import both
from bot.core.errors import (
    ActiveRun,
    ActiveRunExists,
    AdmissionRefused,
    BotError,
    ConfigError,
    GitHubError,
    QuotaSpent,
    TransientGitHubError,
    UsageError,
)
from bot.core.logs import get_logger
from bot.engine.types import ArbitrationContext, DebateSpec, Mode, RepoRef
from bot.github.gateway import InstallationClient
from bot.inputs.parser import Command, parse_command, usage_text
from bot.inputs.plan import choose_mode
from bot.inputs.repo_config import RepoConfig
from bot.inputs.text import cap_subject
from bot.run.admission import Budget, Limits, Quota, quota_scope
from bot.run.completers import seat_agents
from bot.run.spec import Overrides, Subject, build_spec
from bot.service.worker.budgets import (
    budget_for,
    caps_for,
    forecast_for,
    quota_for,
    status_spend,
)
from bot.service.worker.context import Origin, Services, load_config
from bot.service.worker.publish import Publisher, Thread
from bot.store import NewRun, RunRow
from bot.store.trigger import ArbitrationActions, Queued, ReviewedPlan, Trigger

log = get_logger(__name__)

PERMISSION_RANK = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}


class TriggerExtras(TypedDict, total=False):
    """What a feature adds to the trigger record of the run it starts."""

    review: ReviewedPlan
    reviewed: dict[str, str]
    queue: Queued
    arbitrated_comment: int
    previous_review: str


class StartOptions(TypedDict, total=False):
    """How ``Responder.start`` starts a run: the fields of ``RunStart`` after its
    subject, by name."""

    mode: Mode | None
    link_from: Origin | None
    review_thread: int | None
    overrides: Overrides | None
    arbitration: ArbitrationContext | None
    extras: TriggerExtras | None
    commit: str | None


class SpecOptions(TypedDict, total=False):
    """What ``Responder.make_spec`` takes besides the config, command and subject."""

    mode: Mode | None
    overrides: Overrides | None
    arbitration: ArbitrationContext | None
    repo_ref: RepoRef | None


@dataclass(frozen=True)
class RunStart:
    """What starts a run: the trigger's ``origin``, the repo's ``config``, the
    command and its ``subject``, and how. ``link_from``: the command was made
    elsewhere and its quota checked there (``quota_ok``) before the issue was
    filed. ``commit``: what the run reads, when the caller already pinned it (else
    the PR's head or the default branch's head, now). ``extras``: what the
    feature adds to the run's trigger record."""

    origin: Origin
    config: RepoConfig
    cmd: Command
    subject: Subject
    mode: Mode | None = None
    link_from: Origin | None = None
    review_thread: int | None = None
    overrides: Overrides | None = None
    arbitration: ArbitrationContext | None = None
    extras: TriggerExtras | None = None
    commit: str | None = None


def _trigger(what: RunStart) -> Trigger:
    """The trigger record of the run ``what`` starts."""
    origin, config = what.origin, what.config
    trigger = Trigger(
        comment_id=origin.comment_id,
        review_comment=origin.review_comment,
        review_thread=what.review_thread,
        sender=origin.sender,
        delivery=origin.delivery_id,
        default_branch=origin.default_branch,
        running_label=config.running_label,
        arbitration=ArbitrationActions(
            config.arbitration.resolve_on_dismissed, config.arbitration.label_on_confirmed
        ),
        link_from=what.link_from.issue_number if what.link_from else None,
        labels=origin.labels,
    )
    return replace(trigger, **(what.extras or {}))


def addressed_by_default(body: str) -> bool:
    """Whether a comment starts with the default command word."""
    first = body.lstrip().split(maxsplit=1)
    return bool(first) and first[0] == RepoConfig().command


def subject_of(title: str, text: str) -> Subject:
    """A subject capped to the engine's size limit, saying so when it was cut."""
    capped, truncated = cap_subject(text)
    return Subject(title, capped, truncated, warnings=("subject truncated",) if truncated else ())


class Responder:
    def __init__(self, svc: Services) -> None:
        self.svc = svc

    # -- reading the trigger ------------------------------------------------------

    async def config_or_reply(
        self, gh: InstallationClient, origin: Origin, *, addressed: bool = True
    ) -> RepoConfig | None:
        """The repo config, or None after telling the user it is broken."""
        config = await self._config_or_error(gh, origin)
        if isinstance(config, ConfigError):
            await self._config_broken(gh, origin, config, addressed=addressed)
            return None
        return config

    @staticmethod
    async def _config_or_error(gh: InstallationClient, origin: Origin) -> RepoConfig | ConfigError:
        try:
            return await load_config(gh, origin.repo)
        except ConfigError as exc:
            return exc

    async def _config_broken(
        self,
        gh: InstallationClient,
        origin: Origin,
        exc: ConfigError,
        *,
        addressed: bool,
        permission: str | None = None,
    ) -> None:
        """Only a trigger ``addressed`` to the bot under the defaults (`/debate`,
        the `debate` label) from a user with the default permission hears about a
        broken file: any other slash comment stays silent, or a broken config
        would let anyone make the bot post."""
        if addressed and await self.allowed(
            gh, origin, RepoConfig(), reply=False, permission=permission
        ):
            await self.reply(
                gh,
                origin,
                f"**debate-bot** cannot read its configuration.\n\n```\n{exc.public}\n```",
            )

    async def read_command(
        self, gh: InstallationClient, origin: Origin, body: str
    ) -> tuple[RepoConfig, Command] | str:
        """The repo config and the command of an allowed user; or, when there is
        nothing more to do (not a command, or answered with a config, usage or
        permission reply), the delivery's final state."""
        # Nearly every path below needs the sender's permission: ask GitHub for it
        # while the config is read, one round trip instead of two.
        config, permission = await both(
            self._config_or_error(gh, origin), gh.permission(origin.repo, origin.sender)
        )
        if isinstance(config, ConfigError):
            addressed = addressed_by_default(body)
            await self._config_broken(
                gh, origin, config, addressed=addressed, permission=permission
            )
            return "done"
        try:
            cmd = parse_command(body, command=config.command)
        except UsageError as exc:
            if not await self.allowed(gh, origin, config, reply=False, permission=permission):
                return "ignored"
            await self.react(gh, origin, "confused")
            await self.reply(gh, origin, f"{exc.public}\n\n{usage_text(config.command)}")
            return "done"
        if cmd is None:
            return "ignored"
        if not await self.allowed(gh, origin, config, reply=True, permission=permission):
            return "done"
        return config, cmd

    def issue_subject(self, origin: Origin, extra: str = "") -> Subject:
        text = "\n\n".join(p for p in (origin.title, origin.body, extra) if p).strip()
        return subject_of(origin.title, text)

    async def issue_ref_subject(
        self, gh: InstallationClient, origin: Origin, number: int
    ) -> Subject | None:
        """Issue ``#number`` of this repository as a subject, or None after
        saying it was not found."""
        try:
            issue: dict[str, Any] | None = await gh.get_issue(origin.repo, number)
        except GitHubError as exc:
            if exc.github_status != 404:
                raise
            issue = None
        if issue is None:
            await self.reply(gh, origin, f"Issue #{number} was not found in this repository.")
            return None
        text = f"{issue.get('title') or ''}\n\n{issue.get('body') or ''}".strip()
        return subject_of(f"#{number}: {issue.get('title') or ''}", text)

    # -- permission and quotas ----------------------------------------------------

    async def allowed(
        self,
        gh: InstallationClient,
        origin: Origin,
        config: RepoConfig,
        *,
        reply: bool,
        permission: str | None = None,
    ) -> bool:
        """Whether the sender has the config's minimum permission (``permission``:
        theirs, if already known; else GitHub is asked)."""
        perm = permission or await gh.permission(origin.repo, origin.sender)
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

    @staticmethod
    def _quota(config: RepoConfig) -> Quota:
        return quota_for(config)

    async def _quota_used(self, origin: Origin, quota: Quota) -> tuple[int, int]:
        return await self.svc.db.quota_counts(origin.repo, quota.since, origin.sender)

    async def quota_left(self, origin: Origin, config: RepoConfig) -> int:
        """Runs this user may still start here today (repo and user quotas)."""
        quota = self._quota(config)
        repo_used, user_used = await self._quota_used(origin, quota)
        return max(0, min(quota.per_repo - repo_used, quota.per_user - user_used))

    async def quota_ok(self, gh: InstallationClient, origin: Origin, config: RepoConfig) -> bool:
        """Whether a run may start here (else replied): for a check before work
        that must not be done for nothing, as filing an issue; ``start`` counts
        again as it queues the run."""
        quota = self._quota(config)
        scope = quota_scope(quota, *await self._quota_used(origin, quota))
        if scope is None:
            return True
        await self.reply(gh, origin, QuotaSpent(scope).public)
        return False

    async def spend_line(
        self, origin: Origin, config: RepoConfig, installation_id: int | None
    ) -> str:
        """Month-to-date spend against the budgets, for `/debate status`."""
        month = await self.svc.db.month_spend(origin.repo, installation_id)
        return status_spend(month, caps_for(self.svc.settings, config), datetime.now(UTC))

    # -- starting a run -----------------------------------------------------------

    async def start(
        self,
        gh: InstallationClient,
        origin: Origin,
        config: RepoConfig,
        cmd: Command,
        subject: Subject,
        **how: Unpack[StartOptions],
    ) -> str:
        """Create a queued run (one active run per issue, within the daily quotas),
        acknowledge, wake a worker: ``start_run`` of a ``RunStart``, whose fields
        ``how`` sets by name (``mode``, ``link_from``, ``commit``, …)."""
        return await self.start_run(gh, RunStart(origin, config, cmd, subject, **how))

    async def start_run(self, gh: InstallationClient, what: RunStart) -> str:
        """Create the queued run ``what`` describes (every refusal is one reply),
        acknowledge, wake a worker."""
        origin = what.origin
        run_id = self.svc.new_run_id(origin)
        repo_ref = await self.pin(gh, origin, what.commit)
        try:
            chosen, spec = self.make_spec(
                what.config,
                what.cmd,
                what.subject,
                run_id=run_id,
                mode=what.mode,
                overrides=what.overrides,
                arbitration=what.arbitration,
                repo_ref=repo_ref,
            )
            spec = await self.seat(spec)
        except ConfigError as exc:
            await self.reply(gh, origin, exc.public)
            return "done"
        installation = None if gh is None else gh.installation_id
        budget = await self._budget(gh, what, spec, installation)
        # The quota was counted where the command was made (link_from).
        quota = None if what.link_from else self._quota(what.config)
        try:
            new = NewRun(
                repo=origin.repo,
                issue_number=origin.issue_number,
                spec=spec,
                mode=chosen,
                installation_id=installation,
                is_pr=origin.is_pr,
                trigger=_trigger(what),
                requested_by=origin.sender,
                run_id=run_id,
            )
            run = await self.svc.db.create_run(new, Limits(quota, budget))
        except ActiveRunExists as exc:
            await self.already_running(gh, origin, exc.run)
            return "done"
        except AdmissionRefused as exc:  # a quota, a budget, an unknown price
            log.info("run.refused", repo=origin.repo, issue=origin.issue_number, code=exc.code)
            await self.reply(gh, origin, exc.public)
            return "done"
        log.info("run.queued", run=run.id, repo=origin.repo, issue=origin.issue_number, mode=chosen)
        await self.acknowledge(gh, origin, what.config, what.link_from)
        self.svc.wake()
        return "done"

    async def _budget(
        self, gh: InstallationClient, what: RunStart, spec: DebateSpec, installation: int | None
    ) -> Budget | None:
        """The budgets, and the estimate they need (`/debate estimate`'s own figure)."""
        caps = caps_for(self.svc.settings, what.config)
        repo = what.origin.repo
        estimate = (
            await forecast_for(self.svc, gh, spec, repo=repo, installation_id=installation)
            if caps.any
            else None
        )
        return budget_for(spec, estimate, caps, self.svc.models.prices)

    async def started(self, origin: Origin) -> RunRow | None:
        """The run ``start`` just created for this origin (None when it replied instead)."""
        run = await self.svc.db.active_run(origin.repo, origin.issue_number)
        if run is not None and run.trigger.delivery == origin.delivery_id:
            return run
        return None

    async def pin(
        self, gh: InstallationClient, origin: Origin, commit: str | None
    ) -> RepoRef | None:
        """The commit a run reads (docs/architecture.md, "Repository snapshots"): a
        PR's head, else the default branch's head, read when the run starts and
        stored in its spec. None when GitHub has none (an empty repository): the
        run debates from its static context."""
        try:
            if not commit and origin.is_pr:
                pull = await gh.get_pull(origin.repo, origin.issue_number)
                commit = str((pull.get("head") or {}).get("sha") or "")
            elif not commit:
                commit = await gh.branch_sha(origin.repo, origin.default_branch)
        except GitHubError as exc:
            if isinstance(exc, TransientGitHubError):
                raise
            log.warning("run.not_pinned", repo=origin.repo, error=exc.code)
            return None
        if not commit:
            return None
        return RepoRef(origin.repo, commit, origin.repo_page(self.svc.settings.github_api_url))

    def make_spec(
        self,
        config: RepoConfig,
        cmd: Command,
        subject: Subject,
        *,
        run_id: str,
        **how: Unpack[SpecOptions],
    ) -> tuple[Mode, DebateSpec]:
        chosen: Mode = how.get("mode") or cmd.mode or config.mode or choose_mode(subject.text)
        repo_ref = how.get("repo_ref")
        spec = build_spec(
            command=cmd,
            config=config,
            settings=self.svc.settings,
            mode=chosen,
            subject=subject,
            available_providers=self.svc.models.available_providers(),
            run_id=run_id,
            arbitration=how.get("arbitration"),
            overrides=how.get("overrides"),
            repo_ref=repo_ref,
            # The debaters read the pinned commit (bot/repo) when one was pinned.
            tools_available=repo_ref is not None,
        )
        return chosen, spec

    async def seat(self, spec: DebateSpec) -> DebateSpec:
        """``spec`` with its agent seats proven able to run here (AgentUnavailable,
        a ConfigError: one cannot, the command is refused). The first check of a
        process starts bubblewrap and each CLI: off the event loop."""
        return await anyio.to_thread.run_sync(seat_agents, spec, self.svc.models)

    async def acknowledge(
        self, gh: InstallationClient, origin: Origin, config: RepoConfig, link_from: Origin | None
    ) -> None:
        target = link_from or origin
        await self.react(gh, target, "eyes")
        if config.running_label:
            await gh.add_labels(origin.repo, origin.issue_number, ["debate:running"])
        if link_from is not None:  # a one-off reply: the run's own markers live on the new issue
            await self.reply(gh, link_from, f"Debating this in #{origin.issue_number}.")

    async def already_running(
        self, gh: InstallationClient, origin: Origin, active: ActiveRun
    ) -> None:
        where = f"#{active.issue_number}"
        await self.reply(
            gh,
            origin,
            f"A debate is already running here ({where}, run `{active.id}`, "
            f"{active.state}). Use `/debate status` or `/debate cancel`.",
        )

    # -- saying something ---------------------------------------------------------

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
        await Publisher(gh, None, key, thread, resumed=self.svc.resume_comments).upsert(
            "status", text
        )
