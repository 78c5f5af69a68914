"""The heatmaps' colour-scale transforms of attention probabilities, by name (`--transform`): tensor methods
only, so the names are read without loading torch."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor


def _without_sink(p: Tensor) -> Tensor:
    rest = p.clone()
    rest[..., 0] = float("nan")
    return rest / p[..., 1:].sum(-1, keepdim=True)  # row 0 (only token 0) becomes NaN: nothing left to show


TRANSFORMS: dict[str, tuple[Callable[[Tensor], Tensor], str]] = {
    "none": (lambda p: p, "attention probability p"),
    "log": (lambda p: (1 + 1000 * p).log10(), "log10(1 + 1000·p)"),
    "sqrt": (lambda p: p.sqrt(), "sqrt(p)"),
    "exclude-sink": (_without_sink, "p renormalised without token 0"),
}
