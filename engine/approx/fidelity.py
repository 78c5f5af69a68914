"""How far an approximate answer is from the exact one: next-token logits, greedy continuations and
per-layer hidden states, always against the exact full recompute of the same final prompt."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from engine.model.decoder import Decoder


@dataclass
class Fidelity:
    cosine: float  # of the next-token logit vectors
    kl: float  # KL(exact || approx) of the next-token distributions, nats
    top1_agree: bool  # the two argmaxes are the same token
    exact_top_rank: int  # rank of the exact top token among the approximate logits (0: also the top)
    first_difference: int  # index of the first differing greedy token (= length when none differs)
    continuation_agree: bool  # the greedy continuations are identical
    layer_cosine: list[float]  # per layer, cosine of the last token's hidden state (empty if not recorded)


def compare(
    exact_logits: torch.Tensor,
    approx_logits: torch.Tensor,
    exact_tokens: Sequence[int] = (),
    approx_tokens: Sequence[int] = (),
    exact_hidden: Sequence[torch.Tensor] = (),
    approx_hidden: Sequence[torch.Tensor] = (),
) -> Fidelity:
    """Next-token logits `[vocab]`, greedy continuations and per-layer last hidden states of both paths;
    identical inputs give cosine 1.0, KL 0.0, rank 0 and full agreement."""
    e, a = exact_logits.double().flatten(), approx_logits.double().flatten()
    log_p, log_q = torch.log_softmax(e, -1), torch.log_softmax(a, -1)
    kl = float((log_p.exp() * (log_p - log_q)).sum().clamp_min(0.0))
    top = int(e.argmax())
    rank = int((a > a[top]).sum())
    n = min(len(exact_tokens), len(approx_tokens))
    first = next((i for i in range(n) if exact_tokens[i] != approx_tokens[i]), n)
    return Fidelity(
        cosine=_cosine(e, a),
        kl=kl,
        top1_agree=int(a.argmax()) == top,
        exact_top_rank=rank,
        first_difference=first,
        continuation_agree=list(exact_tokens) == list(approx_tokens),
        layer_cosine=[
            _cosine(x.double().flatten(), y.double().flatten())
            for x, y in zip(exact_hidden, approx_hidden, strict=True)
        ],
    )


def _cosine(x: torch.Tensor, y: torch.Tensor) -> float:
    if torch.equal(x, y):
        return 1.0
    return float(torch.nn.functional.cosine_similarity(x, y, dim=0).clamp(-1.0, 1.0))


@contextmanager
def last_hidden(model: Decoder) -> Iterator[list[torch.Tensor]]:
    """Record each layer's output hidden state of the last token of the latest forward (a list, filled in
    place: one tensor per layer, overwritten by every forward while the block is open)."""
    states: list[torch.Tensor] = [torch.empty(0)] * len(model.layers)

    def hook(index: int):  # noqa: ANN202
        def keep(_module: torch.nn.Module, _inputs: tuple, output: torch.Tensor) -> None:
            states[index] = output[-1].float().cpu().clone()  # a copy: layers may add to x in place

        return keep

    handles = [layer.register_forward_hook(hook(i)) for i, layer in enumerate(model.layers)]
    try:
        yield states
    finally:
        for h in handles:
            h.remove()
