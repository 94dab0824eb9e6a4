"""The run layer: the one place the engine meets I/O.

``execute`` drives a run from its spec and stored turns to its outcome; what
differs between the worker, Action mode, the local CLI and eval is passed in
as ``Hooks`` and a ``Completer`` (docs/architecture.md, "The run layer").
"""

from bot.runner.execute import Collect, Completer, Hooks, NoHooks, execute

__all__ = ["Collect", "Completer", "Hooks", "NoHooks", "execute"]
