"""Which models each seat uses: persona models, escalation tiers, degradation.

A model reference is ``provider/model``; the provider is the part before the
first ``/``. When the shell says which providers it can reach
(``spec.available_providers``), personas meant to run on different vendors
that cannot are either moved onto a reachable model (``downgrade``, and every
output says ``[DEGRADED: within-model debate]``) or the run is aborted before
any debate request (``abort``). A vendor can also fail during the run: when
fallbacks put every persona turn of a round on one vendor although the seats'
primary models differ (``single_vendor``), the run is degraded as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.engine.agents import is_agent
from bot.engine.types import DebateSpec

DEGRADED = "[DEGRADED: within-model debate]"


def provider(ref: str) -> str:
    return ref.split("/", 1)[0] if "/" in ref else ref


def all_models(spec: DebateSpec) -> tuple[str, ...]:
    """Every model reference a run may call: seats, fallbacks, the judge, voters,
    escalation tiers."""
    refs: list[str] = [m for p in spec.personas for m in (p.model, *p.fallbacks)]
    refs += [spec.judge, *spec.judge_fallbacks, *spec.default_models, *spec.voters]
    refs += [m for tier in spec.tiers for m in tier]
    return _dedupe(tuple(r for r in refs if r))


def judge_models(spec: DebateSpec) -> tuple[str, ...]:
    primary = spec.judge or (spec.default_models[0] if spec.default_models else "")
    if not primary:
        primary = next((p.model for p in spec.personas if p.model), "")
    return _dedupe((primary, *spec.judge_fallbacks)) if primary else ()


def base_models(spec: DebateSpec, index: int) -> tuple[str, ...]:
    """Tier-0 models of seat ``index``: its configured model and fallbacks, or a
    default model for auto-picked personas and personas without a model."""
    persona = spec.personas[index] if index < len(spec.personas) else None
    if persona is not None and persona.model:
        return _dedupe((persona.model, *persona.fallbacks))
    if spec.default_models:
        default = spec.default_models[index % len(spec.default_models)]
    else:
        default = (judge_models(spec) or ("",))[0]
    extra = persona.fallbacks if persona is not None else ()
    return _dedupe((default, *extra)) if default else ()


def tier_models(spec: DebateSpec, tier: int, index: int) -> tuple[str, ...]:
    """Models of seat ``index`` at escalation ``tier`` (>= 1): the tier's model for
    that seat first, then the tier's other models as fallbacks (same strength)."""
    pool = spec.tiers[tier]
    if not pool:
        return base_models(spec, index)
    start = index % len(pool)
    return _dedupe(tuple(pool[start:]) + tuple(pool[:start]))


def max_tier(spec: DebateSpec) -> int:
    """Highest escalation tier this run may reach (``spec.tiers[0]`` is the
    starting tier; at most two escalations)."""
    return max(0, min(2, spec.max_escalations, len(spec.tiers) - 1))


@dataclass(frozen=True)
class Routing:
    seats: tuple[tuple[str, ...], ...]  # per seat: primary then fallbacks
    judge: tuple[str, ...]
    degraded: bool = False
    abort_reason: str = ""  # non-empty: stop before any debate request
    notes: tuple[str, ...] = ()


def route(spec: DebateSpec, seats: Sequence[tuple[str, ...]], judge: tuple[str, ...]) -> Routing:
    available = spec.available_providers
    if not available:
        return Routing(tuple(seats), judge)
    intended = {provider(m[0]) for m in seats if m}
    usable = [tuple(m for m in models if provider(m) in available) for models in seats]
    judge_usable = tuple(m for m in judge if provider(m) in available)
    # An agent seat runs its CLI or not at all: never moved onto an API model.
    stranded = [m[0] for m, u in zip(seats, usable, strict=True) if m and is_agent(m[0]) and not u]
    if judge and is_agent(judge[0]) and not judge_usable:
        stranded.append(judge[0])
    if stranded:
        return Routing(
            tuple(seats),
            judge,
            abort_reason="vendor_unavailable",
            notes=tuple(f"agent seat `{ref}` cannot run here" for ref in stranded),
        )
    apis = [u for u in usable if u and not is_agent(u[0])]
    donor = next((u[0] for u in apis), judge_usable[0] if judge_usable else "")
    if not donor:
        return Routing(
            tuple(seats),
            judge,
            abort_reason="vendor_unavailable",
            notes=("no configured model has a reachable provider",),
        )
    notes: list[str] = []
    moved = [i for i, u in enumerate(usable) if not u]
    routed = tuple(u if u else (donor,) for u in usable)
    effective = {provider(m[0]) for m in routed}
    degraded = len(intended) >= 2 and len(effective) < len(intended)
    lost = sorted(intended - effective)
    if degraded and spec.on_unavailable == "abort":
        return Routing(
            tuple(seats),
            judge,
            abort_reason="vendor_unavailable",
            notes=(f"provider(s) unavailable: {', '.join(lost)}",),
        )
    for i in moved:
        notes.append(
            f"seat {i + 1} moved from `{seats[i][0] if seats[i] else '?'}` to `{donor}` "
            "(provider unavailable)"
        )
    if degraded:
        notes.append(
            f"provider(s) unavailable: {', '.join(lost)}; vendors meant to differ share one"
        )
    if not judge_usable:
        notes.append(f"judge moved to `{donor}` (provider unavailable)")
        judge_usable = (donor,)
    return Routing(routed, judge_usable, degraded=degraded, notes=tuple(notes))


def single_vendor(meant: Sequence[str], answered: Sequence[str]) -> str:
    """The one vendor that answered every turn when the turns' seats were meant to
    run on two or more vendors (``meant``: each turn's primary model; ``answered``:
    the model that produced it, after fallbacks), else ``""``. Routing only sees
    which providers are reachable; this catches a vendor that failed at run time."""
    if len(meant) < 2 or len({provider(m) for m in meant}) < 2:
        return ""
    got = {provider(m) for m in answered if m}
    if len(got) != 1 or len(answered) != len([m for m in answered if m]):
        return ""
    return got.pop()


def _dedupe(refs: Sequence[str]) -> tuple[str, ...]:
    seen: list[str] = []
    for r in refs:
        if r and r not in seen:
            seen.append(r)
    return tuple(seen)
