"""Next-token choice: greedy at temperature 0, else temperature and nucleus (top-p) sampling."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.arguments import real
from engine.errors import NumericalError


def check_sampling(temperature: object, top_p: object) -> tuple[float, float]:
    """Validated (temperature >= 0, 0 < top_p <= 1); nothing is clamped."""
    return real("temperature", temperature, 0.0), real("top_p", top_p, positive=True, maximum=1.0)


def sample_rows(
    logits: torch.Tensor, params: Sequence[tuple[float, float, torch.Generator | None]]
) -> list[int]:
    """The next token of each row of float32 `logits [rows, vocab]`, row i by (temperature, top_p, generator)
    from `params[i]` (checked by `check_sampling`). Greedy rows and the finiteness check cost one transfer to
    the host for the whole step; a seeded row is deterministic for its generator."""
    finite, greedy = torch.stack((torch.isfinite(logits).all(-1).long(), logits.argmax(-1))).tolist()
    if not all(finite):
        raise NumericalError(
            "the model produced NaN or infinite logits; in float16 this is usually an overflow "
            "(try --dtype bfloat16 or float32)"
        )
    return [
        greedy[i] if temperature == 0.0 else _sample(logits[i], temperature, top_p, generator)
        for i, (temperature, top_p, generator) in enumerate(params)
    ]


def _sample(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None) -> int:
    """Temperature and nucleus sampling of one row `[vocab]`."""
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        # keep the smallest prefix whose mass reaches top_p (always at least the top token)
        keep = sorted_probs.cumsum(-1) - sorted_probs < top_p
        probs = torch.zeros_like(probs).scatter_(0, order[keep], sorted_probs[keep])
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))
