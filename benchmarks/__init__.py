"""Benchmarks: ``python -m benchmarks [name ...] [--quick]``.

Every public module here that defines ``main(argv: list[str]) -> int`` is a
benchmark. Each prints its own table and returns 0 unless it could not run:
benchmarks report figures, they do not gate.
"""
