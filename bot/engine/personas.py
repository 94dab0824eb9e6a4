"""The persona auto-pick table and the judge's classification.

The judge answers the frame question with ``ARTIFACT: <key>`` (one of the keys
below, or ``none``) and, for ``none``, ``OWNER: <name> — <lens>``: the natural
owner of the artifact, who faces Quill. Anything unparseable falls back to two
generic reviewers, never to an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.engine.text import clip
from bot.engine.types import is_reserved_name

LENSES: dict[str, str] = {
    "Atlas": "Scale and correctness: what breaks under load, over time, or at the edges; "
    "insist on the design that stays right as the system grows.",
    "Forge": "Ship it: the simplest thing that works now, YAGNI, cost of delay; "
    "argue for building and learning over speculative generality.",
    "Quill": "The skeptic: find the holes, unsupported claims, missing baselines and "
    "overstated framing.",
    "Scribe": "Defend the contribution: what is genuinely new and valuable, and why the "
    "framing holds up.",
    "Helix": "Rigor and controls: confounders, sample sizes, ablations, pre-registered "
    "metrics; an experiment that cannot fail teaches nothing.",
    "Gauge": "Is the gain real: noise, variance, seeds, regression to the mean, "
    "measurement error, cherry-picking.",
    "Vera": "What the data means: the most plausible reading of the result and what it "
    "licenses us to do next.",
    "Compass": "What is cuttable and realistic: scope, sequencing, dependencies, the "
    "critical path and the honest timeline.",
    "Ethos": "Consent and risk: privacy, licensing, provenance, harm and who bears it.",
    "Trove": "Get the data: the value of the data, practical ways to obtain it, and the "
    "cost of not having it.",
    "Lemma": "Proof or counterexample: check every step, hunt for the edge case that "
    "breaks the bound.",
    "Proposer": "The intuition behind the claim: why it should hold, and the argument "
    "that makes it true.",
    "Beacon": "It already exists: prior art, existing tools and libraries, and why "
    "building it again is not novel.",
}


@dataclass(frozen=True)
class ArtifactKind:
    key: str
    label: str
    pair: tuple[str, str]
    tension: str


KINDS: tuple[ArtifactKind, ...] = (
    ArtifactKind(
        "architecture",
        "architecture / tech choice",
        ("Atlas", "Forge"),
        "scale and correctness vs ship it, YAGNI",
    ),
    ArtifactKind(
        "paper",
        "paper / claim / framing",
        ("Quill", "Scribe"),
        "find the holes vs defend the contribution",
    ),
    ArtifactKind(
        "experiment",
        "experiment design",
        ("Helix", "Forge"),
        "rigor and controls vs feasibility and cost",
    ),
    ArtifactKind(
        "result",
        'result / "it improved"',
        ("Gauge", "Vera"),
        "is the gain real vs what the data means",
    ),
    ArtifactKind(
        "plan", "plan / timeline / scope", ("Compass", "Forge"), "what is cuttable vs the ambition"
    ),
    ArtifactKind("data", "using some data", ("Ethos", "Trove"), "consent and risk vs get the data"),
    ArtifactKind(
        "math",
        "math claim / bound",
        ("Lemma", "Proposer"),
        "proof or counterexample vs the intuition",
    ),
    ArtifactKind("build", "build it or not", ("Beacon", "Forge"), "already exists vs let's build"),
)
KIND_BY_KEY = {k.key: k for k in KINDS}

GENERIC_PAIR: tuple[tuple[str, str], tuple[str, str]] = (
    (
        "Feasibility Reviewer",
        "Technical feasibility and implementation risk: is the approach "
        "realistic, which steps are missing, which complexity is underestimated.",
    ),
    (
        "Risk Reviewer",
        "Security, reliability and operations: attack surfaces, data integrity, "
        "failure modes, and whether it holds up in production.",
    ),
)

# Arbitrate mode: seat 1 argues the review concern is real, seat 2 that it is a
# false positive. Custom personas keep this seat order.
ARBITRATION_PAIR: tuple[tuple[str, str], tuple[str, str]] = (
    (
        "Sentry",
        "The review concern is a real defect: show the input, state or sequence "
        "under which the changed code misbehaves, using the diff and the file.",
    ),
    (
        "Author",
        "The change is correct as written: show why the concern does not apply "
        "here (guards, invariants, callers, tests), using the diff and the file.",
    ),
)

DEFAULT_OWNER = (
    "Owner",
    "The artifact's author: defend its choices and explain the intent and constraints behind them.",
)


@dataclass(frozen=True)
class Classification:
    kind: str | None  # a KINDS key, "none" (no clean fit), or None (unparseable)
    owner: tuple[str, str] | None = None


_ARTIFACT = re.compile(r"^[\s*_`>-]*ARTIFACT\s*\**\s*[:\-—–]\s*\**\s*([A-Za-z_/ -]+)", re.I | re.M)
_OWNER = re.compile(r"^[\s*_`>-]*OWNER\s*\**\s*[:]\s*\**\s*(.+)$", re.I | re.M)
# Stricter than the configured-persona rule (is_reserved_name): an auto-picked
# owner may not shadow Quill, whom it faces, nor look like any judge.
_AUTO_RESERVED = re.compile(r"^(quill|judge.*)$", re.I)
# The owner's name is model output that is used outside any fence (the slot,
# headings, "You are <name>"): one short word, nothing to smuggle instructions in.
_NAME_OK = re.compile(r"^[A-Za-z][A-Za-z0-9'-]{0,23}$")
LENS_MAX = 300  # the owner's lens is model output too (fenced, and bounded)


def parse_classification(text: str) -> Classification:
    m = _ARTIFACT.search(text)
    if m is None:
        return Classification(None)
    word = m.group(1).strip().lower().split()[0].strip("/") if m.group(1).strip() else ""
    if word in KIND_BY_KEY:
        return Classification(word)
    if word not in ("none", "other", "no"):
        return Classification(None)
    owner: tuple[str, str] | None = None
    om = _OWNER.search(text)
    if om:
        parts = re.split(r"\s+[—–-]\s+", om.group(1).strip(), maxsplit=1)
        name = parts[0].strip(" *_`\"'")
        lens = clip(parts[1], LENS_MAX) if len(parts) > 1 else ""
        if _NAME_OK.match(name) and not _AUTO_RESERVED.match(name) and not is_reserved_name(name):
            owner = (name, lens or DEFAULT_OWNER[1])
    return Classification("none", owner)


def pick_pair(c: Classification) -> tuple[tuple[tuple[str, str], tuple[str, str]], str]:
    """The (name, lens) pair for a classification and a short note on why."""
    if c.kind in KIND_BY_KEY:
        kind = KIND_BY_KEY[c.kind]
        a, b = kind.pair
        return ((a, LENSES[a]), (b, LENSES[b])), f"{kind.label}: {kind.tension}"
    if c.kind == "none":
        owner = c.owner or DEFAULT_OWNER
        return (("Quill", LENSES["Quill"]), owner), "no clean fit: the skeptic vs the owner"
    return GENERIC_PAIR, "classification unavailable: generic reviewers"


def classification_menu() -> str:
    """The table the judge classifies against (used in the frame prompt)."""
    rows = [f"- `{k.key}` — {k.label} ({k.pair[0]} vs {k.pair[1]}: {k.tension})" for k in KINDS]
    rows.append("- `none` — no clean fit (Quill, the skeptic, vs the artifact's natural owner)")
    return "\n".join(rows)
