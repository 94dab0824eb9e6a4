"""Webhook signature verification (`X-Hub-Signature-256`).

We verify ourselves instead of using githubkit's ``verify()``: that one falls
back to SHA-1 when the ``sha256=`` prefix is missing.
"""

from __future__ import annotations

import hashlib
import hmac

from bot.core.errors import WebhookError

SIGNATURE_HEADER = "X-Hub-Signature-256"
_PREFIX = "sha256="
_HEX_LEN = 64


def sign(secret: bytes, body: bytes) -> str:
    """The header value GitHub sends for ``body`` signed with ``secret``."""
    return _PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_signature(secret: bytes, body: bytes, header: str | None) -> None:
    """Raise ``WebhookError(http_status=401)`` unless ``header`` signs ``body`` with ``secret``.

    An empty secret never verifies anything: HMAC with an empty key is forgeable
    by anyone, so a service without a secret must refuse every delivery.
    """
    if not secret:
        raise WebhookError("webhook secret is not configured", http_status=401)
    if not header:
        raise WebhookError("missing signature", http_status=401)
    value = header.strip()
    if not value.startswith(_PREFIX):
        raise WebhookError("signature must use sha256", http_status=401)
    hex_part = value[len(_PREFIX) :]
    if len(hex_part) != _HEX_LEN:
        raise WebhookError("malformed signature", http_status=401)
    try:
        given = bytes.fromhex(hex_part)
    except ValueError:
        raise WebhookError("malformed signature", http_status=401) from None
    expected = hmac.new(secret, body, hashlib.sha256).digest()
    if not hmac.compare_digest(expected, given):
        raise WebhookError("signature mismatch", http_status=401)
