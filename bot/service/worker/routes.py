"""The one table of what the bot acts on (``TriggerTable``): deliveries,
commands and queued work.

Each feature registers everything it has in one place (``register(triggers)``
in its ``handlers``, composed in bot/service/features/table.py): handlers bound
to the triggers its ``triggers`` module declares (the web tier reads the same
declarations), its commands, queued work, end-of-run actions and loops. The
worker asks the table what to run for a stored delivery, a command, the work
queued behind a finished run, and what to do once a run has ended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar, get_args

from bot.core.errors import BotError, GitHubError, ProtocolError, TargetGone, Transient
from bot.core.logs import get_logger
from bot.engine.types import Outcome
from bot.github.events import WebhookEvent, parse_payload
from bot.github.gateway import InstallationClient
from bot.inputs.parser import Action, Command
from bot.inputs.repo_config import RepoConfig
from bot.service.web.filter import Trigger
from bot.service.worker.context import Origin, Services
from bot.service.worker.publish import Publisher
from bot.service.worker.respond import Responder
from bot.store.rows import DeliveryRow, RunRow

log = get_logger(__name__)

E = TypeVar("E", bound=WebhookEvent)

# A handler returns the delivery's final state, or None: "not mine", the next
# handler registered for the same event and action is asked.
EventHandler = Callable[[Responder, InstallationClient, Any, DeliveryRow], Awaitable[str | None]]
# About the installation itself: no installation token is fetched (there may be none).
AppEventHandler = Callable[[Responder, Any, DeliveryRow], Awaitable[str]]
Handle = Callable[[Responder, Any, DeliveryRow], Awaitable[str | None]]
CommandHandler = Callable[
    [Responder, InstallationClient, Origin, RepoConfig, Command], Awaitable[str]
]
QueueHandler = Callable[[Responder, InstallationClient, RunRow], Awaitable[None]]


@dataclass(frozen=True)
class Finished:
    """A run whose final comment is posted: what a feature's end-of-run action reads."""

    svc: Services
    gh: InstallationClient
    run: RunRow
    publisher: Publisher
    outcome: Outcome


# A feature's end-of-run action (resolve a thread, open a PR, file findings),
# run in registration order after the final comment; it handles its own failures.
FinishAction = Callable[[Finished], Awaitable[None]]
# A feature's periodic loop, run by every worker process for its life: (services, worker id).
Loop = Callable[[Services, str], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class EventRoute:
    trigger: Trigger[Any]
    handle: Handle


@dataclass(frozen=True)
class CommandRoute:
    handler: CommandHandler
    in_review_thread: bool  # also answered in a PR review thread


class TriggerTable:
    def __init__(self) -> None:
        self._events: dict[str, list[EventRoute]] = {}
        self._commands: dict[str, CommandRoute] = {}
        self._queued: dict[str, QueueHandler] = {}
        self._finish: list[FinishAction] = []
        self._loops: list[Loop] = []

    # -- registration -------------------------------------------------------------

    def on_event(
        self,
        trigger: Trigger[E],
        handler: Callable[[Responder, InstallationClient, E, DeliveryRow], Awaitable[str | None]],
    ) -> None:
        """``handler`` for a declared trigger, after those bound earlier to its event."""
        assert not trigger.about_installation, "bind it with on_installation_event"
        self._add(EventRoute(trigger, _with_client(handler)))

    def on_installation_event(
        self, trigger: Trigger[E], handler: Callable[[Responder, E, DeliveryRow], Awaitable[str]]
    ) -> None:
        """An event about the installation itself (removed, suspended, repositories)."""
        assert trigger.about_installation, "bind it with on_event"
        self._add(EventRoute(trigger, handler))

    def _add(self, route: EventRoute) -> None:
        self._events.setdefault(route.trigger.event, []).append(route)

    def on_comment(self, trigger: Trigger[E], origin: Callable[[E, DeliveryRow], Origin]) -> None:
        """A comment trigger: its body is read as a command and dispatched."""
        assert trigger.command_in == "comment", "a comment trigger reads the comment's body"

        async def handle(r: Responder, gh: InstallationClient, event: Any, row: DeliveryRow) -> str:
            return await self.run_command(r, gh, origin(event, row), event.comment.body)

        self._add(EventRoute(trigger, _with_client(handle)))

    def on_command(
        self, action: Action, handler: CommandHandler, *, in_review_thread: bool = False
    ) -> None:
        self._commands[action] = CommandRoute(handler, in_review_thread)

    def on_queued(self, kind: str, handler: QueueHandler) -> None:
        self._queued[kind] = handler

    def on_finish(self, action: FinishAction) -> None:
        self._finish.append(action)

    def every(self, loop: Loop) -> None:
        self._loops.append(loop)

    @property
    def finish_actions(self) -> tuple[FinishAction, ...]:
        return tuple(self._finish)

    @property
    def loops(self) -> tuple[Loop, ...]:
        return tuple(self._loops)

    def check_complete(self) -> None:
        """Every action the parser can produce has a handler (checked once, at start)."""
        missing = set(get_args(Action)) - set(self._commands)
        if missing:
            raise ProtocolError(f"no handler for the commands {sorted(missing)}")

    @property
    def bound(self) -> tuple[Trigger[Any], ...]:
        """The declared triggers a handler is bound to, in binding order."""
        return tuple(route.trigger for routes in self._events.values() for route in routes)

    # -- run by the worker --------------------------------------------------------

    async def handle(self, r: Responder, row: DeliveryRow) -> str:
        """Process one stored delivery; returns its final state."""
        routes = [r for r in self._events.get(row.event, ()) if row.action in r.trigger.actions]
        if not routes or row.installation_id is None:
            return "ignored"
        # Removed or suspended: nothing is sent to GitHub for it any more.
        active = await r.svc.db.installation_state(row.installation_id) == "active"
        parsed: dict[type[WebhookEvent], WebhookEvent] = {}
        for route in routes:
            model = route.trigger.model
            if model not in parsed:
                parsed[model] = parse_payload(model, row.payload.encode())
            event = parsed[model]
            if event.sender is not None and event.sender.is_bot:
                return "ignored"
            if not (active or route.trigger.about_installation):
                return "ignored"
            state = await route.handle(r, event, row)
            if state is not None:
                return state
        return "ignored"

    async def run_command(
        self, r: Responder, gh: InstallationClient, origin: Origin, body: str
    ) -> str:
        if not body.lstrip().startswith("/"):
            return "ignored"
        got = await r.read_command(gh, origin, body)
        if isinstance(got, str):
            return got
        config, cmd = got
        try:
            return await self.dispatch(r, gh, origin, config, cmd)
        except GitHubError as exc:
            # Waited out (transient) or nowhere to post (gone): no reply. Any other
            # answer GitHub gave the handler is final: say so once, like a failed run.
            if isinstance(exc, Transient | TargetGone):
                raise
            await self._say_failed(r, gh, origin, config, exc)
            raise

    async def dispatch(
        self, r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, cmd: Command
    ) -> str:
        route = self._commands[cmd.action]
        if origin.review_comment and not route.in_review_thread:
            await r.reply(
                gh,
                origin,
                f"In a review thread, `{config.command} arbitrate` arbitrates the comment that "
                f"opened the thread. Other commands belong in the pull request's conversation.",
            )
            return "done"
        return await route.handler(r, gh, origin, config, cmd)

    @staticmethod
    async def _say_failed(
        r: Responder, gh: InstallationClient, origin: Origin, config: RepoConfig, exc: GitHubError
    ) -> None:
        said = _github_answer(exc)
        text = (
            f"**debate-bot could not do that** (`{exc.code}`). {exc.public}"
            + (f" GitHub answered {said}." if said else "")
            + f"\n\nDetails are in the service logs. Comment `{config.command}` to try again."
        )
        try:
            await r.reply(gh, origin, text)
        except BotError as failed:
            log.warning("command.failure_notice_failed", error=failed.code)

    async def continue_queue(self, r: Responder, gh: InstallationClient, run: RunRow) -> None:
        """Start the work queued behind ``run`` on the same issue or PR.

        Runs are keyed by issue (one active run each), so work needing several
        runs on one PR (`--bots`, automatic reviews of several plans) is a chain
        carried in the trigger. Nothing here may fail the run that just finished."""
        queue = run.trigger.queue
        if queue is None:
            return
        handler = self._queued.get(queue.kind)
        if handler is None:
            log.warning("queue.unknown_kind", run=run.id, kind=queue.kind)
            return
        try:
            await handler(r, gh, run)
        except Exception:  # the finished run stays finished; the queue just stops here
            log.exception("queue.continue_failed", run=run.id, kind=queue.kind)


def _with_client(handler: EventHandler) -> Handle:
    """The handler, given a client acting as the delivery's installation (tokens are cached)."""

    async def handle(r: Responder, event: Any, row: DeliveryRow) -> str | None:
        assert row.installation_id is not None  # TriggerTable.handle ignores deliveries without
        # Its writes (eyes, a reply) wait their installation's turn by when the
        # webhook arrived: counted from "now", an intake slot would wait behind
        # every write of the runs started since, and one installation's busy runs
        # would hold the slots other installations' deliveries need.
        since = row.received_at.timestamp()
        gh = await r.svc.gateway.installation(row.installation_id, since=since)
        return await handler(r, gh, event, row)

    return handle


def _github_answer(exc: GitHubError) -> str:
    """GitHub's status and its own short message ("409: Git Repository is empty"),
    read from the error text the session builds (bot/github/session.py)."""
    if exc.github_status is None:
        return ""
    _, found, message = str(exc).partition(f" failed: {exc.github_status} ")
    message = message.strip().splitlines()[0][:200].rstrip(".") if found and message.strip() else ""
    return f"{exc.github_status}" + (f" ({message})" if message else "")
