"""The repository brief: what a repository-wide or folder-wide design review
debates instead of a plan.

Two pure steps with the I/O between them, shared by the GitHub side (one
recursive git-trees request, then the contents) and the local side
(``bot.repo.brief.local``)::

    paths = plan_fetches(entries, scope, ref=ref)        # ConfigError: no run
    contents = {p: fetch(p) for p in paths}              # None: gone or binary
    brief = build_brief(entries, scope, contents, budget_kb=..., truncated=...)
"""

from bot.repo.brief.build import Brief, build_brief
from bot.repo.brief.choose import MAX_FILES, plan_fetches
from bot.repo.brief.tree import TreeEntry, nothing_to_review, parse_git_tree

__all__ = [
    "MAX_FILES",
    "Brief",
    "TreeEntry",
    "build_brief",
    "nothing_to_review",
    "parse_git_tree",
    "plan_fetches",
]
