"""The revised plan of a critique run as data (pure).

The critique outcome renders the revised plan into markdown among other
sections; a pull request needs the plan text alone, so it is taken from the
synthesis the outcome was built from, as the replay read it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.engine.fold import replay
from bot.engine.replies import CritiqueSynthesis
from bot.engine.types import DebateSpec, Turn

CHANGED = "[CHANGED]"
_MARK = re.compile(r"\[CHANGED\][ \t]?")


def revised_plan(spec: DebateSpec, turns: Sequence[Turn]) -> str | None:
    """The synthesis's revised plan, or None (not a critique, no usable synthesis,
    or no ``REVISED PLAN`` section)."""
    if spec.mode != "critique":
        return None
    run = replay(spec, turns)
    critique = run.synthesis_as(CritiqueSynthesis)
    if critique is None:
        return None
    return critique.revised_plan.strip("\n") or None


def changed_lines(plan: str) -> list[str]:
    """The lines the synthesis marked ``[CHANGED]``, without the mark."""
    return [strip_marks(line).strip() for line in plan.splitlines() if CHANGED in line]


def strip_marks(plan: str) -> str:
    """The plan as it should be committed: review annotations removed (the pull
    request's diff shows what changed)."""
    return "\n".join(
        _MARK.sub("", line).rstrip() if CHANGED in line else line for line in plan.split("\n")
    )
