"""Tolerances per dtype, measured rather than guessed, and the greedy tie-break rule.

In float32 the bounds are fixed: logits within 1e-4 of `transformers`, attention probabilities within 1e-5,
cached equal to uncached within 1e-5. In bfloat16 / float16 they come from the reference itself:
`transformers` run in that dtype on the test's device strays from its own float32 logits (on CPU) by E, on the
same model and a fixed probe prompt. Ours may stray from float32 by MULTIPLE x E. Cached against uncached
compares our own two paths in the same dtype and must stay within 1 x E (on CPU they are bitwise equal).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

MULTIPLE = 3.0  # measured on CPU: ours strays at most 1.04 E in logits and 1.66 E in attention probabilities
PROBE = torch.randint(3, 512, (128,), generator=torch.Generator().manual_seed(11)).tolist()


@dataclass(frozen=True)
class Error:
    """How far `transformers` in one dtype strays from its own float32 on the same input."""

    logits: float  # max |Δ logit|
    relative: float  # logits / max |logit|
    attention: float  # max |Δ attention probability|


@torch.no_grad()
def reference_error(
    model: torch.nn.Module, ids: Sequence[int], device: torch.device, dtype: torch.dtype
) -> Error:
    """`model` (float32, eager attention) on CPU against a copy of it in `dtype` on `device`."""
    exact = model(torch.tensor([ids]), output_attentions=True)
    rounded = copy.deepcopy(model).to(device=device, dtype=dtype)
    half = rounded(torch.tensor([ids], device=device), output_attentions=True)
    logits = (half.logits[0].float().cpu() - exact.logits[0]).abs().max().item()
    attention = (
        (torch.stack(half.attentions).float().cpu() - torch.stack(exact.attentions)).abs().max().item()
    )
    error = Error(logits, logits / exact.logits.abs().max().item(), attention)
    assert 0 < error.relative < 0.05, f"{error} is not a half-precision rounding error"
    return error


class Precision:
    """The tolerances of one (device, dtype) run; `build(kind)` gives the float32 `transformers` model."""

    def __init__(
        self, device: torch.device, dtype: torch.dtype, build: Callable[[str], torch.nn.Module]
    ) -> None:
        self.device, self.dtype, self._build = device, dtype, build
        self.exact = dtype == torch.float32
        self.measured: dict[str, Error] = {}
        self.observed: dict[tuple[str, str], float] = {}  # (kind, "logits" | "attention") -> max ours / E

    def error(self, kind: str, model: torch.nn.Module | None = None, ids: Sequence[int] = PROBE) -> Error:
        """transformers' own error in this dtype on this device for `kind` (the tiny model of that kind unless
        `model` is given), measured once."""
        if kind not in self.measured:
            self.measured[kind] = reference_error(
                model if model is not None else self._build(kind), ids, self.device, self.dtype
            )
        return self.measured[kind]

    def observe(self, kind: str, what: str, error: float) -> float:
        """Keep ours' `error` ("logits" or "attention", against transformers' float32) as a multiple of E
        for the end-of-run report; returns `error`."""
        if not self.exact:
            ratio = error / getattr(self.error(kind), what)
            self.observed[(kind, what)] = max(self.observed.get((kind, what), 0.0), ratio)
        return error

    def logits_tol(self, kind: str, **measure: Any) -> float:
        """Ours against `transformers` in float32."""
        return 1e-4 if self.exact else MULTIPLE * self.error(kind, **measure).logits

    def attention_tol(self, kind: str) -> float:
        """Our attention probabilities against `transformers`' in float32."""
        return 1e-5 if self.exact else MULTIPLE * self.error(kind).attention

    def cache_tol(self, kind: str) -> float:
        """Ours against ours in the same dtype: cached against cold, decode steps against a plain forward."""
        return 1e-5 if self.exact else self.error(kind).logits


def near_ties(tokens: Sequence[int], reference: torch.Tensor, tol: float) -> int:
    """Greedy agreement with a tie-break rule: each token is the argmax of `reference` (float32 logits
    [len(tokens), vocab] at the steps that chose them, teacher-forced on `tokens`), or within `tol` of it: a
    near-tie that the dtype's rounding may break either way. Returns how many steps were such near-ties."""
    reference = reference.float().cpu()
    best = reference.max(-1).values
    short = best - reference[torch.arange(len(tokens)), torch.tensor(tokens)]
    bad = (short > tol).nonzero().flatten().tolist()
    assert not bad, (
        f"step {bad[0]}: token {tokens[bad[0]]} is {short[bad[0]]:.3g} below the best logit (> {tol:.3g})"
    )
    return int((short > 0).sum())


def assert_same_greedy_run(
    tokens: Sequence[int],
    logits: torch.Tensor,
    ref_tokens: Sequence[int],
    ref_logits: torch.Tensor,
    tol: float,
) -> None:
    """Two greedy runs of one prompt agree: logits within `tol` and the same tokens, up to a first difference
    that may only be a near-tie of the reference (after it the two runs continue different texts)."""
    n = next((i for i, (a, b) in enumerate(zip(tokens, ref_tokens, strict=True)) if a != b), len(tokens))
    steps = min(n + 1, len(tokens))
    assert (logits[:steps].float().cpu() - ref_logits[:steps].float().cpu()).abs().max().item() <= tol
    near_ties(tokens[:steps], ref_logits[:steps], tol)
