"""The flags' one table (bot/inputs/flags.py ``FLAGS``) is what the parser,
the refusals and the usage text read: a row and a ``Flags`` field make a flag."""

from __future__ import annotations

from dataclasses import fields

import pytest

from bot.core.errors import UsageError
from bot.inputs.flags import FLAGS, Flags
from bot.inputs.parser import parse_command, usage_text


def test_every_row_sets_a_field_and_every_field_has_a_row() -> None:
    assert sorted(f.field for f in FLAGS) == sorted(f.name for f in fields(Flags))
    assert len({f.name for f in FLAGS}) == len(FLAGS)


@pytest.mark.parametrize("flag", [f for f in FLAGS if f.help], ids=lambda f: f.name)
def test_every_flag_is_in_the_usage_text(flag) -> None:
    assert flag.help_line() in usage_text()


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        ("/debate review plan.md --bots", "`--bots` cannot be used with `review`"),
        ("/debate --open-pr topic", "`--open-pr` cannot be used with `a debate`"),
        ("/debate arbitrate --estimate", "`--estimate` cannot be used with `arbitrate`"),
        ("/debate decide 1 A --rounds 2", "`--rounds` cannot be used with `decide`"),
    ],
)
def test_where_a_flag_is_taken_comes_from_its_row(body: str, refused: str) -> None:
    with pytest.raises(UsageError, match=refused):
        parse_command(body)


def test_a_flag_row_carries_its_value_into_the_command() -> None:
    cmd = parse_command("/debate --rounds 3 --no-tools -s --models openai/a,openai/b topic")
    assert cmd is not None
    assert (cmd.rounds, cmd.no_tools, cmd.vote_stalemates) == (3, True, True)
    assert cmd.models == ("openai/a", "openai/b") and cmd.topic == "topic"
