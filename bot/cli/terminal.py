"""The one place the CLI makes a rich ``Console``: text prints as text.

Rich reads ``[word]`` in a string as markup and drops it, and ``:name:`` as an
emoji code: "pip install 'debate-bot[eval]'" printed as "pip install
'debate-bot'", a proxy URL's ``[user:password@]`` vanished from a table. A
console from here has markup and emoji codes off, so every string (a message, a
table cell, a path, an error from a driver) comes out as written; styles go in
as ``style=`` or ``rich.text.Text``, never as markup in the text.
"""

from __future__ import annotations

from typing import IO

from rich.console import Console


def make_console(
    *,
    stderr: bool = False,
    file: IO[str] | None = None,
    width: int | None = None,
    highlight: bool = True,
    soft_wrap: bool = False,
) -> Console:
    return Console(
        stderr=stderr,
        file=file,
        width=width,
        highlight=highlight,
        soft_wrap=soft_wrap,
        markup=False,
        emoji=False,
    )
