"""Cost models of prompt layouts, and the measured inputs they need.

A cached token is not free on a local engine: every computed token attends to it, and its K/V are
read. `measure_token_costs` measures, in one run, the seconds per computed token `c` and the cost of a
cached token relative to a computed one, `alpha`, for a given number of new tokens and cached context.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from engine.runtime.engine import Engine


@dataclass(frozen=True)
class TokenCosts:
    c: float  # seconds per computed token (median over repeats)
    alphas: list[float]  # a cached token's cost relative to c, one per repeat (paired within the repeat)

    @property
    def alpha(self) -> float:
        return statistics.median(self.alphas)


def measure_token_costs(engine: Engine, context: int, new: int, repeats: int = 3) -> TokenCosts:
    """c = TTFT of `new` tokens alone / new; alpha = extra TTFT per cached token of `context` cached tokens
    under the same `new` tokens (the warm path), relative to c. Each repeat times both arms back to back."""
    gen = torch.Generator().manual_seed(context * 7919 + new)
    ids = torch.randint(100, min(engine.config.vocab_size, 30000), (context + new,), generator=gen).tolist()
    salt = f"alpha-{context}-{new}"
    alone, cached = [], []
    engine.generate(ids[-new:], max_new_tokens=1, cache=False)  # warm-up
    for _ in range(max(1, repeats)):
        alone.append(engine.generate(ids[-new:], max_new_tokens=1, cache=False).timing.ttft_s)
        engine.generate(ids[:context], max_new_tokens=1, cache_salt=salt)  # publishes the context's blocks
        warm = engine.generate(ids, max_new_tokens=1, cache_salt=salt)
        assert warm.usage.cached_tokens == context // engine.blocks.block_size * engine.blocks.block_size
        cached.append(warm.timing.ttft_s)
        engine.reset_cache()
    c = statistics.median(alone) / new
    reused = context // engine.blocks.block_size * engine.blocks.block_size
    extra_new = context - reused  # tokens of the context that were recomputed (less than one block)
    alphas = [(w - a - extra_new * c) / max(reused, 1) / c for w, a in zip(cached, alone, strict=True)]
    return TokenCosts(c, alphas)


def replace_extra_tokens(status: int, between: int, updates: int, alpha: float) -> float:
    """Replacing the status recomputes the `between` tokens after the old one, at each update but the 1st."""
    return (updates - 1) * (1 - alpha) * between


def append_extra_tokens(status: int, between: int, updates: int, alpha: float) -> float:
    """Appending keeps every old status in the prefix: update t carries t-1 of them at cost alpha each."""
    return alpha * status * updates * (updates - 1) / 2


def break_even_between(status: int, updates: int, alpha: float) -> float:
    """Appending is cheaper than replacing when `between` exceeds this: alpha*S*N/2 = (1-alpha)*R."""
    return alpha * status * updates / (2 * (1 - alpha))
