"""`debate-bot eval` against a real provider reference (openai/…) pointed at the
loopback fake model server: killed half way and run again, it asks no model
for anything it already has; a spending cap stops it cleanly."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.engine.rehearsal import reply as rehearsal_reply
from testkit.fakes.model_server import FakeModelServer

N_CASES = 8
CONFIGS = [
    "-c",
    "one=single:openai/gpt-4.1-mini",
    "-c",
    "three=vote:3:openai/gpt-4.1-nano",  # not the single's model: every request is distinct
    "-c",
    "deb=debate:openai/gpt-4.1-mini;rounds=2",
]
# single 1 + vote 3 + debate (2 openings, 2 rebuttals, 1 synthesis) per case
REQUESTS_PER_CASE = 1 + 3 + 5


def responder(prompt: str) -> str:
    if "\nTASK: answer\n" in prompt:
        return "VERDICT: CONFIRMED\nREASON: the fake model always agrees."
    return rehearsal_reply(prompt)


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer(
        latency_s=0.1, openai_api_key=secrets.token_hex(8), responder=responder
    ) as s:
        yield s


def write_cases(tmp_path: Path) -> Path:
    path = tmp_path / "cases.jsonl"
    rows = [
        {
            "id": f"c-{i}",
            "kind": "arbitrate",
            "comment": f"`item_{i}` can be None when the cache is cold.",
            "path": "app/cache.py",
            "line": 2,
            "diff_hunk": f"@@ -1,1 +1,2 @@\n+return item_{i}.value",
            "files": {"app/cache.py": f"item_{i} = lookup()\nreturn item_{i}.value\n"},
            "expected": "CONFIRMED" if i % 2 else "DISMISSED",
        }
        for i in range(N_CASES)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def env_for(server: FakeModelServer) -> dict[str, str]:
    env = dict(os.environ)
    env["OPENAI_BASE_URL"] = server.openai_base_url
    env["OPENAI_API_KEY"] = server.openai_api_key or ""
    return env


def eval_argv(cases: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bot", "eval", str(cases), *CONFIGS, "--out", str(out), *extra]


def stored_turns(out: Path) -> int:
    with sqlite3.connect(out / "cache.sqlite") as db:
        return int(db.execute("SELECT count(*) FROM turns").fetchone()[0])


def asked(server: FakeModelServer) -> set[tuple[str | None, str]]:
    """Each model call as (model, prompt): distinct per turn of the eval, and the
    same again when a turn is asked again (a provider's retry counts once)."""
    return {(r.model, r.prompt_text) for r in server.requests}


def test_killed_half_way_the_rerun_repeats_no_model_request(
    tmp_path: Path, server: FakeModelServer
) -> None:
    cases, out = write_cases(tmp_path), tmp_path / "out"
    total = N_CASES * REQUESTS_PER_CASE
    proc = subprocess.Popen(
        eval_argv(cases, out, "--concurrency", "2"),
        env=env_for(server),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    # Past the single answers and the votes, into the debates (several batches each).
    while len(server.requests) < 45 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, "the eval finished before it could be killed"
    first = asked(server)
    kept = stored_turns(out)
    assert 0 < kept < total
    # At most the calls in flight at the kill (two cases, up to three calls each)
    # were asked and never stored.
    assert 0 <= len(first) - kept <= 6

    server.reset()
    done = subprocess.run(
        eval_argv(cases, out, "--concurrency", "2"),
        env=env_for(server),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    second = asked(server)
    # Nothing stored is asked again: the rerun asks exactly for what is missing,
    # and the only calls asked twice are those lost in flight at the kill.
    assert len(second) == total - kept
    assert len(first & second) == len(first) - kept
    assert len(first | second) == total
    assert stored_turns(out) == total
    report = json.loads((out / "report.json").read_text())
    assert len(report["cases"]) == N_CASES * 3
    single = next(c for c in report["configs"] if c["name"] == "one")
    assert single["n"] == N_CASES and single["accuracy"] == 0.5  # always CONFIRMED
    assert single["cost_usd"] > 0  # priced from the fake's reported usage

    # A third run is served from the cache entirely.
    server.reset()
    again = subprocess.run(
        eval_argv(cases, out), env=env_for(server), capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0, again.stderr
    assert server.requests == []
    assert f"{N_CASES * 3} from the cache" in " ".join(again.stderr.split())


def test_a_spending_cap_stops_cleanly_and_the_report_says_so(
    tmp_path: Path, server: FakeModelServer
) -> None:
    cases, out = write_cases(tmp_path), tmp_path / "out"
    done = subprocess.run(
        eval_argv(cases, out, "--concurrency", "1", "--budget-usd", "0.0015"),
        env=env_for(server),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    calls = len(asked(server))
    assert 0 < calls < N_CASES * REQUESTS_PER_CASE
    # One case at a time: every case began under the cap, and the last one crossed it.
    with sqlite3.connect(out / "cache.sqlite") as db:
        rows = db.execute("SELECT job, turn FROM turns ORDER BY rowid").fetchall()
    by_job: dict[str, float] = {}
    for job, turn in rows:
        by_job[job] = by_job.get(job, 0.0) + json.loads(turn)["usage"]["cost_usd"]
    costs = list(by_job.values())
    assert sum(costs[:-1]) < 0.0015 <= sum(costs)
    assert len(rows) == calls
    text = (out / "report.md").read_text()
    assert "Stopped at the budget" in text
    assert "the budget was reached" in " ".join(done.stderr.split())
