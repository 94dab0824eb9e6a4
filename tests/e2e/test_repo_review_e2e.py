"""`/debate review` of the whole repository or a folder, over HTTP against the fakes."""

from __future__ import annotations

from typing import Any

from testkit.harness.scenarios import bot_markers, command, delivery_states, finished, runs
from testkit.harness.service import INSTALLATION, REPO, Harness

FILES: dict[str, str | bytes] = {
    "README.md": "# Shop\n\nA shop with orders and payments services. Boundaries matter.\n",
    "docs/adr/0001-queue.md": "# Use a queue between orders and payments\n\nAccepted.\n",
    "pyproject.toml": '[project]\nname = "shop"\n',
    "src/orders/service.py": '"""Orders: owns the order lifecycle; talks to payments."""\n'
    + "x = 1\n" * 400,
    "src/payments/api.py": '"""Payments API: charges cards, idempotent by key."""\n',
    "node_modules/left-pad/index.js": "module.exports = VENDORED_MARKER;\n",
    "package-lock.json": '{"lockfileVersion": 3, "VENDORED_MARKER": 1}\n',
    "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary",
    "tools/release.md": "# Releasing\n",  # sorts last: cut from a truncated tree
}


def seed_repository(h: Harness) -> None:
    for path, content in FILES.items():
        h.github.put_file(REPO, path, content)


def review_command(h: Harness, number: int, text: str) -> dict[str, Any]:
    payload, _ = command(h, number, text)
    payload["repository"]["default_branch"] = "main"  # the fake repository's branch
    return payload


def verdict(h: Harness, number: int) -> str:
    [body] = [
        c["body"]
        for c in h.github.comments(REPO, number)
        if c["body"].startswith("<!-- debate-bot:verdict")
    ]
    return str(body)


def prompts(h: Harness) -> str:
    return "\n".join(r.prompt_text for r in h.models.requests)


def test_repository_review_reads_the_brief_and_ranks_findings(harness: Harness) -> None:
    h = harness
    seed_repository(h)
    h.start()
    number = h.github.add_issue(REPO, title="Design review", body="", user="Codertocat")
    payload = review_command(h, number, "/debate review --rounds 1")
    h.post("issue_comment", payload)
    h.wait_for(lambda: finished(h), timeout=60, what="the review to finish")

    [(_, state, kind)] = runs(h)
    assert (state, kind) == ("done", "critique")
    sent = prompts(h)
    assert "Design review of the repository" in sent
    assert "src/" in sent and "README.md" in sent  # the tree outline
    assert "Boundaries matter." in sent  # the README's text
    assert "Use a queue between orders and payments" in sent  # a decision record
    assert "owns the order lifecycle" in sent  # a source file's opening docstring
    assert "VENDORED_MARKER" not in sent  # vendored code and lockfiles are never read
    assert "node_modules/" in sent  # ... but listed as left out
    body = verdict(h, number)
    assert (
        "## Design review of the repository" in body
        and "### Findings" in body
        and "(`README.md`)" in body
    )
    assert "left out:" in body  # the audit repeats what the brief left out
    contents = h.github.count("GET", "/repos/{owner}/{repo}/contents/{path}")
    trees = h.github.count("GET", "/repos/{owner}/{repo}/git/trees/{tree_sha}")
    assert trees == 1 and 0 < contents <= 25
    # The files come from the run's snapshot: one archive, not a request per file.
    assert h.github.count("GET", "/repos/{owner}/{repo}/tarball/{ref}") == 1


def test_folder_review_truncated_tree_and_missing_folder(harness: Harness) -> None:
    h = harness
    seed_repository(h)
    h.github.tree_limit = 16  # GitHub cuts the answer after src/: the review says so
    h.start()
    number = h.github.add_issue(REPO, title="Payments design", body="", user="Codertocat")
    payload = review_command(h, number, "/debate review src/payments/ --rounds 1")
    h.post("issue_comment", payload)
    h.wait_for(lambda: finished(h), timeout=60, what="the folder review")
    sent = prompts(h)
    assert "Design review of the folder `src/payments/`" in sent
    assert "idempotent by key" in sent
    assert "owns the order lifecycle" not in sent  # outside the folder
    assert "truncated" in verdict(h, number)

    missing = review_command(h, number, "/debate review nope/")
    h.post("issue_comment", missing, delivery_id="missing-folder")
    h.wait_for(lambda: delivery_states(h).get("missing-folder") == "done", what="the reply")
    assert len(runs(h)) == 1  # no run for a folder that is not there
    replies = [c["body"] for c in h.github.comments(REPO, number)]
    assert any("`nope/` does not exist at `main`" in b for b in replies)


def test_an_empty_repository_gets_one_reply_and_no_run(harness: Harness) -> None:
    h = harness
    h.github.add_repo("Codertocat/empty", installation_id=INSTALLATION)
    h.start()
    number = h.github.add_issue(REPO, title="Design review", body="", user="Codertocat")
    payload = review_command(h, number, "/debate review")
    h.post("issue_comment", payload, delivery_id="empty-check")
    # REPO has no files either: the fake answers 409 "Git Repository is empty."
    h.wait_for(lambda: delivery_states(h).get("empty-check") == "done", what="the reply")
    assert runs(h) == []
    assert len(bot_markers(h, number)) == 1
    assert any("empty" in c["body"] for c in h.github.comments(REPO, number))


def test_a_repository_nothing_was_pushed_to_is_empty_not_a_failure(harness: Harness) -> None:
    """Before the first push GitHub answers 409 "Git Repository is empty." for the
    branch itself: the reply says so, and does not offer a retry that cannot work."""
    h = harness
    h.start()
    number = h.github.add_issue(REPO, title="Design review", body="", user="Codertocat")
    h.github.make_empty(REPO)
    payload = review_command(h, number, "/debate review")
    h.post("issue_comment", payload, delivery_id="never-pushed")
    h.wait_for(lambda: delivery_states(h).get("never-pushed") == "done", what="the reply")
    assert runs(h) == []
    [reply] = [c["body"] for c in h.github.comments(REPO, number) if c["body"].startswith("<!--")]
    assert "The repository is empty at `main`; there is nothing to review." in reply
    for retry in ("try again", "github_error", "409", "could not do that"):
        assert retry not in reply, reply


def test_file_issues_twice_files_each_finding_once(harness: Harness) -> None:
    h = harness
    seed_repository(h)
    h.start()
    number = h.github.add_issue(REPO, title="Design review", body="", user="Codertocat")
    for i in (1, 2):
        payload = review_command(h, number, "/debate review --rounds 1 --file-issues")
        h.post("issue_comment", payload, delivery_id=f"review-{i}")

        def reviewed(n: int = i) -> bool:
            return len(runs(h)) == n and finished(h)

        h.wait_for(reviewed, timeout=60, what=f"review {i}")
    filed = [i for i in h.github.issues(REPO) if "debate:finding" in i["labels"]]
    assert filed, "the review filed no finding"
    assert len({i["title"] for i in filed}) == len(filed)  # the second review filed nothing new
    for issue in filed:
        assert f"#{number}" in issue["body"]  # linked to the review ...
    statuses = [
        c["body"]
        for c in h.github.comments(REPO, number)
        if c["body"].startswith("<!-- debate-bot:status")
    ]
    assert statuses and all(f"#{filed[0]['number']}" in s for s in statuses)  # ... and back
