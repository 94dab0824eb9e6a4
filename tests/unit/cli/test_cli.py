"""`debate-bot run` end to end: the real CLI against the loopback fake model server."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from testkit.fakes.model_server import FakeModelServer, Fault
from testkit.harness.cli import repo as repo
from testkit.harness.cli import server as server

PLAN_BODY = """\
# Migrate session storage to Redis

We plan to move user sessions from the PostgreSQL table to a Redis cluster to cut
login latency. The migration runs in three phases: dual-write for one week, then
read from Redis with a fallback to PostgreSQL, then drop the table. Rollback is a
config flag. The current code is in @docs/small.md and the runbook in @docs/big.md;
the old design note @docs/missing.md is referenced too.

## Dual write

Both stores receive every session write for a week while we compare reads.

## Cut over

Reads go to Redis with a PostgreSQL fallback, then the table is dropped.
"""

PERSONAS = """\
personas:
  - name: Feasibility
    perspective: Is this realistic to build and run?
    model: openai/gpt-feasible
  - name: Security
    perspective: What can go wrong, and who can abuse it?
    model: anthropic/claude-secure
"""

SMALL = "def load(session_id):\n    return redis.get(session_id)\n"
SMALL_LINE = f"- docs/small.md ({len(SMALL.encode())} bytes)\n"
QUESTION = "Should we use gRPC or REST for the internal billing API?\n"


def run(*args: str) -> Result:
    return CliRunner().invoke(app, ["run", *args])


def transcript_of(result: Result) -> str:
    path = Path(result.stdout.strip())
    assert path.is_file(), result.stdout
    return path.read_text(encoding="utf-8")


def write_docs(repo: Path) -> None:
    docs = repo / "docs"
    docs.mkdir()
    (docs / "small.md").write_text(SMALL)
    sections = [
        f"## Section {i}\n\n" + ("filler text about unrelated matters. " * 25) + "\n"
        for i in range(6)
    ]
    sections[3] = "## Redis session rollback\n\nRedis session migration rollback steps.\n\n"
    (docs / "big.md").write_text("".join(sections))


# --- a full critique ----------------------------------------------------------------


def test_critique_with_frontmatter_and_files(repo: Path, server: FakeModelServer) -> None:
    write_docs(repo)
    token = "ghp_" + "A1b2C3d4" * 4 + "Zz9Y"
    (repo / "plan.md").write_text(
        f"---\nrounds: 2\nresponse_scale: 2\ncontext_budget_kb: 1\n{PERSONAS}---\n"
        f"{PLAN_BODY}\nDeploy token for the pilot: {token}\n"
    )
    result = run("plan.md")
    assert result.exit_code == 0, result.output
    out = result.stdout.strip()
    assert re.fullmatch(r"debates/debate-\d{4}-\d{2}-\d{2}-\d{6}\.md", out), out
    text = transcript_of(result)

    for expected in (
        "**Topic:** Migrate session storage to Redis",
        "**Plan:** plan.md",
        "**Rounds:** 2",
        "**Mode:** critique",
        "**Response scale:** 2.0",
        "| Persona A | Feasibility | `openai/gpt-feasible` |",
        "| Persona B | Security | `anthropic/claude-secure` |",
        "| Judge | judge | `openai/judge-model` |",
        "## Context Files",
        SMALL_LINE,
        "`docs/missing.md`: file not found; skipped",
        "## Issue Extraction",
        "## Round 1 — opening",
        "## Round 2 — rebuttal",
        "### Feasibility",
        "### Security",
        "## Synthesis",
        "### Revised plan",
        "## Audit",
    ):
        assert expected in text, expected
    assert re.search(r"\*\*Date:\*\* \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", text)
    assert re.search(r"- docs/big\.md \([\d,]+ bytes\) \[CONDENSED\]", text)
    # Secrets are redacted; @paths are left as written (no mention neutralizing in a file).
    assert token not in text and "[REDACTED:" in text
    assert "@docs/small.md" in text

    # Each persona went to its own vendor; the judge to the default model.
    by_model = {(r.api, r.model) for r in server.requests}
    assert ("openai", "gpt-feasible") in by_model
    assert ("anthropic", "claude-secure") in by_model
    assert ("openai", "judge-model") in by_model
    # The condensed file kept the section relevant to the subject, not the filler.
    prompt = next(r.prompt_text for r in server.requests if r.model == "gpt-feasible")
    assert "Redis session migration rollback steps." in prompt
    assert "Section 5" not in prompt

    # Progress: each turn with persona, phase, round, model, elapsed, status.
    assert re.search(
        r"✓ Feasibility · opening, round 1 · openai/gpt-feasible · \d+\.\ds · ok", result.stderr
    )
    assert re.search(r"✓ Security · rebuttal, round 2 · anthropic/claude-secure", result.stderr)
    assert re.search(r"✓ judge · synthesis · openai/judge-model", result.stderr)
    assert "done: critique" in result.stderr


def test_short_question_is_a_debate(repo: Path, server: FakeModelServer) -> None:
    (repo / "q.md").write_text(QUESTION)
    result = run("q.md")
    assert result.exit_code == 0, result.output
    text = transcript_of(result)
    assert "**Mode:** debate" in text
    assert "## Issue Extraction" not in text
    for section in ("### Settled", "### Flip condition", "### Decisive factor"):
        assert section in text
    assert server.requests and all(r.status == 200 for r in server.requests)


def test_parallel_batches_run_concurrently(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeModelServer(latency_s=0.3) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)  # no key: like Ollama
        (repo / "q.md").write_text(QUESTION)
        result = run("q.md", "--model", "openai/m", "--rounds", "1")
        assert result.exit_code == 0, result.output
        assert fake.max_in_flight == 2


def test_flags_override_frontmatter(repo: Path, server: FakeModelServer) -> None:
    (repo / "plan.md").write_text(f"---\nrounds: 3\n{PERSONAS}---\n{PLAN_BODY}")
    result = run(
        "plan.md",
        "--rounds",
        "1",
        "--mode",
        "debate",
        "--model",
        "openai/override",
        "--judge",
        "anthropic/judge-x",
        "--alternating",
    )
    assert result.exit_code == 0, result.output
    text = transcript_of(result)
    assert "**Rounds:** 1" in text
    assert "**Mode:** debate" in text
    assert "| Persona A | Feasibility | `openai/override` |" in text
    assert "| Judge | judge | `anthropic/judge-x` |" in text
    assert "turn order alternating" in text
    assert {(r.api, r.model) for r in server.requests} == {
        ("openai", "override"),
        ("anthropic", "judge-x"),
    }
    # Alternating: one persona per batch, so nothing ran side by side.
    assert server.max_in_flight == 1
    assert "▸ opening, round 1 — Feasibility (one request)" in result.stderr
    assert "▸ opening, round 1 — Security (one request)" in result.stderr


def test_output_dir_from_frontmatter_is_under_the_repo_root(
    repo: Path, server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_docs(repo)
    sub = repo / "plans"
    sub.mkdir()
    (sub / "plan.md").write_text(f"---\nrounds: 1\noutput_dir: reviews/debates\n---\n{PLAN_BODY}")
    monkeypatch.chdir(sub)  # @docs/… still resolve against the repository root
    result = run("plan.md")
    assert result.exit_code == 0, result.output
    written = Path(result.stdout.strip())
    assert written.parent.resolve() == (repo / "reviews" / "debates").resolve()
    assert SMALL_LINE in written.read_text()

    custom = repo / "elsewhere"
    result = run("plan.md", "--output-dir", str(custom))
    assert result.exit_code == 0, result.output
    assert Path(result.stdout.strip()).parent == custom


def test_default_plan_file(repo: Path, server: FakeModelServer) -> None:
    (repo / ".github").mkdir()
    (repo / ".github" / "debate.md").write_text(QUESTION)
    result = run()
    assert result.exit_code == 0, result.output
    assert "**Plan:** .github/debate.md" in transcript_of(result)


def test_no_plan_file_prints_an_example(repo: Path) -> None:
    result = run()
    assert result.exit_code == 2
    assert ".github/debate.md" in result.stderr
    assert "personas:" in result.stderr and "@path" in result.stderr
    assert result.stdout == ""


# --- dry run --------------------------------------------------------------------------


def test_dry_run_calls_no_model(repo: Path, server: FakeModelServer) -> None:
    write_docs(repo)
    (repo / "plan.md").write_text(f"---\nrounds: 2\n{PERSONAS}---\n{PLAN_BODY}")
    result = run("plan.md", "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("DRY RUN of plan.md")
    assert "no model is called" in out
    assert "Batch 1 · frame — 1 request" in out
    assert "Batch 2 · opening, round 1 — 2 requests in parallel" in out
    assert re.search(r"- Feasibility: openai/gpt-feasible · ~[\d,]+ input tokens", out)
    assert re.search(r"- Security: anthropic/claude-secure · ~[\d,]+ input tokens", out)
    assert "- judge: openai/judge-model" in out
    assert "Simulated with scripted placeholder replies" in out
    assert server.requests == []
    assert not (repo / "debates").exists()


def test_dry_run_without_credentials_names_the_problem(repo: Path) -> None:
    (repo / "q.md").write_text(QUESTION)
    result = run("q.md", "--dry-run", "--model", "anthropic/claude-x")
    assert result.exit_code == 0, result.output
    assert "ANTHROPIC_API_KEY" in result.stdout
    assert "a real run would stop here" in result.stdout


# --- errors: exit 2, one clear line, no traceback -----------------------------------------


def _plan(text: str | bytes) -> Path:
    path = Path("plan.md")
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("content", "args", "expected"),
    [
        (
            QUESTION,
            (),
            [
                "DEBATE_BOT_DEFAULT_MODEL",
                "--model",
                "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
                "--model scripted/rehearsal",
            ],
        ),
        (QUESTION, ("--model", "anthropic/claude-x"), ["'anthropic'", "ANTHROPIC_API_KEY"]),
        (QUESTION, ("--model", "openai/gpt-x"), ["'openai'", "OPENAI_API_KEY"]),
        (QUESTION, ("--model", "nope/x"), ["unknown model provider 'nope'"]),
        (QUESTION, ("--model", "gpt-4o"), ["must look like provider/model"]),
        (QUESTION, ("--mode", "verdict"), ["--mode must be one of"]),
        ("---\nrounds: 2\n  bad: : x\n---\n" + QUESTION, (), ["plan.md", "YAML error at line 3"]),
        ("---\nrounds: many\n---\n" + QUESTION, (), ["plan.md", "rounds", "integer"]),
        ("---\nresponse_scale: [1]\n---\n" + QUESTION, (), ["response_scale"]),
        ("---\nrounds: 2\n" + QUESTION, (), ["never closed"]),
        (
            "---\npersonas:\n  - name: A\n  - name: B\n  - name: C\n---\n" + QUESTION,
            (),
            ["exactly 2 personas, got 3"],
        ),
        (
            "---\npersonas:\n  - name: A\n---\n" + QUESTION,
            ("--mode", "proposal"),
            ["2 or more personas, got 1"],
        ),
        ("", (), ["plan.md", "empty"]),
        ("\n  \n", (), ["empty"]),
        ("---\nrounds: 2\n---\n\n", (), ["empty"]),
        (b"%PDF-1.4\x00\x01\x02binary", (), ["plan.md", "binary"]),
        (b"\xff\xfe\xfa not utf-8", (), ["binary"]),
        (b"x" * (1024 * 1024 + 1), (), ["1 MiB"]),
        ("---\noutput_dir: ../../tmp\n---\n" + QUESTION, (), ["output_dir", "inside"]),
    ],
)
def test_errors_exit_2(
    repo: Path, content: str | bytes, args: tuple[str, ...], expected: list[str]
) -> None:
    _plan(content)
    needs_model = "DEBATE_BOT_DEFAULT_MODEL" not in expected[0] and "--model" not in args
    extra = ("--model", "scripted/rehearsal") if needs_model else ()
    result = run("plan.md", *args, *extra)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: "), result.stderr
    for part in expected:
        assert part in result.stderr, (part, result.stderr)
    assert "Traceback" not in result.output
    assert result.stdout == ""
    assert not (repo / "debates").exists()


def test_missing_file_and_directory(repo: Path) -> None:
    result = run("nothere.md", "--model", "scripted/rehearsal")
    assert result.exit_code == 2
    assert "error: nothere.md: file not found" in result.stderr
    (repo / "adir").mkdir()
    result = run("adir", "--model", "scripted/rehearsal")
    assert result.exit_code == 2
    assert "adir: is a directory" in result.stderr


def test_reference_leaving_the_root_is_refused(repo: Path, server: FakeModelServer) -> None:
    (repo.parent / "outside-secret.md").write_text("not yours")
    _plan(f"{PLAN_BODY}\nAlso see @../outside-secret.md please.\n")
    result = run("plan.md")
    assert result.exit_code == 2, result.output
    assert "`../outside-secret.md`: the path leaves the repository root" in result.stderr
    assert "refused" in result.stderr
    assert server.requests == []


def test_symlink_leaving_the_root_is_refused(repo: Path, server: FakeModelServer) -> None:
    (repo.parent / "outside-secret.md").write_text("not yours")
    (repo / "docs").mkdir()
    (repo / "docs" / "link.md").symlink_to(repo.parent / "outside-secret.md")
    _plan(f"{PLAN_BODY}\nAlso see @docs/link.md please.\n")
    result = run("plan.md")
    assert result.exit_code == 2, result.output
    assert "symbolic link" in result.stderr
    assert server.requests == []


@pytest.mark.parametrize("dangling", [False, True])
def test_output_dir_through_a_symlink_out_of_the_repo_is_refused(
    repo: Path,
    server: FakeModelServer,
    tmp_path_factory: pytest.TempPathFactory,
    dangling: bool,
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    target = outside / "not-yet" if dangling else outside
    (repo / "docs").symlink_to(target, target_is_directory=True)
    _plan(f"---\noutput_dir: docs/debates\n---\n{QUESTION}")
    result = run("plan.md", "--model", "scripted/rehearsal")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: plan.md: output_dir 'docs/debates' leads outside")
    assert "--output-dir" in result.stderr
    assert result.stdout == ""
    assert list(outside.iterdir()) == []
    assert server.requests == []


def test_output_dir_through_a_symlink_inside_the_repo_is_allowed(
    repo: Path, server: FakeModelServer
) -> None:
    (repo / "real").mkdir()
    (repo / "docs").symlink_to(repo / "real", target_is_directory=True)
    _plan(f"---\nrounds: 1\noutput_dir: docs/debates\n---\n{QUESTION}")
    result = run("plan.md", "--model", "scripted/rehearsal")
    assert result.exit_code == 0, result.output
    written = Path(result.stdout.strip())
    assert written.parent == (repo / "real" / "debates").resolve()
    assert written.is_file()


def test_binary_reference_is_a_warning(repo: Path, server: FakeModelServer) -> None:
    write_docs(repo)
    (repo / "docs" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    _plan(PLAN_BODY.replace("@docs/big.md", "@docs/logo.png"))
    result = run("plan.md", "--rounds", "1")
    assert result.exit_code == 0, result.output
    text = transcript_of(result)
    assert "`docs/logo.png`: binary file (not UTF-8 text); skipped" in text
    assert SMALL_LINE in text


# --- model failures ------------------------------------------------------------------------


def test_rate_limit_then_success_still_finishes(repo: Path, server: FakeModelServer) -> None:
    server.add_faults(Fault.rate_limited("0"), Fault.server_error(503, retry_after="0"))
    (repo / "q.md").write_text(QUESTION)
    result = run("q.md")
    assert result.exit_code == 0, result.output
    statuses = [r.status for r in server.requests]
    assert statuses.count(429) == 1 and statuses.count(503) == 1
    text = transcript_of(result)
    assert "- **Drops:** none" in text
    assert "dropped" not in result.stderr


def test_persona_failing_entirely_aborts_a_two_persona_debate(
    repo: Path, server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEBATE_BOT_MODEL_MAX_RETRIES", "1")
    monkeypatch.setenv("DEBATE_BOT_LOG_LEVEL", "WARNING")  # logs go to stderr, redacted
    server.add_faults(*[Fault.server_error(500, retry_after="0")] * 10, model="claude-secure")
    (repo / "q.md").write_text(f"---\n{PERSONAS}---\n{QUESTION}")
    result = run("q.md")
    assert result.exit_code == 1, result.output
    assert re.search(
        r"✗ Security · opening, round 1 · anthropic/claude-secure · \d+\.\ds · "
        r"dropped: provider_error",
        result.stderr,
    )
    assert "dropped: Security (provider_error) in opening, round 1" in result.stderr
    assert "aborted (quorum_lost)" in result.stderr
    assert "model call failed" in result.stderr
    assert os.environ["ANTHROPIC_API_KEY"] not in result.output
    assert len(result.stdout.splitlines()) == 1
    text = transcript_of(result)  # the transcript is written all the same
    assert "Debate aborted" in text and "quorum_lost" in text
    assert "_Dropped: provider_error._" in text


def test_dropped_persona_in_a_three_way_proposal(repo: Path, server: FakeModelServer) -> None:
    personas = (
        "personas:\n"
        "  - {name: Ada, perspective: Ship it, model: openai/ada}\n"
        "  - {name: Bo, perspective: Make it robust, model: anthropic/bo}\n"
        "  - {name: Cy, perspective: Cost first, model: scripted/fail-timeout}\n"
    )
    (repo / "plan.md").write_text(f"---\nrounds: 2\n{personas}---\n{PLAN_BODY}")
    result = run("plan.md", "--mode", "proposal")
    assert result.exit_code == 0, result.output
    assert "✗ Cy · opening, round 1 · scripted/fail-timeout" in result.stderr
    assert "dropped: Cy (timeout)" in result.stderr
    text = transcript_of(result)
    assert "**Mode:** proposal" in text
    assert "_Dropped: timeout._" in text
    assert {r.model for r in server.requests} >= {"ada", "bo"}


def test_scripted_rehearsal_needs_no_keys(repo: Path) -> None:
    (repo / "plan.md").write_text(PLAN_BODY)
    result = run("plan.md", "--model", "scripted/rehearsal", "--rounds", "2")
    assert result.exit_code == 0, result.output
    text = transcript_of(result)
    assert "(scripted rehearsal)" in text
    assert "| Judge | judge | `scripted/rehearsal` |" in text


def test_long_plan_is_truncated_with_a_warning(repo: Path) -> None:
    section = "## Part\n\n" + "The rollout needs a careful review of every step. " * 40 + "\n\n"
    (repo / "plan.md").write_text("# Big plan\n\n" + section * 20)  # ~40 KB, under 1 MiB
    result = run("plan.md", "--model", "scripted/rehearsal", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "Warning: the plan was longer than the subject limit and was truncated" in result.stdout


def test_version_names_the_installed_package() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"debate-bot {version('debate-bot')}"


# --- like the bot: the checkout's .github/debate.yml, a plan on standard input ------------


def _repo_config(repo: Path, text: str) -> None:
    (repo / ".github").mkdir(exist_ok=True)
    (repo / ".github" / "debate.yml").write_text(text)


def test_the_checkouts_repo_config_is_honoured(repo: Path) -> None:
    _repo_config(
        repo,
        "rounds: 1\nturn_order: alternating\njudge: scripted/rehearsal\n"
        "personas:\n  - name: Ledger\n    perspective: cost\n  - name: Pilot\n"
        "    perspective: speed\nmodels: [scripted/rehearsal]\n",
    )
    (repo / "q.md").write_text(QUESTION)
    result = run("q.md", "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "rounds: up to 1 · turn order: alternating" in out
    assert "Personas: Ledger (default model), Pilot (default model)" in out
    assert "- judge: scripted/rehearsal" in out


def test_flags_and_frontmatter_win_over_the_repo_config(repo: Path) -> None:
    _repo_config(repo, "rounds: 1\njudge: scripted/rehearsal\n")
    (repo / "q.md").write_text("---\nrounds: 2\n---\n" + QUESTION)
    result = run("q.md", "--dry-run", "--model", "scripted/rehearsal")
    assert "rounds: up to 2" in result.stdout, result.output
    result = run("q.md", "--dry-run", "--model", "scripted/rehearsal", "--rounds", "3")
    assert "rounds: up to 3" in result.stdout, result.output


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("rounds: many\n", ["debate.yml", "rounds", "integer"]),
        ("rounds: 2\n  bad: : x\n", ["debate.yml", "YAML error at line 2"]),
        ("round: 2\n", ["debate.yml", "round", "Extra inputs"]),
    ],
)
def test_an_invalid_repo_config_is_one_line_and_exit_2(
    repo: Path, config: str, expected: list[str]
) -> None:
    _repo_config(repo, config)
    (repo / "q.md").write_text(QUESTION)
    for result in (
        run("q.md", "--model", "scripted/rehearsal"),
        CliRunner().invoke(app, ["review", str(repo), "--model", "scripted/rehearsal"]),
    ):
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: .github/debate.yml: "), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        for part in expected:
            assert part in result.stderr, (part, result.stderr)
        assert "Traceback" not in result.output
        assert not (repo / "debates").exists()


def test_a_plan_on_standard_input(repo: Path) -> None:
    (repo / "docs").mkdir()
    (repo / "docs" / "small.md").write_text(SMALL)
    plan = "# Cache the sessions?\n\nShould we cache sessions in Redis? See @docs/small.md\n"
    result = CliRunner().invoke(
        app, ["run", "-", "--model", "scripted/rehearsal", "--rounds", "1"], input=plan
    )
    assert result.exit_code == 0, result.output
    text = transcript_of(result)
    assert "**Plan:** <stdin>" in text and "Cache the sessions?" in text
    assert "docs/small.md" in text  # @path resolves against the current checkout


@pytest.mark.parametrize(
    ("data", "expected"), [(b"", "standard input is empty"), (b"\x00\x01", "binary")]
)
def test_a_bad_plan_on_standard_input_is_exit_2(repo: Path, data: bytes, expected: str) -> None:
    result = CliRunner().invoke(app, ["run", "-", "--model", "scripted/rehearsal"], input=data)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: <stdin>: ") and expected in result.stderr
