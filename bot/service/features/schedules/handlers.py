"""Scheduled design reviews: `design_review: {schedule: weekly | monthly, scope: ...}`.

Two passes, run by every worker process (a loop registered with the router) every
``schedule_poll_s``: discovery reads each installed repository's config and
records the ones that ask for a schedule (a repository without the key is never
reviewed on a schedule); then each due review is claimed through the database
(one worker starts it), filed as an issue "Design review YYYY-MM-DD" linking the
previous one, and reviewed there like `/debate review` with the usual quotas.
When it ends, an end-of-run action compares its findings with the previous review's
(``compare_findings``): fixed, still open, new.
"""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime

import anyio

from bot.core.errors import BotError, ConfigError
from bot.core.logs import get_logger
from bot.engine.protocol import next_step
from bot.engine.types import Finding, Outcome
from bot.inputs.parser import Command
from bot.inputs.repo_config import RepoConfig
from bot.service.features.reviews.repo_review import finding_key, review_repository
from bot.service.worker.context import Origin, Services, load_config
from bot.service.worker.publish import Publisher, file_issue_once
from bot.service.worker.respond import Responder
from bot.service.worker.routes import Finished, TriggerTable
from bot.store.rows import RunRow, ScheduleRow

log = get_logger(__name__)

MAX_REPOS_PER_INSTALLATION = 300  # repositories whose config discovery reads per pass


def scope_folders(config: RepoConfig) -> tuple[str, ...]:
    scope = config.design_review.scope
    folders = [scope] if isinstance(scope, str) else scope
    return tuple(f.strip("/") for f in folders if f.strip("/"))  # "/" alone: everything


async def discover(svc: Services) -> None:
    """Record which repositories ask for scheduled reviews; forget the others."""
    db = svc.db
    for installation in await svc.gateway.installation_ids():
        if await db.installation_state(installation) != "active":
            continue
        try:
            gh = await svc.gateway.installation(installation)
            repos = await gh.installation_repositories(MAX_REPOS_PER_INSTALLATION)
        except BotError as exc:
            log.warning("schedule.discovery_failed", installation=installation, error=exc.code)
            continue
        keep: list[str] = []
        for repo in repos:
            try:
                config = await load_config(gh, repo)
            except ConfigError:
                continue  # a broken config is reported when someone triggers the bot
            cadence = config.design_review.schedule
            if cadence is not None:
                await db.set_schedule(repo, installation, cadence, scope_folders(config))
                keep.append(repo)
        await db.drop_schedules(installation, keep)


async def run_due(r: Responder, worker_id: str) -> int:
    """Start every due scheduled review this worker can claim; returns how many."""
    db, lease = r.svc.db, r.svc.settings.lease_s
    started = 0
    while (row := await db.claim_due_schedule(worker_id, lease)) is not None:
        issue, run_id = None, None
        try:
            issue, run_id = await _start(r, row)
            started += issue is not None
        except BotError as exc:  # tried again next period; nothing half-done is left
            log.warning("schedule.start_failed", repo=row.repo, error=exc.code)
        finally:  # shielded: a shutdown must still hand the claim back
            with anyio.CancelScope(shield=True):
                await db.schedule_started(row.repo, worker_id, issue=issue, run_id=run_id)
    return started


async def _start(r: Responder, row: ScheduleRow) -> tuple[int | None, str | None]:
    gh = await r.svc.gateway.installation(row.installation_id)
    try:
        config = await load_config(gh, row.repo)
    except ConfigError:
        return None, None
    if config.design_review.schedule is None:
        return None, None
    today = datetime.now(UTC).date().isoformat()
    title = f"Design review {today}"
    lines = [
        f"The {row.cadence} design review of this repository"
        + (f" (folders: {', '.join(f'`{f}/`' for f in row.scope)})" if row.scope else "")
        + ", asked for by `design_review.schedule` in `.github/debate.yml`."
    ]
    if row.last_issue is not None:
        lines.append(f"The previous review: #{row.last_issue}.")
    body = "\n\n".join(lines)
    # One issue per due review, even if its start is retried after a crash.
    due = row.next_due.isoformat()
    key = "schedule-" + hashlib.sha256(f"{row.repo.lower()}|{due}".encode()).hexdigest()[:16]
    number = await file_issue_once(gh, row.repo, title, body, key=key, resumed=True)
    origin = Origin(
        repo=row.repo,
        default_branch=await gh.default_branch(row.repo),
        issue_number=number,
        is_pr=False,
        sender=await gh.bot_login(),
        title=title,
        body=body,
        delivery_id=key,
    )
    cmd = Command(action="review", mode="critique", path="")
    await review_repository(
        r, gh, origin, config, cmd, folders=row.scope, previous_run=row.last_run
    )
    run = await r.started(origin)
    return number, run.id if run is not None else None


async def schedule_loop(svc: Services, worker_id: str) -> None:
    """Due reviews every ``schedule_poll_s``, discovery every ``schedule_discovery_s``
    (and at start); a failed pass is logged and the next one tries again. A
    ``schedule_poll_s`` of 0 turns scheduled reviews off."""
    if svc.settings.schedule_poll_s <= 0:
        return
    respond = Responder(svc)
    discovered_at: float | None = None
    while True:
        try:
            now = time.monotonic()
            if discovered_at is None or now - discovered_at >= svc.settings.schedule_discovery_s:
                await discover(svc)
                discovered_at = now
            await run_due(respond, worker_id)
        except Exception:
            log.exception("schedule.pass_failed")
        await anyio.sleep(svc.settings.schedule_poll_s)


def register(triggers: TriggerTable) -> None:
    triggers.every(schedule_loop)
    triggers.on_finish(compare_with_previous)


# --- what changed since the previous review --------------------------------------


async def compare_with_previous(done: Finished) -> None:
    if done.outcome.kind == "critique" and done.run.trigger.previous_review:
        await compare_findings(done.svc, done.run, done.outcome.findings, done.publisher)


async def findings_of(svc: Services, run: RunRow) -> tuple[Finding, ...]:
    """A finished review's findings, replayed from its stored turns (pure engine)."""
    step = next_step(run.debate_spec(), await svc.db.load_turns(run.id))
    return step.findings if isinstance(step, Outcome) else ()


async def compare_findings(
    svc: Services,
    run: RunRow,
    findings: tuple[Finding, ...],
    publisher: Publisher,
) -> None:
    previous_id = run.trigger.previous_review
    previous = await svc.db.get_run(previous_id) if previous_id else None
    if previous is None or previous.state != "done":
        return
    before = {finding_key(run.repo, f): f for f in await findings_of(svc, previous)}
    now = {finding_key(run.repo, f): f for f in findings}
    fixed = [f for k, f in before.items() if k not in now]
    still = [f for k, f in now.items() if k in before]
    new = [f for k, f in now.items() if k not in before]
    lines = [f"**Since the previous review (#{previous.issue_number}):**", ""]
    for label, group in (("Fixed", fixed), ("Still open", still), ("New", new)):
        lines.append(f"- {label}: {len(group)}")
        lines += [f"  - {f.title}" for f in group]
    await publisher.upsert("status", "\n".join(lines))
