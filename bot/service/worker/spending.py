"""`/debate estimate`: the plan and estimated cost of the debate the same flags
would start, with the budgets that apply; nothing runs (docs/configuration.md, "Money")."""

from __future__ import annotations

import anyio

from bot.core.errors import ConfigError
from bot.github.gateway import InstallationClient
from bot.inputs.parser import Command
from bot.inputs.repo_config import RepoConfig
from bot.models.estimate import estimate_run
from bot.service.worker.budgets import caps_for, estimate_text
from bot.service.worker.context import Origin
from bot.service.worker.respond import Responder, subject_of
from bot.service.worker.routes import TriggerTable
from bot.service.worker.specs import Subject


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
        _, spec = r.make_spec(config, cmd, subject, run_id="estimate")
    except ConfigError as exc:
        await r.reply(gh, origin, exc.public)
        return "done"
    prices = r.svc.models.prices
    # The walk of the whole plan is CPU work: off the event loop.
    est = await anyio.to_thread.run_sync(estimate_run, spec, prices)
    await r.reply(gh, origin, estimate_text(spec, est, caps_for(r.svc.settings, config), prices))
    return "done"
