"""What started a run and what its end must do: stored with the run.

Written once when the run is created (bot/service/worker/respond.py), read when it
ends (reactions, labels, arbitration actions, the opened revision PR) and when
queued work continues on the same PR. Stored with the spec's codec, so a key
missing from an older row takes its default and an unknown key is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class ArbitrationActions:
    """The repo config's arbitration switches when the run started."""

    resolve_on_dismissed: bool = False
    label_on_confirmed: str | None = None


@dataclass(frozen=True)
class RevisionTarget:
    """Where `--open-pr` branches the revised plan from (absent on forks)."""

    base: str
    from_sha: str


@dataclass(frozen=True)
class ReviewedPlan:
    """What a design review reads, pinned to the commit it was read at: a plan
    file, or a folder (``path`` ends with ``/``) or the repository (``""``)."""

    path: str
    ref: str
    open_pr: bool = False
    target: RevisionTarget | None = None
    prefix: str = ""  # the frontmatter, put back in front of a revised plan
    blob: str = ""  # sha256 of the text reviewed
    file_issues: bool = False  # a folder or repository review: file its findings


@dataclass(frozen=True)
class CommandFields:
    """The flags of a queued `/debate arbitrate --bots`, replayed per comment."""

    rounds: int | None = None
    personas: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    judge: str | None = None
    alternating: bool = False


@dataclass(frozen=True)
class QueuedComments:
    """`--bots`: review comments still to arbitrate after this run, in order."""

    kind: Literal["arbitrate_bots"] = "arbitrate_bots"
    pending: tuple[int, ...] = ()
    command: CommandFields = CommandFields()
    comment_id: int | None = None
    review_comment: bool = False
    thread_root: int | None = None
    delivery: str = ""


@dataclass(frozen=True)
class QueuedPlans:
    """Automatic reviews: the next changed plan of the PR is looked up at the end."""

    kind: Literal["design_review"] = "design_review"
    delivery: str = ""


Queued = QueuedComments | QueuedPlans


@dataclass(frozen=True)
class Trigger:
    sender: str = ""
    delivery: str = ""
    default_branch: str = "main"
    comment_id: int | None = None  # the command comment, reacted to at the end
    review_comment: bool = False  # comment_id is a PR review comment
    review_thread: int | None = None  # outcomes go to this review thread
    link_from: int | None = None  # a filed topic: the issue the command came from
    labels: tuple[str, ...] = ()  # the issue's labels when the trigger fired
    running_label: bool = False
    arbitration: ArbitrationActions = ArbitrationActions()
    arbitrated_comment: int | None = None
    review: ReviewedPlan | None = None
    # Automatic reviews: plan path -> blob sha reviewed so far on this PR.
    reviewed: dict[str, str] = field(default_factory=dict, hash=False)
    queue: Queued | None = None
    previous_review: str | None = None  # a scheduled review: the run before it
