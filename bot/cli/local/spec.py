"""The DebateSpec of a local run: command-line flags over the plan's frontmatter
over the checkout's ``.github/debate.yml`` over the server settings, and a check
that every model can actually be reached.

Model precedence (documented in the README's `debate-bot run` section):
- personas: ``--model`` for every persona, else each persona's ``model`` (from
  the frontmatter, else the repo config), else the repo config's ``models``,
  else ``DEBATE_BOT_DEFAULT_MODELS`` seat by seat, else ``DEBATE_BOT_DEFAULT_MODEL``;
- judge: ``--judge``, else the repo config's ``judge``, else
  ``DEBATE_BOT_DEFAULT_MODEL``, else ``--model``, else the first persona's model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from bot.core.errors import ConfigError, ProtocolError
from bot.core.settings import Settings
from bot.engine.protocol import next_step
from bot.engine.routing import all_models, base_models, judge_models
from bot.engine.types import ContextFile, DebateSpec, Mode, PersonaSpec
from bot.inputs.plan import Plan
from bot.inputs.repo_config import PersonaConfig, RepoConfig
from bot.models.router import ModelRouter

NO_MODEL = (
    "no model is configured. Set DEBATE_BOT_DEFAULT_MODEL (e.g. openai/gpt-4.1-mini) or pass "
    "--model, together with the provider's key: OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
    "OpenAI-compatible server) or ANTHROPIC_API_KEY. For an offline rehearsal without any key, "
    "pass --model scripted/rehearsal."
)

# What a dry run plans with when no model is configured (it calls none): the
# model NO_MODEL suggests, priced by the built-in table.
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


def _persona(p: PersonaConfig, model: str | None) -> PersonaSpec:
    return PersonaSpec(p.name, p.perspective, model or p.model or "", tuple(p.fallbacks))


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
    """Flags over the plan's frontmatter over the checkout's ``.github/debate.yml``
    over the server settings, as the bot weighs a plan against the repo config."""
    flags, config = inputs.flags, inputs.config
    model = (flags.model or "").strip() or None
    set_by_plan = set(plan.frontmatter_keys)
    chosen = plan.personas if "personas" in set_by_plan else tuple(config.personas)
    personas = tuple(_persona(p, model) for p in chosen)
    judge, default_models, warnings = _models(inputs, model, personas)
    if inputs.subject_truncated:
        warnings = (*warnings, "the plan was longer than the subject limit and was truncated")
    spec = DebateSpec(
        mode=plan.mode,
        title=plan.title,
        subject=inputs.subject,
        subject_truncated=inputs.subject_truncated,
        personas=personas,
        judge=judge,
        rounds=flags.rounds or (plan.rounds if "rounds" in set_by_plan else config.rounds),
        turn_order="alternating" if flags.alternating else config.turn_order,
        response_scale=(
            plan.response_scale if "response_scale" in set_by_plan else config.response_scale
        ),
        synthesizer=plan.synthesizer if "synthesizer" in set_by_plan else config.synthesizer,
        context_files=inputs.context_files,
        warnings=warnings,
        # The service's per-run token cap guards a local bill just the same.
        max_tokens=config.max_tokens_per_run,
        voters=tuple(config.voters),
        tiers=tuple(tuple(t) for t in config.tiers),
        on_unavailable=config.on_unavailable,
        available_providers=inputs.available_providers,
        seed=inputs.seed,
        default_models=default_models,
        # Tools need a reader of the working tree (tools_available).
        tools=inputs.tools_available and config.tools and not flags.no_tools,
    )
    try:
        next_step(spec, ())  # the engine's own checks (persona count, names, rounds)
    except ProtocolError as exc:
        raise ConfigError(f"{plan.source}: {exc}") from exc
    return spec


def _models(
    inputs: SpecInputs, model: str | None, personas: tuple[PersonaSpec, ...]
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The judge, the personas' default models and the warnings: with no model
    configured at all, a dry run's stand-in (and a warning that says so), else
    ConfigError."""
    config, settings, stand_in = inputs.config, inputs.settings, inputs.flags.stand_in
    default_models: tuple[str, ...] = (
        (model,)
        if model
        else tuple(config.models)
        or tuple(settings.default_models)
        or ((settings.default_model,) if settings.default_model else ())
    )
    judge = (
        (inputs.flags.judge or "").strip() or config.judge or settings.default_model or model or ""
    )
    if judge or default_models or any(p.model for p in personas):
        return judge, default_models, inputs.warnings
    if not stand_in:
        raise ConfigError(NO_MODEL)
    warning = (
        f"no model is configured: planned with {stand_in} and its price "
        "(set DEBATE_BOT_DEFAULT_MODEL or pass --model for yours)"
    )
    return stand_in, (stand_in,), (*inputs.warnings, warning)


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
