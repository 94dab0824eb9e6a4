"""One check of `debate-bot doctor`, and the model ping several checks share."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.core.errors import ConfigError, ModelError
from bot.core.explain import first_line
from bot.core.redact import redact_secrets
from bot.engine.types import ModelRequest, Prompt, TurnKey
from bot.models.router import ModelRouter


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


async def ping(router: ModelRouter, ref: str, *, name: str) -> Check:
    """One short call to ``ref``: answered, or why not."""
    fix = "check the provider's key, base URL and the model's name"
    try:
        provider, model = router.resolve(ref)
    except ConfigError as exc:
        return Check(name, False, exc.public, "name it as provider/model")
    if provider not in router.available_providers():
        variable = f"{provider.upper()}_API_KEY"
        return Check(name, False, f"no credentials for {provider}", f"set {variable}")
    request = _ping_request(ref)
    started = time.monotonic()
    try:
        await router.provider(provider).generate(model, request.prompt, request.max_output_tokens)
    except ModelError as exc:
        # e.g. "openai: cannot connect (connection refused)"; secrets already scrubbed.
        detail = redact_secrets(first_line(str(exc)) or exc.drop_class)
        return Check(name, False, f"{exc.drop_class}: {detail}", fix)
    return Check(name, True, f"answered in {int((time.monotonic() - started) * 1000)} ms")


def _ping_request(ref: str) -> ModelRequest:
    return ModelRequest(
        key=TurnKey(phase="frame", round=0, slot="doctor"),
        models=(ref,),
        prompt=Prompt(system="Answer with one word.", prefix="", suffix="Say OK."),
        max_output_tokens=16,
    )
