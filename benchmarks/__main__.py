"""Run benchmarks by name: ``python -m benchmarks [name ...] [--quick]``.

Benchmarks are discovered, not listed: any module of this package whose name
does not start with ``_`` and which defines a callable ``main(argv) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
import traceback
from collections.abc import Callable
from types import ModuleType

import benchmarks

BenchMain = Callable[[list[str]], int]


def discover() -> dict[str, BenchMain]:
    found: dict[str, BenchMain] = {}
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        module: ModuleType = importlib.import_module(f"{benchmarks.__name__}.{info.name}")
        entry = getattr(module, "main", None)
        if callable(entry):
            found[info.name] = entry
    return found


def main(argv: list[str] | None = None) -> int:
    available = discover()
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=f"Run benchmarks (available: {', '.join(available) or 'none'}).",
    )
    parser.add_argument("names", nargs="*", metavar="name", help="benchmarks to run; default all")
    parser.add_argument("--quick", action="store_true", help="fewer iterations, for a smoke run")
    args = parser.parse_args(argv)

    unknown = [n for n in args.names if n not in available]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    names = args.names or list(available)
    sub_argv = ["--quick"] if args.quick else []

    status = 0
    for name in names:
        print(f"\n== {name} ==", flush=True)
        started = time.perf_counter()
        try:
            code = available[name](list(sub_argv))
        except Exception:
            # One broken benchmark must not hide the others' figures.
            traceback.print_exc()
            code = 1
        print(f"({name}: {time.perf_counter() - started:.1f} s)", flush=True)
        status = max(status, code)
    return status


if __name__ == "__main__":
    sys.exit(main())
