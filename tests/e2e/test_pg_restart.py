"""PostgreSQL restarted under running debates (`web` + `worker`): the runs resume
from their stored turns, nothing is lost and no comment is posted twice.

The shared server at DEBATE_BOT_TEST_PG_URL is never restarted (other tests use
it): this test runs its own throwaway server (initdb + pg_ctl on a free port) and
restarts that. It skips where the PostgreSQL binaries are missing, or where it
runs as root without a `postgres` user to run the server as."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store import RunStore
from testkit.harness.scenarios import (
    bot_markers,
    command,
    never_converge,
    posted_rounds,
    seed_issue,
)
from testkit.harness.service import Harness, Service, free_port


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for root in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (root / name).exists():
            return str(root / name)
    return None


class PrivatePostgres:
    def __init__(self, data: Path, port: int, user: str | None) -> None:
        self.data, self.port, self.user = data, port, user
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def ctl(self, *args: str) -> None:
        pg_ctl = _pg_bin("pg_ctl")
        assert pg_ctl is not None
        opts = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1"
        cmd = [pg_ctl, "-D", str(self.data / "db"), "-o", opts, "-w", "-m", "fast", *args]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    initdb = _pg_bin("initdb")
    if initdb is None or _pg_bin("pg_ctl") is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl)")
    user: str | None = None
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root without a postgres user to run a server as")
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser")
        user = "postgres"
    # Not under pytest's tmp_path: its parents are private to root.
    root = Path(tempfile.mkdtemp(prefix="debate-bot-pg-"))
    try:
        if user is not None:
            info = pwd.getpwnam(user)
            os.chown(root, info.pw_uid, info.pw_gid)
        cmd = [initdb, "-D", str(root / "db"), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        if user is not None:
            cmd = ["runuser", "-u", user, "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        pg = PrivatePostgres(root, free_port(), user)
        pg.ctl("-l", str(root / "server.log"), "start")
        try:
            yield pg
        finally:
            pg.ctl("stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_runs_survive_a_postgres_restart(harness: Harness, private_pg: PrivatePostgres) -> None:
    h = harness
    h.models.latency_s = 0.5
    h.models.responder = never_converge
    env = {**h.env, "DEBATE_BOT_DATABASE_URL": private_pg.url}
    migrate = subprocess.run(
        [sys.executable, "-m", "bot", "migrate"], env=env, capture_output=True, text=True
    )
    assert migrate.returncode == 0, migrate.stderr
    h.service = Service(env, h.tmp / "web.log").start("web")
    worker = Service(env, h.tmp / "worker.log").start("worker")
    store = RunStore.from_url(private_pg.url)
    try:
        issues = [seed_issue(h, title=f"Question {i}: Kafka or NATS?") for i in range(3)]
        for number in issues:
            payload, _ = command(h, number, "/debate --rounds 3")
            assert h.post("issue_comment", payload).json()["status"] == "queued"
        h.wait_for(
            lambda: any("round=1" in m for n in issues for m in bot_markers(h, n)),
            timeout=60,
            what="a first round posted",
        )
        assert store.counts_by_state().get("running", 0) > 0  # restarted under live runs
        private_pg.ctl("-l", str(private_pg.data / "server.log"), "restart")

        def all_done() -> bool:
            try:
                return store.counts_by_state().get("done", 0) == len(issues)
            except Exception:  # the store is reconnecting
                return False

        h.wait_for(all_done, timeout=120, what="every run done after the restart")
        assert worker.proc is not None and worker.proc.poll() is None, "the worker died"
        for number in issues:
            markers = bot_markers(h, number)
            assert len(markers) == len(set(markers)), f"duplicate comments: {markers}"
            assert posted_rounds(h, number) == [1, 2, 3]
            assert sum("debate-bot:verdict" in m for m in markers) == 1
        counts = store.delivery_counts_by_state()
        assert counts["done"] == sum(counts.values()) == len(issues), counts
    finally:
        worker.stop()
        store.dispose()
