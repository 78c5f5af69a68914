"""Cost models of prompt layouts, and the measured inputs they need.

A cached token is not free on a local engine: every computed token attends to it, and its K/V are
read. `measure_token_costs` measures, in one run, the marginal seconds per computed token `c` and the cost
of a cached token relative to a computed one, `alpha`, for a given number of new tokens and cached context.
Both are marginal: a forward's fixed cost (reading every weight once, launching its kernels) is paid by any
request and is in neither.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from engine.runtime.engine import Engine


@dataclass(frozen=True)
class TokenCosts:
    c: float  # marginal seconds per computed token (median over repeats)
    alphas: list[float]  # a cached token's cost relative to c, one per repeat (paired within the repeat)

    @property
    def alpha(self) -> float:
        return statistics.median(self.alphas)


def measure_token_costs(engine: Engine, context: int, new: int, repeats: int = 3) -> TokenCosts:
    """c = the slope of cold TTFT between `new` and 2 x `new` tokens (seconds per extra computed token, the
    fixed cost of a forward cancelling out); alpha = the extra TTFT per cached token of `context` cached
    tokens under the same `new` tokens (the warm path) over the cold TTFT of `new` tokens alone, relative
    to c. Each repeat times all three arms back to back, the cold pair first in even repeats and the warm
    arm first in odd ones."""
    gen = torch.Generator().manual_seed(context * 7919 + new)
    vocab = min(engine.config.vocab_size, 30000)
    ids = torch.randint(100, vocab, (context + 2 * new,), generator=gen).tolist()
    prompt, alone, double = ids[: context + new], ids[context : context + new], ids[context:]
    salt = f"alpha-{context}-{new}"
    reused = context // engine.blocks.block_size * engine.blocks.block_size
    extra_new = context - reused  # tokens of the context that are recomputed (less than one block)

    def cold(tokens: list[int]) -> float:
        return engine.generate(tokens, max_new_tokens=1, cache=False).timing.ttft_s

    def warm() -> float:
        engine.generate(ids[:context], max_new_tokens=1, cache_salt=salt)  # publishes the context's blocks
        gen = engine.generate(prompt, max_new_tokens=1, cache_salt=salt)
        assert gen.usage.cached_tokens == reused
        engine.reset_cache()
        return gen.timing.ttft_s

    cold(alone)  # warm-up
    runs: list[tuple[float, float, float]] = []  # (alone, double, cached) TTFT of each repeat
    for i in range(max(1, repeats)):
        if i % 2:  # odd repeats: the warm arm first
            w = warm()
            a, d = cold(alone), cold(double)
        else:
            a, d = cold(alone), cold(double)
            w = warm()
        runs.append((a, d, w))
    c = statistics.median((d - a) / new for a, d, _ in runs)
    return TokenCosts(c, [(w - a - extra_new * c) / max(reused, 1) / c for a, _, w in runs])


def replace_extra_tokens(status: int, between: int, updates: int, alpha: float) -> float:
    """Replacing the status recomputes the `between` tokens after the old one, at each update but the 1st."""
    return (updates - 1) * (1 - alpha) * between


def append_extra_tokens(status: int, between: int, updates: int, alpha: float) -> float:
    """Appending keeps every old status in the prefix: update t carries t-1 of them at cost alpha each."""
    return alpha * status * updates * (updates - 1) / 2


def break_even_between(status: int, updates: int, alpha: float) -> float:
    """Appending is cheaper than replacing when `between` exceeds this: alpha*S*N/2 = (1-alpha)*R."""
    return alpha * status * updates / (2 * (1 - alpha))
