"""Malformed trace input, refused naming the field: `FieldError`, the type check every reader uses, and the
check that every string of a record is Unicode text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from engine.errors import TraceError


class FieldError(TraceError):
    """Malformed input at `field` (a path like `messages[2].content[0].type`) of one request."""

    def __init__(self, field_path: str, problem: str) -> None:
        super().__init__(f"{field_path}: {problem}")
        self.field_path, self.problem = field_path, problem


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def expect(value: Any, kind: type | tuple[type, ...], field_path: str) -> Any:
    """`value` if it is of `kind` (a bool is not an int here), else a FieldError naming the field."""
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        names = " or ".join(k.__name__ for k in _kinds(kind))
        raise FieldError(
            field_path,
            f"expected {names.replace('str', 'a string').replace('list', 'a list')}"
            f", got {type(value).__name__} {str(value)[:40]!r}",
        )
    return value


def _lone_surrogates(value: Any, where: str) -> Iterator[tuple[str, str, int]]:
    """(field, text, index) of each string under `value` holding a lone surrogate."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            yield where or "body", value, e.start
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _lone_surrogates(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _lone_surrogates(item, f"{where}[{i}]")


def refuse_lone_surrogates(value: Any, where: str = "") -> None:
    """A FieldError naming the first string under `value` that holds a lone surrogate (a JSON `\\ud800`
    escape decodes to one; it is not Unicode text and cannot be tokenized)."""
    bad = next(_lone_surrogates(value, where), None)
    if bad is not None:
        field_path, text, at = bad
        raise FieldError(
            field_path, f"holds a lone surrogate {text[at]!r} at character {at}: not valid Unicode text"
        )
