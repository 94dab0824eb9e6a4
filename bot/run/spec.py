"""The one DebateSpec builder of every shell (the worker, `debate-bot run` and
`review`, eval): the command over a plan's frontmatter over the repo config over
the server settings.

- personas: the plan's, else the ones the command names, else the repo
  config's (none: the engine picks a pair);
- a seat's model: the command's models seat by seat, else the persona's own
  ``model``, else the repo config's ``models`` seat by seat, else
  ``DEBATE_BOT_DEFAULT_MODELS`` seat by seat, else ``DEBATE_BOT_DEFAULT_MODEL``;
- the judge: the command's, else the repo config's ``judge``, else
  ``DEBATE_BOT_DEFAULT_MODEL``, else the first of the seats' models above, else
  the first persona's model (the engine's ``judge_models``);
- no model at all: a ConfigError worded for where its user can fix it, or, for
  a dry run on the command line, a stand-in model and a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.errors import ConfigError, ProtocolError
from bot.core.settings import Settings
from bot.engine.personas import LENSES
from bot.engine.protocol import next_step
from bot.engine.types import (
    ArbitrationContext,
    ContextFile,
    DebateSpec,
    Mode,
    PersonaSpec,
    RepoRef,
    SubjectKind,
)
from bot.inputs.parser import Command
from bot.inputs.plan import Plan
from bot.inputs.repo_config import PersonaConfig, RepoConfig

# No model at all, worded for where its user can fix it: on GitHub, on the command line.
NO_MODEL = (
    "No model is configured. Set `judge` and `personas` (or `models`) in "
    "`.github/debate.yml`, or ask the operator to set DEBATE_BOT_DEFAULT_MODEL."
)
NO_MODEL_LOCAL = (
    "no model is configured. Set DEBATE_BOT_DEFAULT_MODEL (e.g. openai/gpt-4.1-mini) or pass "
    "--model, together with the provider's key: OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
    "OpenAI-compatible server) or ANTHROPIC_API_KEY. For an offline rehearsal without any key, "
    "pass --model scripted/rehearsal."
)


def _persona(p: PersonaConfig) -> PersonaSpec:
    return PersonaSpec(p.name, p.perspective, p.model or "", tuple(p.fallbacks))


@dataclass(frozen=True)
class Overrides:
    """A plan file's frontmatter: wins over the repo config for that run."""

    rounds: int | None = None
    response_scale: float | None = None
    synthesizer: str | None = None
    personas: tuple[PersonaSpec, ...] = ()

    @classmethod
    def of(cls, plan: Plan) -> Overrides:
        """Only the keys the plan's file sets."""
        keys = set(plan.frontmatter_keys)
        return cls(
            rounds=plan.rounds if "rounds" in keys else None,
            response_scale=plan.response_scale if "response_scale" in keys else None,
            synthesizer=plan.synthesizer if "synthesizer" in keys else None,
            personas=tuple(map(_persona, plan.personas)) if "personas" in keys else (),
        )


@dataclass(frozen=True)
class Local:
    """A run asked for on the command line: its refusals name the plan file
    (``source``) and the flags that fix them; a dry run calls no model, so with
    none configured it plans with ``stand_in`` and says so."""

    source: str
    stand_in: str | None = None


@dataclass(frozen=True)
class Subject:
    title: str
    text: str
    truncated: bool = False
    context_files: tuple[ContextFile, ...] = ()
    warnings: tuple[str, ...] = ()
    kind: SubjectKind = "plan"


def _personas(command: Command, config: RepoConfig) -> tuple[PersonaSpec, ...]:
    configured = {p.name.lower(): p for p in config.personas}
    if command.personas:
        chosen = []
        for name in command.personas:
            p = configured.get(name.lower())
            if p is not None:
                chosen.append(_persona(p))
            else:
                lens = next((v for k, v in LENSES.items() if k.lower() == name.lower()), None)
                chosen.append(PersonaSpec(name, lens or f"{name}'s honest view", ""))
        return tuple(chosen)
    return tuple(map(_persona, config.personas))


def _seating(
    command: Command, config: RepoConfig, settings: Settings, ov: Overrides, local: Local | None
) -> tuple[tuple[PersonaSpec, ...], list[str], str, tuple[str, ...]]:
    """The personas, the models for auto-picked seats, the judge and warnings:
    the command's over the plan's over the repo config's over the operator's."""
    personas = ov.personas or _personas(command, config)
    models = list(command.models) or list(config.models) or list(settings.default_models)
    if command.models and personas:
        personas = tuple(
            PersonaSpec(p.name, p.perspective, models[i % len(models)], p.fallbacks)
            for i, p in enumerate(personas)
        )
    judge = command.judge or config.judge or settings.default_model or (models[0] if models else "")
    if not models and settings.default_model:
        models = [settings.default_model]
    if judge or any(p.model for p in personas):
        return personas, models, judge, ()
    if local is None:
        raise ConfigError(NO_MODEL)
    if not local.stand_in:
        raise ConfigError(NO_MODEL_LOCAL)
    warning = (
        f"no model is configured: planned with {local.stand_in} and its price "
        "(set DEBATE_BOT_DEFAULT_MODEL or pass --model for yours)"
    )
    return personas, [local.stand_in], local.stand_in, (warning,)


def build_spec(
    *,
    command: Command,
    config: RepoConfig,
    settings: Settings,
    mode: Mode,
    subject: Subject,
    available_providers: frozenset[str],
    run_id: str,
    arbitration: ArbitrationContext | None = None,
    overrides: Overrides | None = None,
    repo_ref: RepoRef | None = None,
    tools_available: bool = False,
    local: Local | None = None,
) -> DebateSpec:
    """Raises ConfigError (a message for the user) when no model is configured or
    the personas don't fit the mode, before any run exists."""
    ov = overrides or Overrides()
    personas, models, judge, warnings = _seating(command, config, settings, ov, local)
    spec = DebateSpec(
        mode=mode,
        title=subject.title,
        subject=subject.text,
        subject_truncated=subject.truncated,
        personas=personas,
        judge=judge,
        rounds=command.rounds or ov.rounds or config.rounds,
        turn_order="alternating" if command.alternating else config.turn_order,
        response_scale=ov.response_scale or config.response_scale,
        synthesizer=ov.synthesizer or config.synthesizer,
        context_files=subject.context_files,
        warnings=(*subject.warnings, *warnings),
        subject_kind=subject.kind,
        max_tokens=config.max_tokens_per_run,
        vote_stalemates=command.vote_stalemates,
        voters=tuple(config.voters),
        tiers=tuple(tuple(t) for t in config.tiers),
        on_unavailable=config.on_unavailable,
        available_providers=available_providers,
        arbitration=arbitration,
        seed=run_id,
        default_models=tuple(models),
        repo_ref=repo_ref,
        # Tools need the shell's reader: the pinned commit, or the working tree.
        tools=tools_available and config.tools and not command.no_tools,
        require_evidence=config.arbitration.require_evidence,
    )
    try:
        next_step(spec, ())  # the engine's own checks (persona count, names, rounds)
    except ProtocolError as exc:
        raise ConfigError(f"{local.source}: {exc}" if local else f"{exc}.") from exc
    return spec
