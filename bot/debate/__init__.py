"""The pure debate engine: specs, personas, protocol, prompts, parsing, rendering.

No I/O, no asyncio, no clock: ``next_step(spec, turns)`` returns the next
batch of model requests or the final outcome.
"""

from bot.debate.protocol import choose_mode, next_step
from bot.debate.render import render_round, render_transcript

__all__ = ["choose_mode", "next_step", "render_round", "render_transcript"]
