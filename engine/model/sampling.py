"""Next-token choice for a step's rows, batched on the device: greedy at temperature 0 (and below
GREEDY_BELOW), else temperature and nucleus (top-p) sampling by the inverse of each row's distribution at
one uniform number drawn from the row's own generator.

A row's token depends only on its logits, its parameters and its generator, never on the other rows of the
batch, so a seeded request samples the same tokens alone or batched. The step's tokens and the rows'
finiteness come back to the host in one transfer; a row whose logits are not finite gets None (its request
fails alone), never a token.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.arguments import real
from engine.devices import to_device

# Temperatures below this choose greedily, as vLLM's sampler does (its _SAMPLING_EPS): dividing float32
# logits by a smaller one overflows (1e-38 made every probability NaN), and the distribution it stands for
# is the greedy choice to float32 precision anyway.
GREEDY_BELOW = 1e-5

RowParams = tuple[float, float, torch.Generator | None]  # (temperature, top_p, generator)


def check_sampling(temperature: object, top_p: object) -> tuple[float, float]:
    """Validated (temperature >= 0, 0 < top_p <= 1); nothing is clamped (a temperature below GREEDY_BELOW
    samples greedily)."""
    return real("temperature", temperature, 0.0), real("top_p", top_p, positive=True, maximum=1.0)


def sample_rows(logits: torch.Tensor, params: Sequence[RowParams]) -> list[int | None]:
    """The next token of each row of float32 `logits [rows, vocab]`, row i by `params[i]` (checked by
    `check_sampling`); None for a row whose logits are NaN or infinite. One transfer to the host."""
    if not params:
        return []
    chosen = logits.argmax(-1)
    sampled = [i for i, (t, _, _) in enumerate(params) if t >= GREEDY_BELOW]
    if sampled:
        rows = to_device(sampled, torch.long, logits.device)
        columns = [(t, p, _uniform(g)) for t, p, g in (params[i] for i in sampled)]
        temperature, top_p, uniform = to_device(columns, torch.float32, logits.device).t()
        picked = _inverse_cdf(logits.index_select(0, rows), temperature, top_p, uniform)
        chosen = chosen.index_copy(0, rows, picked)
    tokens, finite = torch.stack((chosen, torch.isfinite(logits).all(-1).long())).tolist()
    return [tok if ok else None for tok, ok in zip(tokens, finite, strict=True)]


def _uniform(generator: torch.Generator | None) -> float:
    """One number in [0, 1) from the row's own generator (the global one when unseeded), on the host."""
    return float(torch.rand((), generator=generator))


def _inverse_cdf(
    logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, uniform: torch.Tensor
) -> torch.Tensor:
    """Rows of `logits [rows, vocab]` sampled at their temperatures within their nuclei: probabilities in
    descending order, the smallest prefix whose mass reaches top_p kept (at least the top token), and the
    token where the kept mass's cumulative sum first exceeds uniform x its total."""
    probs = torch.softmax(logits / temperature[:, None], dim=-1)
    ordered, order = probs.sort(dim=-1, descending=True)
    before = ordered.cumsum(-1) - ordered
    keep = before < top_p[:, None]
    keep[:, 0] = True
    kept = ordered * keep
    cdf = kept.cumsum(-1)
    target = (uniform * cdf[:, -1])[:, None]
    index = torch.searchsorted(cdf, target, right=True)
    index = torch.minimum(index, keep.sum(-1, keepdim=True) - 1)  # never past the nucleus (rounding)
    return order.gather(1, index).squeeze(1)
