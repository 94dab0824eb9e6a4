"""Secret redaction shared by logs, the command parser, the local CLI, the model
providers and the GitHub sanitizer. Standard library only.

- ``redact_secrets`` finds secrets by their shape (tokens, API keys, JWTs,
  private keys, AWS credentials) and writes ``[REDACTED:<kind>]`` in their place;
- ``redact_known`` masks values the caller knows are secret (its own API key,
  say) as ``***``, whatever they look like;
- ``redact_event`` is a structlog processor applying ``redact_secrets`` to every
  string value of a log event.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, MutableMapping
from typing import Any

# Each shape with the literal strings every match of it contains: a pattern runs
# only where one of them occurs, so text without secrets (nearly all of it, and
# every digest is sanitized before it is posted) costs a few substring scans.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----.{0,16384}?-----END \1PRIVATE KEY-----",
            re.DOTALL,
        ),
        ("PRIVATE KEY-----",),
    ),
    # A truncated PEM block: the header and whatever base64/header lines follow.
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
            r"(?:\n[ \t]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+:[^\n]*|(?=\n)))*"
        ),
        ("PRIVATE KEY-----",),
    ),
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
        ("eyJ",),
    ),
    (
        "github_token",
        re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    (
        "github_token",
        re.compile(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}"),
        ("github_pat_",),
    ),
    (
        "anthropic_key",
        re.compile(r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{16,}"),
        ("sk-ant-",),
    ),
    (
        "openai_key",
        # Random keys always hold a digit or a capital; kebab-case words do not.
        # The lookahead is bounded so a long run of "sk-sk-…" stays linear.
        re.compile(r"(?<![A-Za-z0-9])sk-(?=[a-z_-]{0,40}[0-9A-Z])[A-Za-z0-9_-]{20,}"),
        ("sk-",),
    ),
    (
        "aws_access_key_id",
        re.compile(
            r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}(?![A-Z0-9])"
        ),
        ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA"),
    ),
    ("slack_token", re.compile(r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"), ("xox",)),
    ("google_api_key", re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}"), ("AIza",)),
    (
        "stripe_key",
        re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}"),
        ("k_live_", "k_test_"),
    ),
    ("stripe_key", re.compile(r"(?<![A-Za-z0-9])pk_live_[0-9A-Za-z]{10,}"), ("pk_live_",)),
    ("gitlab_token", re.compile(r"(?<![A-Za-z0-9])glpat-[0-9A-Za-z_-]{20,}"), ("glpat-",)),
)

# `aws_secret_access_key = "…"`: the 40-character value is redacted, the name kept.
_AWS_SECRET_ASSIGNMENT = re.compile(
    r"((?:aws_?)?secret_?access_?key|aws_?secret(?:_?key)?)"
    r"([\"']?\s*[:=]>?\s*[\"']?)"
    r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
    re.IGNORECASE,
)
_SECRET_WORD = re.compile("secret", re.IGNORECASE)  # in every _AWS_SECRET_ASSIGNMENT match
# Every hint above and the secret word in one scan: short text with none of them
# (nearly every log value: ids, names, counts) is returned after one search. On
# longer text the substring scans below are faster than this alternation.
_SHORT = 120
_ANY_HINT = re.compile(
    "|".join(re.escape(hint) for _, _, hints in SECRET_PATTERNS for hint in hints) + "|(?i:secret)"
)


def redact_secrets(text: str) -> str:
    """Replace every secret-shaped substring with ``[REDACTED:<kind>]``."""
    if len(text) < _SHORT and _ANY_HINT.search(text) is None:
        return text
    for kind, pattern, hints in SECRET_PATTERNS:
        if any(hint in text for hint in hints):
            text = pattern.sub(f"[REDACTED:{kind}]", text)
    if _SECRET_WORD.search(text) is None:
        return text
    return _AWS_SECRET_ASSIGNMENT.sub(lambda m: f"{m[1]}{m[2]}[REDACTED:aws_secret_key]", text)


def redact_known(text: str, secrets: Iterable[str]) -> str:
    """Replace each occurrence of each (non-empty) known secret with ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def redact_event(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: ``redact_secrets`` on every string value of the event."""
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = redact_secrets(value)
    return event
