"""The DebateSpec of a local run, through the one builder of every shell
(``bot/run/spec.py``: flags over the plan's frontmatter over the checkout's
``.github/debate.yml`` over the server settings), with the flags read as a
command's; and a check that every model can actually be reached.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import get_args

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.engine.routing import all_models, base_models, judge_models
from bot.engine.types import ContextFile, DebateSpec, Mode
from bot.inputs.parser import Command
from bot.inputs.plan import Plan
from bot.inputs.repo_config import RepoConfig
from bot.models.router import ModelRouter
from bot.run.spec import Local, Overrides, Subject, build_spec

# What a dry run plans with when no model is configured (it calls none): the
# model bot/run/spec.py's NO_MODEL_LOCAL suggests, priced by the built-in table.
PLANNING_MODEL = "openai/gpt-4.1-mini"

_CREDENTIALS = {
    "openai": "set OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server)",
    "anthropic": "set ANTHROPIC_API_KEY",
    "ollama": "set OPENAI_BASE_URL to the Ollama server (e.g. http://127.0.0.1:11434/v1)",
}


@dataclass(frozen=True)
class Flags:
    """The command-line flags that win over the frontmatter and the repo config."""

    rounds: int | None = None
    mode: Mode | None = None
    model: str | None = None
    judge: str | None = None
    alternating: bool = False
    no_tools: bool = False
    stand_in: str | None = None  # a dry run's model where none is configured


def parse_mode(value: str | None) -> Mode | None:
    if value is None:
        return None
    modes: tuple[Mode, ...] = get_args(Mode)
    for mode in modes:
        if value.strip().lower() == mode:
            return mode
    raise ConfigError(f"--mode must be one of {', '.join(modes)}; got {value!r}")


@dataclass(frozen=True)
class SpecInputs:
    """What a plan is weighed with: its subject as read, the flags, the
    checkout's repo config and the server settings."""

    subject: str
    subject_truncated: bool
    context_files: tuple[ContextFile, ...]
    warnings: tuple[str, ...]
    flags: Flags
    config: RepoConfig
    settings: Settings
    available_providers: frozenset[str]
    seed: str
    tools_available: bool = False  # a reader of the working tree


def spec_from_inputs(plan: Plan, inputs: SpecInputs) -> DebateSpec:
    """The plan's spec: the flags as the command, the keys its frontmatter sets
    as the overrides."""
    flags = inputs.flags
    model = (flags.model or "").strip()
    command = Command(
        action="debate",
        rounds=flags.rounds,
        mode=plan.mode,
        models=(model,) if model else (),
        judge=(flags.judge or "").strip() or None,
        alternating=flags.alternating,
        no_tools=flags.no_tools,
    )
    subject = Subject(
        plan.title, inputs.subject, inputs.subject_truncated, inputs.context_files, inputs.warnings
    )
    spec = build_spec(
        command=command,
        config=inputs.config,
        settings=inputs.settings,
        mode=plan.mode,
        subject=subject,
        available_providers=inputs.available_providers,
        run_id=inputs.seed,
        overrides=Overrides.of(plan),
        tools_available=inputs.tools_available,
        local=Local(plan.source, flags.stand_in),
    )
    if inputs.subject_truncated:
        truncated = "the plan was longer than the subject limit and was truncated"
        spec = replace(spec, warnings=(*spec.warnings, truncated))
    return spec


def check_models(spec: DebateSpec, router: ModelRouter) -> tuple[str, ...]:
    """Raise ConfigError for a malformed reference or a primary model whose
    provider has no credentials; return notes on unreachable fallbacks."""
    seats = max(2, len(spec.personas))
    roles: list[tuple[str, tuple[str, ...], str]] = []
    for i in range(seats):
        name = spec.personas[i].name if i < len(spec.personas) else f"auto-picked persona {i + 1}"
        roles.append((f"persona {name!r}", base_models(spec, i), "--model"))
    roles.append(("the judge", judge_models(spec), "--judge"))
    available = router.available_providers() | router.seatable(all_models(spec))
    notes: list[str] = []
    for role, refs, flag in roles:
        for position, ref in enumerate(refs):
            prov, _ = router.resolve(ref)
            if prov in available:
                continue
            hint = _CREDENTIALS.get(prov, f"configure the {prov!r} provider")
            if position == 0:
                raise ConfigError(
                    f"{role} uses {ref!r}, but provider {prov!r} has no credentials: {hint}, "
                    f"or choose another model with {flag}."
                )
            notes.append(f"fallback {ref!r} of {role} is skipped: {hint} to use it")
    return tuple(dict.fromkeys(notes))
