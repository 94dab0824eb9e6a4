"""`python -m bot`: the CLI without relying on the installed script."""

from bot.cli.main import main

main()
