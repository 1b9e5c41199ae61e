"""The judge's reading of what a candidate process answers to a task (gates.candidate's `task` requests): its JSON
meta checked against a shape before any of it is used, so that a forged or malformed answer is a failing verdict
(`protocol_error`), never an exception in the judge and never a value the judge did not expect.

A shape is a plain value: a type check (`NUMBER`, `COUNT`, `FLAG`, `text(limit)`), a `Record` (an object with
required and optional keys, no others), `ListOf` or `MapOf`. `checked(meta, shape)` returns the value or raises
`AnswerError` naming the path of the first thing wrong. Numbers are finite: a NaN or an infinity in a timing or a
metric is refused here, not compared later."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


class AnswerError(ValueError):
    """An answer that does not have the shape asked; the judge fails the check with `protocol_error`."""


@dataclass(frozen=True)
class Scalar:
    """A JSON scalar: `kind` is "number" (finite int or float), "count" (int >= 0), "flag" (bool) or "text"."""

    kind: str
    limit: int = 0  # text: the most characters; number: unused


NUMBER = Scalar("number")
COUNT = Scalar("count")
FLAG = Scalar("flag")


def text(limit: int = 2000) -> Scalar:
    return Scalar("text", limit)


@dataclass(frozen=True)
class Record:
    """An object with exactly these keys (`optional` ones may be absent or null), each of its shape."""

    required: dict = field(default_factory=dict)
    optional: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ListOf:
    item: Any
    limit: int = 10_000


@dataclass(frozen=True)
class MapOf:
    """An object of any keys (text up to `key_limit` characters), each value of one shape."""

    value: Any
    limit: int = 1000
    key_limit: int = 200


@dataclass(frozen=True)
class OneOf:
    """The first of `shapes` the value has."""

    shapes: tuple


def checked(value: Any, shape: Any, path: str = "answer") -> Any:
    """`value` if it has `shape`, else AnswerError naming where it does not."""
    if isinstance(shape, Scalar):
        return _scalar(value, shape, path)
    if isinstance(shape, Record):
        return _record(value, shape, path)
    if isinstance(shape, ListOf):
        if not isinstance(value, list) or len(value) > shape.limit:
            raise AnswerError(f"{path}: expected a list of at most {shape.limit} items, got {_kind(value)}")
        return [checked(v, shape.item, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(shape, MapOf):
        if not isinstance(value, dict) or len(value) > shape.limit:
            raise AnswerError(f"{path}: expected an object of at most {shape.limit} keys, got {_kind(value)}")
        for key in value:
            if not isinstance(key, str) or len(key) > shape.key_limit:
                raise AnswerError(f"{path}: a key that is not short text")
        return {k: checked(v, shape.value, f"{path}.{k}") for k, v in value.items()}
    if isinstance(shape, OneOf):
        for option in shape.shapes:
            try:
                return checked(value, option, path)
            except AnswerError:
                continue
        raise AnswerError(f"{path}: {_kind(value)} is none of the shapes allowed")
    raise TypeError(f"not a shape: {shape!r}")  # the judge's own mistake, not the candidate's


def _scalar(value: Any, shape: Scalar, path: str) -> Any:
    if shape.kind == "flag":
        if type(value) is not bool:
            raise AnswerError(f"{path}: expected true or false, got {_kind(value)}")
        return value
    if shape.kind == "text":
        if not isinstance(value, str) or len(value) > shape.limit:
            raise AnswerError(f"{path}: expected text of at most {shape.limit} characters, got {_kind(value)}")
        return value
    if type(value) not in (int, float) or not math.isfinite(value):  # bool is no number here
        raise AnswerError(f"{path}: expected a finite number, got {_kind(value)}")
    if shape.kind == "count" and (type(value) is not int or value < 0):
        raise AnswerError(f"{path}: expected a count (an integer >= 0), got {value!r}")
    return value


def _record(value: Any, shape: Record, path: str) -> dict:
    if not isinstance(value, dict):
        raise AnswerError(f"{path}: expected an object, got {_kind(value)}")
    extra = set(value) - set(shape.required) - set(shape.optional)
    if extra:
        raise AnswerError(f"{path}: keys not asked for: {sorted(map(str, extra))[:5]}")
    out = {}
    for key, item in shape.required.items():
        if key not in value:
            raise AnswerError(f"{path}: no {key!r}")
        out[key] = checked(value[key], item, f"{path}.{key}")
    for key, item in shape.optional.items():
        if value.get(key) is not None:
            out[key] = checked(value[key], item, f"{path}.{key}")
    return out


def _kind(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return type(value).__name__


# --- the shapes the gates ask for ---------------------------------------------------------------------------------

# a timing.Timing as the candidate reports it (`spread` is derived, so the judge recomputes it)
TIMING = Record(
    required={
        "median_ms": NUMBER,
        "p20_ms": NUMBER,
        "p80_ms": NUMBER,
        "min_ms": NUMBER,
        "max_ms": NUMBER,
        "reps": COUNT,
        "wall_median_ms": NUMBER,
    },
    optional={
        "turn_wait_s": NUMBER,
        "turn_held_s": NUMBER,
        "first_calls_s": NUMBER,
        "host_launch_ms": NUMBER,
        "launch_bound": NUMBER,
        "spread": NUMBER,
    },
)

# one kernel specialization's static metrics (sass.kernel_metrics, gates.compile): numbers, labels, and counts by
# kind (load widths, tensor-core instruction kinds)
METRIC = OneOf((NUMBER, FLAG, text(2000), MapOf(NUMBER, limit=64, key_limit=64)))
SPECIALIZATION = MapOf(METRIC, limit=64, key_limit=64)

# what an output or input looks like in a frame's meta (wire.pack_values)
_PLAIN = OneOf((NUMBER, FLAG, text(200)))
VALUE = Record(
    optional={
        "tensor": text(64),
        "stride": ListOf(NUMBER, 64),
        "value": OneOf((_PLAIN, ListOf(_PLAIN, 64))),
        "tuple": FLAG,
        "type": text(64),
    }
)


def timing(raw: dict):
    """A checked TIMING as a timing.Timing, with the candidate's figures in their order: a median below its own
    p20 or a p80 below it is not a distribution anyone measured."""
    from klineage.timing import Timing

    t = checked(raw, TIMING, "timing")
    t.pop("spread", None)
    if not (0 <= t["min_ms"] <= t["p20_ms"] <= t["median_ms"] <= t["p80_ms"] <= t["max_ms"]) or t["reps"] < 1:
        raise AnswerError(f"timing: figures out of order or no repetitions: {t}")
    if t["median_ms"] <= 0:
        raise AnswerError("timing: a median of zero")
    return Timing(**t)
