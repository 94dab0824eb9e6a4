"""What every HTTP provider shares: its endpoint, client, retry policy, its gate
(bot/models/gate.py: capacity, pacing and fair turns), and one timed, retried JSON POST."""

from __future__ import annotations

import time
from typing import Any

import httpx

from bot.core.errors import ModelError, ToolsUnsupported
from bot.models.base import names_tools
from bot.models.fair import CallInfo
from bot.models.gate import EndpointGate
from bot.models.retry import Gated, RetryPolicy, post_json


def count(value: object) -> int:
    """A token count from a usage block; anything odd counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class HttpProvider:
    """One endpoint; its gate admits the requests to it. ``max_concurrency`` is
    the gate's ceiling; the router may replace the gate with one configured from
    the settings (``gate`` is public for that)."""

    def __init__(
        self,
        *,
        url: str,
        api_key: str | None,
        client: httpx.AsyncClient,
        policy: RetryPolicy,
        max_concurrency: int,
        name: str,
    ) -> None:
        self._url = url
        self._api_key = api_key
        self._client = client
        self._policy = policy
        self._name = name
        self.gate = EndpointGate(name, ceiling=max_concurrency)

    async def _post(
        self,
        model: str,
        body: dict[str, Any],
        headers: dict[str, str],
        call_info: CallInfo | None,
    ) -> tuple[dict[str, Any], int, str]:
        """(response JSON, latency in ms, label for errors and logs); ``call_info``
        is what the gate is told of the call."""
        label = f"{self._name}/{model}"
        started = time.monotonic()
        data = await post_json(
            self._client,
            self._url,
            headers={"content-type": "application/json", **headers},
            body=body,
            policy=self._policy,
            gated=Gated(self.gate, call_info),
            label=label,
            secrets=(self._api_key,) if self._api_key else (),
        )
        return data, int((time.monotonic() - started) * 1000), label

    async def _post_step(
        self,
        model: str,
        body: dict[str, Any],
        headers: dict[str, str],
        call_info: CallInfo | None,
    ) -> tuple[dict[str, Any], int, str]:
        """``_post`` for a tool-loop step: a refusal that blames the tools is
        ``ToolsUnsupported``, so the loop answers from the prompt alone."""
        try:
            return await self._post(model, body, headers, call_info)
        except ModelError as exc:
            if "tools" in body and names_tools(exc):
                raise ToolsUnsupported(str(exc)) from exc
            raise
