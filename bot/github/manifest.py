"""The GitHub App manifest, deploy/app.yml: the one list of the app's
permissions and events, read by `setup` (to register the app) and `doctor`
(to compare with what GitHub granted)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from bot.core.errors import ConfigError


def load_app_manifest() -> dict[str, Any]:
    """deploy/app.yml: shipped in the wheel as bot/app.yml, read from the checkout otherwise."""
    packaged = files("bot").joinpath("app.yml")
    path = Path(str(packaged))
    if not path.is_file():
        path = Path(__file__).resolve().parents[2] / "deploy" / "app.yml"
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: not a GitHub App manifest")
    return doc
