"""Model providers behind one async interface (see ``base.Provider``).

Entry point: ``bot.llm.router.ModelRouter``. Kept import-light on purpose so the
pure engine may use ``bot.llm.pricing`` without pulling in httpx.
"""
