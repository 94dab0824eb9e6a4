"""Every trigger, end-of-run action and loop the bot has: the feature modules
registered with one router, built once per process by its wiring.

Order matters where two features answer the same event and action: a handler
returning None passes the delivery to the next one. Design reviews come first,
so a labelled PR that changes plans under ``design_review.paths`` is reviewed
instead of debated.
"""

from __future__ import annotations

from bot.service.features.arbitration import handlers as arbitration
from bot.service.features.debates import handlers as debates
from bot.service.features.installations import handlers as installations
from bot.service.features.reviews import handlers as reviews
from bot.service.features.schedules import handlers as schedules
from bot.service.features.spending import handlers as spending
from bot.service.worker.routes import TriggerTable


def build_triggers() -> TriggerTable:
    triggers = TriggerTable()
    reviews.register(triggers)
    schedules.register(triggers)
    debates.register(triggers)
    arbitration.register(triggers)
    installations.register(triggers)
    spending.register(triggers)
    triggers.check_complete()
    return triggers
