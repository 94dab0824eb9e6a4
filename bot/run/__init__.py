"""The run layer: the one place the engine meets I/O.

``execute.execute`` drives a run from its spec and stored turns to its outcome;
what differs between the worker, Action mode, the local CLI and eval is passed
in as ``Hooks`` and a ``Completer`` (docs/architecture.md, "The run layer").
This package imports nothing on its own: an importer loads only the modules it names.
"""
