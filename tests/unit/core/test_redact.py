"""bot/core/redact.py on its own: secrets found by shape, known values masked, log events."""

from __future__ import annotations

import random
import string
import subprocess
import sys
from typing import Any

import pytest

from bot.core.redact import SECRET_PATTERNS, redact_event, redact_known, redact_secrets

rng = random.Random(4321)
UPPER_DIGITS = string.ascii_uppercase + string.digits


def rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


# One secret of each shape, generated at test time (no secret-looking literals).
SAMPLES: dict[str, str] = {
    "private_key": f"-----BEGIN RSA PRIVATE KEY-----\n{rand(64)}\n-----END RSA PRIVATE KEY-----",
    "jwt": f"eyJ{rand(20)}.eyJ{rand(20)}.{rand(43)}",
    "github_token": "ghp_" + rand(36),
    "anthropic_key": "sk-ant-api03-" + rand(40),
    "openai_key": "sk-proj-" + rand(40) + "A1",
    "aws_access_key_id": "AKIA" + rand(16, UPPER_DIGITS),
    "slack_token": "xoxb-" + rand(30),
    "google_api_key": "AIza" + rand(35),
    "stripe_key": "sk_live_" + rand(24),
    "gitlab_token": "glpat-" + rand(20),
}


def test_every_pattern_kind_has_a_sample() -> None:
    assert {kind for kind, _, _ in SECRET_PATTERNS} == set(SAMPLES)


# Every alternative a pattern spells out, so the hint test below sees them all.
VARIANTS: list[str] = [
    *SAMPLES.values(),
    f"-----BEGIN EC PRIVATE KEY-----\n{rand(64)}",  # truncated
    f"-----BEGIN PRIVATE KEY-----\n{rand(64)}\n-----END PRIVATE KEY-----",
    *(f"gh{c}_" + rand(36) for c in "pousr"),
    "github_pat_" + rand(40),
    *(p + rand(16, UPPER_DIGITS) for p in ("ASIA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA")),
    "ANVA" + rand(16, UPPER_DIGITS),
    *(f"{a}_{b}_" + rand(24) for a in ("sk", "rk") for b in ("live", "test")),
    "pk_live_" + rand(24),
    *(f"xox{c}-" + rand(30) for c in "abprs"),
]


@pytest.mark.parametrize("secret", VARIANTS)
def test_every_match_holds_one_of_its_hints(secret: str) -> None:
    # The hints let a pattern be skipped; a match without one would leak.
    found = False
    for _, pattern, hints in SECRET_PATTERNS:
        for match in pattern.finditer(f"x {secret} y"):
            found = True
            assert any(hint in match[0] for hint in hints), (pattern.pattern, hints)
    assert found
    assert "[REDACTED:" in redact_secrets(f"x {secret} y")


@pytest.mark.parametrize(("kind", "secret"), sorted(SAMPLES.items()))
def test_redact_secrets_by_shape(kind: str, secret: str) -> None:
    out = redact_secrets(f"before {secret} after")
    assert out == f"before [REDACTED:{kind}] after"
    assert redact_secrets(out) == out


def test_aws_secret_assignment_keeps_the_name() -> None:
    value = rand(40, string.ascii_letters + string.digits + "/+")
    assert redact_secrets(f"aws_secret_access_key = {value}") == (
        "aws_secret_access_key = [REDACTED:aws_secret_key]"
    )


def test_redact_known_masks_values_of_any_shape() -> None:
    key = "test-" + rand(12)  # no secret shape: only the caller knows it is one
    assert redact_secrets(f"bad key {key}") == f"bad key {key}"
    assert redact_known(f"bad key {key}; {key}", (key, "")) == "bad key ***; ***"
    assert redact_known("nothing to hide", ()) == "nothing to hide"


def test_redact_event_redacts_string_values_only() -> None:
    token = "ghp_" + rand(36)
    event: dict[str, Any] = {"event": f"token {token}", "attempt": 2, "url": "https://x"}
    assert redact_event(None, "info", event) == {
        "event": "token [REDACTED:github_token]",
        "attempt": 2,
        "url": "https://x",
    }


def test_module_and_parser_need_no_third_party_package() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import bot.core.redact\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "extra = new - set(sys.stdlib_module_names) - {'bot'}\n"
        "assert not extra, extra\n"
        "import bot.inputs.parser\n"
        "assert 'markdown_it' not in sys.modules, 'the command parser pulls in markdown-it'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
