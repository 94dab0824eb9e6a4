"""The web tier stands apart (pyproject.toml, the import contracts): it judges
deliveries from the trigger table's DeliveryFilter, data handed over by the
process wiring, and loads neither the worker, a model adapter nor the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.core.errors import ProtocolError
from bot.github.events import IssuesEvent
from bot.service.web.filter import DeliveryFilter, EventTriggers
from bot.service.web.triggers import DELIVERY_FILTER
from bot.service.worker.triggers import build_triggers

ROOT = Path(__file__).resolve().parents[4]


def test_importing_the_web_app_loads_no_worker_model_or_engine_module() -> None:
    code = (
        "import sys, bot.service.web.main, bot.service.web.redeliver, bot.service.web.proxy\n"
        "import bot.service.web.ingest, bot.service.web.webhook\n"
        "print(sorted(m for m in sys.modules if m.startswith(('bot.service.worker', 'bot.models',"
        " 'bot.engine.', 'bot.run.')) and m not in ('bot.engine.types', 'bot.run.admission')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_filter_is_the_router_as_data() -> None:
    deliveries = build_triggers().delivery_filter()
    comment = deliveries.events["issue_comment"]
    assert comment == EventTriggers(
        frozenset({"created"}), ("comment", "issue", "repository", "sender"), "comment"
    )
    # Two features on one event: their actions merge (design reviews and the label debate).
    assert deliveries.events["pull_request"].actions == {"opened", "synchronize", "labeled"}


def test_prefilter_judges_only_what_needs_no_repo_config() -> None:
    f = DeliveryFilter({"issue_comment": EventTriggers(frozenset({"created"}), (), "comment")})
    base = {"action": "created", "installation": {"id": 7}, "comment": {"body": "/debate"}}
    assert f.prefilter("issue_comment", base) is None
    assert f.prefilter("issue_comment", {**base, "action": "edited"}) == "event"
    assert f.prefilter("push", base) == "event"
    bot_sender = {**base, "sender": {"type": "Bot"}}
    assert f.prefilter("issue_comment", bot_sender) == "bot sender"
    chat = {**base, "comment": {"body": "thanks!"}}
    assert f.prefilter("issue_comment", chat) == "not a command"
    assert f.prefilter("issue_comment", {**base, "comment": "x"}) == "not a command"
    assert f.prefilter("issue_comment", {**base, "installation": {"id": True}}) == (
        "no installation"
    )


def test_a_web_process_loads_no_feature_model_adapter_or_reader() -> None:
    """`debate-bot web` imports bot.service.main and runs its web half only: the worker
    half (features, model adapters, repository readers) is imported when a worker
    starts, and the route reads the trigger table as data."""
    code = (
        "import sys, bot.cli.main, bot.service.main\n"
        "print(sorted(m for m in sys.modules if m.startswith("
        "('bot.service.worker', 'bot.models', 'bot.repo.brief', 'bot.repo', 'bot.inputs'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_table_is_what_the_features_register() -> None:
    assert build_triggers().delivery_filter() == DELIVERY_FILTER


def test_a_registration_missing_from_the_table_stops_the_start() -> None:
    router = build_triggers()
    router.on_event(IssuesEvent, ("opened",), _never)
    with pytest.raises(ProtocolError, match=r"\['issues'\].*bot/service/web/triggers.py"):
        router.check_complete()


async def _never(*_: object) -> str | None:
    raise AssertionError("not called")
