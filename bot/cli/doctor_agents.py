"""`debate-bot doctor`'s lines for agent seats (docs/agents-operators.md): for
each CLI configured (its `DEBATE_BOT_AGENT_<CLI>_BIN`) or on PATH, whether it is
found at its pinned minimum, whether the sandbox starts, and whether its
upstream provider has a key and answers."""

from __future__ import annotations

import os
import shutil

from bot.cli.checks import Check, ping
from bot.core.errors import AgentUnavailable
from bot.core.settings import Settings
from bot.engine.agents import CLIS, UPSTREAM, Cli
from bot.models.agents.clis import CLI_SPECS
from bot.models.router import ModelRouter

KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}


def configured(settings: Settings, router: ModelRouter) -> list[Cli]:
    """The CLIs an operator set up: a BIN setting, or the executable on PATH."""
    return [
        cli
        for cli in CLIS
        if router.agents.bins.get(cli)
        or any(shutil.which(n, path=os.environ.get("PATH")) for n in CLI_SPECS[cli].names)
    ]


async def agent_checks(settings: Settings) -> list[Check]:
    async with ModelRouter(settings.model_copy(update={"model_max_retries": 0})) as router:
        clis = configured(settings, router)
        if not clis:
            return []
        checks = [_sandbox(router)]
        for cli in clis:
            checks.append(_found(router, cli))
            checks.append(await _upstream(router, cli))
        return checks


def _sandbox(router: ModelRouter) -> Check:
    name = "agent sandbox"
    try:
        found = router.agents.sandbox()
    except AgentUnavailable as exc:
        fix = "install bubblewrap; allow user namespaces (docs/agents-operators.md)"
        return Check(name, False, exc.public, fix)
    if not found.confined:
        return Check(name, False, "DEBATE_BOT_AGENT_SANDBOX=none: agents run unconfined",
                     "unset DEBATE_BOT_AGENT_SANDBOX (bwrap)")  # fmt: skip
    return Check(name, True, f"bubblewrap starts ({found.bwrap})")


def _found(router: ModelRouter, cli: Cli) -> Check:
    name = f"agent:{cli}"
    spec = CLI_SPECS[cli]
    try:
        found = router.agents.cli(cli)
    except AgentUnavailable as exc:
        return Check(name, False, exc.public, f"install {spec.min_version} or newer")
    model = router.agents.models.get(cli) or "the CLI's default model"
    return Check(name, True, f"{found.version} (minimum {spec.min_version}), runs {model}")


async def _upstream(router: ModelRouter, cli: Cli) -> Check:
    provider = UPSTREAM[cli]
    name = f"agent:{cli} upstream ({provider})"
    upstream = router.agent_upstreams()[provider]
    if not upstream.key:
        return Check(name, False, "no key", f"set {KEYS[provider]}")
    model = router.agents.models.get(cli)
    if not model:
        setting = f"DEBATE_BOT_AGENT_{CLI_SPECS[cli].setting}_MODEL"
        return Check(name, True, f"key set (set {setting} to have it answer here)")
    if provider == "gemini":  # no API provider of ours speaks Gemini's API
        return Check(name, True, "key set")
    return await ping(router, f"{provider}/{model}", name=name)
