"""Checks of argument values at the public boundary (API and command line): types and ranges.

Each check returns the value as a plain `int`/`float` or raises one `InvalidArgumentError` line naming the
argument. `bool` is refused where a number is expected (Python counts it as an int; a user never means it).
"""

from __future__ import annotations

import math
import numbers

from engine.errors import InvalidArgumentError


def integer(name: str, value: object, minimum: int | None = None) -> int:
    """An int (numpy ints too) of at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def real(name: str, value: object, minimum: float | None = None, *, positive: bool = False) -> float:
    """A finite number, at least `minimum` (and above 0 when `positive`)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{name} must be a finite number, got {value!r}")
    if positive and number <= 0:
        raise InvalidArgumentError(f"{name} must be greater than 0, got {value!r}")
    if minimum is not None and number < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum}, got {value!r}")
    return number
