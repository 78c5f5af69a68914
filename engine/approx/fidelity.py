"""How far an approximate answer is from the exact one, always against the exact full recompute of the same
final prompt: the next-token distribution first (KL, top-1 and top-k agreement, the rank of the exact top
token), then the greedy continuation, then the geometry of logits and hidden states.

Cosines are taken where they can tell paths apart. Logits are centred first (each vector minus its mean):
softmax ignores a constant shift, and raw logit vectors share a large common component, so their raw
cosine sits near 1 for any two answers. Hidden states are standardized per dimension first, with each
dimension's mean and standard deviation over the exact run's prompt tokens at that layer: a few dimensions
of the residual stream are tens to hundreds of times larger than the rest (massive activations, rogue
dimensions) and would otherwise carry the cosine alone (Timkey & van Schijndel, "All Bark and No Bite:
Rogue Dimensions in Transformer Language Models Obscure Representational Quality", EMNLP 2021). A
per-token RMS normalization would not do this: it rescales the whole vector, which leaves a cosine as it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from engine.model.decoder import Decoder

TOP_K = 10  # top-k agreement: the share of the exact run's k most likely tokens among the approximate run's


@dataclass
class HiddenStates:
    """Per layer: the last prompt token's output hidden state, and each dimension's mean and standard
    deviation over every row the recorded forwards computed (float64, on the host); and the rows each
    recorded forward computed, in order (one entry per forward of the model)."""

    last: list[torch.Tensor] = field(default_factory=list)
    mean: list[torch.Tensor] = field(default_factory=list)
    std: list[torch.Tensor] = field(default_factory=list)
    forward_rows: list[int] = field(default_factory=list)


@dataclass
class Fidelity:
    kl: float  # KL(exact || approx) of the next-token distributions, nats
    top1_agree: bool  # the two argmaxes are the same token
    topk_agree: float  # share of the exact top-TOP_K tokens that are in the approximate top-TOP_K
    exact_top_rank: int  # rank of the exact top token among the approximate logits (0: also the top)
    first_difference: int  # index of the first differing greedy token (= length when none differs)
    continuation_agree: bool  # the greedy continuations are identical
    centred_cosine: float  # of the next-token logit vectors, each minus its mean
    layer_cosine: list[float]  # per layer, of the last token's standardized hidden states (empty: none)


def compare(
    exact_logits: torch.Tensor,
    approx_logits: torch.Tensor,
    exact_tokens: Sequence[int] = (),
    approx_tokens: Sequence[int] = (),
    exact_hidden: HiddenStates | None = None,
    approx_hidden: HiddenStates | None = None,
) -> Fidelity:
    """Next-token logits `[vocab]`, greedy continuations and hidden states of both paths (the exact path's
    statistics standardize both); identical inputs give KL 0, full agreement, rank 0 and cosines of 1."""
    # float64 on the host (MPS has no float64)
    e, a = (x.to("cpu", torch.float64).flatten() for x in (exact_logits, approx_logits))
    log_p, log_q = torch.log_softmax(e, -1), torch.log_softmax(a, -1)
    kl = float((log_p.exp() * (log_p - log_q)).sum().clamp_min(0.0))
    top = int(e.argmax())
    k = min(TOP_K, e.numel())
    shared = set(e.topk(k).indices.tolist()) & set(a.topk(k).indices.tolist())
    n = min(len(exact_tokens), len(approx_tokens))
    layers = []
    if exact_hidden is not None and approx_hidden is not None:
        layers = [
            _cosine(*_standardized(x, y, mu, sd))
            for x, y, mu, sd in zip(
                exact_hidden.last, approx_hidden.last, exact_hidden.mean, exact_hidden.std, strict=True
            )
        ]
    return Fidelity(
        kl=kl,
        top1_agree=int(a.argmax()) == top,
        topk_agree=len(shared) / k,
        exact_top_rank=int((a > a[top]).sum()),
        first_difference=next((i for i in range(n) if exact_tokens[i] != approx_tokens[i]), n),
        continuation_agree=list(exact_tokens) == list(approx_tokens),
        centred_cosine=_cosine(e - e.mean(), a - a.mean()),
        layer_cosine=layers,
    )


def _standardized(
    x: torch.Tensor, y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """x and y in units of each dimension's spread, over the dimensions that vary (a one-token prompt has
    none: then x and y as they are)."""
    varies = std > 0
    if not bool(varies.any()):
        return x, y
    return (x - mean)[varies] / std[varies], (y - mean)[varies] / std[varies]


def _cosine(x: torch.Tensor, y: torch.Tensor) -> float:
    if torch.equal(x, y):
        return 1.0
    return float(torch.nn.functional.cosine_similarity(x, y, dim=0).clamp(-1.0, 1.0))


@contextmanager
def hidden_states(model: Decoder) -> Iterator[HiddenStates]:
    """Record every layer's output while the block is open: the last row of the latest forward, and each
    dimension's mean and standard deviation over all rows of every forward (filled in when the block
    closes), and how many rows each forward computed. Each forward's states are copied to the host: record in a pass of its own, never a timed one."""
    count, width = len(model.layers), model.norm.weight.shape[0]
    last: list[torch.Tensor] = [torch.empty(0)] * count
    sums = [torch.zeros(width, dtype=torch.float64) for _ in range(count)]
    squares = [torch.zeros(width, dtype=torch.float64) for _ in range(count)]
    rows = [0] * count
    recorded = HiddenStates()

    def hook(index: int):  # noqa: ANN202
        def keep(_module: torch.nn.Module, _inputs: tuple, output: torch.Tensor) -> None:
            x = output.detach().to("cpu", torch.float64)  # a copy: layers may add to their output in place
            last[index] = x[-1].clone()
            sums[index] += x.sum(0)
            squares[index] += x.pow(2).sum(0)
            rows[index] += x.shape[0]
            if index == 0:  # the first layer runs once per forward of the model
                recorded.forward_rows.append(x.shape[0])

        return keep

    handles = [layer.register_forward_hook(hook(i)) for i, layer in enumerate(model.layers)]
    try:
        yield recorded
    finally:
        for h in handles:
            h.remove()
        recorded.last = last
        recorded.mean = [s / max(r, 1) for s, r in zip(sums, rows, strict=True)]
        recorded.std = [
            (q / max(r, 1) - m**2).clamp_min(0.0).sqrt()
            for q, r, m in zip(squares, rows, recorded.mean, strict=True)
        ]
