"""The pure debate engine: specs, personas, protocol, prompts, parsing, rendering.

No I/O, no asyncio, no clock: ``protocol.next_step(spec, turns)`` returns the
next batch of model requests or the final outcome; ``render`` turns a run into
markdown. This package imports nothing on its own, so ``bot.engine.types``
costs one module (the web tier and the store read the types, never the engine).
"""
