"""A request body's JSON, read strictly: what Python's `json` would accept but the rest of the server (or the
record file's readers) could not hold is refused here with a 400 naming where it is.

- Nesting: at most `MAX_DEPTH` levels of arrays and objects (the body itself is level 1): one less than
  the trace readers take (engine/traces/fields.py), the record's line holding the body one level down. A
  tool schema that deep renders, records and replays; deeper, the recursive readers downstream (the chat
  template's JSON, the control-token scan, the replay parsers) would run out of stack.
- Strings: Unicode text. A `\ud800` escape decodes to a lone surrogate, which no tokenizer takes and the
  trace readers refuse.
- Integers: at most `MAX_DIGITS` digits, the most Python converts (a longer one cannot even be printed).
- Numbers: finite only. `NaN`, `Infinity` and `-Infinity` are not JSON (RFC 8259), and a literal too large
  for a double (`1e400`) would become one; the record file is strict JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from engine.serve.errors import APIError
from engine.traces import fields

MAX_DEPTH = fields.MAX_DEPTH - 1
MAX_DIGITS = sys.get_int_max_str_digits() or 4300
SHOWN_STEPS = 6  # path steps an error line shows before eliding the middle


class _Refused:
    """A number the body may not hold, left in place by the parser and reported with its path."""

    def __init__(self, what: str) -> None:
        self.what = what


def _integer(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    if digits > MAX_DIGITS:
        return _Refused(
            f"an integer of {digits:,} digits is longer than the {MAX_DIGITS:,} this server reads"
        )
    return int(text)


def _float(text: str) -> float | _Refused:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        return _Refused(f"{text[:40]} is too large for a number (a double's range)")
    return value


def _constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a JSON number (JSON has no NaN or Infinity)")


def parse(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, every check above passed; else a 400 (code `invalid_json`)."""
    try:
        data = json.loads(raw, parse_int=_integer, parse_float=_float, parse_constant=_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise APIError(400, f"request body is not valid JSON: {e}", code="invalid_json") from None
    except RecursionError:  # far deeper than MAX_DEPTH: the parser itself gave up
        raise APIError(400, _too_deep("the request body"), code="invalid_json") from None
    if not isinstance(data, dict):
        raise APIError(
            400, f"request body must be a JSON object, got {type(data).__name__}", code="invalid_json"
        )
    _check(data)
    try:
        fields.refuse_lone_surrogates(data)
    except fields.FieldError as e:
        raise APIError(400, str(e), e.field_path, "invalid_json") from None
    return data


def _too_deep(where: str) -> str:
    return f"{where} nests arrays and objects deeper than the {MAX_DEPTH} levels this server reads"


def _check(body: dict[str, Any]) -> None:
    """Walk every container (no recursion: a body at the limit walks in constant stack)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(body, ())]
    while stack:
        value, path = stack.pop()
        if len(path) >= MAX_DEPTH:
            raise APIError(
                400, _too_deep(f"request body at {field_path(path)}"), path_param(path), "invalid_json"
            )
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            if isinstance(item, dict | list):
                stack.append((item, (*path, key)))
            elif isinstance(item, _Refused):
                at = (*path, key)
                raise APIError(400, f"{field_path(at)}: {item.what}", path_param(at), "invalid_json")


def field_path(path: tuple[str | int, ...]) -> str:
    """`messages[0].content[2].text`; a long path keeps its first and last steps."""
    steps = [f"[{k}]" if isinstance(k, int) else f".{k}" for k in path]
    if len(steps) > 2 * SHOWN_STEPS:
        steps = [*steps[:SHOWN_STEPS], f"...({len(steps) - 2 * SHOWN_STEPS} more)", *steps[-SHOWN_STEPS:]]
    return "".join(steps).removeprefix(".")


def path_param(path: tuple[str | int, ...]) -> str | None:
    """The error's `param`: the whole path when short, else the top-level field it lies in."""
    return field_path(path) if len(path) <= 2 * SHOWN_STEPS else str(path[0])
