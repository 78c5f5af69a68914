"""Malformed trace input, refused naming the field: `FieldError` and the type check every reader uses."""

from __future__ import annotations

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
