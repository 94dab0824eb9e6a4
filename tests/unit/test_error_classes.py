"""Errors that say verdict or outage truthfully (bot/core/errors.py).

- A store failure is a verdict unless the database is out (``StoreUnavailable``):
  an undecodable run spec fails the run at its first claim.
- The error tree imports nothing of the project, and the brief, which is pure,
  loads neither settings nor pydantic.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa
from pydantic import SecretStr

from bot.core.errors import (
    ActiveRun,
    ActiveRunExists,
    CodecError,
    StoreError,
    StoreUnavailable,
    Transient,
)
from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.engine.types import DebateSpec
from bot.github.gateway import GitHubGateway
from bot.models.router import ModelRouter
from bot.service.features.table import build_triggers
from bot.service.worker.context import Services
from bot.service.worker.pool import Worker, is_transient
from bot.store import NewRun, RunStore
from bot.store.engine import store_failure
from bot.store.schema import runs
from testkit.harness.service import APP_ID, INSTALLATION, REPO

ROOT = Path(__file__).resolve().parents[2]


def test_a_store_verdict_is_final_and_an_outage_transient() -> None:
    assert not is_transient(StoreError("release_run: unknown fields"))
    assert not is_transient(CodecError("invalid JSON for DebateSpec"))
    assert is_transient(StoreUnavailable("claim_runs failed: OperationalError"))
    outage = store_failure("claim_runs", sa.exc.OperationalError("SELECT 1", {}, OSError("gone")))
    assert isinstance(outage, StoreUnavailable) and isinstance(outage, Transient)
    assert "gone" not in str(outage)  # the class only: driver text may quote parameters
    verdict = store_failure("save_turn", sa.exc.IntegrityError("INSERT", {}, ValueError("dup")))
    assert type(verdict) is StoreError and not is_transient(verdict)


def test_a_database_that_cannot_be_opened_is_an_outage(tmp_path: Path) -> None:
    store = RunStore.from_url(f"sqlite:///{tmp_path / 'gone' / 'db.sqlite'}")
    try:
        with pytest.raises(StoreUnavailable):
            store.load_turns("some-run")
    finally:
        store.dispose()


def test_a_constraint_the_store_hits_is_a_verdict(store: RunStore) -> None:
    spec = DebateSpec(mode="debate", title="t", subject="s")
    run = store.create_run(NewRun(repo=REPO, issue_number=1, spec=spec))
    with pytest.raises(StoreError) as info:
        store.create_run(NewRun(repo=REPO, issue_number=1, spec=spec))
    assert not is_transient(info.value)
    assert isinstance(info.value, ActiveRunExists)
    assert info.value.run == ActiveRun(run.id, "queued", REPO, 1)


def test_an_undecodable_spec_fails_the_run_at_its_first_claim(
    store: RunStore, app_keys: tuple[str, str]
) -> None:
    """Once deferred and re-claimed until its sixth claim; now failed at once."""
    spec = DebateSpec(mode="debate", title="t", subject="s")
    run = store.create_run(
        NewRun(repo=REPO, issue_number=7, spec=spec, installation_id=INSTALLATION)
    )
    with store.engine.begin() as conn:
        conn.execute(
            runs.update().where(runs.c.id == run.id).values(spec=json.dumps({"mode": "nope"}))
        )
    settings = Settings(_env_file=None, app_id=APP_ID, private_key=SecretStr(app_keys[0]))
    worker = Worker(
        Services(settings, store, GitHubGateway(settings), ModelRouter(settings), Metrics()),
        build_triggers(),
        worker_id="w1",
    )
    claimed = store.claim_run("w1", 60)
    assert claimed is not None and claimed.attempts == 1
    anyio.run(worker.drive, claimed)
    final = store.get_run(run.id)
    assert final is not None
    assert final.state == "failed" and final.error_class == "codec_error"
    assert store.claim_run("w1", 60) is None  # nothing left to re-claim


def test_the_error_tree_imports_nothing_of_the_project() -> None:
    tree = ast.parse((ROOT / "bot" / "core" / "errors.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not {m for m in imported if m == "bot" or m.startswith("bot.")}, imported


@pytest.mark.parametrize("module", ["bot.repo.brief", "bot.inputs.text", "bot.core.errors"])
def test_pure_modules_load_neither_settings_nor_pydantic(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'pydantic_settings', 'sqlalchemy') "
        "or m in ('bot.core.settings', 'bot.inputs.repo_config', 'bot.store'))\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", proc.stdout


def test_every_exception_class_is_in_the_tree_or_a_named_signal() -> None:
    """An exception class of the project derives from BotError, or is a
    control-flow signal that bot/core/errors.py names (or private to its module)."""
    import bot.core.errors as errors

    named = errors.__doc__ or ""
    outside = []
    for path in sorted((ROOT / "bot").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            signal = bases & {"Exception", "BaseException"} and node.name != "BotError"
            if signal and not node.name.startswith("_") and f"``{node.name}``" not in named:
                outside.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert outside == [], f"derive from BotError, or name the signal in errors.py: {outside}"
