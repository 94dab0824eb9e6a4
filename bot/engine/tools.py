"""The read-only repository tools a request may use, and their per-turn budgets.

Pure data: the names and arguments are the contract of docs/architecture.md
("Evidence: the debaters read the code"); the providers render these
definitions in their own wire format and the shell runs the loop
(``bot/run/tool_loop.py``) against the pinned snapshot.

Default budgets, per turn:

- ``max_calls = 10``: settling a review concern takes a search for the symbol,
  its definition, one or two callers and the test that covers it (4-6 calls);
  10 leaves room for a miss or two without letting one persona browse the
  repository.
- ``max_bytes = 48_000`` (about 12,000 tokens): six reads of 200 lines of
  40 bytes. Every step re-sends the conversation, so this also bounds the
  input of the turn's last step (a prefix cache makes the repeats cheap, a
  server without one pays them in full).
- ``max_steps = 6``: model calls are sequential within a turn, so steps bound
  the turn's wall time (6 × the model's latency at worst); several calls in
  one response count once as a step.
"""

from __future__ import annotations

from typing import Any, Final

from bot.engine.types import PERSONA_PHASES, TOOL_NAMES, DebateSpec, Phase, ToolBudget, ToolName

MAX_CALLS: Final = 10
MAX_BYTES: Final = 48_000
MAX_STEPS: Final = 6

# Phases whose requests get tools: the personas' rounds and the synthesis. The
# frame (classify, extract points) and the voters answer from the prompt alone.
TOOL_PHASES: Final[frozenset[Phase]] = PERSONA_PHASES | {"synthesis"}


def budget_for(spec: DebateSpec, phase: Phase) -> ToolBudget | None:
    """The tools and budgets of a request in ``phase``, or None (no tools)."""
    if not spec.tools or phase not in TOOL_PHASES:
        return None
    return ToolBudget(
        tools=TOOL_NAMES, max_calls=MAX_CALLS, max_bytes=MAX_BYTES, max_steps=MAX_STEPS
    )


_PATH = {"type": "string", "description": "a path relative to the repository root"}

# The one tool contract: what the providers send (bot/models, the estimate's
# count) and what bot/repo/tools.py validates a call's arguments against.
TOOL_DEFINITIONS: Final[dict[ToolName, tuple[str, dict[str, Any]]]] = {
    "list_files": (
        "List the entries of a folder of the repository at the pinned commit, one a "
        "line; folders end with '/'. Capped; says when the list was cut.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": 'a folder; "" is the root'},
            },
            "required": ["path"],
        },
    ),
    "read_file": (
        "Read lines of a file of the repository at the pinned commit, each prefixed "
        "with its 1-based line number (cite these numbers). Capped per call; binary "
        "files are refused.",
        {
            "type": "object",
            "properties": {
                "path": _PATH,
                "start_line": {"type": "integer", "description": "first line (1-based)"},
                "end_line": {"type": "integer", "description": "last line (inclusive)"},
            },
            "required": ["path"],
        },
    ),
    "search_code": (
        "Search the repository at the pinned commit for a regular expression; answers "
        "`path:line: text` per match, capped. A pattern that cannot run safely is refused.",
        {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "a regular expression"},
                "path": {"type": "string", "description": "a folder to search in (optional)"},
            },
            "required": ["pattern"],
        },
    ),
}


def definitions(names: tuple[ToolName, ...]) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, description, JSON schema of the arguments) of each tool offered."""
    return [(n, *TOOL_DEFINITIONS[n]) for n in names]


def tool_named(name: str) -> ToolName | None:
    """The tool a model called by ``name``, or None: there is no such tool."""
    return next((n for n in TOOL_DEFINITIONS if n == name), None)


def required_arguments(name: ToolName) -> tuple[str, ...]:
    return tuple(TOOL_DEFINITIONS[name][1]["required"])


# Told once per run in the system prompt when tools are on (constant, so caches hit).
TOOL_RULES: Final = """
Evidence rules (this run can read the repository):
- You have read-only tools over the repository at the run's pinned commit: \
list_files, read_file, search_code. Use them to check a claim before you make \
it: the definition a concern doubts, its callers, the test that covers it. \
Your tool budget per turn is limited; when it is used up you are asked to \
answer without tools.
- Cite code as `path:L12` or `path:L12-L20`, with line numbers exactly as \
read_file printed them (relative to the file, never counted inside a diff or \
this prompt), and quote the cited line right after the citation, e.g. \
`bot/service/web.py:L40` "if token is None:". Every citation is checked against the \
repository; one that cannot be verified is marked (unverified) and the judge \
is told.
"""
