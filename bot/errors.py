"""The one error hierarchy of debate-bot.

Every error carries a stable ``code`` and a short ``public`` sentence that is safe
to post on GitHub; the exception text itself (``str(exc)``) may hold details and
goes to logs only.
"""

from __future__ import annotations


class BotError(Exception):
    code = "internal_error"
    public = "debate-bot hit an internal error."

    def __init__(self, message: str = "", *, public: str | None = None) -> None:
        super().__init__(message or self.public)
        if public is not None:
            self.public = public


class WebhookError(BotError):
    code = "webhook_error"
    public = "The webhook delivery was rejected."

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message, public=message)
        self.status = status


class GitHubError(BotError):
    code = "github_error"
    public = "A call to GitHub failed."

    def __init__(self, message: str = "", *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ModelError(BotError):
    """A model call failed; ``drop_class`` is the stable class recorded on the turn."""

    code = "model_error"
    public = "A model call failed."

    def __init__(self, message: str = "", *, drop_class: str = "provider_error") -> None:
        super().__init__(message)
        self.drop_class = drop_class


class ConfigError(BotError):
    """Bad settings, repo config, plan frontmatter or CLI input.

    Its message is written for the user who made the mistake (it is public).
    """

    code = "config_error"
    public = "The configuration is invalid."

    def __init__(self, message: str) -> None:
        super().__init__(message, public=message)


class StoreError(BotError):
    code = "store_error"
    public = "The run store failed."


class ProtocolError(BotError):
    code = "protocol_error"
    public = "The debate protocol reached an invalid state."
