"""`/debate estimate`: the plan and estimated cost of the debate the same flags
would start, with the budgets that apply and what they would do with it now;
nothing runs (docs/configuration.md, "Money").

The figure is admission's own (``budgets.forecast_for``): the same spec (pinned
to the commit a run would read now, so with tools as a run has them), the same
history, the same estimate."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.core.errors import ConfigError
from bot.github.gateway import InstallationClient
from bot.inputs.parser import Command
from bot.inputs.repo_config import RepoConfig
from bot.run.spec import Subject
from bot.service.worker.budgets import caps_for, estimate_text, forecast_for
from bot.service.worker.context import Origin
from bot.service.worker.respond import Responder, subject_of
from bot.service.worker.routes import TriggerTable


def register(triggers: TriggerTable) -> None:
    triggers.on_command("estimate", estimate)


async def _subject(
    r: Responder, gh: InstallationClient, origin: Origin, cmd: Command
) -> Subject | None:
    """What the debate would be about: a topic, another issue, or this one."""
    if cmd.topic:
        return subject_of(cmd.topic.strip().splitlines()[0][:200], cmd.subject)
    if cmd.issue_ref is None:
        return r.issue_subject(origin, cmd.context)
    return await r.issue_ref_subject(gh, origin, cmd.issue_ref)


async def estimate(
    r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
) -> str:
    subject = await _subject(r, gh, origin, cmd)
    if subject is None:
        return "done"
    try:
        _, spec = r.make_spec(
            config, cmd, subject, run_id="estimate", repo_ref=await r.pin(gh, origin, None)
        )
    except ConfigError as exc:
        await r.reply(gh, origin, exc.public)
        return "done"
    installation = None if gh is None else gh.installation_id
    est = await forecast_for(r.svc, gh, spec, repo=origin.repo, installation_id=installation)
    caps = caps_for(r.svc.settings, config)
    month = await r.svc.db.month_spend(origin.repo, installation) if caps.any else None
    body = estimate_text(spec, est, caps, r.svc.models.prices, month, datetime.now(UTC))
    await r.reply(gh, origin, body)
    return "done"
