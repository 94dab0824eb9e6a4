"""Make untrusted text (model output, echoed user input) safe to post on GitHub.

``sanitize`` is applied to every comment body before it is posted. It:

1. redacts secrets as ``[REDACTED:<kind>]`` everywhere, code blocks included
   (``bot.core.redact.redact_secrets``);
2. escapes anything resembling our marker (``<!-- debate-bot:``, in any case or
   spacing, with entity-encoded ``<``/``!``/``-`` or zero-width characters) into
   the inert canonical text ``&lt;!-- debate‑bot`` (a non-breaking hyphen), so it
   can neither hide as an HTML comment nor forge or hijack a bot comment;
3. neutralizes ``@user`` and ``@org/team`` mentions by putting a zero-width
   space after the ``@`` (the same trick Renovate uses with ``@&#8203;``): the
   text reads the same but GitHub does not ping anyone. Entity-encoded ``@``
   (``&#64;``, ``&commat;`` …) is decoded first so it cannot slip through.

Mentions inside fenced or indented code blocks are kept verbatim: GitHub never
pings there, and code such as ``@property`` or ``@scope/pkg`` must stay
copy-pasteable. Code blocks are found with a CommonMark parser (markdown-it-py),
so a fence that GitHub would not treat as code (inside an HTML block, say) is
not treated as code here either. Inline code spans are *not* exempt: a mention
there gets the invisible zero-width space too, which keeps it readable; telling
spans apart from literal backticks exactly is not worth the risk of a ping.

Email addresses are untouched (``@`` after a word character is not a mention).
A side effect is that links with ``/@user`` in their path (medium.com style)
also get the zero-width space.

The function is idempotent: ``sanitize(sanitize(x)) == sanitize(x)``.
"""

from __future__ import annotations

import re
from functools import lru_cache

from markdown_it import MarkdownIt

# Re-exported: callers that sanitize GitHub text also redact with it.
from bot.core.redact import redact_secrets as redact_secrets

ZWSP = "\u200b"
MARKER_ESCAPED = "&lt;!-- debate\u2011bot"

_SP = r"[\s\u200b-\u200d\u2060\ufeff]*"
_DASH = r"(?:-|&#0*45;?|&#x0*2d;?|&dash;|&hyphen;|&minus;|[\u2010-\u2015\u2212])"
_MARKER_LOOKALIKE = re.compile(
    r"(?:<|&lt;?|&#0*60;?|&#x0*3c;?)"
    + _SP
    + r"(?:!|&excl;|&#0*33;?|&#x0*21;?)"
    + _SP
    + rf"(?:{_DASH}{_SP})+"  # one em dash is how "--" arrives from smart keyboards
    + r"debate"
    + rf"(?:[\s_.\u200b-\u200d\u2060\ufeff]|{_DASH})*"
    + r"bot",
    re.IGNORECASE,
)

_AT_ENTITY = re.compile(r"&(?:#0*64|#x0*40|commat);?", re.IGNORECASE)
# GitHub's mention filter matches `@name` at the start or after a non-word character.
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])")


def escape_markers(text: str) -> str:
    return _MARKER_LOOKALIKE.sub(MARKER_ESCAPED, text)


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    # Only block structure matters here; skipping inline parsing makes it ~4x faster.
    return MarkdownIt("commonmark").disable(["inline", "text_join"])


def code_block_lines(text: str) -> set[int]:
    """0-based indices of lines (split on ``\\n``) inside fenced/indented code blocks."""
    lines: set[int] = set()
    for token in _markdown().parse(text):
        if token.type in ("fence", "code_block") and token.map is not None:
            start, end = token.map
            lines.update(range(start, end))
    return lines


def _neutralize_line(line: str) -> str:
    line = _AT_ENTITY.sub("@", line)
    return _MENTION.sub("@" + ZWSP, line)


def neutralize_mentions(text: str) -> str:
    if "@" not in text and "&" not in text:
        return text
    code = code_block_lines(text)
    lines = text.split("\n")
    return "\n".join(line if i in code else _neutralize_line(line) for i, line in enumerate(lines))


def _normalize(text: str) -> str:
    # CommonMark treats a lone CR as a line ending; make line numbers agree with
    # the parser's, and drop NULs (replaced, as CommonMark does).
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")


def sanitize(text: str) -> str:
    """Redact secrets, escape marker look-alikes, neutralize mentions (see module doc)."""
    text = _normalize(text)
    text = redact_secrets(text)
    text = escape_markers(text)
    return neutralize_mentions(text)
