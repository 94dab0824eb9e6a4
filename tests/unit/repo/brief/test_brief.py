"""The repository brief (bot/brief): tree filtering and outline, the fetch
plan, opening comments, budgeting, scope errors, and the local tree reader.

``tests/data/git-tree.recursive.json`` is written by the project (it is not a
published payload, so it stays out of tests/fixtures/): the shape of GitHub's
documented ``GET /repos/{owner}/{repo}/git/trees/{sha}?recursive=1`` answer
(sha, url, tree[path, mode, type, sha, size (blobs only), url], truncated) for
an invented repository with the clutter real ones carry.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.core.errors import ConfigError
from bot.repo.brief import MAX_FILES, Brief, TreeEntry, build_brief, parse_git_tree, plan_fetches
from bot.repo.brief import tree as tree_mod
from bot.repo.brief.local import read_text, read_tree
from bot.repo.brief.opening import opening_comment

FIXTURE = Path(__file__).resolve().parents[3] / "data" / "git-tree.recursive.json"


@pytest.fixture(scope="module")
def entries() -> tuple[TreeEntry, ...]:
    found, truncated = parse_git_tree(json.loads(FIXTURE.read_text()))
    assert not truncated
    return found


def _brief(entries: tuple[TreeEntry, ...], scope: str = "", **contents: str) -> Brief:
    return build_brief(entries, scope, contents, budget_kb=100, ref="main", repo="octo-org/shop")


ORDERS_PY = '''\
# Copyright 2024 Octo Org
# Licensed under the Apache License, Version 2.0

"""Orders: the aggregate that owns an order's lines, totals and state machine.

Payments and checkout talk to orders only through this module.
"""

from __future__ import annotations

LICENSE_NOTE = "not part of the opening"
'''

MAIN_GO = """\
/*
 * Copyright 2024 Octo Org. SPDX-License-Identifier: Apache-2.0
 */

// Package main runs the checkout service: it reserves stock, then asks
// the payments API to capture the order.
package main

// Server is not part of the opening.
type Server struct{}
"""


# -- the fixture and the tree ------------------------------------------------


def test_fixture_has_the_documented_shape(entries: tuple[TreeEntry, ...]) -> None:
    data = json.loads(FIXTURE.read_text())
    assert set(data) == {"sha", "url", "tree", "truncated"}
    for item in data["tree"]:
        assert {"path", "mode", "type", "sha", "url"} <= set(item)
        assert ("size" in item) == (item["type"] == "blob")
    by_path = {e.path: e for e in entries}
    assert by_path["shop/orders.py"] == TreeEntry("shop/orders.py", 48213, "blob")
    assert by_path["shop"].kind == "tree"
    assert len(entries) == len(data["tree"])


def test_parse_git_tree_reads_truncated_and_ignores_odd_items() -> None:
    payload = {
        "tree": [
            {"path": "a.py", "type": "blob", "size": 3},
            {"path": "lib", "type": "commit"},
            {"path": "x", "type": "tag"},
            "not an item",
        ],
        "truncated": True,
    }
    found, truncated = parse_git_tree(payload)
    assert truncated is True
    assert found == (TreeEntry("a.py", 3, "blob"), TreeEntry("lib", 0, "commit"))


def test_vendored_lockfiles_generated_binary_and_hidden_are_left_out_with_counts(
    entries: tuple[TreeEntry, ...],
) -> None:
    brief = _brief(entries)
    for gone in (
        "node_modules",
        "lodash.js",
        "package-lock.json",
        "poetry.lock",
        "go.sum",
        "app.min.js",
        "orders_pb2.py",
        "hero.jpg",
        "inter.woff2",
        "checkout-flow.png",
        ".vscode",
        "img/",
        "fonts/",
    ):
        assert gone not in brief.outline, gone
    assert "  .github/\n    workflows/\n      ci.yml (2.6 KB)" in brief.outline  # .github stays
    assert "package.json (1.2 KB)" in brief.outline
    left = "\n".join(brief.left_out)
    assert "5 files in vendored, dependency or build folders: `node_modules/`" in left
    assert "2 files in hidden folders: `.vscode/`" in left
    assert "3 lockfiles: `package-lock.json`, `poetry.lock`, `services/checkout/go.sum`" in left
    assert (
        "3 generated or minified files: `shop/proto/orders_pb2.py`, "
        "`web/static/app.min.js`, `web/static/app.min.js.map`"
    ) in left
    assert (
        "4 binary files: `assets/fonts/inter.woff2`, `assets/img/hero.jpg`, "
        "`docs/img/checkout-flow.png`, …" in left
    )


def test_wide_folders_collapse_to_counts(entries: tuple[TreeEntry, ...]) -> None:
    outline = _brief(entries).outline
    # 40 migrations in one folder (> COLLAPSE_AT); the one-child chain on one line.
    assert "  migrations/versions/ (40 files, 45.6 KB)\n" in outline
    assert "0001_step.py" not in outline
    assert "  services/checkout/\n    Dockerfile (760 B)" in outline


def test_outline_stays_within_its_line_bound() -> None:
    many = [TreeEntry(f"pkg{d:03d}/mod{f:02d}.py", 100) for d in range(120) for f in range(20)]
    outline = tree_mod.outline(many, "")
    lines = outline.splitlines()
    assert len(lines) <= tree_mod.MAX_LINES + 1
    # Breadth first: every top folder is there, the deeper level is counted.
    assert sum(1 for ln in lines if ln.startswith("  pkg")) == 120
    assert "  pkg119/ (20 files, 2.0 KB)" in lines
    wide = [TreeEntry(f"f{i:04d}.txt", 1) for i in range(2000)]
    cut = tree_mod.outline(wide, "").splitlines()
    assert len(cut) == tree_mod.MAX_LINES + 2
    assert cut[-1] == f"  … {2000 - tree_mod.MAX_LINES} more lines not shown"


# -- the fetch plan ----------------------------------------------------------


def test_plan_fetches_priority_order(entries: tuple[TreeEntry, ...]) -> None:
    assert plan_fetches(entries, "") == [
        "README.md",
        "ARCHITECTURE.md",
        "docs/adr/README.md",  # the decision index, then the newest record first
        "docs/adr/0003-split-checkout-service.md",
        "docs/adr/0002-use-postgres-for-orders.md",
        "docs/adr/0001-record-architecture-decisions.md",
        "docs/index.md",
        "docs/getting-started.md",
        "docs/api/orders.md",
        "package.json",
        "pyproject.toml",
        "Dockerfile",
        "docker-compose.yml",
        ".github/workflows/ci.yml",
        ".github/workflows/release.yml",
        ".github/CODEOWNERS",
        # The largest source files, tests (tests/test_orders.py, *_test.go) not
        # among them.
        "shop/orders.py",
        "services/checkout/main.go",
        "shop/payments.py",
        "web/src/app.ts",
        "shop/models.py",
        "shop/api/routes.py",
        "services/checkout/cart.go",
        "web/src/cart.ts",
    ]


def test_plan_fetches_is_bounded_and_keeps_room_for_source(
    entries: tuple[TreeEntry, ...],
) -> None:
    assert MAX_FILES == 25
    assert plan_fetches(entries, "", max_files=8) == [
        "README.md",
        "ARCHITECTURE.md",
        "docs/adr/README.md",
        "docs/adr/0003-split-checkout-service.md",
        "docs/adr/0002-use-postgres-for-orders.md",
        "docs/adr/0001-record-architecture-decisions.md",
        "shop/orders.py",  # a quarter of the requests go to source files
        "services/checkout/main.go",
    ]
    many_adrs = [TreeEntry(f"docs/adr/{i:04d}-x.md", 900) for i in range(1, 60)]
    planned = plan_fetches(many_adrs, "")
    assert planned[0] == "docs/adr/0059-x.md"
    assert len(planned) == 5  # the per-role cap, not 59 requests


def test_folder_scope_reads_the_folder_and_the_front_door(
    entries: tuple[TreeEntry, ...],
) -> None:
    assert plan_fetches(entries, "services/checkout/") == [
        "services/checkout/README.md",
        "README.md",
        "services/checkout/go.mod",
        "package.json",
        "pyproject.toml",
        "services/checkout/Dockerfile",
        ".github/CODEOWNERS",
        "services/checkout/main.go",
        "services/checkout/cart.go",
    ]
    brief = _brief(entries, "services/checkout")
    assert brief.scope == "services/checkout"
    assert brief.outline.startswith("services/checkout/\n  Dockerfile (760 B)\n")
    assert "shop" not in brief.outline and "node_modules" not in "\n".join(brief.left_out)
    assert brief.left_out[0] == "1 lockfile: `services/checkout/go.sum`"
    assert brief.title == "Design review of the folder `services/checkout/` of octo-org/shop"
    with_root = _brief(entries, "services/checkout", **{"README.md": "# Shop\n"})
    assert "outside the folder, as background only: `README.md`." in with_root.subject_text()
    assert "outside the folder" not in brief.subject_text()


def test_a_folder_named_as_vendored_is_reviewed_when_asked_for() -> None:
    tree = [TreeEntry("vendor/acme/client.go", 4000), TreeEntry("main.go", 10)]
    assert plan_fetches(tree, "vendor") == ["vendor/acme/client.go"]
    assert "client.go (3.9 KB)" in _brief(tuple(tree), "vendor").outline


# -- scope errors ------------------------------------------------------------


def test_empty_repository_is_one_clear_error() -> None:
    for call in (
        lambda: plan_fetches([], "", ref="main"),
        lambda: build_brief([], "", {}, budget_kb=100, ref="main"),
    ):
        with pytest.raises(ConfigError) as err:
            call()
        assert err.value.public == "The repository is empty at `main`; there is nothing to review."


def test_missing_folder_names_the_folder_and_the_ref(entries: tuple[TreeEntry, ...]) -> None:
    with pytest.raises(ConfigError) as err:
        plan_fetches(entries, "src/foo/", ref="feature/x")
    assert err.value.public == "`src/foo/` does not exist at `feature/x`."
    with pytest.raises(ConfigError, match=r"`sho/` does not exist\.$"):
        build_brief(entries, "sho", {}, budget_kb=100)  # a prefix of shop/ is not shop/
    with pytest.raises(ConfigError, match=r"`shop/orders\.py` is a file at `main`, not a folder"):
        plan_fetches(entries, "shop/orders.py", ref="main")
    with pytest.raises(ConfigError, match="leaves the repository root"):
        plan_fetches(entries, "../elsewhere")


def test_a_folder_of_nothing_but_clutter_is_an_error(entries: tuple[TreeEntry, ...]) -> None:
    with pytest.raises(ConfigError, match=r"Nothing to review in `assets/`: its 2 files"):
        _brief(entries, "assets/")


# -- contents, budget, warnings -----------------------------------------------


def test_source_files_contribute_only_their_opening_comment(
    entries: tuple[TreeEntry, ...],
) -> None:
    brief = _brief(
        entries,
        **{"shop/orders.py": ORDERS_PY, "services/checkout/main.go": MAIN_GO},
        **{"shop/payments.py": "import os\n\nPAY = 1\n"},
    )
    files = {f.path: f for f in brief.files}
    orders = files["shop/orders.py"]
    assert orders.condensed and orders.size_bytes == 48213  # the tree's size
    assert "the aggregate that owns an order's lines" in orders.text
    assert "Copyright" not in orders.text and "LICENSE_NOTE" not in orders.text
    main = files["services/checkout/main.go"].text
    assert "// Package main runs the checkout service" in main
    assert "SPDX" not in main and "Server" not in main
    assert "shop/payments.py" not in files
    assert "`shop/payments.py`: no opening docstring or comment" in brief.left_out


def test_budget_is_respected_and_an_oversized_doc_is_condensed(
    entries: tuple[TreeEntry, ...],
) -> None:
    section = "\n\n## {n}. {topic}\n\n" + "The {topic} module owns its data and boundaries. " * 40
    architecture = "# Architecture\n" + "".join(
        section.format(n=i, topic=t) for i, t in enumerate(["orders", "payments", "checkout"] * 4)
    )
    assert len(architecture.encode()) > 8 * 1024
    brief = build_brief(
        entries,
        "",
        {
            "README.md": "# Shop\n\nA shop.\n",
            "ARCHITECTURE.md": architecture,
            "docs/index.md": "# Docs\n\n" + "x" * 2000,
            "shop/orders.py": ORDERS_PY,
        },
        budget_kb=4,
    )
    files = {f.path: f for f in brief.files}
    assert sum(len(f.text.encode()) for f in brief.files) <= 4 * 1024
    assert not files["README.md"].condensed
    assert files["ARCHITECTURE.md"].condensed
    assert files["ARCHITECTURE.md"].size_bytes == len(architecture.encode())
    assert "[…]" in files["ARCHITECTURE.md"].text
    assert "docs/index.md" not in files
    assert any(x.startswith("`docs/index.md`: not embedded") for x in brief.left_out)


def test_unread_unfetched_and_unplanned_files_are_listed(
    entries: tuple[TreeEntry, ...],
) -> None:
    brief = build_brief(entries, "", {"README.md": None}, budget_kb=100, max_files=3, ref="main")
    assert plan_fetches(entries, "", max_files=3) == [
        "README.md",
        "ARCHITECTURE.md",
        "docs/adr/README.md",
    ]
    assert brief.left_out[5:] == (
        "could not be read (gone or not text): `README.md`",
        "not fetched: `ARCHITECTURE.md`, `docs/adr/README.md`",
        "14 more candidate files not read (at most 3 per review): "
        "`docs/adr/0003-split-checkout-service.md`, `docs/adr/0002-use-postgres-for-orders.md`, "
        "`docs/adr/0001-record-architecture-decisions.md`, `docs/index.md`, "
        "`docs/getting-started.md`, `docs/api/orders.md`, `package.json`, `pyproject.toml`, "
        "`Dockerfile`, `docker-compose.yml` and 4 more",
        "49 source files not read (a review reads only the opening comment of the largest few)",
    )
    assert brief.files == ()
    # A file the caller fetched beyond the plan is read, and not listed as left out.
    more = build_brief(entries, "", {"docs/index.md": "# Docs\n"}, budget_kb=100, max_files=3)
    assert [f.path for f in more.files] == ["docs/index.md"]
    assert "`docs/index.md`" not in "\n".join(more.left_out)


def test_submodules_show_in_the_outline() -> None:
    tree = [TreeEntry("lib/core.py", 2048), TreeEntry("lib/proto", 0, "commit")]
    assert _brief(tuple(tree)).outline == "./\n  lib/\n    proto (submodule)\n    core.py (2.0 KB)"


def test_truncated_tree_says_so(entries: tuple[TreeEntry, ...]) -> None:
    brief = build_brief(entries, "", {}, budget_kb=100, truncated=True)
    want = (
        f"The file tree was truncated by GitHub; reviewed from the {len(entries)} entries "
        "that came back."
    )
    assert brief.warnings == (want,)
    assert f"> {want}" in brief.subject_text()
    assert build_brief(entries, "", {}, budget_kb=100).warnings == ()


def test_subject_text_renders_header_tree_and_left_out(entries: tuple[TreeEntry, ...]) -> None:
    text = _brief(entries, **{"README.md": "# Shop\n"}).subject_text()
    assert text.startswith(
        "# Design review of the repository octo-org/shop\n\nReview the design at `main`"
    )
    assert "## File tree\n\n```text\n./\n  .github/\n" in text
    assert "\n```\n\n## Left out\n\n- 5 files in vendored" in text


# -- opening comments ---------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "text", "want"),
    [
        (
            "a.py",
            '#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n"""Run it."""\nx = 1\n',
            '"""Run it."""',
        ),
        ("a.py", "# Helpers for the CLI.\n\nimport os\n", "# Helpers for the CLI."),
        ("a.py", "import os\n\n# not an opening comment\n", ""),
        (
            "a.ts",
            "/**\n * The cart store.\n */\nexport class Cart {}\n",
            "/**\n * The cart store.\n */",
        ),
        (
            "a.rs",
            "//! Parser for the wire format.\n//! Zero-copy.\nuse std::io;\n",
            "//! Parser for the wire format.\n//! Zero-copy.",
        ),
        ("a.sh", "#!/bin/sh\n# Build the image.\nset -e\n", "# Build the image."),
        ("a.lua", "-- The game loop.\nlocal x = 1\n", "-- The game loop."),
    ],
)
def test_opening_comment(path: str, text: str, want: str) -> None:
    assert opening_comment(text, path) == want


def test_opening_comment_is_bounded() -> None:
    long = '"""' + "\n".join(f"line {i}" for i in range(500)) + '\n"""\n'
    got = opening_comment(long, "big.py")
    assert got.endswith("\n[…]") and len(got.splitlines()) <= 41


# -- the local reader ----------------------------------------------------------


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_read_tree_in_a_git_work_tree_honours_gitignore(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("secret.env\nout/\n")
    (tmp_path / "secret.env").write_text("TOKEN=x\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "bundle.js").write_text("x")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text('"""App."""\n')
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\x00\x00")
    subprocess.run(["git", "-C", str(tmp_path), "add", "src/app.py"], check=True)
    found = {e.path: e for e in read_tree(tmp_path)}
    assert set(found) == {".gitignore", "src/app.py", "logo.png"}  # untracked, not ignored: in
    assert found["src/app.py"] == TreeEntry("src/app.py", 11, "blob")
    assert read_text(tmp_path, "src/app.py") == '"""App."""\n'
    assert read_text(tmp_path, "logo.png") is None
    assert read_text(tmp_path, "../outside") is None
    assert read_text(tmp_path, "gone.md") is None


def test_read_tree_outside_git_skips_hidden_and_vendored(tmp_path: Path) -> None:
    (tmp_path / "node_modules" / "x").mkdir(parents=True)
    (tmp_path / "node_modules" / "x" / "i.js").write_text("x")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "blob").write_text("x")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "core.go").write_text("package lib\n")
    (tmp_path / ".env").write_text("A=1\n")
    (tmp_path / "lib" / "server.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    paths = [e.path for e in read_tree(tmp_path)]
    assert paths == ["lib/core.go"]  # no dot-file, no key file: they must not reach a model
    assert plan_fetches(read_tree(tmp_path), "lib") == ["lib/core.go"]
