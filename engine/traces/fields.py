"""Malformed trace input, refused naming the field: `FieldError`, the type check every reader uses, token
counts, the check that every string of a record is Unicode text, and JSON read within bounds (`loads`).

Bounds, so that every reader ends on any input with memory bounded by what it reads: JSON values nest at most
`MAX_DEPTH` levels (the chat templates and the readers walk values recursively; a real request nests a few
dozen), integers have at most Python's 4,300 digits, and a token count is at most `MAX_TOKENS`.
"""

from __future__ import annotations

import json
from typing import Any

from engine.errors import TraceError

MAX_DEPTH = 256  # levels of JSON nesting a trace value may have
MAX_TOKENS = 10**12  # a token count of one request: far above any model's context


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


def token_count(value: Any, field_path: str) -> int:
    """A non-negative token count of one request (at most `MAX_TOKENS`), else a FieldError naming the field."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        shown = f"{value!r:.40}" if not isinstance(value, int) or value < 10**40 else "an integer over 10^40"
        raise FieldError(field_path, f"expected a token count (0 to {MAX_TOKENS:.0e}), got {shown}")
    return value


class JSONLimitError(ValueError):
    """Valid JSON beyond what is read: nested deeper than `MAX_DEPTH`, or an integer of over 4,300 digits."""


def loads(text: str, strings: bool = True, where: str = "") -> Any:
    """`json.loads` within the bounds (`json.JSONDecodeError` for invalid JSON, `JSONLimitError` beyond
    them, a FieldError under field `where` for nesting); with `strings`, every string checked to be Unicode
    text (`refuse_lone_surrogates`)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONLimitError(f"nested more than {MAX_DEPTH} levels deep") from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # Python's limit on the digits of an integer
        raise JSONLimitError("holds an integer of more than 4,300 digits") from None
    _check(value, where, strings)
    return value


def json_text(text: str, field_path: str) -> Any:
    """The JSON value that field `field_path` holds as text (a captured body, an attribute), within the
    bounds, its strings Unicode text; anything else a FieldError naming the field."""
    try:
        return loads(text, where=field_path)
    except json.JSONDecodeError as e:
        raise FieldError(field_path, f"not valid JSON: {e}") from None
    except JSONLimitError as e:
        raise FieldError(field_path, str(e)) from None


def tool_arguments(value: Any, field_path: str) -> Any:
    """A tool call's arguments as sent: a JSON string is read within the bounds (beyond them, or holding a
    lone surrogate, a FieldError naming the field: the chat template and the readers walk the value
    recursively); a string that is not JSON stays as it is (the template renders the string); any other
    value is the body's own, already bounded."""
    if not isinstance(value, str):
        return value
    try:
        return loads(value, where=field_path)
    except json.JSONDecodeError:
        return value
    except JSONLimitError as e:
        raise FieldError(field_path, str(e)) from None


def _path(link: tuple[Any, ...] | None, where: str) -> str:
    """The field path of a node of `_check`'s walk, from its chain of (parent, key) links."""
    keys = []
    while link is not None:
        link, key = link
        keys.append(key)
    out = where
    for key in reversed(keys):
        out += f"[{key}]" if isinstance(key, int) else f".{key}" if out else str(key)
        if len(out) > 80:  # a path through hundreds of levels
            return out[:77] + "..."
    return out or "body"


def _check(value: Any, where: str, strings: bool) -> None:
    """Walk `value` without recursion: refuse nesting deeper than `MAX_DEPTH` and (with `strings`) the first
    string, in document order, that holds a lone surrogate, naming the field."""
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(value, 0, None)]
    while stack:
        item, depth, link = stack.pop()
        if isinstance(item, str):
            if strings:
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise FieldError(
                        _path(link, where),
                        f"holds a lone surrogate {item[e.start]!r} at character {e.start}: "
                        "not valid Unicode text",
                    ) from None
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise FieldError(_path(link, where), f"nested more than {MAX_DEPTH} levels deep")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack += reversed([(v, depth + 1, (link, k)) for k, v in pairs])


def refuse_lone_surrogates(value: Any, where: str = "") -> None:
    """A FieldError naming the first string under `value` that holds a lone surrogate (a JSON `\\ud800`
    escape decodes to one; it is not Unicode text and cannot be tokenized), or where `value` nests more
    than `MAX_DEPTH` levels deep."""
    _check(value, where, strings=True)
