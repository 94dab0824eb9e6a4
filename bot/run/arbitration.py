"""What an arbitration run is given, built from plain values: the concern, its
diff hunk, the file at the PR head, the question asked and the seats' config.

Pure (no GitHub call), so the service (bot/service/features/arbitration/handlers.py) and
`debate-bot eval` (bot/cli/eval/material.py) build arbitration specs the same way.
"""

from __future__ import annotations

from bot.engine.types import ArbitrationContext
from bot.inputs.repo_config import RepoConfig
from bot.inputs.text import cap_subject
from bot.run.spec import Subject

EXCERPT_RADIUS = 40  # lines either side of the commented line
EXCERPT_MAX_BYTES = 8 * 1024
HUNK_MAX_BYTES = 8 * 1024
PR_BODY_MAX_BYTES = 8 * 1024
CONCERN_MAX_BYTES = 16 * 1024


def file_excerpt(
    text: str,
    line: int | None,
    *,
    radius: int = EXCERPT_RADIUS,
    max_bytes: int = EXCERPT_MAX_BYTES,
) -> str:
    """Numbered lines around ``line`` (the file's start when None), at most
    ``max_bytes``: the window shrinks around the line until it fits."""
    lines = text.splitlines()
    if not lines:
        return "(empty file)"
    center = min(max(1, line or 1), len(lines))
    width = len(str(len(lines)))
    r = radius
    while True:
        lo = max(1, center - r) if line is not None else 1
        hi = min(len(lines), center + r) if line is not None else min(len(lines), 2 * r + 1)
        out = "\n".join(f"{n:>{width}} | {lines[n - 1]}" for n in range(lo, hi + 1))
        if len(out.encode()) <= max_bytes or r == 0:
            break
        r //= 2
    if len(out.encode()) > max_bytes:
        out = out.encode()[:max_bytes].decode("utf-8", errors="ignore") + " […]"
    notes = []
    if lo > 1:
        notes.append(f"[… lines 1–{lo - 1} omitted]")
    body = "\n".join([*notes, out])
    if hi < len(lines):
        body += f"\n[… lines {hi + 1}–{len(lines)} omitted]"
    return body


def _cap(text: str, max_bytes: int) -> str:
    capped, _ = cap_subject(text, max_bytes)
    return capped


def arbitration_context(
    *,
    concern: str,
    author: str,
    is_bot: bool,
    path: str,
    line: int | None,
    diff_hunk: str,
    file_text: str | None,
    head_sha: str,
    pr_title: str,
    pr_body: str,
) -> ArbitrationContext:
    """The engine's view of one review comment; ``file_text`` None: the file is
    not a text file at the head."""
    excerpt = (
        file_excerpt(file_text, line)
        if file_text is not None
        else f"(`{path}` does not exist as a text file at the PR head {head_sha[:7]})"
    )
    return ArbitrationContext(
        concern=_cap(concern, CONCERN_MAX_BYTES),
        concern_author=author,
        concern_author_is_bot=is_bot,
        path=path,
        diff_hunk=_cap(diff_hunk, HUNK_MAX_BYTES),
        file_excerpt=excerpt,
        pr_title=pr_title,
        pr_body=_cap(pr_body, PR_BODY_MAX_BYTES),
        line=line,
    )


def arbitration_subject(ctx: ArbitrationContext, pr_number: int | None) -> Subject:
    """The question the debate answers (``pr_number`` None: a PR without a number,
    as in an eval case)."""
    where = f"`{ctx.path}`" + (f" line {ctx.line}" if ctx.line is not None else "")
    pr = f"pull request #{pr_number}" if pr_number is not None else "the pull request"
    question = (
        f"Is this review comment by {ctx.concern_author} on {where} of {pr} "
        "a real problem, or a false positive?"
    )
    return Subject(f"Review comment on {ctx.path or 'the pull request'}", question)


def arbitration_config(config: RepoConfig) -> RepoConfig:
    """Arbitration seats are fixed (concern real vs false positive), so the repo's
    debate personas are not used; their models still are, when no `models` list
    is configured."""
    models = list(config.models) or [p.model for p in config.personas if p.model]
    return config.model_copy(update={"personas": [], "models": models})
