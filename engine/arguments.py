"""Checks of argument values at the public boundary (API and command line): types and ranges.

Each check returns the value as a plain `int`/`float` or raises one `InvalidArgumentError` line naming the
argument. `bool` is refused where a number is expected (Python counts it as an int; a user never means it).
"""

from __future__ import annotations

import argparse
import math
import numbers
from collections.abc import Callable

from engine.errors import EngineError, InvalidArgumentError

DEFAULT_CACHE_TOKENS = 65_536  # the KV pool when neither cache_tokens nor cache_gb is given
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes an unsigned 64-bit seed at most
# Stop strings a request may carry, and the characters of each: matching costs O(characters) to prepare and
# O(new characters x stop strings) per token (engine/runtime/stop_strings.py); a server refuses more (4xx).
MAX_STOP_STRINGS = 64
MAX_STOP_CHARS = 4096


def integer(name: str, value: object, minimum: int | None = None, maximum: int | None = None) -> int:
    """An int (numpy ints too) of at least `minimum` and at most `maximum`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidArgumentError(f"{name} must be at most {maximum}, got {value}")
    return int(value)


def random_seed(name: str, value: object) -> int:
    """A random seed: an int in [0, 2**64 - 1], the range every seeded generator here takes."""
    return integer(name, value, minimum=0, maximum=SEED_MAX)


def boolean(name: str, value: object) -> bool:
    """True or False, nothing merely truthy."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be True or False, got {value!r:.60}")
    return value


def real(
    name: str,
    value: object,
    minimum: float | None = None,
    *,
    positive: bool = False,
    maximum: float | None = None,
) -> float:
    """A finite number, at least `minimum` (and above 0 when `positive`), at most `maximum`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{name} must be a finite number, got {value!r}")
    if positive and number <= 0:
        raise InvalidArgumentError(f"{name} must be greater than 0, got {value!r}")
    if minimum is not None and number < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum}, got {value!r}")
    if maximum is not None and number > maximum:
        raise InvalidArgumentError(f"{name} must be at most {maximum}, got {value!r}")
    return number


def string(name: str, value: object, error: type[EngineError] = InvalidArgumentError) -> str:
    """A str that is valid Unicode: a lone surrogate (from a bad decode) cannot be tokenized."""
    if not isinstance(value, str):
        raise error(f"{name} must be a string, got {type(value).__name__} {value!r:.60}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise error(
            f"{name} holds a lone surrogate {value[e.start]!r} at character {e.start}: not valid Unicode text"
        ) from None
    return value


def stop_strings(stop: object) -> tuple[str, ...]:
    """`stop`: None, one string (never split into characters) or a list of at most MAX_STOP_STRINGS
    non-empty strings of at most MAX_STOP_CHARS characters each."""
    if stop is None:
        return ()
    items = [stop] if isinstance(stop, str) else stop
    if not isinstance(items, list | tuple):
        raise InvalidArgumentError(f"stop must be a string or a list of strings, got {type(stop).__name__}")
    if len(items) > MAX_STOP_STRINGS:
        raise InvalidArgumentError(f"stop takes at most {MAX_STOP_STRINGS} strings, got {len(items)}")
    for i, item in enumerate(items):
        name = "stop" if isinstance(stop, str) else f"stop[{i}]"
        if not string(name, item):
            raise InvalidArgumentError(f"{name} is an empty string, which would stop before any text")
        if len(item) > MAX_STOP_CHARS:
            raise InvalidArgumentError(
                f"{name} has {len(item):,} characters; a stop string takes at most {MAX_STOP_CHARS:,}"
            )
    return tuple(items)


def int_flag(minimum: int = 1, maximum: int | None = None) -> Callable[[str], int]:
    """argparse `type=` for an integer flag in [`minimum`, `maximum`]: a bad value is argparse's one error
    line naming the flag (exit status 2)."""

    def parse(value: str) -> int:
        try:
            return integer("value", int(value), minimum, maximum)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
        except InvalidArgumentError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def text_flag(value: str) -> str:
    """argparse `type=` for a flag that names something (an address, a model name): a blank value is
    argparse's one error line (`--host ""` bound every interface)."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"must not be empty, got {value!r}")
    return value


def float_flag(
    minimum: float | None = None, *, positive: bool = False, maximum: float | None = None
) -> Callable[[str], float]:
    """argparse `type=` for a finite number flag, at least `minimum` (above 0 when `positive`), at most
    `maximum`."""

    def parse(value: str) -> float:
        try:
            return real("value", float(value), minimum, positive=positive, maximum=maximum)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
        except InvalidArgumentError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse
