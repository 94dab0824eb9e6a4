"""The one error hierarchy of debate-bot.

Every error carries a stable ``code`` and a short ``public`` sentence that is safe
to post on GitHub; the exception text itself (``str(exc)``) may hold details and
goes to logs only.

Whether a failure is an outage worth waiting out or a verdict is carried by the
type: ``Transient`` marks the former (the worker lets the run's lease lapse and
resumes it later; model calls are retried before the turn is dropped)::

    BotError
    ├── WebhookError               .http_status: our answer to the delivery
    ├── PayloadError               a delivery's body does not parse (the route answers 400)
    ├── GitHubError                .github_status: GitHub's answer (None: none)
    │   ├── TransientGitHubError   + Transient (judged in bot/github/session.py)
    │   │   └── RateLimited        .resume_at: a wait beyond the cap; the run is handed back
    │   └── TargetGone             the run's issue or PR was deleted, transferred or locked
    ├── ModelError                 .drop_class: recorded on the dropped turn
    │   ├── TransientModelError    + Transient, .retry_after
    │   └── ToolsUnsupported       the server refused tools: the turn debates without them
    ├── ConfigError                its message is public
    │   ├── UsageError             a /debate command that cannot be understood
    │   └── AgentUnavailable       .cause: an agent seat cannot run here (no sandbox, no CLI)
    ├── StoreError                 a verdict: a bad query, a constraint, a bad state
    │   ├── StoreUnavailable       + Transient: the database is down or unreachable
    │   ├── CodecError             a stored spec that does not decode
    │   ├── ActiveRunExists        .run: the issue's queued or running run (id, state, issue)
    │   └── RunNotFound
    ├── AdmissionRefused           .scope: why a run was not started (bot/run/admission.py)
    │   ├── QuotaSpent             the repository's or the requester's daily quota
    │   ├── BudgetSpent            a dollar budget: per run, repository or installation
    │   └── PriceUnknown           .models: a model of the plan has no price
    └── ProtocolError

Not errors, so not here: control-flow signals that stay beside their one user
and never derive from ``BotError``, so an ``except BotError`` can never swallow
them: the driver's ``LeaseLost``, ``Cancelled`` and ``Draining``
(bot/service/worker/driver.py), the session's internal ``_Retry``, eval's
``Stopped`` (its budget said stop, bot/cli/eval/debate.py), the archive
reader's ``ArchiveTooLarge`` (the snapshot turns lazy, bot/repo/archive.py) and
the repository readers' ``Refused`` (a read a model asked for that cannot be
served: its text is the answer the model sees, bot/repo/paths.py).

This is the lowest module: it imports nothing of the project, not even for
typing, so every package can raise these errors without reaching the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol


class Transient:
    """Marker base: the failure is an outage, not a verdict; trying later may work."""


class BotError(Exception):
    code = "internal_error"
    public = "debate-bot hit an internal error."

    def __init__(self, message: str = "", *, public: str | None = None) -> None:
        super().__init__(message or self.public)
        if public is not None:
            self.public = public


class WebhookError(BotError):
    code = "webhook_error"
    public = "The webhook delivery was rejected."

    def __init__(self, message: str, *, http_status: int = 400) -> None:
        super().__init__(message, public=message)
        self.http_status = http_status


class PayloadError(BotError):
    """A delivery's body is not the JSON the bot needs (malformed, or a required
    field missing or mistyped). It carries no HTTP status: the webhook route maps
    it to 400; in the worker it fails the delivery. The message names the field,
    never a payload value, so it is public."""

    code = "payload_error"
    public = "The webhook payload is malformed."

    def __init__(self, message: str) -> None:
        super().__init__(message, public=message)


class GitHubError(BotError):
    """A GitHub call failed for good. Raise it through ``bot.github.session.github_error``,
    which picks this class or ``TransientGitHubError``."""

    code = "github_error"
    public = "A call to GitHub failed."

    def __init__(self, message: str = "", *, github_status: int | None = None) -> None:
        super().__init__(message)
        self.github_status = github_status


class TransientGitHubError(GitHubError, Transient):
    """GitHub is down, rate-limiting us, or answered nothing usable."""


class RateLimited(TransientGitHubError):
    """GitHub asked for a longer wait than a call waits in place (the
    ``github_max_retry_wait_s`` cap): nothing may go to the installation before
    ``resume_at`` (epoch seconds), so a run is handed back until then."""

    code = "github_rate_limited"
    public = "GitHub's rate limit for this installation is exhausted for now."

    def __init__(self, message: str, *, github_status: int | None, resume_at: float) -> None:
        super().__init__(message, github_status=github_status)
        self.resume_at = resume_at


class TargetGone(GitHubError):
    """The issue or pull request (or a comment on it) is gone: 404 or 410 on its
    routes, or 403 because the conversation is locked. Final, and nothing more can
    be posted there, not even a failure notice."""

    code = "target_gone"
    public = "The issue or pull request was deleted, transferred or locked."


class ModelError(BotError):
    """A model call failed; ``drop_class`` is the stable class recorded on the turn."""

    code = "model_error"
    public = "A model call failed."

    def __init__(self, message: str = "", *, drop_class: str = "provider_error") -> None:
        super().__init__(message)
        self.drop_class = drop_class


class TransientModelError(ModelError, Transient):
    """A failure worth retrying (429, 5xx, timeouts, connection errors).

    ``retry_after`` is the server's requested wait in seconds, if it sent one.
    When retries are exhausted it propagates as the ``ModelError`` it is.
    """

    def __init__(self, message: str, *, drop_class: str, retry_after: float | None = None) -> None:
        super().__init__(message, drop_class=drop_class)
        self.retry_after = retry_after


class ToolsUnsupported(ModelError):
    """The server refused a request because of its tools (an HTTP 400 naming them, a
    server without tool support). Not a drop: the tool loop answers from the prompt
    alone (bot/run/tool_loop.py)."""

    code = "tools_unsupported"


class ConfigError(BotError):
    """Bad settings, repo config, plan frontmatter or CLI input.

    Its message is written for the user who made the mistake (it is public).
    """

    code = "config_error"
    public = "The configuration is invalid."

    def __init__(self, message: str) -> None:
        super().__init__(message, public=message)


class UsageError(ConfigError):
    """The comment started with the command but could not be understood."""

    code = "usage_error"


class AgentUnavailable(ConfigError):
    """An ``agent:`` seat cannot run on this machine: no usable sandbox, or the CLI
    is missing or too old. The command is refused with this message and no run
    starts: an agent seat is never moved onto another model (docs/agents.md)."""

    code = "agent_unavailable"

    def __init__(self, message: str, *, cause: str) -> None:
        super().__init__(message)
        self.cause = cause  # "sandbox" | "cli" | "upstream"


class StoreError(BotError):
    """The run store refused or failed an operation for good: a constraint, a bad
    argument, a stored value that does not decode. Trying again would fail the
    same way; an outage of the database is ``StoreUnavailable``."""

    code = "store_error"
    public = "The run store failed."


class StoreUnavailable(StoreError, Transient):
    """The database is down, unreachable or busy (a dropped connection, a lock
    timeout): waited out, as it may be back (the run resumes from its turns)."""

    code = "store_unavailable"
    public = "The run store is unavailable."


class CodecError(StoreError):
    code = "codec_error"


class RunRef(Protocol):
    """What ``ActiveRunExists`` needs of a run row (the store's ``RunRow`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def repo(self) -> str: ...
    @property
    def issue_number(self) -> int: ...


@dataclass(frozen=True)
class ActiveRun:
    id: str
    state: str
    repo: str
    issue_number: int


class ActiveRunExists(StoreError):
    """The issue already has a queued, running or waiting run (``.run``)."""

    code = "active_run_exists"
    public = "A debate is already running on this issue."

    def __init__(self, run: RunRef) -> None:
        super().__init__(f"run {run.id} is {run.state} on {run.repo}#{run.issue_number}")
        self.run = ActiveRun(run.id, run.state, run.repo, run.issue_number)


class AdmissionRefused(BotError):
    """A run was not started: its ``public`` sentence is the one reply."""

    code = "admission_refused"
    scope = ""


class QuotaSpent(AdmissionRefused):
    """A daily quota is spent: the repository's (``scope == "repo"``) or the
    requester's in it (``"user"``)."""

    code = "quota_spent"

    def __init__(self, scope: Literal["repo", "user"]) -> None:
        public = (
            "This repository has reached its daily debate quota."
            if scope == "repo"
            else "You have reached your daily debate quota here."
        )
        super().__init__(f"the {scope} quota is spent", public=public)
        self.scope = scope


_BUDGET_NAMES = {
    "run": "the per-run budget",
    "repo": "this repository's monthly budget",
    "installation": "this installation's monthly budget",
}


class BudgetSpent(AdmissionRefused):
    """A dollar budget has no room for the run's estimate: ``scope`` is
    ``run``, ``repo`` or ``installation``; ``resets`` (None for a per-run
    budget) is when a monthly one starts again."""

    code = "budget_spent"

    def __init__(
        self,
        scope: Literal["run", "repo", "installation"],
        *,
        limit: float,
        spent: float,
        estimate: float,
        resets: datetime | None = None,
        least: float | None = None,  # what did not fit: the first round (default: estimate)
    ) -> None:
        name = _BUDGET_NAMES[scope]
        least = estimate if least is None else least
        short = least - (limit - spent)
        what = (
            f"this run is estimated at ${estimate:.4f}"
            if least >= estimate
            else f"this run is estimated at ${estimate:.4f}, and even its first round at "
            f"${least:.4f}"
        )
        if scope == "run":
            public = (
                f"Not started: {what}, over {name} of ${limit:.4f} by ${short:.4f}. "
                "Try fewer rounds or personas, or `/debate estimate` to compare."
            )
        else:
            when = resets.strftime("%Y-%m-%d %H:%M UTC") if resets else "next month"
            public = (
                f"Not started: {name} is ${limit:.4f}; ${spent:.4f} is spent or held "
                f"by running debates this month, which leaves ${max(0.0, limit - spent):.4f}, "
                f"and {what}: ${short:.4f} short. The budget resets on {when}."
            )
        super().__init__(f"the {scope} budget has no room for ${least:.4f}", public=public)
        self.scope = scope
        self.limit = limit
        self.spent = spent
        self.estimate = estimate
        self.least = least
        self.resets = resets


class PriceUnknown(AdmissionRefused):
    """A model of the plan has no price, and unknown prices are refused
    (``DEBATE_BOT_UNKNOWN_PRICE``)."""

    code = "price_unknown"
    scope = "price"

    def __init__(self, models: tuple[str, ...]) -> None:
        names = ", ".join(f"`{m}`" for m in models)
        super().__init__(
            f"no price for {', '.join(models)}",
            public=(
                f"Not started: no price is known for {names}, so its cost cannot be "
                "held against the budget. The operator can add it to the price file "
                "(DEBATE_BOT_PRICES_FILE) or set DEBATE_BOT_UNKNOWN_PRICE."
            ),
        )
        self.models = models


class RunNotFound(StoreError):
    code = "run_not_found"
    public = "No such debate run."


class ProtocolError(BotError):
    code = "protocol_error"
    public = "The debate protocol reached an invalid state."
