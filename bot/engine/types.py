"""Value types shared by the engine and the I/O shell.

All are frozen dataclasses of plain values, so they can be persisted as JSON
(see ``to_json``/``from_json`` helpers in the modules that store them) and
compared for equality in tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

# The run vocabulary, declared here once: the repo config, plan frontmatter and
# the command parser validate against these same aliases.
Mode = Literal["debate", "critique", "arbitrate", "proposal"]
MODES: Final[tuple[Mode, ...]] = get_args(Mode)
TurnOrder = Literal["parallel", "alternating"]
# What a critique reviews: a plan file, or a repository (or folder) from its brief.
SubjectKind = Literal["plan", "repository"]
Severity = Literal["critical", "major", "minor"]
SEVERITIES: Final[tuple[Severity, ...]] = ("critical", "major", "minor")
Phase = Literal["frame", "opening", "rebuttal", "counter", "vote", "synthesis"]
# The phases in which personas speak: a round's turns (the rest are the judge's).
PERSONA_PHASES: Final[frozenset[Phase]] = frozenset({"opening", "rebuttal", "counter"})
DropClass = Literal[
    "timeout",
    "rate_limited",
    "provider_error",
    "unusable_output",
    "unavailable",
    # an agent seat (docs/agents.md): its CLI, sandbox, upstream or the run's cap
    "agent_missing",
    "agent_sandbox",
    "agent_timeout",
    "agent_auth",
    "agent_quota",
    "agent_protocol",
    "agent_budget",
]
TurnStatus = Literal["ok", "dropped"]
Stance = Literal["AGREE", "HOLD", "CONCEDE"]
OutcomeKind = Literal[
    "verdict",  # debate mode
    "critique",  # critique mode
    "arbitration",  # arbitrate mode
    "proposal",  # proposal mode, finished
    "pending_decision",  # proposal mode, stalemates wait for `/debate decide`
    "aborted",  # quorum lost, vendors unavailable with on_unavailable=abort, ...
]
ArbitrationVerdict = Literal["DISMISSED", "CONFIRMED", "ESCALATED"]
# The read-only repository tools (docs/architecture.md, "Evidence"); names are a contract.
ToolName = Literal["list_files", "read_file", "search_code"]
TOOL_NAMES: Final[tuple[ToolName, ...]] = get_args(ToolName)
CitationStatus = Literal["verified", "repaired", "unverified"]

JUDGE = "judge"  # slot name of the judge

# Slot names the engine keeps for itself (the judge, its frame slots, the
# voters): a configured persona may not take one.
_RESERVED_NAME = re.compile(r"^(judge|judge-.*|voter-\d+)$", re.I)


def is_reserved_name(name: str) -> bool:
    return _RESERVED_NAME.match(name) is not None


@dataclass(frozen=True)
class PersonaSpec:
    name: str
    perspective: str
    model: str  # "provider/model" or a named endpoint "name/model"
    fallbacks: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContextFile:
    """A repo file embedded in the prompt (already loaded and budgeted)."""

    path: str
    text: str
    size_bytes: int  # size of the original file
    condensed: bool = False


@dataclass(frozen=True)
class ArbitrationContext:
    concern: str  # the review comment body
    concern_author: str
    concern_author_is_bot: bool
    path: str
    diff_hunk: str
    file_excerpt: str  # the file at the PR head around the line (bounded)
    pr_title: str
    pr_body: str
    line: int | None = None


@dataclass(frozen=True)
class Decision:
    """A maintainer's answer to a proposal stalemate (`/debate decide`)."""

    point: int
    choice: str  # "A", "B" or "both"
    by: str = ""


@dataclass(frozen=True)
class RepoRef:
    """The repository and the commit a run reads, pinned when the run starts (a PR's
    head, the default branch's head, the commit a review reviews): a resumed run,
    and every persona's tool call, reads this commit whatever was pushed since."""

    repo: str  # "owner/name"
    commit: str  # the full sha
    html_url: str = ""  # the repository's page, the base of permalinks (GHES alike)


@dataclass(frozen=True)
class DebateSpec:
    """Everything the engine needs to know about one run. Built by the shell."""

    mode: Mode
    title: str
    subject: str  # the question or plan text (already capped; see subject_truncated)
    personas: tuple[PersonaSpec, ...] = ()  # empty: auto-pick in the frame phase
    judge: str = ""  # model reference of the judge
    judge_fallbacks: tuple[str, ...] = ()
    rounds: int = 3
    turn_order: TurnOrder = "parallel"
    response_scale: float = 1.5
    synthesizer: str = JUDGE  # "judge" or a persona name
    context_files: tuple[ContextFile, ...] = ()
    warnings: tuple[str, ...] = ()  # e.g. missing @path files, a truncated subject
    subject_truncated: bool = False
    max_tokens: int | None = None  # input+output token cap for the run
    max_cost_usd: float | None = None
    vote_stalemates: bool = False
    voters: tuple[str, ...] = ()  # model refs of the voter panel
    decisions: tuple[Decision, ...] = ()
    tiers: tuple[tuple[str, ...], ...] = ()  # escalation tiers: model refs per tier
    on_unavailable: Literal["downgrade", "abort"] = "downgrade"
    # Providers the shell can actually reach (have credentials/endpoints), e.g.
    # {"openai", "anthropic"}. Used for degradation; empty means "all".
    available_providers: frozenset[str] = frozenset()
    arbitration: ArbitrationContext | None = None
    seed: str = ""  # deterministic shuffles (voter labels); the run id in practice
    # Models for auto-picked personas (persona i gets default_models[i % n]);
    # empty: the judge's model.
    default_models: tuple[str, ...] = ()
    # A voted position is accepted when it gets strictly more than this share of
    # the eligible voters that answered.
    vote_threshold: float = 0.5
    max_escalations: int = 2  # never more than two, whatever is configured
    subject_kind: SubjectKind = "plan"
    repo_ref: RepoRef | None = None  # what the debaters' repository tools read
    # Personas and the judge may read the repository at the pinned commit
    # (repo config `tools`, `--no-tools`); the shell runs the tool loop.
    tools: bool = False
    # Arbitration: CONFIRMED / DISMISSED need a verified citation, else ESCALATED
    # (repo config `arbitration.require_evidence`; only when tools are on).
    require_evidence: bool = True


@dataclass(frozen=True)
class TurnKey:
    phase: Phase
    round: int  # 0 for frame and synthesis
    slot: str  # persona name, "judge", or "voter-<i>"
    tier: int = 0  # escalation tier (0 = first run)

    def id(self) -> str:
        return f"t{self.tier}:{self.phase}:{self.round}:{self.slot}"


PriceBasis = Literal["list", "assumed", "unknown"]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0  # total input tokens, cached included
    output_tokens: int = 0
    cached_tokens: int = 0  # input tokens served from the provider's prefix cache
    latency_ms: int = 0
    cost_usd: float = 0.0
    cache_write_tokens: int = 0  # input tokens written to the provider's prompt cache
    # How cost_usd was priced: "list" (the price table or the operator's price
    # file), "assumed" (DEBATE_BOT_UNKNOWN_PRICE) or "unknown" (priced at 0).
    price_basis: PriceBasis = "list"


@dataclass(frozen=True)
class CitationCheck:
    """One ``path:L12`` / ``path:L12-L20`` citation of a turn, checked against the
    pinned commit by the shell (``bot.engine.citations.check_citations``)."""

    cited: str  # the citation as the model wrote it, e.g. "bot/x.py:L12-L20"
    path: str
    start: int
    end: int
    status: CitationStatus
    url: str = ""  # the permalink (verified or repaired), else ""
    # A repaired citation: the lines the quote was found at instead.
    fixed_start: int = 0
    fixed_end: int = 0
    reason: str = ""  # unverified: why (no such file, past the end, quote not found)


@dataclass(frozen=True)
class Evidence:
    """What a turn read and cited: the tool loop's counts and its citations."""

    tool_calls: int = 0
    files_read: tuple[str, ...] = ()
    bytes_read: int = 0
    steps: int = 0  # model calls the turn's loop made
    citations: tuple[CitationCheck, ...] = ()
    # Why the turn debated from the static context only (e.g. the server refused
    # tools); "" when tools were used or never offered.
    static_reason: str = ""


@dataclass(frozen=True)
class ToolCall:
    id: str  # the provider's call id, or one the shell made when it sent none
    name: str
    arguments: str  # the arguments as the model sent them (JSON text, maybe malformed)


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class Exchange:
    """One finished step of a turn's tool loop: the model's calls and our answers."""

    text: str  # what the model said beside its calls (often "")
    calls: tuple[ToolCall, ...]
    results: tuple[ToolResult, ...]


@dataclass(frozen=True)
class Turn:
    """One finished model call (or the record that it could not be made)."""

    key: TurnKey
    text: str
    model: str  # the model reference that produced it (after fallbacks)
    usage: Usage = field(default_factory=Usage)
    status: TurnStatus = "ok"
    drop_class: DropClass | None = None
    truncated: bool = False  # the provider stopped at the output limit
    evidence: Evidence | None = None  # a turn of a run with tools (bot/run/tool_loop.py)


@dataclass(frozen=True)
class Prompt:
    """``system`` and ``prefix`` are identical across every request of a run
    (shared instructions, fenced subject and files), so provider prefix caches hit;
    ``suffix`` holds the persona lens and the round's material."""

    system: str
    prefix: str
    suffix: str


@dataclass(frozen=True)
class ToolBudget:
    """The tools a request may use and its per-turn budgets (bot/engine/tools.py
    says why the defaults are what they are)."""

    tools: tuple[ToolName, ...]
    max_calls: int  # tool calls answered in the turn
    max_bytes: int  # bytes of tool answers returned to the model in the turn
    max_steps: int  # model calls in the turn, the last one without tools


@dataclass(frozen=True)
class ModelRequest:
    key: TurnKey
    models: tuple[str, ...]  # primary first, then fallbacks, tried in order
    prompt: Prompt
    max_output_tokens: int
    tools: ToolBudget | None = None  # None: answer from the prompt alone


@dataclass(frozen=True)
class Batch:
    """Requests to run now. ``parallel`` requests don't see each other's output."""

    requests: tuple[ModelRequest, ...]


@dataclass(frozen=True)
class Finding:
    """One finding of a repository design review, as the synthesis ranked it."""

    number: int
    severity: Severity
    text: str  # the problem and what to do
    files: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        """The finding's first sentence: a stable, short name for it."""
        first = self.text.split(". ", 1)[0].strip().rstrip(".")
        return first[:120]


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    title: str  # e.g. the proposal issue title, or the debate title
    body: str  # rendered markdown of the final comment (no marker line)
    verdict: ArbitrationVerdict | None = None  # arbitrate mode
    pending_points: tuple[int, ...] = ()  # proposal stalemates awaiting decisions
    reason: str = ""  # aborted: stable reason class
    findings: tuple[Finding, ...] = ()  # repository design reviews, most severe first
