"""What the models see for one case: the DebateSpec (built as the service builds
one, so a debate here is the service's debate) and the single-answer prompt,
which starts with the same shared prefix; and reading answers back.

Arbitration cases go through ``arbitration_context`` / ``arbitration_subject`` /
``arbitration_config`` and ``build_spec``, exactly as bot/service/features/arbitration/handlers.py
does for a review comment on GitHub. The case's other files (``files`` beyond
the commented one) are embedded as context files, and with ``tools=on`` they
are also what the debaters' tools read (``bot.cli.eval.reader``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from bot.cli.eval.cases import ArbitrateCase, Loaded, QuestionCase
from bot.cli.eval.configs import EvalConfig
from bot.cli.eval.reader import case_files
from bot.core.settings import Settings
from bot.engine import prompts
from bot.engine.replies import parse_verdict
from bot.engine.types import ArbitrationContext, ContextFile, DebateSpec, Prompt
from bot.inputs.parser import Command
from bot.inputs.repo_config import RepoConfig
from bot.models.oracle import Labelled
from bot.run.arbitration import (
    arbitration_config,
    arbitration_context,
    arbitration_subject,
)
from bot.run.spec import Subject, build_spec

CONTEXT_FILE_MAX_BYTES = 16 * 1024
SINGLE_MAX_OUTPUT_TOKENS = 800
TOOLS_FIELD = "tools"


def tools_supported() -> bool:
    """Whether eval's debates can read the repository: yes, an arbitration case's
    files through the service's tool loop (``bot.cli.eval.reader``)."""
    return True


def _context_files(case: ArbitrateCase) -> tuple[ContextFile, ...]:
    out = []
    for path, text in case.files.items():
        if path == case.path:
            continue
        raw = text.encode()
        cut = raw[:CONTEXT_FILE_MAX_BYTES].decode("utf-8", errors="ignore")
        out.append(ContextFile(path, cut, len(raw), condensed=len(raw) > len(cut.encode())))
    return tuple(out)


def _subject(loaded: Loaded) -> tuple[Subject, ArbitrationContext | None]:
    case = loaded.case
    if isinstance(case, QuestionCase):
        text = case.question
        if case.choices:
            text += "\n\nChoices: " + " | ".join(case.choices)
        title = " ".join(case.question.split())[:120]
        return Subject(title, text), None
    ctx = arbitration_context(
        concern=case.comment,
        author=case.author,
        is_bot=case.author_is_bot,
        path=case.path,
        line=case.line,
        diff_hunk=case.diff_hunk,
        file_text=loaded.head_text,
        head_sha=case.commit or "",
        pr_title=case.pr_title,
        pr_body=case.pr_body,
    )
    subject = replace(arbitration_subject(ctx, None), context_files=_context_files(case))
    return subject, ctx


def case_spec(
    loaded: Loaded,
    config: EvalConfig,
    *,
    settings: Settings,
    available: frozenset[str],
) -> DebateSpec:
    """The spec a debate of this case runs (single and vote answers use its prefix).
    ConfigError when the models don't fit, before anything is spent."""
    subject, ctx = _subject(loaded)
    arbitrate = isinstance(loaded.case, ArbitrateCase)
    models = config.models
    cmd = Command(
        action="arbitrate" if arbitrate else "debate",
        mode="arbitrate" if arbitrate else "debate",
        rounds=config.rounds,
        models=models,
        judge=config.judge or models[0],
    )
    repo = arbitration_config(RepoConfig()) if arbitrate else RepoConfig()
    spec = build_spec(
        command=cmd,
        config=repo,
        settings=settings,
        mode="arbitrate" if arbitrate else "debate",
        subject=subject,
        available_providers=available,
        run_id=f"eval:{loaded.id}",
        arbitration=ctx,
    )
    if config.tools is not None and tools_supported():
        # Only a case with files to read gets tools: one offered tools over nothing
        # would cite nothing, and the evidence rule would escalate its verdict.
        switch: dict[str, Any] = {TOOLS_FIELD: config.tools and bool(case_files(loaded))}
        spec = replace(spec, **switch)
    return spec


def labelled(loaded: Loaded) -> Labelled:
    case = loaded.case
    if isinstance(case, ArbitrateCase):
        return Labelled(case.id, "arbitrate", case.expected)
    return Labelled(case.id, "question", case.expected, tuple(case.choices))


# --- one model alone --------------------------------------------------------------


def single_prompt(spec: DebateSpec, sample: int) -> Prompt:
    """One model, asked directly, with the debate's own material (same prefix)."""
    if spec.mode == "arbitrate":
        task = [
            "You are a careful code reviewer answering alone. Decide whether the review "
            "concern above identifies a real problem in this change that should be fixed. "
            "Decide from the diff and the file, not from the reviewer's authority.",
            "Answer with these lines:",
            "VERDICT: DISMISSED | CONFIRMED (DISMISSED: a false positive; CONFIRMED: a real "
            "problem to fix; ESCALATED only if a human must decide)",
            "REASON: one short paragraph",
        ]
    else:
        task = [
            "You are answering alone. Answer the question in the subject above.",
            "Answer with these lines:",
            "ANSWER: the answer only"
            + (" (exactly one of the choices)" if "\nChoices: " in spec.subject else ""),
            "REASON: one short paragraph",
        ]
    trailer = [("TASK", "answer"), ("MODE", spec.mode), ("SAMPLE", sample)]
    suffix = "\n".join([prompts.TASK_HEADER, *task, "", *(f"{k}: {v}" for k, v in trailer)])
    return Prompt(system=prompts.SYSTEM, prefix=prompts.shared_prefix(spec), suffix=suffix + "\n")


_ANSWER = re.compile(r"^[\s>*_`-]*(?:ANSWER|CALL)[*_`]*\s*[:\-—–]\s*(.+)$", re.I | re.M)


def normalize(text: str) -> str:
    return " ".join(text.strip().strip("`*_\"'.").lower().split())


def read_answer(loaded: Loaded, text: str) -> str | None:
    """The answer a reply gives: a verdict (arbitrate) or the question's answer,
    mapped onto a choice when one is named; None when there is none to read."""
    case = loaded.case
    if isinstance(case, ArbitrateCase):
        return parse_verdict(text)
    found = _ANSWER.findall(text)
    if not found:
        return None
    said = normalize(found[-1])
    if not case.choices:
        return said
    choices = {normalize(c): c for c in case.choices}
    if said in choices:
        return choices[said]
    named = [c for n, c in choices.items() if re.search(rf"\b{re.escape(n)}\b", said)]
    return named[0] if len(named) == 1 else said


def is_correct(loaded: Loaded, answer: str) -> bool:
    return normalize(answer) == normalize(loaded.case.expected)
