"""The router: one table of what the bot acts on, asked by the webhook route and the worker."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import pytest
from pydantic import SecretStr

from bot.core.errors import PayloadError, ProtocolError
from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.github.events import IssuesEvent, PullRequestEvent
from bot.github.gateway import GitHubGateway, InstallationClient
from bot.github.webhooks import sign
from bot.inputs.parser import Action
from bot.models.router import ModelRouter
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.features.table import build_triggers
from bot.service.web.filter import DeliveryFilter, trigger
from bot.service.web.main import create_app
from bot.service.web.webhook import rejection_status
from bot.service.worker.context import Services
from bot.service.worker.respond import Responder
from bot.service.worker.routes import TriggerTable
from bot.store import NewRun, RunStore
from bot.store.rows import DeliveryRow, RunRow
from bot.store.trigger import QueuedComments, QueuedPlans, Trigger
from testkit.fakes.github_server import FakeGitHub
from testkit.harness.engine import spec_for
from testkit.harness.service import APP_ID, INSTALLATION, REPO, delivery, rsa_keypair

SECRET = "router-secret-" + uuid.uuid4().hex


# --- the table ---------------------------------------------------------------------


def test_the_default_table() -> None:
    r = DELIVERY_FILTER
    accepted = {
        (event, action)
        for event in r.event_names
        for action in (
            *("created", "labeled", "opened", "synchronize", "edited", "closed"),
            *("deleted", "suspend", "unsuspend", "added", "removed"),
        )
        if r.accepts(event, action)
    }
    assert accepted == {
        ("issue_comment", "created"),
        ("issues", "labeled"),
        ("pull_request", "labeled"),
        ("pull_request", "opened"),
        ("pull_request", "synchronize"),
        ("pull_request_review_comment", "created"),
        ("installation", "deleted"),
        ("installation", "suspend"),
        ("installation", "unsuspend"),
        ("installation_repositories", "removed"),
    }
    assert r.required_objects("issue_comment") == ("comment", "issue", "repository", "sender")
    assert r.required_objects("pull_request") == ("pull_request", "repository", "sender")
    assert r.command_in("issue_comment") == "comment"
    assert r.command_in("pull_request_review_comment") == "comment"
    assert r.command_in("issues") is None
    assert not r.accepts("push", "created") and r.required_objects("push") == ()


def test_a_command_the_parser_knows_without_a_handler_fails_at_start() -> None:
    router = TriggerTable()

    async def nothing(*_: Any) -> str:
        return "done"

    actions: tuple[Action, ...] = ("debate", "review", "decide", "status", "cancel", "help")
    for action in actions:
        router.on_command(action, nothing)
    with pytest.raises(ProtocolError, match="arbitrate"):
        router.check_complete()
    build_triggers().check_complete()  # the real composition is complete


# --- the webhook route asks the router -------------------------------------------------


async def _post(client: httpx.AsyncClient, event: str, payload: dict[str, Any]) -> httpx.Response:
    body = json.dumps(payload).encode()
    return await client.post(
        "/api/github/webhooks",
        content=body,
        headers={
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(SECRET.encode(), body),
        },
    )


async def _done(*_: Any) -> str:
    return "done"


def test_the_webhook_route_stores_what_the_router_accepts(store: RunStore) -> None:
    only_opened = TriggerTable()
    only_opened.on_event(trigger(IssuesEvent, "opened"), _done)
    app = create_app(
        Settings(webhook_secret=SecretStr(SECRET)),
        store,
        Metrics(),
        deliveries=DeliveryFilter.of(only_opened.bound),
    )

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [
                await _post(client, "issues", delivery("issues.opened.app-delivery")),
                await _post(client, "issues", delivery("issues.labeled.app-delivery")),
                await _post(client, "issue_comment", delivery("issue_comment.created")),
            ]

    opened, labeled, comment = anyio.run(scenario)
    assert (opened.status_code, opened.json()) == (202, {"status": "queued"})
    assert (labeled.status_code, labeled.json()) == (202, {"status": "ignored", "reason": "event"})
    assert comment.json() == {"status": "ignored", "reason": "event"}
    stored = store.claim_delivery("w", 60)
    assert stored is not None and stored.event == "issues" and stored.action == "opened"
    assert store.claim_delivery("w", 60) is None


# --- the worker asks the router ------------------------------------------------------


@pytest.fixture
def responder(store: RunStore) -> Iterator[Responder]:
    private, public = rsa_keypair()
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as github:
        github.add_repo(REPO, installation_id=INSTALLATION)
        settings = Settings(
            app_id=APP_ID, private_key=SecretStr(private), github_api_url=github.api_url
        )
        svc = Services(settings, store, GitHubGateway(settings), ModelRouter(settings), Metrics())
        yield Responder(svc)


def _row(event: str, action: str, payload: dict[str, Any] | bytes) -> DeliveryRow:
    text = payload.decode() if isinstance(payload, bytes) else json.dumps(payload)
    return DeliveryRow(
        delivery_id=str(uuid.uuid4()),
        event=event,
        action=action,
        installation_id=INSTALLATION,
        payload=text,
        received_at=datetime.now(UTC),
        state="pending",
        lease_owner="w",
        lease_expires_at=None,
        attempts=1,
        error_class=None,
        finished_at=None,
    )


def _run(r: Responder, work: Any) -> Any:
    async def go() -> Any:
        try:
            return await work
        finally:
            await r.svc.gateway.aclose()

    return anyio.run(go)


def test_handlers_are_asked_in_order_until_one_answers(responder: Responder) -> None:
    calls: list[tuple[str, str, int]] = []

    def handler(name: str, answer: str | None) -> Any:
        async def handle(
            r: Responder, gh: InstallationClient, event: PullRequestEvent, row: DeliveryRow
        ) -> str | None:
            calls.append((name, event.action, gh.installation_id))
            return answer

        return handle

    router = TriggerTable()
    router.on_event(trigger(PullRequestEvent, "labeled"), handler("first", None))
    router.on_event(trigger(PullRequestEvent, "labeled", "opened"), handler("second", "done"))
    router.on_event(trigger(PullRequestEvent, "labeled"), handler("third", "never asked"))
    row = _row("pull_request", "labeled", delivery("pull_request.labeled"))
    assert _run(responder, router.handle(responder, row)) == "done"
    assert calls == [("first", "labeled", INSTALLATION), ("second", "labeled", INSTALLATION)]


def test_nobody_answering_bots_and_unrouted_actions_are_ignored(responder: Responder) -> None:
    calls: list[str] = []

    async def not_mine(*_: Any) -> None:
        calls.append("asked")

    router = TriggerTable()
    router.on_event(trigger(PullRequestEvent, "labeled"), not_mine)
    labeled = delivery("pull_request.labeled")
    by_bot = delivery("pull_request.labeled", **{"sender.type": "Bot"})

    async def scenario() -> list[str]:
        return [
            await router.handle(responder, _row("pull_request", "labeled", labeled)),
            await router.handle(responder, _row("pull_request", "labeled", by_bot)),
            # An action nobody routes is not even parsed.
            await router.handle(responder, _row("pull_request", "closed", b"{not json")),
            await router.handle(responder, _row("push", "created", b"{not json")),
        ]

    assert _run(responder, scenario()) == ["ignored"] * 4
    assert calls == ["asked"]  # the bot's delivery never reached a handler


def test_a_routed_malformed_delivery_is_a_400_error(responder: Responder) -> None:
    router = TriggerTable()
    router.on_event(trigger(IssuesEvent, "labeled"), _done)
    row = _row("issues", "labeled", {"action": "labeled", "sender": {"login": "x"}})
    with pytest.raises(PayloadError, match="invalid issues payload") as exc_info:
        _run(responder, router.handle(responder, row))
    assert rejection_status(exc_info.value) == 400


def test_queued_work_goes_to_its_kind_and_never_fails_the_finished_run(
    responder: Responder, store: RunStore
) -> None:
    seen: list[tuple[str, str]] = []

    async def plans(r: Responder, gh: InstallationClient, run: RunRow) -> None:
        seen.append(("plans", run.id))

    async def broken(r: Responder, gh: InstallationClient, run: RunRow) -> None:
        raise RuntimeError("boom")

    router = TriggerTable()
    router.on_queued("design_review", plans)
    router.on_queued("arbitrate_bots", broken)
    spec = spec_for("debate")
    with_plans = store.create_run(
        NewRun(
            repo=REPO, issue_number=1, spec=spec, trigger=Trigger(queue=QueuedPlans(delivery="d"))
        )
    )
    with_comments = store.create_run(
        NewRun(
            repo=REPO,
            issue_number=2,
            spec=spec,
            trigger=Trigger(queue=QueuedComments(pending=(3,))),
        )
    )
    without = store.create_run(NewRun(repo=REPO, issue_number=3, spec=spec))

    async def scenario() -> None:
        gh = await responder.svc.gateway.installation(INSTALLATION)
        for run in (with_plans, with_comments, without):
            await router.continue_queue(responder, gh, run)
        # No handler: logged, skipped.
        await TriggerTable().continue_queue(responder, gh, with_plans)

    _run(responder, scenario())
    assert seen == [("plans", with_plans.id)]
