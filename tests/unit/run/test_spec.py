"""bot/run/spec.py: the one spec builder, as the worker, eval and the local CLI
(bot/cli/local/spec.py) call it."""

from __future__ import annotations

import pytest

from bot.cli.local.spec import Flags, SpecInputs, spec_from_inputs
from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.engine.types import DebateSpec, PersonaSpec
from bot.inputs.parser import Command
from bot.inputs.plan import parse_plan
from bot.inputs.repo_config import RepoConfig, load_repo_config
from bot.run.spec import NO_MODEL, NO_MODEL_LOCAL, Local, Overrides, Subject, build_spec

BARE = Settings(_env_file=None)
SUBJECT = Subject("Billing", "Should the billing API use gRPC or REST?")
PAIR = "personas:\n  - name: Ledger\n    model: a/one\n  - name: Pilot\n"


def hosted(
    command: Command | None = None,
    config: RepoConfig | None = None,
    settings: Settings = BARE,
    *,
    overrides: Overrides | None = None,
    local: Local | None = None,
) -> DebateSpec:
    return build_spec(
        command=command or Command(action="debate"),
        config=config or RepoConfig(),
        settings=settings,
        mode="debate",
        subject=SUBJECT,
        available_providers=frozenset({"a", "b"}),
        run_id="r1",
        overrides=overrides,
        local=local,
    )


def local(text: str, flags: Flags, config: RepoConfig, settings: Settings = BARE) -> DebateSpec:
    plan = parse_plan(text, source="q.md", mode="debate")
    inputs = SpecInputs(
        subject=plan.body,
        subject_truncated=False,
        context_files=(),
        warnings=(),
        flags=flags,
        config=config,
        settings=settings,
        available_providers=frozenset({"a", "b"}),
        seed="r1",
    )
    return spec_from_inputs(plan, inputs)


def seating(spec: DebateSpec) -> tuple[object, ...]:
    return (spec.personas, spec.judge, spec.default_models)


def test_the_commands_models_take_the_seats_and_the_first_one_judges() -> None:
    config = load_repo_config(PAIR + "models: [b/cfg]\n", source="debate.yml")
    spec = hosted(Command(action="debate", models=("b/x", "b/y")), config)
    assert [p.model for p in spec.personas] == ["b/x", "b/y"]
    assert (spec.judge, spec.default_models) == ("b/x", ("b/x", "b/y"))
    # Without the command's: each persona's own model, the repo's models for the rest.
    spec = hosted(config=config)
    assert [p.model for p in spec.personas] == ["a/one", ""]
    assert (spec.judge, spec.default_models) == ("b/cfg", ("b/cfg",))


def test_the_operators_model_judges_and_fills_the_seats() -> None:
    settings = Settings(_env_file=None, default_model="a/op")
    spec = hosted(settings=settings)
    assert (spec.judge, spec.default_models) == ("a/op", ("a/op",))


def test_no_model_is_worded_for_where_it_can_be_fixed() -> None:
    with pytest.raises(ConfigError) as hosted_error:
        hosted()
    assert hosted_error.value.public == NO_MODEL
    with pytest.raises(ConfigError) as local_error:
        hosted(local=Local("q.md"))
    assert local_error.value.public == NO_MODEL_LOCAL


def test_a_dry_run_plans_with_its_stand_in_and_says_so() -> None:
    spec = hosted(local=Local("q.md", stand_in="a/plan"))
    assert (spec.personas, spec.judge, spec.default_models) == ((), "a/plan", ("a/plan",))
    assert spec.warnings == (
        "no model is configured: planned with a/plan and its price "
        "(set DEBATE_BOT_DEFAULT_MODEL or pass --model for yours)",
    )
    configured = hosted(Command(action="debate", judge="b/j"), local=Local("q.md", "a/plan"))
    assert (configured.judge, configured.warnings) == ("b/j", ())


def test_the_engines_refusal_names_the_plan_file_on_the_command_line() -> None:
    three = RepoConfig.model_validate(
        {"personas": [{"name": n} for n in "ABC"], "models": ["a/one"]}
    )
    with pytest.raises(ConfigError) as on_github:
        hosted(config=three)
    with pytest.raises(ConfigError) as on_the_command_line:
        hosted(config=three, local=Local("q.md"))
    reason = str(on_github.value.__cause__)
    assert on_github.value.public == f"{reason}."
    assert on_the_command_line.value.public == f"q.md: {reason}"


def test_a_plan_overrides_only_the_keys_its_file_sets() -> None:
    bare = parse_plan("Use gRPC?\n", source="q.md")
    assert Overrides.of(bare) == Overrides()
    plan = parse_plan(
        "---\nrounds: 5\nresponse_scale: 2\npersonas:\n  - name: A\n    model: a/one\n"
        "    fallbacks: [b/two]\n  - name: B\n---\nUse gRPC?\n",
        source="q.md",
        mode="debate",
    )
    assert Overrides.of(plan) == Overrides(
        rounds=5,
        response_scale=2.0,
        personas=(PersonaSpec("A", "", "a/one", ("b/two",)), PersonaSpec("B", "", "")),
    )


def test_the_local_flags_seat_as_the_same_command_would() -> None:
    config = load_repo_config(PAIR + "models: [b/cfg]\nrounds: 2\n", source="debate.yml")
    plan = "---\nrounds: 4\n---\nUse gRPC?\n"
    flags = Flags(model=" b/x ", judge="a/j", rounds=None, alternating=True)
    spec = local(plan, flags, config)
    command = Command(action="debate", models=("b/x",), judge="a/j", alternating=True)
    same = hosted(command, config, overrides=Overrides(rounds=4))
    assert seating(spec) == seating(same)
    assert (spec.rounds, spec.turn_order) == (same.rounds, same.turn_order) == (4, "alternating")
    assert seating(local(plan, Flags(), config)) == seating(hosted(config=config))
