"""Checks of top-level request fields, each refusal a 400 naming the field: types, ranges, fields that are
accepted only at the value that changes nothing, and fields neither API module knows (refused, as OpenAI
and Anthropic refuse them, rather than silently ignored)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from engine.serve.errors import APIError


def refuse_unknown(body: dict[str, Any], known: Iterable[str], within: str = "") -> None:
    unknown = sorted(set(body) - set(known))
    if unknown:
        name = f"{within}.{unknown[0]}" if within else unknown[0]
        raise APIError(400, f"unrecognized request argument supplied: {name}", name)


def only(body: dict[str, Any], name: str, allowed: tuple[Any, ...], why: str) -> None:
    """`name` may be absent or one of `allowed` (the values that change nothing here); else refused."""
    value = body.get(name)
    same = (v == value and isinstance(v, bool) == isinstance(value, bool) for v in allowed)
    if name in body and not any(same):
        raise APIError(400, f"{name}={value!r:.60} is not implemented: {why}", name)


def integer(
    body: dict[str, Any], name: str, minimum: int, default: Any = None, maximum: int | None = None
) -> Any:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise APIError(400, f"{name} must be an integer, got {value!r:.60}", name)
    if value < minimum:
        raise APIError(400, f"{name} must be at least {minimum}, got {_shown(value)}", name)
    if maximum is not None and value > maximum:
        raise APIError(400, f"{name} must be at most {maximum}, got {_shown(value)}", name)
    return value


def _shown(value: int) -> str:
    """An integer for an error line (Python refuses to print one of more than 4,300 digits)."""
    if value.bit_length() < 200:
        return str(value)
    return f"an integer of about {int(value.bit_length() * 0.30103)} digits"


def number(
    body: dict[str, Any], name: str, low: float, high: float, default: float, open_low: bool = False
) -> float:
    """A finite number in [low, high] ((low, high] with `open_low`); `default` when absent or null."""
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise APIError(400, f"{name} must be a number, got {value!r:.60}", name)
    if value > high or value < low or (open_low and value == low):
        bound = f"({low}, {high}]" if open_low else f"[{low}, {high}]"
        raise APIError(400, f"{name} must be in {bound}, got {value}", name)
    return float(value)


def boolean(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise APIError(400, f"{name} must be true or false, got {value!r:.60}", name)
    return value


def text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise APIError(400, f"{name} must be a string, got {type(value).__name__}", name)
    return value


def mapping(body: dict[str, Any], name: str) -> dict[str, Any]:
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise APIError(400, f"{name} must be an object, got {type(value).__name__}", name)
    return value


def strings(value: Any, name: str, limit: int | None = None, one_string: bool = True) -> list[str]:
    """A list of non-empty strings (stop sequences), or one such string where `one_string`."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) and one_string else value
    if not isinstance(items, list) or not all(isinstance(s, str) and s for s in items):
        what = "a non-empty string or a list of them" if one_string else "a list of non-empty strings"
        raise APIError(400, f"{name} must be {what}, got {value!r:.60}", name)
    if limit is not None and len(items) > limit:
        raise APIError(400, f"{name} takes at most {limit} sequences, got {len(items)}", name)
    return list(items)


def required(body: dict[str, Any], name: str) -> Any:
    if body.get(name) is None:
        raise APIError(400, f"{name}: field required", name)
    return body[name]
