"""Case files and configurations for `debate-bot eval`: what loads, and every
mistake refused with file, line and reason (one CLI line, exit 2) before any
model is called."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.eval.cases import ArbitrateCase, QuestionCase, load_cases
from bot.cli.eval.configs import parse_config
from bot.cli.main import app
from bot.core.errors import ConfigError

GOOD = """\
- id: retry-1
  kind: arbitrate
  comment: "MAX_RETRIES is never set, so this loop can spin forever."
  path: src/handler.py
  line: 2
  diff_hunk: "@@ -1,1 +1,2 @@\\n+for _ in range(MAX_RETRIES):"
  files:
    src/handler.py: "from limits import MAX_RETRIES\\nfor _ in range(MAX_RETRIES):\\n    pass\\n"
    src/limits.py: "MAX_RETRIES = 3\\n"
  expected: dismissed
  source: {url: "https://example.org/x", commit: abc, license: MIT}
- id: q-7
  kind: question
  question: "Which sorting algorithm is stable?"
  choices: [quicksort, mergesort, heapsort]
  expected: mergesort
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_good_yaml_file_and_a_folder_load(tmp_path: Path) -> None:
    write(tmp_path, "a.yml", GOOD)
    write(
        tmp_path,
        "b.jsonl",
        '{"id": "q-8", "kind": "question", "question": "2+2?", "expected": "4"}\n',
    )
    write(tmp_path, "README.md", "not a case file")
    cases = load_cases([tmp_path])
    assert [c.id for c in cases] == ["retry-1", "q-7", "q-8"]
    first = cases[0].case
    assert isinstance(first, ArbitrateCase) and first.expected == "DISMISSED"
    assert cases[0].head_text is not None and cases[0].head_text.startswith("from limits")
    assert isinstance(cases[1].case, QuestionCase)
    assert cases[0].where.endswith("a.yml:1") and cases[1].where.endswith("a.yml:12")
    # The fingerprint follows the content: the cache never serves an edited case.
    (tmp_path / "x").mkdir()
    edited = load_cases([write(tmp_path / "x", "c.yml", GOOD.replace("forever", "ever"))])
    assert edited[0].fingerprint() != cases[0].fingerprint()
    assert edited[1].fingerprint() == cases[1].fingerprint()
    noted = load_cases(
        [write(tmp_path / "x", "d.yml", GOOD.replace("license: MIT", "license: BSD"))]
    )
    assert noted[0].fingerprint() == cases[0].fingerprint()  # the source is no model input


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        (GOOD.replace("  expected: dismissed\n", "  expected: maybe\n"), ":10", "expected"),
        (GOOD.replace("  path: src/handler.py\n", ""), ":1", "path"),
        (GOOD.replace("  line: 2\n", "  line: 2\n  colour: red\n"), ":6", "colour"),
        (GOOD.replace("  kind: question\n", "  kind: quiz\n"), ":13", "kind must be"),
        (
            GOOD.replace("expected: mergesort", "expected: bubblesort"),
            ":12",
            "not one of the choices",
        ),
        (GOOD.replace("- id: q-7", "- id: retry-1"), ":12", "repeats (first at"),
        (GOOD.replace("    src/handler.py: ", "    src/other.py: "), ":1", "no entry for path"),
        (GOOD.replace('  comment: "MAX', '  comment: ["MAX'), ":4", "YAML error"),
        ("id: x\nkind: question\n", ":1", "a YAML list"),
        (GOOD + "- just a string\n", ":17", "a case is a mapping"),
    ],
)
def test_malformed_yaml_names_file_line_and_reason(
    tmp_path: Path, text: str, where: str, reason: str
) -> None:
    path = write(tmp_path, "cases.yml", text)
    with pytest.raises(ConfigError) as err:
        load_cases([path])
    message = str(err.value)
    assert message.startswith(f"{path}{where}"), message
    assert reason in message
    assert "\n" not in message


def test_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    good = '{"id": "q-1", "kind": "question", "question": "2+2?", "expected": "4"}'
    path = write(tmp_path, "c.jsonl", f"{good}\n\n{{not json\n")
    with pytest.raises(ConfigError, match=r"c\.jsonl:3: not valid JSON"):
        load_cases([path])
    path = write(tmp_path, "d.jsonl", good + "\n" + good.replace('"4"', "4") + "\n")
    with pytest.raises(ConfigError, match=r"d\.jsonl:2 \(case 'q-1'\): expected"):
        load_cases([path])


def test_cases_read_from_a_local_repository_at_a_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q")
    (repo / "m.py").write_text("x = 1\ny = x + 1\n")
    git("add", "m.py")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "one")
    sha = git("rev-parse", "HEAD")
    case = (
        "- id: r-1\n  kind: arbitrate\n  comment: c\n  path: m.py\n  repo: repo\n"
        f"  commit: {sha}\n  expected: CONFIRMED\n"
    )
    (loaded,) = load_cases([write(tmp_path, "r.yml", case)])
    assert loaded.head_text == "x = 1\ny = x + 1\n"
    bad = write(tmp_path, "s.yml", case.replace(sha, "f" * 40))
    with pytest.raises(ConfigError, match=r"s\.yml:1 \(case 'r-1'\): m\.py at f+ cannot be read"):
        load_cases([bad])


@pytest.mark.parametrize(
    ("arg", "fields"),
    [
        ("one=single:openai/gpt-4.1-mini", ("one", "single", ("openai/gpt-4.1-mini",), 1)),
        ("v=vote:5:scripted/oracle:0.7", ("v", "vote", ("scripted/oracle:0.7",), 5)),
        (
            "d=debate:openai/gpt-4.1-mini,anthropic/claude-sonnet-4-5;rounds=2;tools=on",
            ("d", "debate", ("openai/gpt-4.1-mini", "anthropic/claude-sonnet-4-5"), 1),
        ),
        ("single:ollama/llama3.1", ("single:ollama/llama3.1", "single", ("ollama/llama3.1",), 1)),
    ],
)
def test_configurations_parse(arg: str, fields: tuple[object, ...]) -> None:
    (c,) = parse_config(arg)
    assert (c.name, c.kind, c.models, c.samples) == fields


def test_debate_options_and_canonical_form() -> None:
    (c,) = parse_config("d=debate:a/x,b/y;tools=off;rounds=2;judge=c/z")
    assert (c.rounds, c.tools, c.judge) == (2, False, "c/z")
    assert c.canonical() == "debate:a/x,b/y;rounds=2;tools=off;judge=c/z"


@pytest.mark.parametrize(
    ("arg", "reason"),
    [
        ("x=poll:openai/gpt", "expected single:MODEL"),
        ("x=vote:0:openai/gpt", "N must be a whole number from 1 to 25"),
        ("x=vote:openai/gpt", "expected vote:N:MODEL"),
        ("x=single:gpt-4", "is not a model reference"),
        ("x=debate:a/b;rounds=99", "rounds must be a whole number from 1 to 10"),
        ("x=debate:a/b;colour=red", "unknown option"),
        ("x y=single:a/b", "configuration name"),
    ],
)
def test_bad_configurations_are_one_line(arg: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        parse_config(arg)


def test_configurations_from_a_yaml_file(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yml", "one: single:a/b\nfive: vote:5:a/b\n")
    assert [c.name for c in parse_config(str(path))] == ["one", "five"]
    bad = write(tmp_path, "d.yml", "one: [single]\n")
    with pytest.raises(ConfigError, match="must be a SPEC string"):
        parse_config(str(bad))


def test_cli_mistakes_are_one_line_exit_2_and_nothing_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    runner = CliRunner()
    bad = write(tmp_path, "bad.yml", GOOD.replace("expected: dismissed", "expected: maybe"))
    cases = write(tmp_path, "good.yml", GOOD)
    out = tmp_path / "out"
    oracle = "a=single:scripted/oracle:1"
    mistakes = [
        ([str(bad), "-c", oracle], "bad.yml:10"),
        ([str(tmp_path / "nope.yml"), "-c", oracle], "no such file"),
        ([str(cases)], "name at least one configuration"),
        ([str(cases), "-c", "a=single:openai/gpt-4.1-mini", "--out", str(out)], "credentials"),
        ([str(cases), "-c", "a=single:x/y"], "unknown model provider"),
        ([str(cases), "-c", "a=single:scripted/oracle:1.5"], "probability must be a number"),
        ([str(cases), "-c", oracle, "-c", "a=vote:3:scripted/oracle:1"], "used twice"),
        (["harvest", "not-a-repo"], "is not OWNER/REPO"),
        (["harvest", "o/r", "--since", "3 days"], "--since"),
        (["harvest", "o/r"], "no GitHub credentials"),
    ]
    for tail, reason in mistakes:
        args = ["eval", *tail]
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and reason in lines[0], lines
    assert not (out / "cache.sqlite").exists()  # refused before the run began


def test_cli_runs_the_oracle_and_writes_the_report(tmp_path: Path) -> None:
    cases = write(tmp_path, "good.yml", GOOD)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["eval", str(cases), "-c", "one=single:scripted/oracle:1", "-c",
         "deb=debate:scripted/oracle:1;rounds=2;tools=on", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    assert "| one | `single:scripted/oracle:1` | 2 | 100.0 %" in report
    assert "| deb |" in report
    # Tools asked for: said in the report when this engine has none.
    from bot.cli.eval.material import tools_supported

    assert ("Tools were not available" in report) != tools_supported()


def test_the_starter_set_is_balanced_sourced_and_permissive() -> None:
    root = Path(__file__).resolve().parents[4] / "evals"
    cases = load_cases([root])
    assert len(cases) >= 30
    labels = [c.case.expected for c in cases]
    assert labels.count("CONFIRMED") == labels.count("DISMISSED")
    sources = (root / "SOURCES.md").read_text()
    for loaded in cases:
        case = loaded.case
        assert isinstance(case, ArbitrateCase)
        assert case.source is not None
        assert case.source.url.startswith("https://github.com/") and len(case.source.commit) == 40
        assert case.source.license in ("MIT", "BSD-3-Clause", "Apache-2.0")
        assert case.source.commit in sources  # every repository is listed with its licence
        assert "Label: " in case.note
        assert loaded.head_text is not None and len(loaded.head_text.splitlines()) <= 120
    # Pairs: the same comment on the same file, one label each way.
    pairs: dict[tuple[str, str], set[str]] = {}
    for loaded in cases:
        c = loaded.case
        assert isinstance(c, ArbitrateCase)
        pairs.setdefault((c.id.rsplit("-", 1)[0], c.path), set()).add(c.expected)
    assert all(v == {"CONFIRMED", "DISMISSED"} for v in pairs.values())
