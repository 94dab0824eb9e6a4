"""The web tier stands apart (pyproject.toml, the import contracts): it judges
deliveries from the trigger table's DeliveryFilter, data handed over by the
process wiring, and loads neither the worker, a model adapter nor the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.github.events import IssuesEvent
from bot.service.features.declared import DELIVERY_FILTER, TRIGGERS
from bot.service.features.installations import triggers as installations
from bot.service.features.table import build_triggers
from bot.service.web.filter import DeliveryFilter, EventTriggers, trigger

ROOT = Path(__file__).resolve().parents[4]


def test_importing_the_web_app_loads_no_worker_model_run_or_engine_module() -> None:
    code = (
        "import sys, bot.service.web.main, bot.service.web.redeliver, bot.service.web.proxy\n"
        "import bot.service.web.ingest, bot.service.web.webhook\n"
        "print(sorted(m for m in sys.modules if m.startswith(('bot.service.worker', 'bot.models',"
        " 'bot.engine.', 'bot.run')) and m != 'bot.engine.types'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_filter_is_the_features_declarations_merged() -> None:
    deliveries = DELIVERY_FILTER
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
    half (feature handlers, model adapters, repository readers) is imported when a
    worker starts, and the route reads the features' declarations as data."""
    code = (
        "import sys, bot.cli.main, bot.service.main\n"
        "print(sorted(m for m in sys.modules if m.startswith("
        "('bot.service.worker', 'bot.models', 'bot.repo.brief', 'bot.repo', 'bot.inputs'))"
        " or m.startswith('bot.service.features') and m.rsplit('.', 1)[-1] not in "
        "('features', 'declared', 'triggers', 'debates', 'reviews', 'installations')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_declared_trigger_is_bound_once_and_nothing_else() -> None:
    """The web tier stores what the features declare; the worker must have a handler
    for each of those, and for nothing the web tier would drop."""
    bound = build_triggers().bound
    assert sorted(map(repr, bound)) == sorted(map(repr, TRIGGERS))
    assert DeliveryFilter.of(bound) == DELIVERY_FILTER


def test_a_trigger_is_bound_as_what_it_declares() -> None:
    router = build_triggers()
    with pytest.raises(AssertionError, match="on_installation_event"):
        router.on_event(installations.GONE, _never)
    with pytest.raises(AssertionError, match="comment"):
        router.on_comment(trigger(IssuesEvent, "opened"), _never)  # type: ignore[arg-type]


async def _never(*_: object) -> str | None:
    raise AssertionError("not called")
