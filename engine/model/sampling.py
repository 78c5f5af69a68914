"""Next-token choice: greedy at temperature 0, else temperature and nucleus (top-p) sampling."""

from __future__ import annotations

import torch

from engine.arguments import real
from engine.errors import NumericalError


def check_sampling(temperature: object, top_p: object) -> tuple[float, float]:
    """Validated (temperature >= 0, 0 < top_p <= 1); nothing is clamped."""
    return real("temperature", temperature, 0.0), real("top_p", top_p, positive=True, maximum=1.0)


def sample(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None) -> int:
    """logits: float32 [vocab]. Deterministic for a given generator seed. Arguments come from `check_sampling`."""
    if not bool(torch.isfinite(logits).all()):
        raise NumericalError(
            "the model produced NaN or infinite logits; in float16 this is usually an overflow "
            "(try --dtype bfloat16 or float32)"
        )
    if temperature == 0.0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        # keep the smallest prefix whose mass reaches top_p (always at least the top token)
        keep = sorted_probs.cumsum(-1) - sorted_probs < top_p
        probs = torch.zeros_like(probs).scatter_(0, order[keep], sorted_probs[keep])
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))
