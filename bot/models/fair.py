"""What a model call carries to its endpoint's gate: whose call it is (a
``Share``, bot/core/fair.py) and its size."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.core.fair import Share


@dataclass(frozen=True)
class CallInfo:
    """What the caller knows of a call, for the endpoint's gate: passed down with
    the call (router or tool loop → provider → ``post_json`` → ``EndpointGate.enter``)."""

    share: Share
    input_tokens: int  # estimated
    max_output_tokens: int

    @classmethod
    def of(cls, share: Share | None, input_tokens: int, max_output_tokens: int) -> CallInfo:
        """A call outside a run (no ``share``) counts as one that started now."""
        return cls(share or Share(since=time.time()), input_tokens, max_output_tokens)
