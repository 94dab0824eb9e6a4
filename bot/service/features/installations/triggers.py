"""The installation deliveries the bot acts on (data: read by the web tier, bound
by the handlers)."""

from __future__ import annotations

from bot.github.events import InstallationEvent, InstallationRepositoriesEvent
from bot.service.web.filter import trigger

GONE = trigger(InstallationEvent, "deleted", "suspend", about_installation=True)
BACK = trigger(InstallationEvent, "unsuspend", about_installation=True)
REPOSITORIES_REMOVED = trigger(InstallationRepositoriesEvent, "removed", about_installation=True)

TRIGGERS = (GONE, BACK, REPOSITORIES_REMOVED)
