"""The run layer: where the engine meets I/O (docs/architecture.md)."""
