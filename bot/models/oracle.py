"""``scripted/oracle:<p>``: a test model that knows the right answer and gives it
with probability p, so `debate-bot eval` and its statistics can be checked
without a provider (docs/configuration.md, "debate-bot eval").

Whether an answer is right is drawn from a hash of (case id, model reference,
seat): the same case, model and seat always answer the same way, and two seats
(two voters, two personas, the judge) draw independently.

The expected answers never enter a prompt. The eval registers each case in an
``AnswerBook`` keyed by the SHA-256 of the prompt's shared prefix (the fenced
case material every request about that case starts with), and builds its
router with that book (``ModelRouter(answer_book=…)``, handed to the scripted
provider); the oracle looks its prompt up there. Outside an eval there is no
book, and an oracle call fails as ``unusable_output``.

Replies follow the formats the engine and the eval parse: a ``VERDICT:`` or
``ANSWER:`` line for a single answer, persona turns whose closing stance on
point 1 reads the concern the oracle's way, a judge synthesis with its
verdict (or ``CALL:``). Any other task (classify, …) is answered by the
rehearsal script.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from bot.core.errors import ConfigError, ModelError
from bot.engine.prompts import TASK_HEADER
from bot.engine.types import PERSONA_PHASES, Prompt, Usage
from bot.models.base import Completion, approx_tokens

PREFIX = "oracle:"
VERDICTS = ("CONFIRMED", "DISMISSED")


@dataclass(frozen=True)
class Labelled:
    """What the oracle may know about a case: its id, the right answer and the
    choices (wrong answers are drawn from the others)."""

    case_id: str
    kind: Literal["arbitrate", "question"]
    expected: str
    choices: tuple[str, ...] = ()


class AnswerBook:
    def __init__(self) -> None:
        self._cases: dict[str, Labelled] = {}

    @staticmethod
    def key(prefix: str) -> str:
        return hashlib.sha256(prefix.encode()).hexdigest()

    def add(self, prefix: str, case: Labelled) -> None:
        """Register ``case`` for prompts starting with ``prefix``; two different
        cases with the same material cannot be told apart, so that is refused."""
        k = self.key(prefix)
        known = self._cases.setdefault(k, case)
        if known.case_id != case.case_id:
            raise ConfigError(
                f"cases {known.case_id!r} and {case.case_id!r} have the same material; "
                "remove the duplicate from the case files"
            )

    def find(self, prefix: str) -> Labelled | None:
        return self._cases.get(self.key(prefix))


def draw(case_id: str, model_ref: str, seat: str) -> float:
    """A uniform number in [0, 1) fixed by (case id, model reference, seat)."""
    digest = hashlib.sha256(f"{case_id}\0{model_ref}\0{seat}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def probability(model: str) -> float:
    """``oracle:0.7`` → 0.7; ModelError for a malformed reference."""
    raw = model[len(PREFIX) :]
    try:
        p = float(raw)
    except ValueError:
        p = -1.0
    if not 0.0 <= p <= 1.0:
        raise ModelError(
            f"scripted/{model}: the oracle's probability must be a number from 0 to 1",
            drop_class="unavailable",
        )
    return p


def belief(case: Labelled, model_ref: str, seat: str, p: float) -> str:
    """The answer this seat gives: the right one with probability p, else a wrong one."""
    if draw(case.case_id, model_ref, seat) < p:
        return case.expected
    if case.kind == "arbitrate":
        return next(v for v in VERDICTS if v != case.expected.upper())
    others = [c for c in case.choices if c.strip().lower() != case.expected.strip().lower()]
    pick = draw(case.case_id, model_ref, seat + "/wrong")
    if others:
        return others[int(pick * len(others))]
    return f"not {case.expected} ({int(pick * 1000)})"


def trailer(text: str) -> dict[str, str]:
    """The ``KEY: value`` lines after the prompt's last task header."""
    at = text.rfind("\n" + TASK_HEADER + "\n")
    fields: dict[str, str] = {}
    for line in text[at if at >= 0 else max(0, len(text) - 2000) :].splitlines():
        m = re.match(r"^([A-Z]+): (.*)$", line)
        if m:
            fields[m.group(1)] = m.group(2).strip()
    return fields


def _seat_number(value: str) -> int:
    m = re.match(r"(\d+)", value)
    return int(m.group(1)) if m else 1


def reply(case: Labelled, model_ref: str, p: float, prompt_text: str) -> str | None:
    """The oracle's text, or None for a task it leaves to the rehearsal script."""
    f = trailer(prompt_text)
    task = f.get("TASK", "")
    mode = f.get("MODE", "")
    mark = "(oracle test model)"
    if task == "answer":
        said = belief(case, model_ref, f"sample-{f.get('SAMPLE', '1')}", p)
        label = "VERDICT" if case.kind == "arbitrate" else "ANSWER"
        return f"{mark}\n{label}: {said}\n"
    if task in PERSONA_PHASES:
        name = f.get("PERSONA", "persona")
        said = belief(case, model_ref, name, p)
        if mode == "arbitrate":
            # Seat 1 argues the concern is real, seat 2 that it is a false positive.
            own = "CONFIRMED" if _seat_number(f.get("SEAT", "1")) == 1 else "DISMISSED"
            stance = "HOLD" if said == own else "CONCEDE"
            position = f"POSITION: the concern should be {said}."
        else:
            stance = "HOLD" if task == "opening" else "AGREE"
            position = f"POSITION: the answer is {said}."
        return f"{mark}\n{position}\n\nPOINT 1: {stance} — my reading ({said})\n"
    if task == "synthesis":
        said = belief(case, model_ref, "judge", p)
        if mode == "arbitrate":
            return f"{mark}\nVERDICT: {said}\nCONCLUSION: the oracle's reading.\n"
        return (
            f"{mark}\nSETTLED:\n- nothing\nOPEN:\n- nothing\nCALL: {said}\n"
            "FLIP CONDITION: none\nDECISIVE FACTOR: the oracle's reading\n"
        )
    return None


def oracle_completion(model: str, prompt: Prompt, book: AnswerBook | None) -> Completion | None:
    """The oracle's answer for ``oracle:<p>`` from the eval's ``book``, or None for
    a task it leaves to the rehearsal script (the scripted provider answers those)."""
    p = probability(model)
    case = book.find(prompt.prefix) if book is not None else None
    if case is None:
        raise ModelError(
            f"scripted/{model}: no labelled case for this prompt "
            "(the oracle answers only in `debate-bot eval`)",
            drop_class="unusable_output",
        )
    prompt_text = prompt.system + prompt.prefix + prompt.suffix
    text = reply(case, f"scripted/{model}", p, prompt_text)
    if text is None:
        return None
    usage = Usage(input_tokens=approx_tokens(prompt_text), output_tokens=approx_tokens(text))
    return Completion(text=text, usage=usage)
