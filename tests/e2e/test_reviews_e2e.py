"""Design reviews end to end: `/debate review <path>`, `--open-pr`, and automatic
reviews of the plans a labelled PR changes — `debate-bot serve` as a subprocess,
real HTTP to the fake GitHub and the fake model server."""

from __future__ import annotations

from typing import Any

from bot.engine.revision import changed_lines, strip_marks
from bot.service.features.reviews.handlers import matches
from testkit.harness.service import INSTALLATION, REPO, Harness, all_finished, delivery
from testkit.harness.service import run_rows as runs

HUMAN = "Codertocat"
OTHER_REPO = "Codertocat/Read-Only"
OTHER_INSTALLATION = 2

PLAN = """---
rounds: 1
context_budget_kb: 4
---
# Session tokens

## Tokens
We issue opaque session tokens stored server side. The API contract is @docs/api.md,
the threat model is @docs/threats.md and the old notes were in @docs/gone.md.

## Rollout
Ship behind a flag to ten percent of users, then everyone after a week.
"""

THREATS = "".join(
    f"## Threat {n}\n"
    + (
        "Session tokens leak through logs; rotate session tokens on privilege change.\n"
        if n % 5 == 0
        else "Unrelated physical-security scenario about badge readers and doors.\n"
    )
    * 12
    for n in range(1, 41)
)


def bot_comments(h: Harness, number: int, repo: str = REPO) -> list[str]:
    return [c["body"] for c in h.github.comments(repo, number) if c["body"].startswith("<!--")]


def command(
    h: Harness,
    number: int,
    text: str,
    *,
    repo: str = REPO,
    installation: int = INSTALLATION,
    is_pr: bool = False,
) -> dict[str, Any]:
    cid = h.github.add_comment(repo, number, text, user=HUMAN)
    fields: dict[str, Any] = {
        "comment.body": text,
        "comment.id": cid,
        "comment.user.login": HUMAN,
        "issue.number": number,
        "issue.title": h.github.issue(repo, number)["title"],
        "issue.body": h.github.issue(repo, number)["body"],
        "repository.full_name": repo,
        "repository.name": repo.split("/")[1],
        "repository.default_branch": "main",
        "sender.login": HUMAN,
        "installation.id": installation,
    }
    if is_pr:
        fields["issue.pull_request"] = {"url": f"https://api.github.com/repos/{repo}/pulls/1"}
    return delivery("issue_comment.created.with-installation", **fields)


def verdict(h: Harness, number: int, repo: str = REPO) -> str:
    [body] = [b for b in bot_comments(h, number, repo) if "debate-bot:verdict" in b]
    return body


def test_review_embeds_files_reports_missing_and_condensed(harness: Harness) -> None:
    h = harness
    h.github.put_file(REPO, "docs/plans/auth.md", PLAN)
    h.github.put_file(REPO, "docs/api.md", "POST /session returns API-SPEC-MARKER tokens.\n")
    h.github.put_file(REPO, "docs/threats.md", THREATS)
    h.github.put_file(REPO, "docs/bad.md", "---\nrounds: 2\nresponse_scale: : x\n---\n# Bad\n")
    h.github.put_file(REPO, "docs/huge.md", "# Huge\n" + "word " * 220_000)
    h.start()
    good = h.github.add_issue(REPO, title="Review auth", user=HUMAN)
    h.post("issue_comment", command(h, good, "/debate review docs/plans/auth.md"))
    bad = h.github.add_issue(REPO, title="Review bad", user=HUMAN)
    h.post("issue_comment", command(h, bad, "/debate review docs/bad.md"))
    missing = h.github.add_issue(REPO, title="Review missing", user=HUMAN)
    h.post("issue_comment", command(h, missing, "/debate review docs/nope.md"))
    huge = h.github.add_issue(REPO, title="Review huge", user=HUMAN)
    h.post("issue_comment", command(h, huge, "/debate review docs/huge.md"))
    h.wait_for(lambda: all_finished(h, 1), what="the review to finish")
    h.wait_for(
        lambda: all(bot_comments(h, n) for n in (bad, missing, huge)), what="the three replies"
    )
    [run] = runs(h)
    assert (run["issue_number"], run["state"], run["outcome_kind"]) == (good, "done", "critique")
    body = verdict(h, good)
    assert "## Critique: Session tokens" in body and "### Revised plan" in body
    assert "[CHANGED]" in body
    # frontmatter overrides the repo config: one round
    assert "**Rounds run:** 1 (limit 1 per tier)" in body
    assert "`docs/api.md`" in body and "[CONDENSED]" in body.split("`docs/threats.md`")[1]
    assert "`docs/gone.md`: file not found" in body
    assert "`docs/threats.md`: condensed to fit the context budget (4 KB)" in body
    prompts = "\n".join(r.prompt_text for r in h.models.requests)
    assert "API-SPEC-MARKER" in prompts
    assert "rotate session tokens" in prompts and "badge readers" not in prompts
    # one reply each, no run: bad frontmatter names the line, missing and huge say so
    [bad_reply] = bot_comments(h, bad)
    assert "docs/bad.md" in bad_reply and "line 3" in bad_reply
    [missing_reply] = bot_comments(h, missing)
    assert "`docs/nope.md` was not found on the default branch `main`" in missing_reply
    [huge_reply] = bot_comments(h, huge)
    assert "over 1 MiB" in huge_reply
    assert "Traceback" not in bad_reply + missing_reply + huge_reply


def test_open_pr_with_and_without_contents_permission(harness: Harness) -> None:
    h = harness
    plan = "---\nrounds: 1\n---\n# DB plan\n\n## Storage\nHEAD-VERSION: use PostgreSQL.\n"
    h.github.put_file(REPO, "docs/plans/db.md", plan.replace("HEAD", "MAIN"))
    h.github.put_file(REPO, "docs/plans/db.md", plan, ref="plan-update")
    pr = h.github.add_pull(REPO, title="Update the DB plan", head_ref="plan-update", user=HUMAN)
    h.github.add_repo(OTHER_REPO, installation_id=OTHER_INSTALLATION)
    h.github.set_permission(OTHER_REPO, HUMAN, "admin")
    h.github.set_app_permissions(OTHER_INSTALLATION, contents="read")
    h.github.put_file(OTHER_REPO, "docs/plan.md", plan)
    issue = h.github.add_issue(OTHER_REPO, title="Review it", user=HUMAN)
    h.start()
    h.post("issue_comment", command(h, pr, "/debate review docs/plans/db.md --open-pr", is_pr=True))
    h.post(
        "issue_comment",
        command(
            h,
            issue,
            "/debate review docs/plan.md --open-pr",
            repo=OTHER_REPO,
            installation=OTHER_INSTALLATION,
        ),
    )
    h.wait_for(lambda: all_finished(h, 2), what="both reviews")
    h.wait_for(
        lambda: (
            any("debate-bot:status" in b for b in bot_comments(h, pr))
            and any("debate-bot:status" in b for b in bot_comments(h, issue, OTHER_REPO))
        ),
        what="the pull-request status comments",
    )
    assert all(r["state"] == "done" for r in runs(h))
    # With permission: a PR against the reviewed PR's branch, revised plan committed.
    prompts = "\n".join(r.prompt_text for r in h.models.requests)
    assert "HEAD-VERSION" in prompts and "MAIN-VERSION" not in prompts
    [opened] = [i for i in h.github.issues(REPO) if i["number"] not in (pr,)]
    assert opened["is_pr"] and opened["base_ref"] == "plan-update"
    assert opened["head_ref"].startswith("debate-bot/revise-")
    revised = h.github.file(REPO, "docs/plans/db.md", ref=opened["head_ref"])
    assert revised is not None and revised.startswith("---\nrounds: 1\n---\n# DB plan")
    assert "HEAD-VERSION: use PostgreSQL." in revised
    assert "Add a rollback step" in revised and "[CHANGED]" not in revised
    assert "Add a rollback step" in (opened["body"] or "")
    [status] = [b for b in bot_comments(h, pr) if "debate-bot:status" in b]
    assert f"Opened #{opened['number']}" in status
    # Without contents write: the critique is posted, and a clear sentence says why no PR.
    assert "### Revised plan" in verdict(h, issue, OTHER_REPO)
    [refusal] = [b for b in bot_comments(h, issue, OTHER_REPO) if "debate-bot:status" in b]
    assert "Contents: write" in refusal and "Resource not accessible by integration" in refusal
    assert [i["number"] for i in h.github.issues(OTHER_REPO)] == [issue]
    assert h.github.count("POST", "/repos/{owner}/{repo}/git/refs", status=403) == 1


def label_event(h: Harness, pr: int, action: str = "labeled") -> dict[str, Any]:
    return delivery(
        "pull_request.labeled",
        **{
            "action": action,
            "number": pr,
            "label.name": "debate",
            "pull_request.number": pr,
            "pull_request.title": h.github.issue(REPO, pr)["title"],
            "pull_request.body": "",
            "pull_request.labels": [{"name": "debate"}],
            "pull_request.head.sha": h.github.head_sha(REPO, pr),
            "sender.login": HUMAN,
            "installation.id": INSTALLATION,
        },
    )


def test_automatic_reviews_of_changed_plans_one_after_another(harness: Harness) -> None:
    h = harness
    h.github.put_file(
        REPO, ".github/debate.yml", "design_review:\n  paths: ['docs/plans/**/*.md']\n"
    )
    plan = "---\nrounds: 1\n---\n# Plan {}\n\n## Steps\nDo {} in two steps.\n"
    for name in ("a", "b"):
        h.github.put_file(REPO, f"docs/plans/sub/{name}.md", plan.format(name, name), "design")
    h.github.put_file(REPO, "src/x.py", "x = 1\n", "design")
    files = [
        {"filename": "docs/plans/sub/a.md", "sha": "a1"},
        {"filename": "docs/plans/sub/b.md", "sha": "b1"},
        {"filename": "docs/plans/old.md", "sha": "o1", "status": "removed"},
        {"filename": "src/x.py", "sha": "x1"},
    ]
    pr = h.github.add_pull(
        REPO, title="Plans", head_ref="design", labels=["debate"], files=files, user=HUMAN
    )
    h.start()
    h.post("pull_request", label_event(h, pr))
    h.wait_for(lambda: all_finished(h, 2), what="two reviews, one after the other")
    critiques = [b for b in bot_comments(h, pr) if "debate-bot:verdict" in b]
    assert len(critiques) == 2
    assert sum("docs/plans/sub/a.md" in c for c in critiques) == 1
    assert sum("docs/plans/sub/b.md" in c for c in critiques) == 1
    assert all(r["outcome_kind"] == "critique" for r in runs(h))
    # A push that changes only b.md: only b.md is reviewed again.
    h.github.put_file(REPO, "docs/plans/sub/b.md", plan.format("b2", "b2"), "design")
    h.github.set_pull_files(
        REPO, pr, [{**f, "sha": "b2"} if f["filename"].endswith("b.md") else f for f in files]
    )
    h.post("pull_request", label_event(h, pr, action="synchronize"))
    h.wait_for(lambda: all_finished(h, 3), what="the re-review of b.md")
    critiques = [b for b in bot_comments(h, pr) if "debate-bot:verdict" in b]
    assert len(critiques) == 3 and "Plan b2" in critiques[-1]
    assert len(runs(h)) == 3


def test_design_review_globs() -> None:
    patterns = ["docs/plans/**/*.md", "RFC-?.md"]
    assert matches("docs/plans/a.md", patterns)
    assert matches("docs/plans/x/y/a.md", patterns)
    assert matches("RFC-1.md", patterns)
    assert not matches("docs/plans/a.txt", patterns)
    assert not matches("docs/other/a.md", patterns)
    assert not matches("RFC-12.md", patterns)
    assert not matches("sub/RFC-1.md", patterns)
    assert matches("a/b.md", ["**"]) and not matches("a/b.md", ["*"])


def test_revised_plan_marks_are_stripped_for_the_commit() -> None:
    plan = "# Plan\n- [CHANGED] Add a rollback step\nKeep this.\nOwner: Ana [CHANGED]\n"
    assert strip_marks(plan) == "# Plan\n- Add a rollback step\nKeep this.\nOwner: Ana\n"
    assert changed_lines(plan) == ["- Add a rollback step", "Owner: Ana"]


def test_a_cut_off_revision_is_never_committed(harness: Harness) -> None:
    """A synthesis cut off by the output limit reads like a much shorter plan."""
    from bot.engine.rehearsal import reply

    h = harness
    body = " ".join(f"step{i} keeps the service up while we migrate." for i in range(30))
    h.github.put_file(REPO, "docs/plans/long.md", f"---\nrounds: 1\n---\n# Long plan\n\n{body}\n")
    issue = h.github.add_issue(REPO, title="Review the long plan", user=HUMAN)

    def cut_synthesis(prompt: str) -> str:
        if "TASK: synthesis" in prompt:
            return "CRITIQUE REPORT:\n1. Fine.\nREVISED PLAN:\n# Long plan\n[CHANGED] step0 keeps"
        return reply(prompt)

    h.models.responder = cut_synthesis
    h.start()
    h.post("issue_comment", command(h, issue, "/debate review docs/plans/long.md --open-pr"))
    h.wait_for(lambda: all_finished(h, 1), what="the review")
    h.wait_for(
        lambda: any("debate-bot:status" in b for b in bot_comments(h, issue)), what="the status"
    )
    [status] = [b for b in bot_comments(h, issue) if "debate-bot:status" in b]
    assert "less than half as long as the original" in status
    assert h.github.count("POST", "/repos/{owner}/{repo}/pulls") == 0
