"""Plan input: frontmatter validation, @path references, context budget, subject cap."""

from __future__ import annotations

import pytest

from bot.core.errors import ConfigError
from bot.inputs.plan import find_refs, parse_plan
from bot.inputs.text import assemble_context, cap_subject, check_ref, condense, split_sections

LONG_BODY = "# Plan\n\n" + " ".join(["word"] * 60) + "\n"
PERSONAS_2 = """personas:
  - name: Feasibility
    perspective: Is it realistic?
    model: openai/gpt-4.1-mini
  - name: Security
    perspective: What can go wrong?
    model: anthropic/claude-sonnet-4-5
    fallbacks: [openai/gpt-4.1]
"""


def test_defaults_without_frontmatter() -> None:
    plan = parse_plan(LONG_BODY, source="plan.md")
    assert (plan.rounds, plan.response_scale, plan.context_budget_kb) == (3, 1.5, 100)
    assert plan.synthesizer == "judge"
    assert plan.personas == ()
    assert plan.mode == "critique"
    assert plan.title == "Plan"
    assert plan.output_dir is None


def test_short_body_is_a_debate() -> None:
    plan = parse_plan("Should we use gRPC or REST?", source="q.md")
    assert plan.mode == "debate"
    assert plan.title == "Should we use gRPC or REST?"


def test_full_frontmatter() -> None:
    text = (
        f"---\nrounds: 5\nresponse_scale: 2\ncontext_budget_kb: 0\nsynthesizer: Security\n"
        f"output_dir: out/debates\n{PERSONAS_2}---\n{LONG_BODY}"
    )
    plan = parse_plan(text, source="plan.md")
    assert plan.rounds == 5 and plan.response_scale == 2.0 and plan.context_budget_kb == 0
    assert plan.synthesizer == "Security"
    assert plan.output_dir == "out/debates"
    assert [p.name for p in plan.personas] == ["Feasibility", "Security"]
    assert plan.personas[1].fallbacks == ["openai/gpt-4.1"]
    assert plan.body == LONG_BODY
    assert "personas" in plan.frontmatter_keys


def test_empty_frontmatter_and_host_synthesizer() -> None:
    plan = parse_plan(f"---\n---\n{LONG_BODY}", source="p.md")
    assert plan.rounds == 3
    assert (
        parse_plan(f"---\nsynthesizer: host\n---\n{LONG_BODY}", source="p.md").synthesizer
        == "judge"
    )


def test_yaml_error_names_the_file_line() -> None:
    text = "---\nrounds: 3\npersonas:\n  - name: [unclosed\n---\n" + LONG_BODY
    with pytest.raises(ConfigError) as err:
        parse_plan(text, source="plan.md")
    msg = str(err.value)
    assert msg.startswith("plan.md: YAML error at line ")
    line = int(msg.split("at line ")[1].split(":")[0])
    assert line in (4, 5)  # the broken flow sequence opens on file line 4


def test_yaml_error_line_exact_for_bad_indent() -> None:
    text = "---\nrounds: 3\nresponse_scale: 1.5\n  bad: indent\n---\n" + LONG_BODY
    with pytest.raises(ConfigError, match=r"plan\.md: YAML error at line 4"):
        parse_plan(text, source="plan.md")


@pytest.mark.parametrize(
    ("front", "needle"),
    [
        ("rounds: three", "rounds"),
        ("rounds: 0", "rounds"),
        ("response_scale: big", "response_scale"),
        ("context_budget_kb: -1", "context_budget_kb"),
        ("personas: nope", "personas"),
        ("personas:\n  - perspective: no name", "personas.0.name"),
        ("personas:\n  - name: A\n    model: [1, 2]", "personas.0.model"),
        ("roundz: 3", "roundz"),
        ("mode: chat", "mode"),
        ("- a list", "expected a mapping"),
    ],
)
def test_wrong_types_are_config_errors(front: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_plan(f"---\n{front}\n---\n{LONG_BODY}", source="plan.md")
    assert needle in str(err.value)
    assert str(err.value).startswith("plan.md")


@pytest.mark.parametrize(
    ("personas", "mode", "ok"),
    [
        (1, None, False),
        (2, None, True),
        (3, None, False),
        (3, "critique", False),
        (3, "arbitrate", False),
        (2, "proposal", True),
        (3, "proposal", True),
        (1, "proposal", False),
    ],
)
def test_persona_counts(personas: int, mode: str | None, ok: bool) -> None:
    items = "".join(f"  - name: P{i}\n    perspective: lens {i}\n" for i in range(personas))
    text = f"---\npersonas:\n{items}---\n{LONG_BODY}"
    if ok:
        assert len(parse_plan(text, source="p.md", mode=mode).personas) == personas  # type: ignore[arg-type]
    else:
        with pytest.raises(ConfigError, match="personas"):
            parse_plan(text, source="p.md", mode=mode)  # type: ignore[arg-type]


def test_frontmatter_mode_and_flag_override() -> None:
    text = f"---\nmode: proposal\n---\n{LONG_BODY}"
    assert parse_plan(text, source="p.md").mode == "proposal"
    assert parse_plan(text, source="p.md", mode="debate").mode == "debate"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("---\nrounds: 2\n---\n\n  \n", "empty"),
        ("---\nrounds: 2\n" + LONG_BODY, "never closed"),
        ("abc\x00def", "binary"),
        (f"---\n{PERSONAS_2}synthesizer: Nobody\n---\n{LONG_BODY}", "synthesizer"),
        ("---\npersonas:\n  - name: judge\n  - name: B\n---\n" + LONG_BODY, "reserved"),
        ("---\npersonas:\n  - name: A\n  - name: a\n---\n" + LONG_BODY, "unique"),
    ],
)
def test_invalid_plans(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_plan(text, source="p.md")


# --- @path references ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "refs"),
    [
        ("See @docs/design.md for details.", ["docs/design.md"]),
        ("@src/app.py at line start", ["src/app.py"]),
        ("Read @README.md, then @docs/a.md.", ["README.md", "docs/a.md"]),
        ("mail me at dev@example.com", []),
        ("ping @octocat please", []),
        ("inline `@src/x.py` code", []),
        ("(see @src/x.py)", ["src/x.py"]),
        ("(@src/x.py)", []),
        ("tab\t@a/b", ["a/b"]),
        ("twice @a.md and @a.md", ["a.md"]),
        ("@./ alone", []),
        ("```\n@src/in_fence.py\n```\nafter @src/out.py", ["src/out.py"]),
        ("~~~md\n@a/b.md\n~~~\n", []),
        ("````\n```\n@a/b.md\n```\n````\n@c/d.md", ["c/d.md"]),
        ("   ```python\n@x/y.py\n", []),  # unclosed fence runs to the end
    ],
)
def test_find_refs(text: str, refs: list[str]) -> None:
    assert find_refs(text) == refs


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("docs/a.md", "docs/a.md"),
        ("./docs/../src/b.py", "src/b.py"),
        ("a/./b//c.md", "a/b/c.md"),
        ("docs\\win.md", "docs/win.md"),
    ],
)
def test_check_ref_normalizes(path: str, expected: str) -> None:
    assert check_ref(path) == expected


@pytest.mark.parametrize(
    "path",
    ["../secret", "a/../../b", "/etc/passwd", "C:\\x.md", "~/.ssh/id", "..", ".", "", "a\x00b"],
)
def test_check_ref_refuses_escapes(path: str) -> None:
    with pytest.raises(ConfigError):
        check_ref(path)


# --- context budget -------------------------------------------------------------

DOC = """# Overview
General words about the project and its people.

# Caching
The cache layer stores sessions in Redis with a TTL; cache invalidation on logout.

# Billing
Invoices are generated monthly by the billing service.
"""


def test_files_that_fit_are_embedded_whole() -> None:
    files, warnings = assemble_context("subject", {"a.md": "hello", "b/c.py": "x = 1\n"}, 1)
    assert [(f.path, f.text, f.size_bytes, f.condensed) for f in files] == [
        ("a.md", "hello", 5, False),
        ("b/c.py", "x = 1\n", 6, False),
    ]
    assert warnings == ()


def test_missing_file_is_a_warning() -> None:
    files, warnings = assemble_context("s", {"gone.md": None, "a.md": "x"}, 10)
    assert [f.path for f in files] == ["a.md"]
    assert warnings == ("`gone.md`: file not found; skipped",)


def test_zero_budget_disables_embedding() -> None:
    files, warnings = assemble_context("s", {"a.md": "x"}, 0)
    assert files == () and "context_budget_kb is 0" in warnings[0]


def test_oversized_file_is_condensed_to_relevant_sections() -> None:
    big = DOC + ("\n# Filler\n" + "unrelated filler text " * 60 + "\n") * 3
    first = "f" * 700
    files, warnings = assemble_context(
        "How should the cache handle Redis sessions and invalidation?",
        {"first.txt": first, "doc.md": big},
        2,
    )
    assert warnings == ()
    doc = files[1]
    assert doc.condensed and doc.size_bytes == len(big.encode())
    assert "# Caching" in doc.text
    assert "Billing" not in doc.text
    assert len(doc.text.encode()) <= 2048 - 700
    again, _ = assemble_context(
        "How should the cache handle Redis sessions and invalidation?",
        {"first.txt": first, "doc.md": big},
        2,
    )
    assert again == files


def test_budget_used_up_skips_with_warning() -> None:
    files, warnings = assemble_context("s", {"a.txt": "a" * 1000, "b.md": DOC * 10}, 1)
    assert [f.path for f in files] == ["a.txt"]
    assert "budget (1 KB) is used up" in warnings[0]


def test_split_sections_by_kind() -> None:
    assert len(split_sections(DOC, "doc.md")) == 3
    code = "import os\n\n# helper comment\ndef a():\n    pass\n\nclass B:\n    x = 1\n"
    secs = split_sections(code, "m.py")
    assert [s.split("\n")[0] for s in secs] == ["import os", "def a():", "class B:"]
    prose = "para one\nline\n\npara two\n\npara three\n"
    assert len(split_sections(prose, "notes")) == 3


def test_condense_truncates_a_single_huge_section() -> None:
    text = "# Only\n" + ("cache " * 2000)
    out = condense(text, "cache", 600, "x.md")
    assert len(out.encode()) <= 600
    assert out.startswith("# Only")


def test_cap_subject() -> None:
    assert cap_subject("short") == ("short", False)
    text = ("é" * 50 + "\n") * 400  # multibyte, ~40 KB
    capped, truncated = cap_subject(text, max_bytes=24 * 1024)
    assert truncated
    assert len(capped.encode()) <= 24 * 1024
    assert capped.endswith("[… truncated: the subject exceeded 24 KiB]")
    capped.encode("utf-8")  # no split character
