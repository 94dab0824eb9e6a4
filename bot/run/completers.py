"""A run's model seam, built once for every shell (the worker, Action mode, the
local CLI, eval): the router's plain calls, a tool loop over the pinned commit
when the spec reads the repository, and agent seats when it names any.

``seat_agents`` is the gate before a run starts: every ``agent:`` reference of
the spec must be able to run here (a usable sandbox, the CLI at its pinned
minimum), else ``AgentUnavailable`` says which and why, and no run starts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

from bot.core.fair import Share
from bot.core.metrics import Metrics
from bot.engine.agents import is_agent
from bot.engine.routing import all_models
from bot.engine.types import DebateSpec
from bot.models.agents.gateway import Purse
from bot.models.router import ModelRouter
from bot.repo.snapshot import Snapshot
from bot.repo.tools import ToolCaps, run_tool
from bot.run.agent_seat import AgentDispatch, AgentSeats
from bot.run.execute import Completer
from bot.run.tool_loop import StepLog, ToolLoop


def has_agents(spec: DebateSpec) -> bool:
    return any(is_agent(ref) for ref in all_models(spec))


def seat_agents(spec: DebateSpec, router: ModelRouter) -> DebateSpec:
    """``spec`` with its agent seats proven able to run and made available to
    routing (AgentUnavailable: one cannot; the run must not start)."""
    agents = router.seatable(all_models(spec))
    if not agents or not spec.available_providers:
        return spec  # none, or every provider counts as reachable
    return replace(spec, available_providers=spec.available_providers | agents)


def needs_reader(spec: DebateSpec) -> bool:
    """Whether the run reads the pinned commit: tools, or an agent's workspace."""
    return spec.tools or has_agents(spec)


@dataclass(frozen=True)
class Wiring:
    """What a shell gives its run's model seam."""

    router: ModelRouter
    plain: Completer  # the router's calls (the worker's carry the run's fair share)
    reader: Snapshot | None  # the pinned commit (None: none is read)
    run_id: str
    steps: StepLog | None = None  # where a turn's steps are kept (None: not kept)
    metrics: Metrics | None = None
    share: Share | None = None
    # What the run has spent already: a resumed run's spend counts against its
    # cap from the first agent call.
    spent_usd: float = 0.0
    # Models asked directly, not through the spec's seats (eval's single answers).
    models_beyond_spec: Sequence[str] = ()


@asynccontextmanager
async def run_models(spec: DebateSpec, wiring: Wiring) -> AsyncIterator[Completer]:
    """The run's completer; agent workspaces are removed when the block ends."""
    w = wiring
    router, plain, reader, run_id, steps, share = (
        w.router, w.plain, w.reader, w.run_id, w.steps, w.share
    )  # fmt: skip
    metrics, spent_usd, models_beyond_spec = w.metrics, w.spent_usd, w.models_beyond_spec
    models: Completer = plain
    if spec.tools and reader is not None:
        models = ToolLoop(
            routes=router,
            plain=plain.complete,
            reader=reader,
            run_tool=run_tool,
            caps=ToolCaps(),
            run_id=run_id,
            steps=steps,
            metrics=metrics,
            share=share,
        )
    if not has_agents(spec) and not any(is_agent(m) for m in models_beyond_spec):
        yield models
        return
    seats = AgentSeats(
        host=router.agents,
        upstreams=router.agent_upstreams(),
        client=router.client,
        charge=router.prices.charge,
        run_id=run_id,
        reader=reader,
        steps=steps,
        share=share,
        purse=Purse(spec.max_cost_usd, spent_usd),
    )
    try:
        yield AgentDispatch(models, seats)
    finally:
        await seats.close()
