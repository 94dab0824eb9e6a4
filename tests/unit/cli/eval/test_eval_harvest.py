"""`debate-bot eval harvest` against the fake GitHub over HTTP: merged PRs only,
bots' threads labelled by what happened next (changed lines → CONFIRMED;
resolved or answered by a maintainer with the lines unchanged → DISMISSED;
else left out and counted), pagination, a token or the app's installation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bot.cli.eval.cases import ArbitrateCase, load_cases
from bot.cli.main import app
from testkit.fakes.github_server import FakeGitHub

REPO = "octo/widgets"
APP_ID = 4242
V1 = "\n".join(f"line {n} = value_{n}" for n in range(1, 13)) + "\n"
V2 = V1.replace("line 3 = value_3", "line 3 = fixed_value_3")
OLD = "2020-01-02T03:04:05Z"


@pytest.fixture
def github(app_keys: tuple[str, str]) -> Iterator[FakeGitHub]:
    _, public = app_keys
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as gh:
        gh.add_repo(REPO, installation_id=7)
        gh.set_license(REPO, "MIT")
        gh.put_file(REPO, "src/app.py", V1.replace("value_", "base_"))
        yield gh


def seed(gh: FakeGitHub) -> dict[str, int]:
    """One merged PR with every kind of thread, a closed unmerged PR, an old merged
    PR, and enough merged PRs without comments to need a second page."""
    ids: dict[str, int] = {}
    n = gh.add_pull(REPO, title="Widgets: faster lookups", body="Speeds up lookups.", head_ref="f1")
    gh.put_file(REPO, "src/app.py", V1, ref="f1")

    def bot(line: int, body: str, user: str = "review-bot[bot]") -> int:
        return gh.add_review_comment(REPO, n, body=body, path="src/app.py", line=line, user=user)

    ids["changed"] = bot(3, "value_3 may be None here.")
    ids["resolved"] = bot(6, "value_6 is never used.")
    ids["maintainer"] = bot(8, "This query is built from user input.")
    ids["silent"] = bot(10, "Possible race on value_10.")
    ids["contributor"] = bot(11, "value_11 shadows a builtin.")
    ids["other_bot"] = bot(12, "Style: rename line 12.", user="lint-bot[bot]")
    ids["human"] = gh.add_review_comment(
        REPO, n, body="Why not a dict?", path="src/app.py", line=5, user="alice", user_type="User"
    )
    gh.resolve_thread(REPO, ids["changed"])  # resolved too, but the lines changed: CONFIRMED
    gh.resolve_thread(REPO, ids["resolved"])
    gh.resolve_thread(REPO, ids["other_bot"])
    reply = gh.add_review_comment(
        REPO, n, body="Constants only: not injectable.", path="src/app.py", line=8,
        in_reply_to=ids["maintainer"], user="maria", user_type="User",
    )  # fmt: skip
    gh.set_author_association(reply, "MEMBER")
    drive_by = gh.add_review_comment(
        REPO, n, body="+1", path="src/app.py", line=11, in_reply_to=ids["contributor"],
        user="visitor", user_type="User",
    )  # fmt: skip
    gh.set_author_association(drive_by, "CONTRIBUTOR")
    gh.put_file(REPO, "src/app.py", V2, ref="f1")  # a later commit changes line 3 only
    gh.merge_pull(REPO, n)
    ids["pr"] = n

    closed = gh.add_pull(REPO, title="Abandoned", head_ref="f2")
    gh.add_review_comment(REPO, closed, body="Bug here.", path="src/app.py", line=1)
    gh.close_pull(REPO, closed)
    old = gh.add_pull(REPO, title="Ancient", head_ref="f3")
    gh.add_review_comment(REPO, old, body="Old concern.", path="src/app.py", line=1)
    gh.merge_pull(REPO, old, merged_at=OLD)
    for i in range(105):  # merged, no comments: the listing takes two pages
        gh.merge_pull(REPO, gh.add_pull(REPO, title=f"Chore {i}", head_ref=f"c{i}"))
    return ids


def harvest(
    gh: FakeGitHub, tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[list[dict[str, object]], str]:
    out = tmp_path / "harvested.yml"
    environment = {"DEBATE_BOT_GITHUB_API_URL": gh.api_url, **(env or {})}
    if env is None:
        environment["GITHUB_TOKEN"] = gh.actions_token(REPO)
    result = CliRunner().invoke(
        app, ["eval", "harvest", REPO, "--out", str(out), *args], env=environment
    )
    assert result.exit_code == 0, result.output
    return yaml.safe_load(out.read_text()), result.output


def test_harvest_labels_threads_by_what_happened_next(github: FakeGitHub, tmp_path: Path) -> None:
    ids = seed(github)
    cases, summary = harvest(github, tmp_path, "--since", "30d")
    by_comment = {int(str(c["id"]).rsplit("/c", 1)[1]): c for c in cases}
    assert set(by_comment) == {ids["changed"], ids["resolved"], ids["maintainer"], ids["other_bot"]}
    changed = by_comment[ids["changed"]]
    assert changed["expected"] == "CONFIRMED" and "changed" in str(changed["note"])
    assert by_comment[ids["resolved"]]["expected"] == "DISMISSED"
    maintainer = by_comment[ids["maintainer"]]
    assert maintainer["expected"] == "DISMISSED" and "maria" in str(maintainer["note"])
    # The file the bot saw (at the comment's commit), its source and licence.
    assert changed["files"] == {"src/app.py": V1}
    assert changed["source"] == {
        "url": f"https://github.com/{REPO}/pull/{ids['pr']}#discussion_r{ids['changed']}",
        "commit": changed["source"]["commit"],  # type: ignore[index]
        "license": "MIT",
    }
    assert all(c["label_source"] == "heuristic" for c in cases)
    # Silent and drive-by-answered threads are ambiguous: left out, counted.
    line = " ".join(summary.split())
    assert "harvested 4 case(s) from 106 merged PR(s): 1 CONFIRMED, 3 DISMISSED" in line
    assert "2 ambiguous left out (2 lines unchanged, thread neither resolved" in line
    # The listing followed the Link header to its second page.
    pages = [r for r in github.requests if r.path.endswith(f"/repos/{REPO}/pulls")]
    assert len(pages) == 2
    # What it wrote is a valid case file, ready for `debate-bot eval`.
    loaded = load_cases([tmp_path / "harvested.yml"])
    assert len(loaded) == 4 and all(isinstance(c.case, ArbitrateCase) for c in loaded)


def test_harvest_bots_filter_and_the_app_installation(
    github: FakeGitHub, tmp_path: Path, app_keys: tuple[str, str]
) -> None:
    ids = seed(github)
    private, _ = app_keys
    env = {"DEBATE_BOT_APP_ID": str(APP_ID), "DEBATE_BOT_PRIVATE_KEY": private}
    cases, _ = harvest(github, tmp_path, "--bots", "review-bot", env=env)
    got = {int(str(c["id"]).rsplit("/c", 1)[1]) for c in cases}
    assert got == {ids["changed"], ids["resolved"], ids["maintainer"]}
    assert any(r.path.endswith(f"/repos/{REPO}/installation") for r in github.requests)


def test_harvest_errors_are_one_line(github: FakeGitHub, tmp_path: Path) -> None:
    token = github.actions_token(REPO)
    result = CliRunner().invoke(
        app,
        ["eval", "harvest", "octo/missing"],
        env={"DEBATE_BOT_GITHUB_API_URL": github.api_url, "GITHUB_TOKEN": token},
    )
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "GitHub answered 404" in lines[0] and token not in lines[0]
    # Nothing merged in the window: an empty, valid case file.
    cases, summary = harvest(github, tmp_path, "--since", "1d")
    assert cases == [] and "harvested 0 case(s) from 0 merged PR(s)" in summary
