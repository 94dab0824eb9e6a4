"""RunStore on SQLite and PostgreSQL.

The PostgreSQL half creates a fresh, uniquely named database on the server at
DEBATE_BOT_TEST_PG_URL (an admin URL; default: local trust auth) for the test
session and drops it afterwards. If the server is unreachable those tests fail
in CI (CI=true) and are skipped locally.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from bot.core.errors import (
    ActiveRunExists,
    CodecError,
    QuotaSpent,
    RunNotFound,
    StoreError,
    StoreUnavailable,
)
from bot.engine.types import (
    ArbitrationContext,
    ContextFile,
    DebateSpec,
    Decision,
    PersonaSpec,
    Turn,
    TurnKey,
    Usage,
)
from bot.run.admission import Limits, Quota
from bot.store import (
    CommentRecord,
    NewDelivery,
    NewRun,
    RunStore,
    spec_from_json,
    spec_to_json,
)
from bot.store import engine as engine_module
from bot.store.admission import Admission
from bot.store.engine import create_engine, normalize_url
from bot.store.schema import metadata, runs
from bot.store.trigger import (
    ArbitrationActions,
    CommandFields,
    QueuedComments,
    QueuedPlans,
    ReviewedPlan,
    RevisionTarget,
    Trigger,
)
from testkit.harness.stores import clock as clock
from testkit.harness.stores import db_url as db_url
from testkit.harness.stores import pg_url as pg_url
from testkit.harness.stores import race
from testkit.harness.stores import store as store

LEASE = 30.0


# -- helpers --------------------------------------------------------------------


def make_spec(**overrides) -> DebateSpec:
    spec = DebateSpec(
        mode="debate",
        title="gRPC or REST?",
        subject="Should we use gRPC or REST for the internal API? — ünïcödé ✓",
        personas=(
            PersonaSpec("pro", "argue for gRPC", "openai/gpt-4o", fallbacks=("anthropic/x",)),
            PersonaSpec("con", "argue for REST", "anthropic/claude"),
        ),
        judge="openai/o3",
        judge_fallbacks=("anthropic/claude",),
        rounds=2,
        response_scale=1.25,
        context_files=(ContextFile("docs/api.md", "# API\n", 6, condensed=True),),
        warnings=("missing @docs/x.md",),
        max_tokens=50_000,
        max_cost_usd=0.75,
        voters=("openai/a", "openai/b"),
        decisions=(Decision(point=1, choice="A", by="octocat"),),
        tiers=(("openai/mini",), ("openai/gpt-4o", "anthropic/claude")),
        available_providers=frozenset({"openai", "anthropic", "ollama"}),
        arbitration=ArbitrationContext(
            concern="possible null deref",
            concern_author="review-bot[bot]",
            concern_author_is_bot=True,
            path="src/a.py",
            diff_hunk="@@ -1 +1 @@\n-a\n+b",
            file_excerpt="b = None",
            pr_title="Fix",
            pr_body="",
            line=None,
        ),
        seed="seed-1",
    )
    return replace(spec, **overrides)


def make_turn(phase="opening", rnd=1, slot="pro", text="hello", **usage) -> Turn:
    return Turn(
        key=TurnKey(phase=phase, round=rnd, slot=slot),
        text=text,
        model="openai/gpt-4o",
        usage=Usage(**usage),
    )


def new_run(
    store: RunStore,
    issue: int = 1,
    repo: str = "octo/repo",
    admission: Admission | None = None,
    **kw,
):
    return store.create_run(NewRun(repo, issue, make_spec(), **kw), admission)


def count_rows(store: RunStore, table: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


# -- spec codec (no database) -----------------------------------------------------


def test_spec_codec_round_trip_is_exact():
    spec = make_spec()
    back = spec_from_json(spec_to_json(spec))
    assert back == spec
    assert isinstance(back.personas, tuple) and isinstance(back.personas[0], PersonaSpec)
    assert isinstance(back.available_providers, frozenset)
    assert isinstance(back.tiers[1], tuple)
    assert isinstance(back.arbitration, ArbitrationContext)
    assert back.arbitration.line is None
    minimal = DebateSpec(mode="critique", title="t", subject="s")
    assert spec_from_json(spec_to_json(minimal)) == minimal


def test_spec_codec_is_deterministic_and_validating():
    a = make_spec(available_providers=frozenset(["b", "a", "c"]))
    b = make_spec(available_providers=frozenset(["c", "b", "a"]))
    assert spec_to_json(a) == spec_to_json(b)
    raw = json.loads(spec_to_json(a))
    assert raw["available_providers"] == ["a", "b", "c"]

    raw["mode"] = "shouting"
    with pytest.raises(CodecError, match="mode"):
        spec_from_json(json.dumps(raw))
    raw["mode"] = "debate"
    raw["rounds"] = "3"
    with pytest.raises(CodecError, match="rounds"):
        spec_from_json(json.dumps(raw))
    del raw["rounds"]  # missing optional field: its default
    raw["field_from_the_future"] = 1  # unknown field: ignored
    assert spec_from_json(json.dumps(raw)).rounds == 3
    del raw["title"]  # missing required field
    with pytest.raises(CodecError, match="title"):
        spec_from_json(json.dumps(raw))
    with pytest.raises(CodecError):
        spec_from_json("{not json")
    with pytest.raises(CodecError):
        spec_to_json(make_spec(max_cost_usd=float("nan")))


# -- engine and migrations --------------------------------------------------------


def test_url_normalization():
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgres://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgresql+psycopg://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("sqlite:///./x.db").drivername == "sqlite"
    with pytest.raises(StoreError, match="unsupported"):
        create_engine("mysql://u:hunter2@h/db")
    with pytest.raises(StoreError) as info:
        normalize_url("::not a url hunter2::")
    assert "hunter2" not in str(info.value)


def test_sqlite_connection_settings(tmp_path):
    store = RunStore.from_url(f"sqlite:///{tmp_path / 'p.db'}")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one() >= 1000
    store.dispose()


def test_a_sqlite_write_waits_out_another_writer_then_reports_an_outage(tmp_path, monkeypatch):
    """Writers begin IMMEDIATE (the write lock up front), readers a deferred BEGIN:
    while another process holds the write lock, reads go on, and a write waits the
    busy timeout, then fails as an outage (waited out by the caller), not a crash."""
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 200)
    path = tmp_path / "locked.db"
    store = RunStore.from_url(f"sqlite:///{path}")
    store.migrate()
    new_run(store, issue=1)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        assert sum(store.counts_by_state().values()) == 1  # a reader is not blocked
        with pytest.raises(StoreUnavailable, match="create_run failed: OperationalError"):
            new_run(store, issue=2)
    finally:
        other.execute("ROLLBACK")
        other.close()
    new_run(store, issue=2)  # the lock released, the same store writes again
    assert sum(store.counts_by_state().values()) == 2
    store.dispose()


def test_migrate_is_idempotent_and_matches_schema(db_url, clock):
    store = RunStore.from_url(db_url, clock=clock)
    cfg = store.alembic_config()
    with store.engine.begin() as conn:  # from scratch, even on the shared PG database
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
    with store.engine.connect() as conn:
        assert set(sa.inspect(conn).get_table_names()) <= {"alembic_version"}

    store.migrate()
    store.migrate()

    head = ScriptDirectory.from_config(cfg).get_current_head()
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        assert ctx.get_current_revision() == head
        assert compare_metadata(ctx, metadata) == []
        indexes = {ix["name"] for ix in sa.inspect(conn).get_indexes("runs")}
    assert "uq_runs_active_issue" in indexes
    store.dispose()


def test_ping(store, tmp_path):
    assert store.ping() is True
    broken = RunStore.from_url(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    assert broken.ping() is False


# -- deliveries -------------------------------------------------------------------


def test_delivery_dedupe(store, clock):
    body = b'{"action": "created", "comment": {"body": "/debate \xc3\xa9"}}'
    results = [store.record_delivery("d-1", "issue_comment", "created", 42, body) for _ in range(3)]
    assert results == [True, False, False]
    assert count_rows(store, "deliveries") == 1
    row = store.get_delivery("d-1")
    assert row is not None
    assert row.payload == body.decode()
    assert (row.event, row.action, row.installation_id) == ("issue_comment", "created", 42)
    assert row.state == "pending" and row.received_at == clock.now
    with pytest.raises(StoreError, match="UTF-8"):
        store.record_delivery("d-2", "issues", None, None, b"\xff\xfe")


def test_failed_delivery_is_taken_again_on_redelivery(store):
    assert store.record_delivery("d-1", "issues", "labeled", 1, "{}")
    claimed = store.claim_delivery("w1", LEASE)
    assert claimed is not None
    store.finish_delivery("d-1", "failed", error_class="GitHubError")
    assert store.claim_delivery("w1", LEASE) is None
    assert store.record_delivery("d-1", "issues", "labeled", 1, "{}") is True
    again = store.claim_delivery("w2", LEASE)
    assert again is not None and again.delivery_id == "d-1"
    assert again.attempts == 2 and again.error_class is None
    store.finish_delivery("d-1", "done")
    assert store.record_delivery("d-1", "issues", "labeled", 1, "{}") is False


def test_claim_delivery_lease_and_expiry(store, clock):
    store.record_delivery("d-1", "issue_comment", "created", 1, "{}")
    clock.advance(1)
    store.record_delivery("d-2", "issue_comment", "created", 1, "{}")

    first = store.claim_delivery("w1", LEASE)
    second = store.claim_delivery("w2", LEASE)
    assert first is not None and first.delivery_id == "d-1"
    assert first.lease_owner == "w1" and first.lease_expires_at == clock.now + timedelta(
        seconds=LEASE
    )
    assert second is not None and second.delivery_id == "d-2"
    assert store.claim_delivery("w3", LEASE) is None

    store.finish_delivery("d-2", "ignored")
    clock.advance(LEASE + 1)  # w1 died holding d-1
    resumed = store.claim_delivery("w3", LEASE)
    assert resumed is not None and resumed.delivery_id == "d-1"
    assert resumed.lease_owner == "w3" and resumed.attempts == 2
    store.finish_delivery("d-1", "done")
    assert store.claim_delivery("w3", LEASE) is None
    done = store.get_delivery("d-1")
    assert done is not None and done.state == "done" and done.lease_owner is None
    assert done.finished_at == clock.now
    assert store.delivery_counts_by_state() == {
        "pending": 0,
        "done": 1,
        "ignored": 1,
        "failed": 0,
    }


def test_prune_deliveries_keeps_pending_and_recent(store, clock):
    for i in range(3):
        store.record_delivery(f"old-{i}", "issues", None, None, "{}")
    store.finish_delivery("old-0", "done")
    store.finish_delivery("old-1", "ignored")  # old-2 stays pending
    clock.advance(86_400)
    store.record_delivery("new", "issues", None, None, "{}")
    store.finish_delivery("new", "done")
    assert store.prune_deliveries(clock.now - timedelta(hours=1)) == 2
    assert store.get_delivery("old-0") is None
    assert store.get_delivery("old-2") is not None
    assert store.get_delivery("new") is not None


# -- runs -------------------------------------------------------------------------


def test_trigger_rows_written_before_the_typed_record_still_load(store):
    """Rows keep the JSON shape the trigger had as a plain dict: unknown keys are
    ignored, missing ones take their defaults, the queue's kind picks its type."""
    run = store.create_run(NewRun(repo="octo/repo", issue_number=8, spec=make_spec()))
    old = {
        "comment_id": 7,
        "review_comment": True,
        "sender": "octocat",
        "delivery": "d-1",
        "arbitration": {"resolve_on_dismissed": True, "label_on_confirmed": None},
        "labels": ["debate:failed"],
        "review": {"path": "p.md", "ref": "abc", "open_pr": True, "target": None},
        "queue": {"kind": "design_review", "delivery": "d-0"},
        "no_longer_written": 1,
    }
    with store.engine.begin() as conn:
        conn.execute(sa.update(runs).where(runs.c.id == run.id).values(trigger=json.dumps(old)))
    got = store.get_run(run.id).trigger
    assert got == Trigger(
        comment_id=7,
        review_comment=True,
        sender="octocat",
        delivery="d-1",
        arbitration=ArbitrationActions(resolve_on_dismissed=True),
        labels=("debate:failed",),
        review=ReviewedPlan("p.md", "abc", open_pr=True),
        queue=QueuedPlans(delivery="d-0"),
    )


def test_create_and_get_run(store, clock):
    spec = make_spec()
    trigger = Trigger(
        comment_id=991,
        sender="octocat",
        labels=("debate",),
        arbitration=ArbitrationActions(label_on_confirmed="bug"),
        review=ReviewedPlan("docs/plan.md", "abc123", target=RevisionTarget("main", "abc123")),
        reviewed={"docs/plan.md": "f00"},
        queue=QueuedComments(pending=(5, 6), command=CommandFields(rounds=2, models=("m",))),
    )
    run = store.create_run(
        NewRun(
            repo="octo/repo",
            issue_number=7,
            is_pr=True,
            spec=spec,
            installation_id=2**40,
            trigger=trigger,
            requested_by="octocat",
            run_id="11111111-2222-3333-4444-555555555555",
        )
    )
    assert run.state == "queued" and run.mode == "debate" and run.active
    assert run.created_at == clock.now and run.created_at.tzinfo is not None
    got = store.get_run(run.id)
    assert got == run
    assert got.debate_spec() == spec
    assert got.trigger == trigger
    assert got.installation_id == 2**40 and got.is_pr is True
    assert store.get_run("nope") is None

    with pytest.raises(StoreError, match="already exists"):
        store.create_run(NewRun(repo="octo/other", issue_number=1, spec=spec, run_id=run.id))


def test_spec_survives_the_database(store):
    spec = make_spec(subject="emoji 🎉 and quotes \"'` and\nnewlines\x00?".replace("\x00", ""))
    run = store.create_run(NewRun(repo="o/r", issue_number=3, spec=spec))
    got = store.get_run(run.id)
    assert got is not None and got.debate_spec() == spec
    # A JSON string spec is validated and mode read from it.
    run2 = store.create_run(NewRun(repo="o/r", issue_number=4, spec=spec_to_json(spec)))
    assert run2.mode == "debate"
    assert run2.debate_spec().seed == "seed-1"  # a given seed is kept...
    run3 = store.create_run(NewRun(repo="o/r", issue_number=6, spec=replace(spec, seed="")))
    assert run3.debate_spec() == replace(spec, seed=run3.id)  # ...an empty one is the run id
    with pytest.raises(CodecError):
        store.create_run(NewRun(repo="o/r", issue_number=5, spec='{"mode": "nope"}'))


def test_one_active_run_per_issue(store, clock):
    first = new_run(store, issue=1)
    clock.advance(1)  # claims are oldest first: make `first` the oldest
    with pytest.raises(ActiveRunExists) as info:
        new_run(store, issue=1)
    assert info.value.run.id == first.id
    assert isinstance(info.value, StoreError)
    assert store.active_run("octo/repo", 1) == first

    other_issue = new_run(store, issue=2)
    other_repo = new_run(store, issue=1, repo="octo/elsewhere")
    assert len({first.id, other_issue.id, other_repo.id}) == 3

    # waiting still holds the issue
    claimed = store.claim_run("w1", LEASE)
    assert claimed is not None and claimed.id == first.id
    assert store.release_run(first.id, "w1", "waiting")
    with pytest.raises(ActiveRunExists):
        new_run(store, issue=1)

    # once finished, the issue is free again
    assert store.requeue(first.id)
    claimed = store.claim_run("w1", LEASE)
    assert claimed is not None and claimed.id == first.id
    assert store.release_run(first.id, "w1", "done", outcome_kind="verdict")
    assert store.active_run("octo/repo", 1) is None
    clock.advance(5)
    second = new_run(store, issue=1)
    assert store.active_run("octo/repo", 1) == second
    assert store.latest_run("octo/repo", 1) == second


def test_active_run_rule_is_enforced_by_the_database(store, clock):
    run = new_run(store, issue=9)
    row = {
        "id": str(uuid.uuid4()),
        "repo": run.repo,
        "issue_number": 9,
        "mode": "debate",
        "state": "running",
        "spec": run.spec,
        "requested_by": "mallory",
        "created_at": clock.now,
        "updated_at": clock.now,
    }
    from bot.store.schema import runs

    with pytest.raises(sa.exc.IntegrityError) as info, store.engine.begin() as conn:
        conn.execute(runs.insert().values(**row))
    message = str(info.value)
    assert "uq_runs_active_issue" in message or "UNIQUE constraint failed: runs.repo" in message
    with store.engine.begin() as conn:  # a finished run on the same issue is fine
        conn.execute(runs.insert().values(**{**row, "state": "failed"}))


def test_concurrent_create_on_one_issue(db_url, clock, store):
    stores = [RunStore.from_url(db_url, clock=clock) for _ in range(2)]
    created, refused = [], []

    def attempt(n: int) -> None:
        try:
            created.append(new_run(stores[n % 2], issue=5).id)
        except ActiveRunExists as exc:
            refused.append(exc.run.id)

    race(6, attempt)
    for s in stores:
        s.dispose()
    assert len(created) == 1 and len(refused) == 5
    assert set(refused) == set(created)


def test_a_deferred_run_is_claimed_again_only_when_its_wait_is_over(store, clock):
    run = new_run(store)
    store.claim_run("w1", LEASE)
    until = clock.now + timedelta(seconds=600)  # well past the lease
    assert store.defer_run(run.id, "w2", until) is False  # not w2's run
    assert store.defer_run(run.id, "w1", until) is True
    held = store.get_run(run.id)
    assert (held.state, held.lease_owner, held.lease_expires_at) == ("running", None, until)
    assert store.run_control(run.id) == (None, False)  # w1 sees it is no longer its own
    assert store.renew_lease(run.id, "w1", LEASE) is False
    clock.advance(LEASE + 1)
    assert store.claim_run("w2", LEASE) is None  # a lapsed lease would be claimed here
    clock.advance(600)
    again = store.claim_run("w2", LEASE)
    assert again is not None and again.id == run.id
    assert (again.attempts, again.handbacks, again.crashes) == (2, 1, 1)


def test_claim_lease_lifecycle(store, clock):
    run = new_run(store)
    mine = store.claim_run("w1", LEASE)
    assert mine is not None and mine.id == run.id
    assert mine.state == "running" and mine.lease_owner == "w1" and mine.attempts == 1
    assert mine.lease_expires_at == clock.now + timedelta(seconds=LEASE)
    assert store.claim_run("w2", LEASE) is None  # held

    clock.advance(LEASE - 1)
    assert store.renew_lease(run.id, "w1", LEASE) is True
    assert store.renew_lease(run.id, "w2", LEASE) is False
    clock.advance(LEASE - 1)
    assert store.claim_run("w2", LEASE) is None  # renewal kept it

    clock.advance(2)  # w1 stopped renewing: the lease is gone
    resumed = store.claim_run("w2", LEASE)
    assert resumed is not None and resumed.id == run.id
    assert resumed.lease_owner == "w2" and resumed.attempts == 2
    assert store.renew_lease(run.id, "w1", LEASE) is False
    assert store.release_run(run.id, "w1", "done") is False

    assert store.release_run(
        run.id, "w2", "done", outcome_kind="verdict", tokens_total=1234, cost_usd=0.5
    )
    final = store.get_run(run.id)
    assert final is not None
    assert (final.state, final.outcome_kind, final.tokens_total, final.cost_usd) == (
        "done",
        "verdict",
        1234,
        0.5,
    )
    assert final.lease_owner is None and final.lease_expires_at is None
    assert store.claim_run("w3", LEASE) is None
    assert store.renew_lease(run.id, "w2", LEASE) is False


def test_release_validation_and_hand_back(store):
    run = new_run(store)
    store.claim_run("w1", LEASE)
    with pytest.raises(StoreError):
        store.release_run(run.id, "w1", "running")
    with pytest.raises(TypeError, match="lease_owner"):
        store.release_run(run.id, "w1", "done", lease_owner="x")
    with pytest.raises(StoreError, match="hand-back"):
        store.release_run(run.id, "w1", "failed", handed_back=True)
    # A drained worker hands it back: counted as a claim, not as a crash.
    assert store.release_run(run.id, "w1", "queued", handed_back=True)
    again = store.claim_run("w2", LEASE)
    assert again is not None and again.id == run.id
    assert (again.attempts, again.handbacks, again.crashes) == (2, 1, 1)
    # Released without hand-back (the old way a lease ends): a crash like any other.
    assert store.release_run(run.id, "w2", "queued")
    third = store.claim_run("w3", LEASE)
    assert third is not None and (third.attempts, third.handbacks, third.crashes) == (3, 1, 2)


def test_rolling_restarts_never_poison_a_run(store):
    # Ten drains in a row (ten rolling deploys during one long debate).
    run = new_run(store)
    for n in range(10):
        claimed = store.claim_run(f"w{n}", LEASE)
        assert claimed is not None and claimed.crashes == 1
        assert store.release_run(run.id, f"w{n}", "queued", handed_back=True)
    final = store.claim_run("last", LEASE)
    assert final is not None and (final.attempts, final.crashes) == (11, 1)


def test_a_handed_back_delivery_is_not_an_attempt(store):
    store.record_deliveries([NewDelivery("d-1", "issue_comment", "created", 1, "{}")])
    first = store.claim_delivery("w1", LEASE)
    assert first is not None and first.attempts == 1
    assert store.finish_delivery("d-1", "pending")
    again = store.claim_delivery("w2", LEASE)
    assert again is not None and again.attempts == 1


def test_claims_are_oldest_first(store, clock):
    ids = []
    for issue in (3, 1, 2):
        ids.append(new_run(store, issue=issue).id)
        clock.advance(1)
    claimed = [store.claim_run("w", LEASE) for _ in range(4)]
    assert [r.id for r in claimed[:3] if r] == ids
    assert claimed[3] is None


def test_run_control_reads_the_lease_and_the_cancel_flag(store):
    run = new_run(store)
    assert store.run_control(run.id) == (None, False)
    store.claim_run("w1", LEASE)
    assert store.run_control(run.id) == ("w1", False)
    store.request_cancel(run.id)
    assert store.run_control(run.id) == ("w1", True)
    assert store.run_control("no-such-run") is None
    # A saved turn brings the same two columns back with it.
    assert store.save_turn(run.id, make_turn("opening", 1, "pro", "x")).control == ("w1", True)


def test_claims_in_batches_oldest_first(store, clock):
    ids = []
    for issue in range(5):
        ids.append(new_run(store, issue=issue).id)
        clock.advance(1)
    first = store.claim_runs("w1", LEASE, 3)
    assert [r.id for r in first] == ids[:3]
    assert all(r.lease_owner == "w1" and r.attempts == 1 for r in first)
    rest = store.claim_runs("w2", LEASE, 3)
    assert [r.id for r in rest] == ids[3:]
    assert store.claim_runs("w3", LEASE, 3) == []


def test_racing_batch_claims_take_each_run_once(db_url, clock, store):
    ids = {new_run(store, issue=i).id for i in range(60)}
    stores = [RunStore.from_url(db_url, clock=clock) for _ in range(2)]
    claims: list[str] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        while batch := stores[n % 2].claim_runs(f"w{n}", LEASE, 4):
            assert len(batch) <= 4
            with lock:
                claims.extend(r.id for r in batch)

    race(6, worker)
    for s in stores:
        s.dispose()
    assert sorted(claims) == sorted(ids)


def test_racing_workers_claim_each_run_once(db_url, clock, store):
    ids = {new_run(store, issue=i).id for i in range(40)}
    stores = [RunStore.from_url(db_url, clock=clock) for _ in range(2)]
    claims: list[tuple[str, str]] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        while (run := stores[n % 2].claim_run(f"w{n}", LEASE)) is not None:
            with lock:
                claims.append((run.id, run.lease_owner or ""))

    race(6, worker)
    for s in stores:
        s.dispose()
    claimed_ids = [run_id for run_id, _ in claims]
    assert len(claimed_ids) == len(ids)
    assert set(claimed_ids) == ids
    for run_id, owner in claims:  # the database agrees with who got what
        row = store.get_run(run_id)
        assert row is not None and row.lease_owner == owner and row.attempts == 1


def test_cancel_flag(store):
    running = new_run(store, issue=1)
    store.claim_run("w1", LEASE)
    flagged = store.request_cancel(running.id)
    assert flagged is not None and flagged.cancel_requested and flagged.state == "running"
    assert store.renew_lease(running.id, "w1", LEASE)  # the worker notices at its next step
    got = store.get_run(running.id)
    assert got is not None and got.cancel_requested
    assert store.release_run(running.id, "w1", "cancelled")
    assert store.request_cancel(running.id) is None  # no longer active

    waiting = new_run(store, issue=2)
    store.claim_run("w1", LEASE)
    store.release_run(waiting.id, "w1", "waiting", outcome_kind="pending_decision")
    flagged = store.request_cancel(waiting.id)
    assert flagged is not None and flagged.state == "queued" and flagged.cancel_requested
    reclaimed = store.claim_run("w2", LEASE)
    assert reclaimed is not None and reclaimed.id == waiting.id and reclaimed.cancel_requested

    queued = new_run(store, issue=3)
    assert store.get_run(queued.id).cancel_requested is False
    assert store.request_cancel("no-such-run") is None


def test_decide_updates_spec_and_requeues(store):
    run = new_run(store)
    store.claim_run("w1", LEASE)
    assert store.requeue(run.id) is False  # running, not waiting
    store.release_run(run.id, "w1", "waiting", outcome_kind="pending_decision")
    decided = make_spec(decisions=(*make_spec().decisions, Decision(2, "both", "maint")))
    assert store.update_spec(run.id, decided)
    assert store.requeue(run.id)
    again = store.claim_run("w2", LEASE)
    assert again is not None and again.debate_spec() == decided

    store.release_run(run.id, "w2", "done")
    assert store.update_spec(run.id, make_spec()) is False  # finished runs are frozen

    other = new_run(store, issue=2)
    store.claim_run("w1", LEASE)
    store.release_run(other.id, "w1", "waiting")
    assert store.requeue(other.id, spec=decided)  # spec and state in one step
    assert store.get_run(other.id).debate_spec() == decided


def test_quota_counts(store, clock):
    start = clock.now
    new_run(store, issue=1, requested_by="alice")
    clock.advance(3600)
    new_run(store, issue=2, requested_by="bob")
    new_run(store, issue=3, requested_by="alice")
    new_run(store, issue=1, repo="octo/other", requested_by="alice")
    day_ago = clock.now - timedelta(days=1)
    assert store.quota_counts("octo/repo", day_ago, "alice") == (3, 2)
    assert store.quota_counts("octo/repo", day_ago, "bob") == (3, 1)
    assert store.quota_counts("octo/repo", day_ago, "carol") == (3, 0)
    assert store.quota_counts("octo/other", day_ago, "alice") == (1, 1)
    assert store.quota_counts("octo/repo", start + timedelta(minutes=1), "alice") == (2, 1)
    assert store.quota_counts("octo/repo", clock.now + timedelta(seconds=1), "alice") == (0, 0)
    # a non-UTC aware timestamp means the same instant
    plus2 = timezone(timedelta(hours=2))
    assert store.quota_counts("octo/repo", clock.now.astimezone(plus2), "bob") == (2, 1)


def test_create_run_counts_the_quota_as_it_queues(store, clock):
    quota = Quota(clock.now - timedelta(days=1), per_repo=3, per_user=2)
    new_run(store, issue=1, requested_by="alice", admission=Limits(quota))
    new_run(store, issue=2, requested_by="alice", admission=Limits(quota))
    with pytest.raises(QuotaSpent) as user:
        new_run(store, issue=3, requested_by="alice", admission=Limits(quota))
    assert user.value.scope == "user" and "You have reached" in user.value.public
    new_run(store, issue=3, requested_by="bob", admission=Limits(quota))
    with pytest.raises(QuotaSpent) as repo:
        new_run(store, issue=4, requested_by="carol", admission=Limits(quota))
    assert repo.value.scope == "repo" and "This repository" in repo.value.public
    assert store.active_run("octo/repo", 4) is None  # nothing was queued
    new_run(store, issue=4, requested_by="carol")  # no quota given: none counted
    later = Quota(clock.now + timedelta(seconds=1), per_repo=3, per_user=2)
    new_run(store, issue=1, repo="octo/other", requested_by="alice", admission=Limits(later))


def test_concurrent_creates_never_pass_the_quota(db_url, clock, store):
    """Eight commands at once on eight issues of one repository with room for
    three: exactly three are queued, whichever of two processes they reach."""
    stores = [RunStore.from_url(db_url, clock=clock) for _ in range(2)]
    quota = Quota(clock.now - timedelta(days=1), per_repo=3, per_user=10)
    created, refused = [], []

    def attempt(n: int) -> None:
        try:
            created.append(
                new_run(stores[n % 2], issue=n, requested_by="alice", admission=Limits(quota)).id
            )
        except QuotaSpent as exc:
            refused.append(exc.scope)

    race(8, attempt)
    for s in stores:
        s.dispose()
    assert len(created) == 3 and refused == ["repo"] * 5


def test_counts_by_state(store, clock):
    a = new_run(store, issue=0)
    clock.advance(1)
    b = new_run(store, issue=1)
    clock.advance(1)
    new_run(store, issue=2)
    store.claim_run("w", LEASE)
    store.release_run(a.id, "w", "failed", error_class="ModelError")
    store.claim_run("w", LEASE)
    counts = store.counts_by_state()
    assert counts == {
        "queued": 1,
        "running": 1,
        "waiting": 0,
        "done": 0,
        "failed": 1,
        "cancelled": 0,
        "aborted": 0,
    }
    assert store.get_run(a.id).error_class == "ModelError"
    assert store.get_run(b.id).state == "running"


# -- turns ------------------------------------------------------------------------


def test_turns_are_idempotent_and_ordered(store):
    run = new_run(store)
    saved = [
        make_turn("frame", 0, "judge", "frame", input_tokens=10, output_tokens=5),
        make_turn(
            "opening",
            1,
            "pro",
            "pro says",
            input_tokens=100,
            output_tokens=50,
            cached_tokens=80,
            latency_ms=1200,
            cost_usd=0.0125,
        ),
        replace(
            make_turn("opening", 1, "con", "con says", input_tokens=100, output_tokens=40),
            truncated=True,
        ),
        Turn(
            key=TurnKey("rebuttal", 1, "con", tier=1),
            text="",
            model="anthropic/claude",
            status="dropped",
            drop_class="rate_limited",
        ),
    ]
    for turn in saved:
        assert store.save_turn(run.id, turn).new is True
    # A retry after a crash writes the same key again: the first write wins.
    assert store.save_turn(run.id, replace(saved[1], text="different")).new is False
    assert store.save_turn(run.id, saved[2]).new is False
    # Each save reads the run's lease owner and cancel flag too (the driver's check).
    assert store.save_turn(run.id, saved[0]).control == store.run_control(run.id)

    assert store.load_turns(run.id) == saved
    assert count_rows(store, "turns") == 4
    totals = store.get_run(run.id)
    assert totals.tokens_total == 15 + 150 + 140
    assert totals.cost_usd == pytest.approx(0.0125)
    assert store.load_turns("other-run") == []
    with pytest.raises(RunNotFound):
        store.save_turn("no-such-run", saved[0])


def test_concurrent_turn_saves_keep_every_turn(db_url, clock, store):
    run = new_run(store)
    stores = [RunStore.from_url(db_url, clock=clock) for _ in range(2)]
    turns = [make_turn("opening", 1, f"p{i}", f"t{i}", output_tokens=1) for i in range(24)]

    def save(n: int) -> None:
        for turn in turns[n::4]:
            stores[n % 2].save_turn(run.id, turn)

    race(4, save)
    for s in stores:
        s.dispose()
    loaded = store.load_turns(run.id)
    assert sorted(t.key.slot for t in loaded) == sorted(t.key.slot for t in turns)
    assert store.get_run(run.id).tokens_total == 24


# -- comments ---------------------------------------------------------------------


def test_comment_records(store, clock):
    a = new_run(store, issue=1)
    b = new_run(store, issue=2)
    assert store.comment_id(a.id, "round-1") is None
    store.record_comment(a.id, "round-1", 1001, "issue", "aa" * 32)
    store.record_comment(a.id, "final", 2**40, "review", "bb" * 32)
    assert store.comment_id(a.id, "round-1") == CommentRecord(1001, "issue", "aa" * 32)
    assert store.comment_id(a.id, "final") == (2**40, "review", "bb" * 32)
    assert store.comment_id(b.id, "round-1") is None
    assert store.run_comments(a.id) == {
        "round-1": CommentRecord(1001, "issue", "aa" * 32),
        "final": CommentRecord(2**40, "review", "bb" * 32),
    }
    assert store.run_comments(b.id) == {}

    clock.advance(10)
    store.record_comment(a.id, "round-1", 1002, "issue", "cc" * 32)  # re-posted: updated
    assert store.comment_id(a.id, "round-1") == (1002, "issue", "cc" * 32)
    assert count_rows(store, "comments") == 2
    with pytest.raises(StoreError):
        store.record_comment(a.id, "x", 1, "gist", "00")
    with pytest.raises(StoreError):
        store.record_comment("no-such-run", "x", 1, "issue", "00")  # foreign key


def test_clock_must_be_aware(db_url):
    store = RunStore.from_url(db_url, clock=lambda: datetime(2025, 1, 1))
    with pytest.raises(StoreError, match="aware"):
        store.record_delivery("d", "issues", None, None, "{}")
    store.dispose()


def test_record_deliveries_group_commit(store):
    first = store.record_deliveries(
        [
            NewDelivery("g-1", "issue_comment", "created", 1, "{}"),
            NewDelivery("g-2", "issues", "labeled", 1, b"{}"),
            NewDelivery("g-1", "issue_comment", "created", 1, "{}"),  # twice in one batch
        ]
    )
    assert first == [True, True, False]
    claimed = store.claim_delivery("w", LEASE)
    assert claimed is not None and claimed.delivery_id == "g-1"
    store.finish_delivery("g-1", "failed", "github_error")
    # A redelivery of a failed one is retried; a known good one is a duplicate.
    again = store.record_deliveries(
        [
            NewDelivery("g-1", "issue_comment", "created", 1, "{}"),
            NewDelivery("g-2", "issues", "labeled", 1, "{}"),
            NewDelivery("g-3", "issues", "labeled", 1, "{}"),
        ]
    )
    assert again == [True, False, True]
    assert store.get_delivery("g-1").state == "pending"
