"""Logging while `debate-bot run` runs: stderr, redacted, quiet by default."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

from bot.core.redact import redact_event
from bot.core.settings import Settings


@contextmanager
def cli_logging(settings: Settings) -> Iterator[None]:
    """Logs to stderr, quiet unless DEBATE_BOT_LOG_LEVEL is set: the progress
    lines already say what failed. Restores the previous structlog setup."""
    saved = structlog.get_config()
    level = settings.log_level if "log_level" in settings.model_fields_set else "ERROR"
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            redact_event,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.ERROR)
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    try:
        yield
    finally:
        structlog.configure(**saved)
