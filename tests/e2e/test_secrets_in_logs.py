"""No secret reaches the service's log or a GitHub comment, across a debate, a
usage error, a revoked installation token and a model refusing its key."""

from __future__ import annotations

import re
import secrets

from testkit.harness.scenarios import bot_markers, command, finished, runs, seed_issue
from testkit.harness.service import INSTALLATION, REPO, SECRET, Harness

PEM_LINE = re.compile(r"^[A-Za-z0-9+/=]{16,}$")


def pem_body_lines(pem: str) -> list[str]:
    """The base64 lines of the key: each one alone would be a leak."""
    return [line for line in pem.strip().splitlines() if PEM_LINE.match(line)]


def published_text(h: Harness) -> str:
    """Everything the bot can have written to GitHub: comments, issues it filed."""
    parts: list[str] = []
    for issue in h.github.issues(REPO):
        parts += [issue["title"], issue["body"] or ""]
        parts += [c["body"] for c in h.github.comments(REPO, issue["number"])]
    return "\n".join(parts)


def leaks(haystacks: dict[str, str], known: dict[str, list[str]]) -> list[str]:
    return [
        f"{what} in {where}"
        for where, text in haystacks.items()
        for what, values in known.items()
        if any(v and v in text for v in values)
    ]


def test_no_secret_reaches_the_log_or_a_comment(harness: Harness) -> None:
    h = harness
    openai_key = "sk-proj-" + secrets.token_hex(24)
    anthropic_key = "sk-ant-api03-" + secrets.token_hex(24)
    h.models.openai_api_key = openai_key  # the fake checks the keys it is sent
    h.models.anthropic_api_key = anthropic_key
    h.start(
        OPENAI_API_KEY=openai_key,
        ANTHROPIC_API_KEY=anthropic_key,
        DEBATE_BOT_LOG_LEVEL="DEBUG",
    )

    # A debate, then a command that cannot be parsed.
    debated = seed_issue(h, title="Tabs or spaces?")
    h.post("issue_comment", command(h, debated, "/debate --rounds 1")[0])
    h.wait_for(lambda: finished(h), what="the debate")
    confused = seed_issue(h, title="Usage")
    h.post("issue_comment", command(h, confused, "/debate --rounds banana")[0])
    h.wait_for(lambda: bot_markers(h, confused), what="the usage reply")

    # The installation token revoked, and one model refusing the key it is sent.
    h.github.revoke_tokens(INSTALLATION)
    # The fake OpenAI echoes a refused key in its error message, unmasked.
    h.models.openai_api_key = "sk-proj-" + secrets.token_hex(24)
    third = seed_issue(h, title="Monorepo?")
    h.post("issue_comment", command(h, third, "/debate --rounds 1")[0])
    h.wait_for(lambda: len(runs(h)) == 2 and finished(h), what="the debate with a failing model")
    assert h.github.count(status=401) >= 1  # the revoked token was really refused
    assert any(r.status == 401 for r in h.models.requests)  # the model really failed
    h.stop()  # flushes the log

    jwts = [c for c in h.github.received_credentials if c.count(".") == 2]
    assert jwts and h.github.issued_tokens  # the secrets below were really in use
    known = {
        "the private key": pem_body_lines(h.env["DEBATE_BOT_PRIVATE_KEY"]),
        "an app JWT": jwts,
        "an installation token": h.github.issued_tokens,
        "the webhook secret": [SECRET],
        "a model API key": [openai_key, anthropic_key],
    }
    assert len(known["the private key"]) > 10
    log = (h.tmp / "service.log").read_text()
    assert '"run.released"' in log and '"turn.done"' in log  # the log is the real one
    assert leaks({"the service log": log, "GitHub": published_text(h)}, known) == []
