"""Assembling the repository brief a design review debates instead of a plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.errors import ConfigError
from bot.engine.types import ContextFile
from bot.inputs.text import assemble_context
from bot.repo.brief.choose import MAX_FILES, Candidate, choose, rank
from bot.repo.brief.opening import opening_comment
from bot.repo.brief.tree import (
    Category,
    TreeEntry,
    in_scope,
    normalize_scope,
    outline,
    skip_reason,
    summarize_skipped,
)

# Words a design review cares about: with the outline they are the "subject"
# that decides which sections of an oversized document survive condensing.
_DESIGN_WORDS = (
    "architecture design overview structure modules components layers boundaries "
    "responsibilities dependencies data flow decisions trade-offs interfaces deployment"
)
_LIST_AT_MOST = 10  # paths named one by one in a left-out line


@dataclass(frozen=True)
class Brief:
    """What a repository-wide or folder-wide design review reads."""

    repo: str  # "owner/name", or the folder's name for a local review
    ref: str  # the branch, PR head or commit the tree was read at
    scope: str  # "" for the whole repository, else the folder
    outline: str
    files: tuple[ContextFile, ...]
    left_out: tuple[str, ...]  # for the brief and the audit
    warnings: tuple[str, ...]
    entries: int  # tree entries in scope (files and folders), before any was left out

    @property
    def title(self) -> str:
        if not self.scope:
            return f"Design review of the repository {self.repo}".rstrip()
        of = f" of {self.repo}" if self.repo else ""
        return f"Design review of the folder `{self.scope}/`{of}"

    def audit_warnings(self, limit: int = 10) -> tuple[str, ...]:
        """The brief's warnings and what it left out, for the run's audit block."""
        left_out = [f"left out: {x}" for x in self.left_out[:limit]]
        if len(self.left_out) > limit:
            left_out.append(f"left out: {len(self.left_out) - limit} more (see the brief)")
        return (*self.warnings, *left_out)

    def subject_text(self) -> str:
        """The brief as markdown, the debate's subject."""
        at = f" at `{self.ref}`" if self.ref else ""
        parts = [
            f"# {self.title}",
            f"Review the design{at}: its structure, boundaries and decisions, from the "
            "file tree below and the documents and opening comments attached as context.",
            f"## File tree\n\n```text\n{self.outline}\n```",
        ]
        outside = [f.path for f in self.files if not f.path.startswith(self.scope + "/")]
        if self.scope and outside:
            parts[1] += (
                " Attached from outside the folder, as background only: "
                + ", ".join(f"`{p}`" for p in outside)
                + "."
            )
        if self.warnings:
            parts.append("\n".join(f"> {w}" for w in self.warnings))
        if self.left_out:
            parts.append("## Left out\n\n" + "\n".join(f"- {x}" for x in self.left_out))
        return "\n\n".join(parts) + "\n"


def build_brief(
    entries: Sequence[TreeEntry],
    scope: str,
    contents: Mapping[str, str | None],
    *,
    budget_kb: int,
    truncated: bool = False,
    ref: str = "",
    repo: str = "",
    max_files: int = MAX_FILES,
) -> Brief:
    """The brief from the tree and the contents fetched for ``plan_fetches``
    (a None content: the file could not be read, or is not text; paths that are
    not candidates of the plan are ignored). Source files
    contribute only their opening docstring or comment; the documents are fitted
    to ``budget_kb`` in priority order, condensed like ``@file`` references."""
    scope = normalize_scope(scope)
    scoped = in_scope(entries, scope, ref=ref)
    kept, skipped = _kept(scoped, scope)
    tree_text = outline(kept, scope)
    ranked = rank(entries, scope)
    planned = {c.path for c in choose(ranked, max_files)}
    read = _Read.of(ranked, planned, contents)
    files, budget_notes = _fit(read.loaded, ranked, tree_text, budget_kb)
    left_out = [
        *summarize_skipped(skipped, scope),
        *read.left_out(),
        *budget_notes,
        *_not_read(ranked, planned, contents, max_files),
    ]
    truncated_note = (
        f"The file tree was truncated by GitHub; reviewed from the {len(entries):,} "
        "entries that came back."
    )
    return Brief(
        repo=repo,
        ref=ref,
        scope=scope,
        outline=tree_text,
        files=files,
        left_out=tuple(left_out),
        warnings=(truncated_note,) if truncated else (),
        entries=len(scoped),
    )


def _kept(
    scoped: Sequence[TreeEntry], scope: str
) -> tuple[list[TreeEntry], dict[Category, list[str]]]:
    """The files the outline shows, and by category the ones it leaves out;
    ConfigError when nothing is left to review."""
    kept: list[TreeEntry] = []
    skipped: dict[Category, list[str]] = {}
    for e in scoped:
        if e.kind == "tree":
            continue  # implied by the files below it; a filtered folder must not show
        reason = skip_reason(e.path, scope) if e.kind == "blob" else None
        if reason:
            skipped.setdefault(reason, []).append(e.path)
        else:
            kept.append(e)
    if not kept:
        where = f"`{scope}/`" if scope else "the repository"
        n = sum(map(len, skipped.values()))
        raise ConfigError(
            f"Nothing to review in {where}: its {n:,} files are all vendored, "
            "generated, binary or lockfiles."
        )
    return kept, skipped


@dataclass
class _Read:
    """The candidates' texts as the brief attaches them (a source file's
    opening comment only), and the ones it could not."""

    loaded: dict[str, str] = field(default_factory=dict)
    no_opening: list[str] = field(default_factory=list)  # source files without one
    unread: list[str] = field(default_factory=list)  # fetched, but gone or not text
    unfetched: list[str] = field(default_factory=list)  # planned, but the caller stopped first

    @classmethod
    def of(
        cls, ranked: Sequence[Candidate], planned: set[str], contents: Mapping[str, str | None]
    ) -> _Read:
        read = cls()
        for c in ranked:
            text = contents.get(c.path)
            if text is None:
                if c.path in contents:
                    read.unread.append(c.path)
                elif c.path in planned:
                    read.unfetched.append(c.path)
                continue
            if c.role == "source":
                text = _excerpt(text, c.path)
                if text is None:
                    read.no_opening.append(c.path)
                    continue
            read.loaded[c.path] = text
        return read

    def left_out(self) -> list[str]:
        lines = [f"`{path}`: no opening docstring or comment" for path in self.no_opening]
        if self.unread:
            lines.append(f"could not be read (gone or not text): {_names(self.unread)}")
        if self.unfetched:
            lines.append(f"not fetched: {_names(self.unfetched)}")
        return lines


def _fit(
    loaded: Mapping[str, str | None], ranked: Sequence[Candidate], tree_text: str, budget_kb: int
) -> tuple[tuple[ContextFile, ...], list[str]]:
    """The texts fitted to the budget, and what the budget left out."""
    files, budget_notes = assemble_context(f"{_DESIGN_WORDS}\n{tree_text}", loaded, budget_kb)
    # An excerpt stands for the whole file: its real size, marked condensed.
    sizes = {c.path: c.size for c in ranked if c.role == "source"}
    files = tuple(
        ContextFile(f.path, f.text, sizes[f.path], condensed=True) if f.path in sizes else f
        for f in files
    )
    return files, list(budget_notes)


def _not_read(
    ranked: Sequence[Candidate],
    planned: set[str],
    contents: Mapping[str, str | None],
    max_files: int,
) -> list[str]:
    """The candidates beyond the plan's bound that nobody fetched."""
    # Whatever the caller fetched counts as read, even beyond this plan's bound.
    unplanned = [c for c in ranked if c.path not in planned and c.path not in contents]
    not_planned = [c.path for c in unplanned if c.role != "source"]
    smaller = sum(1 for c in unplanned if c.role == "source")
    lines = []
    if not_planned:
        lines.append(
            f"{_n(len(not_planned), 'more candidate file')} not read (at most {max_files} "
            f"per review): {_names(not_planned)}"
        )
    if smaller:
        lines.append(
            f"{_n(smaller, 'source file')} not read (a review reads only the opening "
            "comment of the largest few)"
        )
    return lines


def _excerpt(text: str, path: str) -> str | None:
    opening = opening_comment(text, path)
    if not opening:
        return None
    return f"[opening comment only; the file has {len(text.splitlines()):,} lines]\n{opening}\n"


def _n(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _names(paths: Sequence[str]) -> str:
    shown_ = ", ".join(f"`{p}`" for p in paths[:_LIST_AT_MOST])
    return shown_ + (
        f" and {len(paths) - _LIST_AT_MOST} more" if len(paths) > _LIST_AT_MOST else ""
    )
