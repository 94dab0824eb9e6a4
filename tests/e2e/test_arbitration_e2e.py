"""PR false-positive arbitration end to end: `debate-bot serve` as a subprocess,
real HTTP to the fake GitHub and the fake model server, the corpus's
`pull_request_review_comment.created` delivery with fields replaced."""

from __future__ import annotations

import re
from typing import Any

from bot.engine.rehearsal import reply as rehearse
from bot.service.features.arbitration.handlers import file_excerpt
from testkit.harness.service import INSTALLATION, REPO, Harness, all_finished, delivery
from testkit.harness.service import run_rows as runs

HUMAN = "Codertocat"
VERDICT = re.compile(r"\*\*Arbitration result: (DISMISSED|CONFIRMED|ESCALATED)\.\*\*")
APP_PY = "".join(f"value_{n} = compute({n})\n" for n in range(1, 31))
FALSE_POSITIVE = "FALSE-POSITIVE-SAMPLE"


def seed_pr(h: Harness, title: str = "Add the compute table") -> int:
    h.github.put_file(REPO, "src/app.py", APP_PY, ref="feature")
    return h.github.add_pull(
        REPO,
        title=title,
        body="Precomputes values.",
        head_ref="feature",
        files=[{"filename": "src/app.py", "patch": "@@ -0,0 +1,30 @@\n+value_1 = compute(1)"}],
    )


def bot_comment(h: Harness, pr: int, body: str, line: int | None = 12, **kw: Any) -> int:
    return h.github.add_review_comment(
        REPO,
        pr,
        body=body,
        path="src/app.py",
        line=line,
        diff_hunk="@@ -0,0 +1,30 @@\n+value_12 = compute(12)",
        **kw,
    )


def review_reply(
    h: Harness, pr: int, text: str, in_reply_to: int | None
) -> tuple[dict[str, Any], int]:
    """A human's review comment (a reply in a thread when ``in_reply_to``) and its delivery."""
    cid = h.github.add_review_comment(
        REPO,
        pr,
        body=text,
        path="src/app.py",
        line=12,
        in_reply_to=in_reply_to,
        user=HUMAN,
        user_type="User",
    )
    fields: dict[str, Any] = {
        "comment.id": cid,
        "comment.body": text,
        "comment.in_reply_to_id": in_reply_to,
        "comment.user.login": HUMAN,
        "comment.user.type": "User",
        "comment.path": "src/app.py",
        "comment.line": 12,
        "pull_request.number": pr,
        "pull_request.title": h.github.issue(REPO, pr)["title"],
        "pull_request.body": h.github.issue(REPO, pr)["body"],
        "pull_request.head.sha": h.github.head_sha(REPO, pr),
        "sender.login": HUMAN,
        "sender.type": "User",
        "installation.id": INSTALLATION,
    }
    if in_reply_to is None:
        fields.pop("comment.in_reply_to_id")
    return delivery("pull_request_review_comment.created", **fields), cid


def conversation_command(h: Harness, pr: int, text: str) -> tuple[dict[str, Any], int]:
    cid = h.github.add_comment(REPO, pr, text, user=HUMAN)
    payload = delivery(
        "issue_comment.created.with-installation",
        **{
            "comment.body": text,
            "comment.id": cid,
            "comment.user.login": HUMAN,
            "issue.number": pr,
            "issue.title": h.github.issue(REPO, pr)["title"],
            "issue.body": h.github.issue(REPO, pr)["body"],
            "issue.pull_request": {"url": f"https://api.github.com/repos/{REPO}/pulls/{pr}"},
            "sender.login": HUMAN,
            "installation.id": INSTALLATION,
        },
    )
    return payload, cid


def thread_replies(h: Harness, pr: int, root: int) -> list[dict[str, Any]]:
    return [
        c
        for c in h.github.review_comments(REPO, pr)
        if c.get("in_reply_to_id") == root and c["body"].startswith("<!-- debate-bot:")
    ]


def verdict_of(h: Harness, pr: int, root: int) -> str:
    [v] = [c for c in thread_replies(h, pr, root) if "debate-bot:verdict" in c["body"]]
    found = VERDICT.findall(v["body"])
    assert len(found) == 1, "exactly one verdict line"
    return str(found[0])


def citing(prompt: str) -> str:
    """Rehearsal replies that cite the code, as a verdict must when the debaters
    can read the pinned commit (``arbitration.require_evidence``): line 12 of the
    file under review, quoted, which the run's snapshot of the head verifies."""
    return cite(rehearse(prompt))


def cite(text: str) -> str:
    return f'{text}\nEVIDENCE: src/app.py:L12 "value_12 = compute(12)"'


def dismissing(prompt: str) -> str:
    """Rehearsal replies, with seats swapped when the concern is the marked false positive:
    the seat arguing the concern is real concedes, so the verdict is DISMISSED."""
    text = rehearse(prompt)
    if FALSE_POSITIVE not in prompt:
        return text
    seat = re.search(r"^SEAT: (\d+) of", prompt[-3000:], re.M)
    if seat and seat.group(1) == "1":
        return text.replace("POINT 1: AGREE", "POINT 1: CONCEDE")
    if seat and seat.group(1) == "2":
        return text.replace("POINT 1: CONCEDE", "POINT 1: AGREE")
    return text


def test_thread_reply_arbitrates_the_thread_root(harness: Harness) -> None:
    h = harness
    h.models.responder = citing
    h.start()
    pr = seed_pr(h)
    concern = "Possible unbounded recursion: compute() calls itself for n=12."
    root = bot_comment(h, pr, concern)
    payload, cmd_id = review_reply(h, pr, "/debate arbitrate", in_reply_to=root)
    assert h.post("pull_request_review_comment", payload).status_code == 202
    h.wait_for(lambda: all_finished(h, 1), what="the arbitration to finish")
    [run] = runs(h)
    assert (run["issue_number"], run["state"], run["outcome_kind"]) == (pr, "done", "arbitration")
    # The default rehearsal converges with the "false positive" seat conceding.
    assert verdict_of(h, pr, root) == "CONFIRMED"
    verdict = next(c for c in thread_replies(h, pr, root) if "debate-bot:verdict" in c["body"])
    body = verdict["body"]
    assert concern in body and "(bot)" in body
    # heterogeneous models by default, with full model specs
    assert "`openai/gpt-4.1-mini`" in body and "`anthropic/claude-sonnet-4-5`" in body
    for section in ("### Participants", "### Concern", "### Debate summary", "### Conclusion"):
        assert section in body
    assert "### Audit" in body
    # every bot comment of the run is a reply in that thread; none in the conversation
    markers = [c["body"].split("\n", 1)[0] for c in thread_replies(h, pr, root)]
    assert len(markers) == len(set(markers)) and any("debate-bot:round" in m for m in markers)
    assert not [c for c in h.github.comments(REPO, pr) if c["body"].startswith("<!--")]
    assert {"eyes", "rocket"} <= set(h.github.reactions(REPO, review_comment_id=cmd_id))
    # the debate saw the diff hunk and the file around the line, numbered
    prompts = "\n".join(r.prompt_text for r in h.models.requests)
    assert "12 | value_12 = compute(12)" in prompts and "+value_12 = compute(12)" in prompts
    # options are off by default: no resolution, no label
    assert not h.github.thread_resolved(REPO, root)
    assert h.github.labels(REPO, pr) == ["debate:done"]


def test_top_level_command_and_foreign_url_get_replies_not_runs(harness: Harness) -> None:
    h = harness
    h.start()
    pr = seed_pr(h)
    payload, top = review_reply(h, pr, "/debate arbitrate", in_reply_to=None)
    h.post("pull_request_review_comment", payload)
    url = "https://github.com/someone/else/pull/9#discussion_r123"
    conv, _ = conversation_command(h, pr, f"/debate arbitrate {url}")
    h.post("issue_comment", conv)
    h.wait_for(lambda: thread_replies(h, pr, top), what="the usage reply in the thread")
    [usage] = thread_replies(h, pr, top)
    assert "nothing to arbitrate" in usage["body"]
    h.wait_for(
        lambda: any(c["body"].startswith("<!--") for c in h.github.comments(REPO, pr)),
        what="the mismatch reply",
    )
    [mismatch] = [c for c in h.github.comments(REPO, pr) if c["body"].startswith("<!--")]
    assert "someone/else#9" in mismatch["body"]
    assert runs(h) == []


def test_url_form_and_repo_options_resolve_and_label(harness: Harness) -> None:
    h = harness
    h.github.put_file(
        REPO,
        ".github/debate.yml",
        "arbitration:\n  resolve_on_dismissed: true\n  label_on_confirmed: confirmed-by-debate\n",
    )
    h.models.responder = lambda prompt: cite(dismissing(prompt))
    h.start()
    # A false positive, named by URL in the conversation: DISMISSED, thread resolved.
    pr1 = seed_pr(h, "First")
    fp = bot_comment(h, pr1, f"{FALSE_POSITIVE}: compute() may return None here.")
    url = f"https://github.com/{REPO}/pull/{pr1}#discussion_r{fp}"
    conv, conv_id = conversation_command(h, pr1, f"/debate arbitrate {url}")
    h.post("issue_comment", conv)
    # A real concern on another PR, replied in its thread: CONFIRMED, labelled.
    h.github.put_file(REPO, "src/app.py", APP_PY, ref="second")
    pr2 = h.github.add_pull(REPO, title="Second", head_ref="second")
    real = bot_comment(h, pr2, "compute(12) divides by zero.")
    payload, _ = review_reply(h, pr2, "/debate arbitrate", in_reply_to=real)
    h.post("pull_request_review_comment", payload)
    h.wait_for(lambda: all_finished(h, 2), what="both arbitrations")
    assert verdict_of(h, pr1, fp) == "DISMISSED"
    assert h.github.thread_resolved(REPO, fp)
    assert "confirmed-by-debate" not in h.github.labels(REPO, pr1)
    assert {"eyes", "rocket"} <= set(h.github.reactions(REPO, comment_id=conv_id))
    assert verdict_of(h, pr2, real) == "CONFIRMED"
    assert not h.github.thread_resolved(REPO, real)
    assert "confirmed-by-debate" in h.github.labels(REPO, pr2)


def test_bots_arbitrates_fresh_bot_comments_in_turn_and_reports_stale(harness: Harness) -> None:
    h = harness
    h.start()
    pr = seed_pr(h)
    fresh_a = bot_comment(h, pr, "Shadowed name on line 12.")
    fresh_b = bot_comment(h, pr, "Magic number on line 20.", line=20)
    outdated = bot_comment(h, pr, "Old remark.", line=None, original_line=3)
    changed = bot_comment(h, pr, "Line 5 overflows.", line=5)
    human = h.github.add_review_comment(
        REPO, pr, body="Nit", path="src/app.py", line=7, user="reviewer", user_type="User"
    )
    resolved = bot_comment(h, pr, "Already handled.", line=9)
    h.github.resolve_thread(REPO, resolved)
    # A push that rewrites line 5 after `changed` was made (the others' lines stay).
    h.github.put_file(
        REPO, "src/app.py", APP_PY.replace("compute(5)", "compute_fast(5)"), "feature"
    )
    conv, _ = conversation_command(h, pr, "/debate arbitrate --bots --rounds 1")
    h.post("issue_comment", conv)
    h.wait_for(lambda: all_finished(h, 2), what="two queued arbitrations")
    rs = runs(h)
    assert len(rs) == 2 and all(r["outcome_kind"] == "arbitration" for r in rs)
    # one round each: both seats still hold, so the verdict is escalated, never a default
    assert verdict_of(h, pr, fresh_a) == "ESCALATED"
    assert verdict_of(h, pr, fresh_b) == "ESCALATED"
    for skipped in (outdated, changed, human, resolved):
        assert thread_replies(h, pr, skipped) == []
    [summary] = [c["body"] for c in h.github.comments(REPO, pr) if c["body"].startswith("<!--")]
    assert "2 review-bot comment(s)" in summary
    assert f"discussion_r{outdated}" in summary and "outdated" in summary
    assert f"discussion_r{changed}" in summary and "line 5 changed" in summary
    assert f"discussion_r{resolved}" not in summary.split("stale")[-1]
    # Asked again: both now carry verdicts, the rest is stale or resolved; nothing runs.
    again, _ = conversation_command(h, pr, "/debate arbitrate --bots")
    h.post("issue_comment", again)
    h.wait_for(
        lambda: sum(c["body"].startswith("<!--") for c in h.github.comments(REPO, pr)) == 2,
        what="the second summary",
    )
    last = h.github.comments(REPO, pr)[-1]["body"]
    assert "No unresolved review-bot comment needs arbitration" in last
    assert len(runs(h)) == 2


def test_bots_queue_stays_within_the_daily_quota(harness: Harness) -> None:
    h = harness
    h.github.put_file(REPO, ".github/debate.yml", "quotas: {per_user_per_day: 2}\n")
    h.start()
    pr = seed_pr(h)
    comments = [bot_comment(h, pr, f"Concern {i}.", line=12 + i) for i in range(3)]
    conv, _ = conversation_command(h, pr, "/debate arbitrate --bots --rounds 1")
    h.post("issue_comment", conv)
    h.wait_for(lambda: all_finished(h, 2), what="two queued arbitrations")
    [summary] = [c["body"] for c in h.github.comments(REPO, pr) if c["body"].startswith("<!--")]
    assert "2 review-bot comment(s)" in summary and "1 more are left" in summary
    assert len(runs(h)) == 2
    assert thread_replies(h, pr, comments[2]) == []
    assert not any("reached your daily" in c["body"] for c in h.github.comments(REPO, pr))


def test_file_excerpt_is_centred_numbered_and_bounded() -> None:
    text = "".join(f"line {n} " + "x" * 300 + "\n" for n in range(1, 201))
    out = file_excerpt(text, 100)
    assert len(out.encode()) <= 8 * 1024 + 200  # the excerpt, plus two omission notes
    assert "100 | line 100 " in out
    assert out.startswith("[… lines 1–") and out.rstrip().endswith("–200 omitted]")
    small = file_excerpt("a\nb\nc\n", 2)
    assert small == "1 | a\n2 | b\n3 | c"
    assert file_excerpt("a\nb\n", None).startswith("1 | a")
    assert file_excerpt("", 3) == "(empty file)"
