"""Row value types returned by the store: every aggregate's, in one place."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple, cast

from bot.engine.types import DebateSpec, Evidence, Exchange, Turn, Usage
from bot.store.codec import from_json, spec_from_json
from bot.store.trigger import Trigger

RunState = Literal["queued", "running", "waiting", "done", "failed", "cancelled", "aborted"]
DeliveryState = Literal["pending", "done", "ignored", "failed"]
CommentKind = Literal["issue", "review"]
InstallationState = Literal["active", "suspended", "removed"]
RedeliveryOutcome = Literal["requested", "refused"]
SpendBy = Literal["repo", "installation", "model"]


class NewDelivery(NamedTuple):
    """A delivery as the webhook route hands it to the store."""

    delivery_id: str
    event: str
    action: str | None
    installation_id: int | None
    payload: bytes | str


@dataclass(frozen=True)
class NewRun:
    """A run as a command queues it (``create_run``). ``mode`` defaults to the
    spec's mode, ``run_id`` to a fresh uuid4; a spec with an empty ``seed``
    gets the run id as its seed."""

    repo: str
    issue_number: int
    spec: DebateSpec | str
    mode: str | None = None
    installation_id: int | None = None
    is_pr: bool = False
    trigger: Trigger | None = None
    requested_by: str = ""
    run_id: str | None = None


@dataclass(frozen=True)
class DeliveryRow:
    delivery_id: str
    event: str
    action: str | None
    installation_id: int | None
    payload: str
    received_at: datetime
    state: DeliveryState
    lease_owner: str | None
    lease_expires_at: datetime | None
    attempts: int
    error_class: str | None
    finished_at: datetime | None

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> DeliveryRow:
        return cls(
            delivery_id=row["delivery_id"],
            event=row["event"],
            action=row["action"],
            installation_id=row["installation_id"],
            payload=row["payload"],
            received_at=row["received_at"],
            state=cast(DeliveryState, row["state"]),
            lease_owner=row["lease_owner"],
            lease_expires_at=row["lease_expires_at"],
            attempts=row["attempts"],
            error_class=row["error_class"],
            finished_at=row["finished_at"],
        )


@dataclass(frozen=True)
class RunRow:
    id: str
    installation_id: int | None
    repo: str
    issue_number: int
    is_pr: bool
    mode: str
    state: RunState
    spec: str  # DebateSpec JSON; see debate_spec()
    trigger: Trigger
    requested_by: str
    created_at: datetime
    updated_at: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    attempts: int
    handbacks: int
    cancel_requested: bool
    outcome_kind: str | None
    error_class: str | None
    tokens_total: int
    cost_usd: float

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running", "waiting")

    @property
    def crashes(self) -> int:
        """Claims that did not end in a clean hand-back, this one included."""
        return self.attempts - self.handbacks

    def debate_spec(self) -> DebateSpec:
        return spec_from_json(self.spec)

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> RunRow:
        return cls(
            id=row["id"],
            installation_id=row["installation_id"],
            repo=row["repo"],
            issue_number=row["issue_number"],
            is_pr=bool(row["is_pr"]),
            mode=row["mode"],
            state=cast(RunState, row["state"]),
            spec=row["spec"],
            trigger=from_json(Trigger, row["trigger"] or "{}"),
            requested_by=row["requested_by"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            lease_owner=row["lease_owner"],
            lease_expires_at=row["lease_expires_at"],
            attempts=row["attempts"],
            handbacks=row["handbacks"],
            cancel_requested=bool(row["cancel_requested"]),
            outcome_kind=row["outcome_kind"],
            error_class=row["error_class"],
            tokens_total=row["tokens_total"],
            cost_usd=float(row["cost_usd"]),
        )


class WriteSlot(NamedTuple):
    """A GitHub write slot: how long to wait for it, and the installation's next
    slot as the reservation left it (see ``extend_write_slot``), or as it stands
    when the slot was too far away to take (``reserve_write``'s ``max_wait_s``)."""

    wait_s: float
    next_at: datetime


class RunControl(NamedTuple):
    """What a driver checks between batches: is the run still its, and wanted."""

    lease_owner: str | None
    cancel_requested: bool


class SavedTurn(NamedTuple):
    new: bool  # False: a turn with the same key was already saved (first write wins)
    control: RunControl  # read in the same transaction


class CommentRecord(NamedTuple):
    """A comment the bot posted for a run, found again by its marker."""

    comment_id: int
    kind: CommentKind
    body_sha256: str


Cadence = Literal["weekly", "monthly"]
PERIOD: dict[Cadence, timedelta] = {"weekly": timedelta(days=7), "monthly": timedelta(days=30)}


@dataclass(frozen=True)
class ScheduleRow:
    repo: str
    installation_id: int
    cadence: Cadence
    scope: tuple[str, ...]  # folders; empty: the whole repository
    next_due: datetime
    last_issue: int | None
    last_run: str | None

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> ScheduleRow:
        scope = json.loads(row["scope"] or "[]")
        return cls(
            repo=row["repo"],
            installation_id=row["installation_id"],
            cadence=cast(Cadence, row["cadence"]),
            scope=tuple(str(s) for s in scope) if isinstance(scope, list) else (),
            next_due=row["next_due"],
            last_issue=row["last_issue"],
            last_run=row["last_run"],
        )


@dataclass(frozen=True)
class RunSpend:
    """A run's spend from the ledger, for its audit line."""

    usd: float
    calls: int
    assumed: tuple[str, ...]  # models priced by DEBATE_BOT_UNKNOWN_PRICE
    unknown: tuple[str, ...]  # models with no price (counted at 0)


@dataclass(frozen=True)
class MonthSpend:
    """Spend since the month's start, and what active runs still hold."""

    repo_usd: float
    repo_held_usd: float
    installation_usd: float
    installation_held_usd: float


@dataclass(frozen=True)
class SpendLine:
    """One row of ``debate-bot spend``."""

    key: str
    runs: int
    calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    usd: float


@dataclass(frozen=True)
class TurnUse:
    """What one stored turn really used, for the estimate (``usage_history``)."""

    run_id: str
    model: str
    phase: str
    words: int  # of its answer
    chars: int  # of its answer
    answer_tokens: int  # output tokens of the call that wrote the answer
    tool_steps: int | None  # steps that read (None: a turn without tools)
    tool_bytes: int  # what they read
    input_tokens: int = 0  # of all the turn's calls
    first_input_tokens: int = 0  # of its first call (a turn with tools)
    turn_id: str = ""  # TurnKey.id()
    cached_tokens: int = 0  # of all the turn's calls, served from the provider's cache


@dataclass(frozen=True)
class UsageHistory:
    """Recent turns of an installation's runs of one mode, and those runs' specs."""

    turns: tuple[TurnUse, ...] = ()
    specs: Mapping[str, DebateSpec] | None = None
    # The latest runs' turns, in order: replayed, they give each request's prompt.
    replays: Mapping[str, tuple[Turn, ...]] | None = None


@dataclass(frozen=True)
class ModelLimit:
    window: float
    decreased_at: datetime | None
    hold_until: datetime | None


@dataclass(frozen=True)
class RunSummary:
    id: str
    repo: str
    issue_number: int
    is_pr: bool
    mode: str
    state: str
    requested_by: str
    created_at: datetime
    updated_at: datetime
    tokens_total: int
    cost_usd: float
    outcome_kind: str | None
    error_class: str | None

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> RunSummary:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class StoredStep:
    """One finished model call of a turn's loop; ``final`` steps end the turn."""

    n: int  # 0-based, in call order within the turn
    model: str  # the model reference that answered
    exchange: Exchange  # its text, its calls and the answers they got
    usage: Usage
    truncated: bool = False
    final: bool = False
    bytes_read: int = 0  # repository bytes the step's tools read
    files: tuple[str, ...] = ()  # files its read_file calls read
    evidence: Evidence | None = None  # final steps only
    # An agent turn's gateway call (bot/run/agent_seat.py): the request's hash, a
    # re-run repeating it gets ``exchange.text`` (the upstream's answer) again.
    request_hash: str = ""
    status: int = 0
    content_type: str = ""
