"""`debate-bot replay`: the real CLI signs a payload file and posts it to a real
`debate-bot serve`, which treats it exactly like a delivery from GitHub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from testkit.harness.service import (
    CORPUS,
    INSTALLATION,
    REPO,
    SECRET,
    Harness,
    delivery,
    free_port,
    run_rows,
)


def replay(*args: str, secret: str | None = SECRET) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if secret is not None:
        env["DEBATE_BOT_WEBHOOK_SECRET"] = secret
    return subprocess.run(
        [sys.executable, "-m", "bot", "replay", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_replayed_command_is_debated(harness: Harness, tmp_path: Path) -> None:
    service = harness.start()
    number = harness.github.add_issue(
        REPO, title="Should we use gRPC or REST?", body="A public API.", user="Codertocat"
    )
    comment_id = harness.github.add_comment(REPO, number, "/debate --rounds 1", user="Codertocat")
    payload = delivery(
        "issue_comment.created.with-installation",
        **{
            "comment.body": "/debate --rounds 1",
            "comment.id": comment_id,
            "comment.user.login": "Codertocat",
            "issue.number": number,
            "sender.login": "Codertocat",
            "installation.id": INSTALLATION,
        },
    )
    file = tmp_path / "comment.json"
    file.write_text(json.dumps(payload))
    url = service.url + "/api/github/webhooks"

    first = replay(str(file), "--event", "issue_comment", "--url", url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("202 ") and '"queued"' in first.stdout
    harness.wait_for(lambda: run_rows(harness), what="a run from the replayed delivery")
    assert run_rows(harness)[0]["issue_number"] == number

    # Signed with the wrong secret: the service refuses it, the CLI says so.
    refused = replay(str(file), "--event", "issue_comment", "--url", url, secret="not-it")
    assert refused.returncode == 1
    assert refused.stdout.startswith("401 ")


def test_bad_input_exits_2_with_the_reason(tmp_path: Path) -> None:
    good = CORPUS / "ping.json"
    not_json = tmp_path / "x.json"
    not_json.write_text("{nope")
    a_list = tmp_path / "list.json"
    a_list.write_text("[1, 2]")
    cases = [
        ([str(tmp_path / "missing.json"), "--event", "ping"], "no such file"),
        ([str(not_json), "--event", "ping"], "not valid JSON"),
        ([str(a_list), "--event", "ping"], "JSON object"),
        ([str(good), "--event", "issue_coment"], "unknown event 'issue_coment'"),
    ]
    for args, reason in cases:
        result = replay(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert reason in result.stderr
        assert "Traceback" not in result.stderr
    no_secret = replay(str(good), "--event", "ping", secret=None)
    assert no_secret.returncode == 2
    assert "DEBATE_BOT_WEBHOOK_SECRET" in no_secret.stderr


def test_an_unreachable_service_exits_1() -> None:
    url = f"http://127.0.0.1:{free_port()}/api/github/webhooks"
    result = replay(str(CORPUS / "ping.json"), "--event", "ping", "--url", url)
    assert result.returncode == 1
    assert "did not answer" in result.stderr
