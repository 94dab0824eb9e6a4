"""Model providers behind one async interface (see ``base.Provider``).

Entry point: ``bot.models.router.ModelRouter``. Kept import-light on purpose so the
pure engine may use ``bot.models.pricing`` without pulling in httpx.
"""
