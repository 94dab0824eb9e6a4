"""JSON (de)serialisation of the engine's frozen dataclasses (DebateSpec & co).

Generic over dataclass type hints, so a field added to ``DebateSpec`` needs no
change here. Tuples become JSON arrays, frozensets sorted arrays (stable
output), nested dataclasses objects; decoding rebuilds exactly the same types
so ``spec_from_json(spec_to_json(s)) == s``. Keys missing from stored JSON take
the field default (specs written before a field existed still load); unknown
keys are ignored (a spec written by a newer version still loads).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any, TypeVar

from bot.debate.types import DebateSpec
from bot.errors import CodecError

T = TypeVar("T")


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        items = [to_jsonable(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise CodecError(f"cannot encode {type(value).__name__}")


def to_json(value: Any) -> str:
    try:
        return json.dumps(to_jsonable(value), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # NaN / infinity
        raise CodecError(f"cannot encode value: {exc}") from exc


def from_json(cls: type[T], text: str | bytes) -> T:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise CodecError(f"invalid JSON for {cls.__name__}") from exc
    return typing.cast(T, _decode(cls, raw, cls.__name__))


def spec_to_json(spec: DebateSpec) -> str:
    return to_json(spec)


def spec_from_json(text: str | bytes) -> DebateSpec:
    return from_json(DebateSpec, text)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(tp: Any, raw: Any, where: str) -> Any:
    if tp is Any:
        return raw
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _decode_dataclass(tp, raw, where)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        if raw not in args:
            raise CodecError(f"{where}: {raw!r} is not one of {args!r}")
        return raw
    if origin in (typing.Union, types.UnionType):
        if raw is None and type(None) in args:
            return None
        errors: list[str] = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _decode(arg, raw, where)
            except CodecError as exc:
                errors.append(str(exc))
        raise CodecError("; ".join(errors) or f"{where}: unexpected null")
    if origin is tuple:
        if not isinstance(raw, list):
            raise CodecError(f"{where}: expected an array")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(raw))
        if len(args) != len(raw):
            raise CodecError(f"{where}: expected {len(args)} items")
        pairs = enumerate(zip(args, raw, strict=True))
        return tuple(_decode(a, v, f"{where}[{i}]") for i, (a, v) in pairs)
    if origin in (frozenset, set, list):
        if not isinstance(raw, list):
            raise CodecError(f"{where}: expected an array")
        (item,) = args or (Any,)
        return origin(_decode(item, v, f"{where}[{i}]") for i, v in enumerate(raw))
    if origin is dict:
        if not isinstance(raw, dict):
            raise CodecError(f"{where}: expected an object")
        _key, value = args or (str, Any)
        return {k: _decode(value, v, f"{where}.{k}") for k, v in raw.items()}
    return _decode_scalar(tp, raw, where)


def _decode_scalar(tp: Any, raw: Any, where: str) -> Any:
    if tp is type(None):
        if raw is not None:
            raise CodecError(f"{where}: expected null")
        return None
    if tp is bool:
        if not isinstance(raw, bool):
            raise CodecError(f"{where}: expected a boolean")
        return raw
    if tp is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise CodecError(f"{where}: expected an integer")
        return raw
    if tp is float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise CodecError(f"{where}: expected a number")
        return float(raw)
    if tp is str:
        if not isinstance(raw, str):
            raise CodecError(f"{where}: expected a string")
        return raw
    raise CodecError(f"{where}: unsupported type {tp!r}")


def _decode_dataclass(cls: type, raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise CodecError(f"{where}: expected an object")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in raw:
            kwargs[f.name] = _decode(hints[f.name], raw[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise CodecError(f"{where}: missing field {f.name!r}")
    return cls(**kwargs)
